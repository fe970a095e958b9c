"""A newcomer's first day (issue 31, items 8-12): what a fresh clone tried as a new user
would, each as the user meets it.

8. The README's LCEL run finishes when counts are estimates (no tiktoken files), and that
   fallback says so once (the snippets themselves run in ``tests/test_readme.py``, also in a
   subprocess without the files).
9. ``compact --archive DIR`` reads back the originals it staged, at every window.
10. The docs agree on what each integration archives by default, and say where runs without
    a thread id archive.
11. Recall on a large record opens on the page that holds the match.
12. Compaction events reach ``astream_events(version="v2")`` and callbacks; the log line says
    what a compaction freed; the CLI refuses a window below its minimum; the README says how
    to stop its PostgreSQL server and under what conditions its test time holds.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import tiktoken.load
import tiktoken.registry
from _data import SUBSET_TRAJECTORY_DIR
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_compact import CompactionConfig, compact_messages, create_compacting_agent, tokens
from langchain_compact import _archive_records as records
from langchain_compact.archive import JsonlArchive, make_recall_tool
from langchain_compact.cli import main
from langchain_compact.cli.transcripts import load_transcript
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.markers import EVENT_KEY

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SHIPPED = sorted(SUBSET_TRAJECTORY_DIR.glob("*.jsonl"))


def _lcel_run(steps: int, *, callbacks: list[Any] | None = None) -> tuple[str, int]:
    """The README's LCEL snippet (``DependentTask(steps)``, a 4,000-token window): the
    verdict and the number of model calls."""
    task = DependentTask(steps=steps)
    by_name = {tool.name: tool for tool in task.tools()}
    model = ContextReadingPolicy().bind_tools(list(by_name.values()))
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history")])
    chain = prompt | compact_messages(config=CompactionConfig(context_window=4_000)) | model
    history: list[BaseMessage] = [HumanMessage(task.prompt())]
    calls = 0
    while True:
        reply = chain.invoke({"history": history}, {"callbacks": callbacks or []})
        calls += 1
        history.append(reply)
        if not reply.tool_calls:
            return task.check(reply.text).reason, calls
        history += [by_name[call["name"]].invoke(call) for call in reply.tool_calls]


# --------------------------------------------------------------------------- 8


def test_the_readme_lcel_run_finishes_when_counts_are_estimates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without tiktoken's files every precise count falls back to the estimate. The run
    ended "BLOCKED: the value of step 24 is no longer in my context": a compaction of three
    steps kept its summary's fidelity supplement to the 32-token floor (the kept tail filled
    the room up to halfway to the fit limit) and dropped a step value, with 243 tokens left
    under the fit limit."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tokens, "_precise", [None])  # as if o200k_base could not load
    verdict, _ = _lcel_run(30)
    assert verdict == "all 30 step values are correct and the report begins with the code"


def test_the_precise_counts_fallback_warns_once_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """It fell back without a word (the warning was silenced), and the run differed."""
    tokens.precise_counter()  # a load still under way (a compactor's preload) ends first

    def no_network(blobpath: str) -> bytes:
        raise OSError(f"network disabled in this test: {blobpath}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setattr(tokens, "provision_tiktoken_cache", lambda *a, **k: None)
    monkeypatch.setattr(tokens, "_precise", [])
    with caplog.at_level(logging.WARNING, logger="langchain_compact"):
        assert tokens.precise_counter() is None
        assert tokens.precise_counter() is None
    (record,) = [r for r in caplog.records if "o200k_base" in r.getMessage()]
    text = record.getMessage()
    assert "network disabled" in text  # what went wrong
    assert "langchain-compact[offline]" in text and "TIKTOKEN_CACHE_DIR" in text  # the fix


# --------------------------------------------------------------------------- 9


@pytest.mark.parametrize("window", [2_000, 4_000, 8_000, 32_000])
def test_compact_reads_back_the_originals_it_staged(
    window: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``compact`` stages the micro-compaction's originals, then the full compaction reads
    them to restore the cleared results for its summarizer: it looked in the archive, where
    nothing is committed yet ("could not read archived originals ...: No archive record",
    5 of the 8 shipped transcripts at 4,000 tokens; the test of issue 20 ran one window)."""
    assert len(SHIPPED) == 8
    for path in SHIPPED:
        out, archive_dir = tmp_path / f"{path.stem}.jsonl", tmp_path / "archive"
        with caplog.at_level(logging.WARNING, logger="langchain_compact"):
            argv = ["compact", str(path), "-o", str(out), "--archive", str(archive_dir)]
            code = main([*argv, "--window", str(window)])
        _, err = capsys.readouterr()
        assert code == 0
        assert err == "", f"{path.name} at {window}: {err}"
        assert not caplog.records, [r.getMessage() for r in caplog.records]
        archive = JsonlArchive(archive_dir)
        text = "\n".join(m.text for m in load_transcript(out))
        for ref in set(re.findall(r"transcript_\w+", text)):
            assert archive.read(ref, thread_id=path.stem), ref  # every ref it quotes reads


