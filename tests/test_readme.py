"""Every ```python block of README.md runs as is, offline, so the snippets stay true.

Only blocks fenced exactly ```python run here: one fenced ```python server needs a running
LangGraph server (``tests/integration/test_langgraph_server_contracts.py`` runs it); the
snippets of ``docs/*.md`` run in ``tests/test_docs.py``.

Each block runs on its own (a fresh namespace: a snippet that uses a name it does not define
fails), in a temporary working folder (the snippets write ``.memory/`` and SQLite files), with
pytest's warnings-as-errors in force.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


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
    line: int, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = compile("\n" * (line - 1) + source, str(README), "exec")  # tracebacks name the line
    namespace: dict[str, object] = {"__name__": f"readme_line_{line}"}
    exec(code, namespace)  # the README's own code: running it is the point of this test
