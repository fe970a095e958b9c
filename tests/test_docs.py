"""docs/*.md and the README stay true: snippets run, quoted numbers come from the results file
they name, the configuration table is the code's, and the README stays a five-minute read.

Snippets run as in ``tests/test_readme.py``: each ```python block on its own (fresh namespace,
temporary working folder, warnings as errors). A block fenced ```python server needs a running
LangGraph server: ``tests/integration/test_langgraph_server_contracts.py`` runs it.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import pytest

from langchain_compact import ExtractiveSummarizer
from tests.test_readme import python_blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results" / "latest.json"

#: Pages written for users (design.md and origins.md are for contributors and keep the
#: project's own vocabulary: the behaviour spec's B1 to B12, the seed articles).
USER_PAGES = (
    "benchmarks.md",
    "cli.md",
    "configuration.md",
    "how-it-works.md",
    "integrations.md",
    "limits.md",
    "provider-compaction.md",
    "server.md",
    "subagents.md",
)

#: Project-internal words a user cannot follow.
INTERNAL = re.compile(
    r"\bseeds\b|\bseed's\b|seeds'|seed articles?\b|dirty value|\bB\d{1,2}\b|\.\./shared"
    r"|shared transcripts|the spec\b|design card",
    re.I,
)


def _doc_blocks() -> list[tuple[str, int, str]]:
    return [
        (path.name, line, source)
        for path in sorted(DOCS.glob("*.md"))
        for line, source in python_blocks(path.read_text(encoding="utf-8"))
    ]


DOC_BLOCKS = _doc_blocks()


def test_the_docs_have_python_snippets() -> None:
    assert {name for name, _, _ in DOC_BLOCKS} >= {"configuration.md", "integrations.md"}


@pytest.mark.parametrize(
    ("name", "line", "source"), DOC_BLOCKS, ids=[f"{n}:line{k}" for n, k, _ in DOC_BLOCKS]
)
def test_docs_snippet_runs(
    name: str, line: int, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = DOCS / name
    code = compile("\n" * (line - 1) + source, str(path), "exec")  # tracebacks name the line
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}_line_{line}"}
    exec(code, namespace)  # the docs' own code: running it is the point of this test


# --------------------------------------------------------------------------- the README


def test_the_readme_is_a_five_minute_read() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    found = sorted({m.group(0) for m in INTERNAL.finditer(text)})
    assert not found, f"README uses project-internal words: {found}"


@pytest.mark.parametrize("page", USER_PAGES)
def test_user_pages_speak_the_users_language(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    found = sorted({m.group(0) for m in INTERNAL.finditer(text)})
    assert not found, f"docs/{page} uses project-internal words: {found}"


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_the_readme_set_up_commands_are_the_ones_ci_and_pyproject_know() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"^## Set up\n.*?^```bash\n(.*?)^```", text, re.S | re.M)
    assert block, "README has a ## Set up section with a bash block"
    commands = [line for line in block.group(1).splitlines() if line and line[0] != "#"]
    assert len(commands) == 2, commands
    demo, tests = commands
    assert demo.endswith("&& langchain-compact demo") and 'pip install -e ".[demo]"' in demo
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = re.search(r'pip install -q (-e "\.\[[a-z,]+\]")', ci)
    assert install, ".ci/run installs the project with its extras"
    assert f"pip install {install.group(1)}" in tests
    assert 'eval "$(bash .ci/postgres.sh)"' in tests and 'eval "$(bash .ci/postgres.sh)"' in ci
    assert tests.endswith("python -m pytest -q") and "\npython -m pytest -q\n" in ci + "\n"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extras = set(re.findall(r"^([a-z]+) = \[", pyproject, re.M))
    for extra in re.findall(r'\.\[([a-z,]+)\]"', text):
        assert set(extra.split(",")) <= extras, f"README names an unknown extra: {extra}"
    assert re.search(r'^langchain-compact = "langchain_compact\.cli:main"', pyproject, re.M)


# --------------------------------------------------------------------------- quoted numbers

#: The README's peer table: its row labels for the systems of ``latest.json["synthetic"]``.
PEER_LABELS = {
    "ours": "langchain-compact (`add_compaction`)",
    "ours_lcel": "langchain-compact (`compact_messages`)",
    "lc_summarization": "langchain `SummarizationMiddleware`",
    "lc_context_editing": "langchain `ContextEditingMiddleware`",
    "langmem": "langmem `SummarizationNode`",
    "trim_messages": "langchain-core `trim_messages`",
    "deepagents": "deepagents `SummarizationMiddleware`",
}


def peer_rows(results: dict[str, Any]) -> list[str]:
    """The README's peer-table rows, computed from the benchmark's results.

    Example:
        >>> row = {"peak_context": 7054, "over_window_calls": 0, "invalid_calls": 0,
        ...        "constraints_kept": 4, "constraints_total": 4, "facts_kept": 12,
        ...        "facts_total": 12, "cost_usd": 4.0}
        >>> peer_rows({"synthetic": {"systems": {"ours": row, "lc_summarization": row}}})[0]
        '| langchain-compact (`add_compaction`) | 7,054 | 0 | 0 | 4/4 | 12/12 | 1.00x |'
    """
    systems = results["synthetic"]["systems"]
    base = systems["lc_summarization"]["cost_usd"]
    rows = []
    for key, a in systems.items():
        cells = [
            PEER_LABELS[key],
            f"{a['peak_context']:,}",
            f"{a['over_window_calls']:,}",
            f"{a['invalid_calls']:,}",
            f"{a['constraints_kept']}/{a['constraints_total']}",
            f"{a['facts_kept']}/{a['facts_total']}",
            f"{a['cost_usd'] / base:.2f}x",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def test_the_readme_peer_table_is_the_results_file() -> None:
    text = README.read_text(encoding="utf-8")
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert "`bench/results/latest.json`, regenerated by `python -m bench`" in text
    rows = peer_rows(results)
    assert len(rows) == len(PEER_LABELS)
    for row in rows:
        assert row in text, f"README's peer table differs from {RESULTS.name}: want {row}"
    synthetic = results["synthetic"]
    intro = f"{synthetic['calls']} model calls in an {synthetic['window']:,}-token window"
    assert intro in text
    assert f"{len(synthetic['constraints'])} hard\nconstraints" in text
    assert f"{len(synthetic['facts'])} facts planted" in text


def test_the_benchmark_page_is_generated_from_the_results_file() -> None:
    pytest.importorskip("langchain.agents", reason="bench.report needs the agents extra")
    from bench.report import readme_section

    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    section = re.search(r"<!-- bench:start[^\n]*-->\n(.*?)\n<!-- bench:end -->", text, re.S)
    assert section, "docs/benchmarks.md has the generated section between its markers"
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert section.group(1) == readme_section(results).rstrip("\n")
    generated = (ROOT / "bench" / "README_SECTION.md").read_text(encoding="utf-8")
    assert section.group(1) == generated.rstrip("\n")


def test_the_speed_and_memory_figures_are_the_results_files() -> None:
    """The speed and memory figures of docs/benchmarks.md are generated from
    bench/results/perf.json and memory.json (``python -m bench.perf`` and
    ``python -m bench.memory`` rewrite them), each naming the command that regenerates it."""
    from bench import perf_docs

    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    quoted = perf_docs.current(text)
    assert quoted is not None, "docs/benchmarks.md has the perf section between its markers"
    assert quoted == perf_docs.section(*perf_docs.read_results()), (
        "docs/benchmarks.md quotes other figures than bench/results/perf.json and memory.json: "
        "run python -m bench.perf_docs"
    )
    bullets = quoted.split("\n- ")
    assert len(bullets) == 4
    for bullet in bullets:
        assert (
            "python -m bench.perf" in bullet
            or "python -m bench.memory" in bullet
            or ("same command" in bullet)
        )
    assert "n/a" not in quoted, "a figure is missing from the results files"


def test_the_decision_cost_figures_are_the_overhead_results() -> None:
    text = " ".join((DOCS / "benchmarks.md").read_text(encoding="utf-8").split())
    overhead = json.loads((ROOT / "bench" / "results" / "overhead.json").read_text())
    ours, theirs = overhead["median_ms"]["ours"], overhead["median_ms"]["lc_summarization"]
    ratio = overhead["ours_over_lc_summarization"]
    assert "(`python -m bench.overhead`, writes `bench/results/overhead.json`;" in text
    assert (
        f"{ours['5000']:.2f} ms at 5,000 messages and {ours['50000']:.2f} ms at 50,000 "
        f"({ratio['5000']}x and {ratio['50000']}x `SummarizationMiddleware`'s "
        f"{theirs['5000']:.1f} and {theirs['50000']:.0f} ms)"
    ) in text


# --------------------------------------------------------------------------- configuration


def _config_table() -> dict[str, str]:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    table = text[text.index("| field | default | meaning |") :]
    table = table[: table.index("\n\n")]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1]
    return rows


def test_the_configuration_table_lists_every_field_with_the_codes_default() -> None:
    from langchain_compact import CompactionConfig
    from langchain_compact.config import DEFAULT_ARCHIVE_DIR

    rows = _config_table()
    names = [f.name for f in fields(CompactionConfig)]
    assert list(rows) == names, "docs/configuration.md lists the fields in the code's order"
    for f in fields(CompactionConfig):
        if f.name == "archive_dir":  # a factory: $LANGCHAIN_COMPACT_ARCHIVE_DIR, else .memory
            default: object = DEFAULT_ARCHIVE_DIR
        else:
            assert f.default is not MISSING, f.name
            default = f.default
        literal = re.match(r"`([^`]*)`", rows[f.name])
        assert literal, f"{f.name}: the default cell starts with a `literal`"
        assert ast.literal_eval(literal.group(1)) == default, f"{f.name}: {rows[f.name]}"


def test_the_reply_reserve_the_configuration_page_states_is_the_budgets() -> None:
    from langchain_compact.budget import Budget

    assert "a twentieth of the window, at most 4,096" in _config_table()["reply_reserve_tokens"]
    assert Budget(window=8_000).reserve == 8_000 // 20
    assert Budget(window=1_000_000).reserve == 4_096


def test_the_defaults_and_demo_the_readme_quotes_are_the_codes() -> None:
    from langchain_compact.cli._demo import DEMO_STEPS, DEMO_WINDOW
    from langchain_compact.config import (
        DEFAULT_ARCHIVE_DIR,
        DEFAULT_LARGE_RESULT_RATIO,
        DEFAULT_TASK_MAX_RATIO,
        DEFAULT_TRIGGER_RATIO,
    )

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"Below the trigger ({DEFAULT_TRIGGER_RATIO:.0%} of the window by default)" in text
    assert DEFAULT_LARGE_RESULT_RATIO == 1 / 5 and "over a fifth of the window" in text
    assert DEFAULT_TASK_MAX_RATIO == 1 / 4 and "over a quarter of the window" in text
    assert f"The demo runs a {DEMO_STEPS}-step task" in text
    assert f"in a {DEMO_WINDOW:,}-token window: it finishes only if" in text
    assert f"JSONL files under `{DEFAULT_ARCHIVE_DIR}/`" in text


def test_the_archive_defaults_the_readme_states_are_the_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every integration archives by default: the store when it has one, else JSONL files
    under ``.memory/`` (tests/unit/test_default_archive.py runs each one)."""
    import inspect

    from langchain_compact import CompactionConfig, add_compaction, create_compacting_agent
    from langchain_compact.archive import DefaultArchive
    from langchain_compact.demo import ContextReadingPolicy, DependentTask
    from langchain_compact.lcel import MessageCompactor, compact_messages

    text = README.read_text(encoding="utf-8")
    rows = {
        "create_compacting_agent": "its `store=`, else JSONL files under `.memory/`",
        "add_compaction": "the graph's store, else JSONL files under `.memory/`",
        "compact_messages": "JSONL files under `.memory/`",
        "CompactionMiddleware": "the agent's store, else JSONL files under `.memory/`",
    }
    for name, cell in rows.items():
        assert re.search(rf"^\| `{name}`[^|\n]*\| {re.escape(cell)} \|", text, re.M), name
    assert "One setting turns archiving off: `archive=None`" in " ".join(text.split())
    for entry in (add_compaction, create_compacting_agent, compact_messages):
        assert inspect.signature(entry).parameters["archive"].default == "default"
    monkeypatch.delenv("LANGCHAIN_COMPACT_ARCHIVE_DIR")
    monkeypatch.chdir(tmp_path)  # the default folder: .memory/ in the working directory
    config = CompactionConfig(context_window=4_000)
    assert config.archive_dir == ".memory"
    assert isinstance(MessageCompactor(config=config).archive, DefaultArchive)
    assert MessageCompactor(config=config, archive=None).archive is None
    pytest.importorskip("langchain.agents", reason="the middleware needs the agents extra")
    from langchain_compact.middleware import CompactionMiddleware

    assert inspect.signature(CompactionMiddleware).parameters["archive"].default == "default"
    task = DependentTask(steps=12)
    agent = create_compacting_agent(
        ContextReadingPolicy(), task.tools(), config=config, summarizer=ExtractiveSummarizer()
    )
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    agent.invoke({"messages": [("user", task.prompt())]}, run)
    assert any((tmp_path / ".memory").rglob("*.jsonl"))