# --------------------------------------------------------------------------- 10


def test_the_docs_agree_that_every_integration_archives_by_default() -> None:
    """README and configuration.md said every integration archives by default (the code
    does: each takes ``archive="default"``); how-it-works.md and integrations.md said
    ``add_compaction`` and LCEL have none."""
    import inspect

    from langchain_compact import add_compaction
    from langchain_compact.archive import DEFAULT_ARCHIVE
    from langchain_compact.middleware import CompactionMiddleware

    for entry in (add_compaction, create_compacting_agent, compact_messages, CompactionMiddleware):
        assert inspect.signature(entry).parameters["archive"].default == DEFAULT_ARCHIVE, entry
    pages = {p.name: " ".join(p.read_text(encoding="utf-8").split()) for p in DOCS.glob("*.md")}
    for name, text in pages.items():
        assert "none by default" not in text and "has none" not in text, name
    assert "every integration archives by default" in pages["how-it-works.md"]
    assert "Every integration archives by default" in pages["configuration.md"]


def test_where_runs_without_a_thread_id_archive_is_said_where_a_user_looks() -> None:
    folder = records.thread_key("default")
    assert folder == "default-37a8eec1ce19"  # the folder every such run shares
    for page in (README, DOCS / "configuration.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert f"`.memory/{folder}/`" in text, page.name
        assert "thread_id" in text


# --------------------------------------------------------------------------- 11


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_recall_opens_on_the_page_holding_the_match(mode: str, tmp_path: Path) -> None:
    """A large record was found and shown from its start ("page 1 of 5519"), the match many
    pages further on."""
    lines = [f"disk sda{i % 4} usage {i % 97}% ok" for i in range(20_000)]
    lines[14_321] = "disk sda1 QUOTA EXCEEDED for /srv/data at 03:12:09"
    archive = JsonlArchive(tmp_path)
    archive.write(
        [ToolMessage("\n".join(lines), tool_call_id="c-df", name="df", id="df-1")],
        thread_id="t",
        reason="micro-compaction",
    )
    tool = make_recall_tool(archive, max_chars=2_000)
    config = {"configurable": {"thread_id": "t"}}

    async def recall(args: dict[str, Any]) -> str:
        if mode == "async":
            return str(await tool.ainvoke(args, config))
        return str(tool.invoke(args, config))

    found = await recall({"query": "disk quota exceeded"})
    assert "QUOTA EXCEEDED for /srv/data" in found
    page, pages = map(int, re.search(r"\[page (\d+) of (\d+)", found).groups())  # type: ignore[union-attr]
    assert 100 < page < pages and f"page={page + 1}" in found and "page=1" in found
    assert len(found) <= 2_000
    start = await recall({"query": "disk quota exceeded", "page": 1})  # page 1 is the start
    assert "QUOTA" not in start and f"[page 1 of {pages}" in start
    by_id = await recall({"tool_call_id": "c-df"})  # no query: from the start
    assert f"[page 1 of {pages}" in by_id


# --------------------------------------------------------------------------- 12


class _Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == EVENT_KEY:
            self.seen[data["event"]] += 1


async def test_compaction_events_reach_astream_events_v2_and_callbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They reached ``astream(stream_mode="custom")`` only; a LangGraph user listens for
    ``on_custom_event`` in ``astream_events(version="v2")``."""
    monkeypatch.chdir(tmp_path)
    task = DependentTask(steps=10)
    config = CompactionConfig(context_window=4_000)
    agent = create_compacting_agent(ContextReadingPolicy(), task.tools(), config=config)
    inputs = {"messages": [("user", task.prompt())]}

    def run(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}, "recursion_limit": 100}

    streamed: Counter[str] = Counter()
    async for chunk in agent.astream(inputs, run("custom"), stream_mode="custom"):
        streamed[chunk[EVENT_KEY]["event"]] += 1
    assert streamed["compaction"] >= 1
    v2: Counter[str] = Counter()
    async for event in agent.astream_events(inputs, run("v2"), version="v2"):
        if event["event"] == "on_custom_event" and event["name"] == EVENT_KEY:
            v2[event["data"]["event"]] += 1
    assert v2 == streamed
    handler = _Events()
    agent.invoke(inputs, {**run("callbacks"), "callbacks": [handler]})
    assert handler.seen == streamed
    lcel = _Events()  # an LCEL chain reports them to its callbacks too
    _lcel_run(8, callbacks=[lcel])
    assert lcel.seen["compaction"] >= 1


def test_the_compaction_log_line_says_what_it_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``compaction #1: 2937 -> 3108 tokens`` read as a compaction that grew the context:
    the first count is the decision's (the newest usage report plus an estimate), the second
    a recount. Counted alike on what it removed and added, it freed tokens (``_unless_larger``
    applies one that frees nothing only when the next call does not fit as it is)."""
    monkeypatch.chdir(tmp_path)
    handler = _Events()
    with caplog.at_level(logging.INFO, logger="langchain_compact"):
        _lcel_run(12, callbacks=[handler])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("compaction #")]
    assert len(lines) == handler.seen["compaction"] >= 2
    for line in lines:
        assert not re.match(r"compaction #\d+: [\d,]+ -> [\d,]+ tokens", line), line
        freed = re.search(r"freed (\d+) tokens", line)
        assert freed and int(freed.group(1)) > 0, line


