"""Every ```python block of README.md runs as is, offline, so the snippets stay true.

Only blocks fenced exactly ```python run here: one fenced ```python server needs a running
LangGraph server (``tests/integration/test_langgraph_server_contracts.py`` runs it); the
snippets of ``docs/*.md`` run in ``tests/test_docs.py``.

Each block runs on its own (a fresh namespace: a snippet that uses a name it does not define
fails), in a temporary working folder (the snippets write ``.memory/`` and SQLite files), with
pytest's warnings-as-errors in force, and must print the verdict of a task that finished: a
snippet that runs but whose agent ends BLOCKED fails here.

Each block also runs as a newcomer runs it after the README's own install command
(``pip install -e ".[demo]"``, which brings no tiktoken files): in a subprocess that finds
no ``bpe-openai`` (the ``offline`` extra), with an empty ``TIKTOKEN_CACHE_DIR`` and no
network, so counting falls back to estimates. The task must finish there too, and the
fallback must say so once on stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
#: What ``DependentTask.check(...).reason`` says of a finished task, the last line each
#: snippet prints.
VERDICT_OK = re.compile(r"^all \d+ step values are correct and the report begins with the code$")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(first line number, source)`` of every ```python block in ``text``.

    Example:
        >>> python_blocks("intro\\n```python\\nx = 1\\n```\\n```bash\\nls\\n```\\n")
        [(3, 'x = 1\\n')]
    """
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_snippets() -> None:
    assert len(BLOCKS) >= 4  # the four integrations


@pytest.mark.parametrize(("line", "source"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_snippet_runs(
    line: int,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = compile("\n" * (line - 1) + source, str(README), "exec")  # tracebacks name the line
    namespace: dict[str, object] = {"__name__": f"readme_line_{line}"}
    exec(code, namespace)  # the README's own code: running it is the point of this test
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed, f"README.md line {line}: the snippet printed no verdict"
    assert VERDICT_OK.match(printed[-1]), f"README.md line {line}: {printed[-1]}"


#: Run before a snippet in the subprocess: ``bpe-openai`` is not installed there (the
#: README's install command does not bring it), so tiktoken's files cannot be provisioned.
_WITHOUT_OFFLINE_EXTRA = """
import importlib.machinery, sys

class NotInstalled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "bpe_openai":
            return importlib.machinery.ModuleSpec(name, None)  # found, but nothing to load
        return None

sys.meta_path.insert(0, NotInstalled)
source, line = sys.argv[1], int(sys.argv[2])
exec(compile("\\n" * (line - 1) + open(source, encoding="utf-8").read(), "README.md", "exec"),
     {"__name__": "__main__"})
"""


def _fresh_env(tiktoken_cache: Path) -> dict[str, str]:
    """The environment of a newcomer's shell: no tiktoken files, no network, no test
    settings (the archive goes to ``.memory/`` in the working folder, as the README says)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.pop("LANGCHAIN_COMPACT_ARCHIVE_DIR", None)
    env["TIKTOKEN_CACHE_DIR"] = str(tiktoken_cache)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[proxy] = "http://127.0.0.1:9"  # the discard port: every download is refused
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.parametrize(("line", "source"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_snippet_finishes_without_tiktoken_files(
    line: int, source: str, tmp_path: Path
) -> None:
    snippet, cache = tmp_path / "snippet.py", tmp_path / "tiktoken-cache"
    snippet.write_text(source, encoding="utf-8")
    cache.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OFFLINE_EXTRA, str(snippet), str(line)],
        cwd=work,
        env=_fresh_env(cache),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.strip().splitlines()
    assert printed and VERDICT_OK.match(printed[-1]), (printed[-1:], done.stderr[-2000:])
    # The fallback is loud: one warning naming what is missing and how to get it.
    assert done.stderr.count("tiktoken could not load its o200k_base file") == 1, done.stderr
    assert "langchain-compact[offline]" in done.stderr
    assert "TIKTOKEN_CACHE_DIR" in done.stderr
    assert not os.listdir(cache)  # nothing was downloaded or provisioned into the cache