@pytest.mark.parametrize("command", ["compact", "inspect", "demo"])
def test_the_cli_refuses_a_window_below_its_minimum(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compact --window 10`` was accepted silently."""
    out = tmp_path / "out.jsonl"
    argv = {
        "compact": ["compact", str(SHIPPED[0]), "-o", str(out)],
        "inspect": ["inspect", str(SHIPPED[0])],
        "demo": ["demo", "--out", str(tmp_path / "demo")],
    }[command]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--window", "10"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --window: 10 tokens is below the smallest window" in err
    assert "(1,000)" in err and "--window 8000" in err
    assert not out.exists() and not (tmp_path / "demo").exists()


def test_the_readme_set_up_says_how_to_stop_its_postgres_server_and_when_its_time_holds() -> None:
    text = README.read_text(encoding="utf-8")
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```bash", 1)[1].split("```", 1)[0]
    assert "bash .ci/postgres.sh stop" in block  # beside the command that starts it
    script = (ROOT / ".ci" / "postgres.sh").read_text(encoding="utf-8")
    assert "\nstop) cmd_stop ;;" in script
    said = " ".join(setup.split())
    timed = re.findall(r"[^.]*\b\d[\d,]* s\b[^.]*", said)
    assert timed, "the set-up section says how long the test command takes"
    assert any("nothing else running" in t for t in timed), timed  # the conditions
    assert any("shared with other work" in t for t in timed), timed
