"""Persistence guarantees (B4, B8, B9): nothing lost, nothing duplicated, resumable, private.

* Every shared transcript, compacted several times, is accounted for message by message:
  the archive plus the final history hold each original exactly once, and the recall tool
  gives back the exact original text.
* A run that dies after the archive write and before the state update resumes from its
  SQLite checkpoint to the same final history as an uninterrupted run, with one summary per
  compaction index and no duplicate archive record (sync and async; in-process and SIGKILL).
* Fifty concurrent threads on one graph and one archive never see each other's messages.
* With the redactor on, planted secrets reach neither the archive files, the summary nor the
  final state.

The histories come from ``tests/_data.py`` (real transcripts) or from
:class:`~langchain_compact.demo.DependentTask` run by the
:class:`~langchain_compact.demo.ContextReadingPolicy`; the expected values are recomputed
from the task and the transcripts, never read back from what the package wrote.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore

from langchain_compact import CompactionConfig, _archive_records
from langchain_compact.archive import JsonlArchive, StoreArchive, make_recall_tool
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.graph import CompactionNodes, CompactionState, add_compaction
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
)
from langchain_compact.redaction import redact_secrets
from langchain_compact.tokens import approximate_tokens
from tests._data import all_trajectories, load_trajectory

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Kinds of messages the package makes; none of them is an original.
MADE_BY_PACKAGE = frozenset({KIND_CLEARED, KIND_TRUNCATED, KIND_SUMMARY, KIND_STOP})
#: The wall-clock part of an archive ref; the rest (content hash) is deterministic.
REF_TIME = re.compile(r"transcript_\d{8}T\d{12}Z_")
PAGE_FOOTER = re.compile(r"\n\n\[page (\d+) of (\d+)[^\]\n]*\]$")

# --------------------------------------------------------------------------- helpers


def is_original(message: BaseMessage) -> bool:
    # A pinned task cut to fit the window is a replacement too (its original is archived).
    return kind_of(message) not in MADE_BY_PACKAGE and not get_meta(message).get("truncated")


def normalise(value: Any) -> str:
    """Canonical JSON with archive-ref timestamps masked (they are write times, not content)."""
    return REF_TIME.sub("transcript_<time>_", json.dumps(value, sort_keys=True, default=str))


def snapshot(messages: Sequence[BaseMessage], *, mask_ref_times: bool = False) -> list[str]:
    """What two histories must agree on: ids, types, contents, tool calls, markers."""
    rows = [
        json.dumps(
            [m.id, m.type, m.content, getattr(m, "tool_calls", None), get_meta(m)],
            sort_keys=True,
            default=str,
        )
        for m in messages
    ]
    return [REF_TIME.sub("transcript_<time>_", r) for r in rows] if mask_ref_times else rows


class ArchiveClock:
    """Deterministic stand-in for the archive's wall clock (1 ms per reading).

    Archive refs carry their write time, and summaries quote their ref, so two runs of one
    task differ in that text (and in every id hashed from it) unless the clock is the same.
    A resumed run keeps reading the clock of the run it resumes, as a real clock moves on.
    """

    def __init__(self, us: int = 1_750_000_000_000_000) -> None:
        self.us = us

    def __call__(self) -> tuple[str, str]:
        self.us += 1000
        now = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=self.us)
        return now.strftime("%Y%m%dT%H%M%S%fZ"), now.isoformat()


def archived_messages(archive: Any, thread_id: str) -> list[BaseMessage]:
    return [
        m
        for ref in archive.refs(thread_id=thread_id)
        for m in archive.read(ref, thread_id=thread_id)
    ]


def same_message(a: BaseMessage, b: BaseMessage) -> bool:
    calls = lambda m: getattr(m, "tool_calls", None)  # noqa: E731
    return (a.type, a.content, calls(a)) == (b.type, b.content, calls(b))


def account(
    originals: Mapping[str, BaseMessage],
    archived: Sequence[BaseMessage],
    final: Sequence[BaseMessage],
    left_in_place: Collection[str] = (),
) -> None:
    """Every original id exactly once in archive + final history, with its original content
    (``left_in_place``: ids a compaction archived and then did not apply, because it would
    not have shrunk the context, may be in both)."""
    seen: collections.Counter[str] = collections.Counter()
    for where, messages in (("archive", archived), ("final history", final)):
        for m in messages:
            if not is_original(m):
                continue
            assert m.id in originals, f"{where} holds a message that never was in the run: {m.id}"
            assert same_message(m, originals[m.id]), f"{where} altered {m.id}"
            seen[m.id] += 1
    lost = [i for i in originals if seen[i] == 0]
    twice = sorted(i for i, n in seen.items() if n > 1 and i not in left_in_place)
    assert not lost, f"{len(lost)} original(s) lost: {lost[:5]}"
    assert not twice, f"{len(twice)} original(s) kept twice: {twice[:5]}"


def leaves(value: Any) -> list[Any]:
    """The scalar values inside a tool call's arguments (their rendering order may differ)."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def recall_whole(tool: BaseTool, thread_id: str, **args: Any) -> tuple[str, int]:
    """Every page of a recall, footers stripped and joined; and the number of pages."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    parts, page = [], 1
    while True:
        text = tool.invoke({**args, "page": page}, config)
        footer = PAGE_FOOTER.search(text)
        if footer is None:
            return "".join([*parts, text]), page
        parts.append(text[: footer.start()])
        if footer.group(1) == footer.group(2):
            return "".join(parts), page
        page += 1


def reply_id(messages: Sequence[BaseMessage]) -> str:
    """Deterministic id for the model's reply, from its input (ref timestamps masked).

    The policy names replies by a hash of the raw input, which includes the write time of
    archive refs quoted in summaries; masking it makes two runs of the same task comparable.
    """
    digest = hashlib.sha256()
    for m in messages:
        digest.update(normalise([m.type, m.content, getattr(m, "tool_calls", None)]).encode())
    return f"ai-{digest.hexdigest()[:20]}"


def build_graph(
    tools: Sequence[BaseTool],
    *,
    config: CompactionConfig,
    archive: Any,
    checkpointer: Any = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """agent <-> tools ReAct loop built by hand, then ``add_compaction`` (the user's path).

    Ids are deterministic (replies: :func:`reply_id`; tool results: ``result-<call id>``), so
    two runs can be compared id by id.
    """
    model = ContextReadingPolicy().bind_tools(tools)
    tool_node = ToolNode(list(tools))

    def agent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        reply = model.invoke(state["messages"], config)
        return {"messages": [reply.model_copy(update={"id": reply_id(state["messages"])})]}

    async def aagent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        reply = await model.ainvoke(state["messages"], config)
        return {"messages": [reply.model_copy(update={"id": reply_id(state["messages"])})]}

    def named(out: dict[str, Any]) -> dict[str, Any]:
        return {
            "messages": [
                m.model_copy(update={"id": f"result-{m.tool_call_id}"}) for m in out["messages"]
            ]
        }

    def run_tools(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return named(tool_node.invoke(state, config))

    async def arun_tools(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return named(await tool_node.ainvoke(state, config))

    builder = StateGraph(CompactionState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent, name="agent"))
    builder.add_node("tools", RunnableLambda(run_tools, afunc=arun_tools, name="tools"))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, config=config, archive=archive, tools=list(tools))
    return builder.compile(checkpointer=checkpointer)


def run_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": 400}


def task_input(task: DependentTask, thread_id: str = "t") -> dict[str, Any]:
    return {"messages": [HumanMessage(task.prompt(), id=f"task-{thread_id}")]}


def ever_seen(states: Sequence[Sequence[BaseMessage]]) -> dict[str, BaseMessage]:
    """Each message id that was ever in the state, as first seen (oldest checkpoint first)."""
    first: dict[str, BaseMessage] = {}
    for messages in states:
        for m in messages:
            if m.id is not None and is_original(m) and m.id not in first:
                first[m.id] = m
    return first


def summary_indices(messages: Sequence[BaseMessage]) -> list[int]:
    return [int(get_meta(m)["index"]) for m in messages if kind_of(m) == KIND_SUMMARY]


# --------------------------------------------------------------------------- 1. transcripts

TRAJECTORIES = all_trajectories()
WORD = re.compile(r"[A-Za-z0-9_]{6,}")


@pytest.mark.full_transcripts
def test_the_shared_transcripts_are_there() -> None:
    assert len(TRAJECTORIES) >= 30, f"expected the shared transcripts, found {len(TRAJECTORIES)}"


def compact_transcript(
    messages: list[BaseMessage], archive: JsonlArchive, thread_id: str
) -> tuple[list[BaseMessage], dict[str, str], int, set[str]]:
    """Grow a state message by message; before each model turn run the micro node, then the
    summarize node when the routing edge asks for it (as the graph does).

    Returns the final history, the tool results the micro node cleared (tool_call_id ->
    original text, from the transcript), how many compactions ran, and the ids of the
    messages in the history when a compaction was not applied (it would not have shrunk
    the context: its span was archived and stays in place).
    """
    total = approximate_tokens(messages)
    config = CompactionConfig(context_window=max(400, total // 4), keep_last_n=2)
    nodes = CompactionNodes(config=config, archive=archive)
    run: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    by_id = {m.id: m for m in messages}
    state: dict[str, Any] = {"messages": []}
    cleared: dict[str, str] = {}
    compactions = 0
    left_in_place: set[str] = set()

    def apply(update: dict[str, Any]) -> None:
        if "messages" in update:
            state["messages"] = add_messages(state["messages"], update["messages"])

    for message in messages:
        if isinstance(message, AIMessage) and state["messages"]:
            update = nodes.micro(state, run)
            for m in update.get("messages", []):
                if kind_of(m) == KIND_CLEARED and isinstance(m, ToolMessage):
                    cleared[m.tool_call_id] = by_id[m.id].text
                elif kind_of(m) == KIND_CLEARED:  # an older call's arguments behind a stub
                    cleared[f"message:{m.id}"] = by_id[m.id].text
            apply(update)
            if nodes.route(state) == "compact":
                update = nodes.summarize(state, run)
                if update["transition"] == "nothing_to_compact":  # it would not shrink
                    assert "the history is kept as it was" in update["stop_reason"], update
                    left_in_place |= {str(m.id) for m in state["messages"]}
                else:
                    assert update["transition"] == "compacted", update
                    compactions += 1
                    apply(update)
        state["messages"] = add_messages(state["messages"], [message])
    return state["messages"], cleared, compactions, left_in_place


@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.stem[:60] for p in TRAJECTORIES])
def test_transcript_compacted_repeatedly_loses_and_duplicates_nothing(
    path: Path, tmp_path: Path
) -> None:
    originals = load_trajectory(path)
    by_id = {m.id: m for m in originals}
    assert len(by_id) == len(originals)
    archive = JsonlArchive(tmp_path / "memory")
    thread = path.stem
    final, cleared, compactions, left_in_place = compact_transcript(originals, archive, thread)

    assert compactions + bool(left_in_place) >= 2
    # one summarize step may compact twice (its kept tail left no room): index counts both
    assert compactions <= max(summary_indices(final)) <= 2 * compactions
    archived = archived_messages(archive, thread)
    account(by_id, archived, final, left_in_place)

    tool = make_recall_tool(archive)
    archived_results = [m for m in archived if isinstance(m, ToolMessage) and is_original(m)]
    results_cleared = {k for k in cleared if not k.startswith("message:")}
    assert results_cleared <= {m.tool_call_id for m in archived_results}
    for result in archived_results:
        text, _ = recall_whole(tool, thread, tool_call_id=result.tool_call_id)
        assert text.startswith("1 archived message(s) match"), text[:200]
        original = by_id[str(result.id)].text
        assert text.endswith(f":\n{original}"), f"recall of {result.tool_call_id} is not exact"
        if result.tool_call_id in cleared:
            assert cleared.pop(result.tool_call_id) == original
    for key in [k for k in cleared if k.startswith("message:")]:
        message_id = key.split(":", 1)[1]
        text, _ = recall_whole(tool, thread, message_id=message_id)
        original = by_id[message_id]
        assert isinstance(original, AIMessage)
        for call in original.tool_calls:  # the arguments come back as they were made
            for leaf in leaves(call["args"]):
                assert json.dumps(leaf, ensure_ascii=False) in text, message_id
        cleared.pop(key)
    assert not cleared, "every cleared tool result and call is recalled"
    if not archived_results:  # transcripts without tool calls: recall by keywords instead
        target = max((m for m in archived if is_original(m)), key=lambda m: len(m.text))
        words = sorted(set(WORD.findall(target.text)), key=lambda w: (-len(w), w))[:4]
        text, _ = recall_whole(tool, thread, query=" ".join(words))
        assert by_id[str(target.id)].text in text


# --------------------------------------------------------------------------- B4 oversized


def test_oversized_tool_result_is_archived_whole_and_recalled_whole(tmp_path: Path) -> None:
    task = DependentTask(steps=3, payload_chars=12_000, seed=4)
    config = CompactionConfig(context_window=200_000, large_tool_result_chars=5000)
    archive = JsonlArchive(tmp_path / "memory")
    graph = build_graph(task.tools(), config=config, archive=archive, checkpointer=InMemorySaver())
    final = graph.invoke(task_input(task), run_config("t"))["messages"]
    assert task.check(final[-1].text).ok

    run_step = task.tools()[0]
    values = [task.starting_value, *task.expected_values()]
    recall = make_recall_tool(archive)
    keep = config.large_tool_result_keep_chars
    results = {m.tool_call_id: m for m in final if isinstance(m, ToolMessage)}
    assert len(results) == task.steps
    for step in range(1, task.steps + 1):
        whole = run_step.invoke({"step": step, "previous": values[step - 1]})
        assert len(whole) > config.large_tool_result_chars
        [(call_id, kept)] = [
            (c, m) for c, m in results.items() if c.startswith(f"call_step_{step}_")
        ]
        if step == task.steps:  # read by the final call only: nothing ran after it
            assert kept.text == whole
            continue
        # Read, then digested before the next call: first line, and the outcome line last.
        assert kind_of(kept) == KIND_TRUNCATED
        assert whole.splitlines()[0] in kept.text
        assert kept.text.rstrip().endswith(whole.splitlines()[-1])
        assert len(kept.text) < keep + 400 < len(whole)
        text, pages = recall_whole(recall, "t", tool_call_id=call_id)
        assert pages >= 3  # 12,000 characters in pages of at most 4,000
        assert text.endswith(f":\n{whole}")
        [hit] = archive.search(thread_id="t", tool_call_id=call_id)
        assert hit.message.content == whole


# --------------------------------------------------------------------------- 2. crash/resume


class Crash(BaseException):
    """The process dying: a BaseException, so no ``except Exception`` on the way can catch it."""


class CrashAfterWrite:
    """Archive wrapper: the ``nth`` write with ``reason`` succeeds, then the process "dies"."""

    def __init__(
        self,
        inner: Any,
        *,
        reason: str,
        nth: int = 1,
        die: Callable[[str], None] | None = None,
    ) -> None:
        self.inner, self.reason, self.nth = inner, reason, nth
        self.die = die or self._raise
        self.seen = 0
        self.crash_ref: str | None = None

    @staticmethod
    def _raise(ref: str) -> None:
        raise Crash(ref)

    def _after(self, reason: str, ref: str) -> str:
        if reason == self.reason:
            self.seen += 1
            if self.seen == self.nth:
                self.crash_ref = ref
                self.die(ref)
        return ref

    def write(self, messages: Sequence[BaseMessage], **kw: Any) -> str:
        return self._after(kw["reason"], self.inner.write(messages, **kw))

    async def awrite(self, messages: Sequence[BaseMessage], **kw: Any) -> str:
        return self._after(kw["reason"], await self.inner.awrite(messages, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


CRASH_TASK = DependentTask(steps=16, payload_chars=600, seed=11)
#: Micro-compactions, four compactions and two summary merges. A 0.4 summary budget: at the
#: default 0.25 the merged summary drops step values and the policy (which never calls the
#: recall tool) blocks, so the run could not finish either way.
CRASH_CONFIG = CompactionConfig(context_window=1500, summary_budget_ratio=0.4)


class SqliteRun:
    """Runs the crash task on a SQLite checkpoint file, through the sync or async API;
    every call opens a fresh connection and compiles a fresh graph (a restarted process)."""

    def __init__(self, mode: str, db: Path) -> None:
        self.mode, self.db = mode, str(db)

    async def invoke(self, archive: Any, payload: Any, thread_id: str) -> dict[str, Any]:
        tools = CRASH_TASK.tools()
        if self.mode == "sync":
            with SqliteSaver.from_conn_string(self.db) as saver:
                graph = build_graph(tools, config=CRASH_CONFIG, archive=archive, checkpointer=saver)
                return graph.invoke(payload, run_config(thread_id))
        async with AsyncSqliteSaver.from_conn_string(self.db) as asaver:
            graph = build_graph(tools, config=CRASH_CONFIG, archive=archive, checkpointer=asaver)
            return await graph.ainvoke(payload, run_config(thread_id))

    async def pending(self, thread_id: str) -> tuple[str, ...]:
        with SqliteSaver.from_conn_string(self.db) as saver:
            graph = build_graph(
                CRASH_TASK.tools(), config=CRASH_CONFIG, archive=None, checkpointer=saver
            )
            return tuple(graph.get_state(run_config(thread_id)).next)

    def checkpoints(self, thread_id: str) -> list[list[BaseMessage]]:
        with SqliteSaver.from_conn_string(self.db) as saver:
            graph = build_graph(
                CRASH_TASK.tools(), config=CRASH_CONFIG, archive=None, checkpointer=saver
            )
            history = list(graph.get_state_history(run_config(thread_id)))
        return [list(s.values.get("messages", [])) for s in reversed(history)]


def record_refs(folder: Path) -> list[str]:
    """Refs of every record file under a JsonlArchive folder, from the raw file listing."""
    return sorted(p.stem for p in folder.rglob("transcript_*.jsonl"))


def check_resumed(
    *,
    resumed: dict[str, Any],
    baseline: dict[str, Any],
    crash_ref: str | None,
    checkpoints: list[list[BaseMessage]],
    baseline_checkpoints: list[list[BaseMessage]],
    refs: list[str],
    baseline_refs: list[str],
) -> None:
    final = resumed["messages"]
    assert task_ok(final), CRASH_TASK.check(final[-1].text).reason
    assert snapshot(final) == snapshot(baseline["messages"])
    count = resumed["compaction_count"]
    assert count == baseline["compaction_count"] >= 2
    indices = summary_indices(final)
    assert indices == sorted(set(indices)) and indices[-1] == count
    for state in checkpoints:  # never two summaries with one index, at any checkpoint
        at = summary_indices(state)
        assert len(at) == len(set(at)), at
    # The resume made exactly the summaries an uninterrupted run makes, no extra one.
    made = {m.id for s in checkpoints for m in s if kind_of(m) == KIND_SUMMARY}
    assert made == {m.id for s in baseline_checkpoints for m in s if kind_of(m) == KIND_SUMMARY}
    # The archive: the record written before the crash is reused, nothing is written twice.
    assert crash_ref is not None and crash_ref in refs
    hashes = [ref[-16:] for ref in refs]
    assert len(hashes) == len(set(hashes)), "a record was written twice"
    assert refs == baseline_refs
    assert crash_ref in {get_meta(m).get("archive_ref") for s in checkpoints for m in s}


def task_ok(messages: Sequence[BaseMessage]) -> bool:
    return CRASH_TASK.check(messages[-1].text).ok


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("reason", "nth"),
    [("micro-compaction", 1), ("compaction", 1), ("compaction", 3), ("summary-merge", 1)],
)
async def test_crash_after_archive_write_resumes_like_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, reason: str, nth: int
) -> None:
    monkeypatch.setattr(_archive_records, "new_timestamp", ArchiveClock())
    base_db = SqliteRun(mode, tmp_path / "baseline.db")
    baseline = await base_db.invoke(
        JsonlArchive(tmp_path / "baseline"), task_input(CRASH_TASK), "t"
    )
    assert task_ok(baseline["messages"])

    monkeypatch.setattr(_archive_records, "new_timestamp", ArchiveClock())
    db = SqliteRun(mode, tmp_path / "run.db")
    crashing = CrashAfterWrite(JsonlArchive(tmp_path / "archive"), reason=reason, nth=nth)
    with pytest.raises(Crash):
        await db.invoke(crashing, task_input(CRASH_TASK), "t")
    node = "compact_micro" if reason == "micro-compaction" else "compact_summarize"
    assert crashing.crash_ref in record_refs(tmp_path / "archive")
    assert await db.pending("t") == (node,), "the checkpoint stops before the crashed node"

    resumed = await db.invoke(JsonlArchive(tmp_path / "archive"), None, "t")
    check_resumed(
        resumed=resumed,
        baseline=baseline,
        crash_ref=crashing.crash_ref,
        checkpoints=db.checkpoints("t"),
        baseline_checkpoints=base_db.checkpoints("t"),
        refs=record_refs(tmp_path / "archive"),
        baseline_refs=record_refs(tmp_path / "baseline"),
    )
    assert not list((tmp_path / "archive").rglob(".tmp-*")), "no half-written file is left"


KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langchain_compact import _archive_records
    from langchain_compact.archive import JsonlArchive
    from tests.unit.test_persistence import (
        CRASH_CONFIG, CRASH_TASK, ArchiveClock, CrashAfterWrite, build_graph, run_config,
        task_input,
    )

    db, folder, durability = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    clock = _archive_records.new_timestamp = ArchiveClock()

    def die(ref):
        print(ref, clock.us, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    archive = CrashAfterWrite(JsonlArchive(folder), reason="compaction", nth=1, die=die)
    with SqliteSaver.from_conn_string(db) as saver:
        graph = build_graph(CRASH_TASK.tools(), config=CRASH_CONFIG, archive=archive,
                            checkpointer=saver)
        graph.invoke(task_input(CRASH_TASK), run_config("t"), durability=durability)
    print("not killed")
    """
)


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_process_killed_after_archive_write_resumes_from_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    """SIGKILL right after the archive write. With ``durability="sync"`` the checkpoint is the
    one before the compaction node; with LangGraph's default ``"async"`` the newest checkpoints
    may not have reached the file, so the resume replays a few steps (tools included) from an
    older one. Either way it ends where an uninterrupted run ends, with no duplicate record."""
    monkeypatch.setattr(_archive_records, "new_timestamp", ArchiveClock())
    base = SqliteRun("sync", tmp_path / "baseline.db")
    baseline = await base.invoke(JsonlArchive(tmp_path / "baseline"), task_input(CRASH_TASK), "t")
    script = tmp_path / "killed_run.py"
    script.write_text(KILLED_RUN)
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, script, tmp_path / "run.db", tmp_path / "archive", durability],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr[-2000:]
    crash_ref, clock_us = proc.stdout.split()
    assert crash_ref in record_refs(tmp_path / "archive")

    # A new process: fresh connection, fresh graph, the wall clock has moved on.
    monkeypatch.setattr(_archive_records, "new_timestamp", ArchiveClock(int(clock_us)))
    db = SqliteRun("sync", tmp_path / "run.db")
    assert not summary_indices(db.checkpoints("t")[-1]), "the state lags behind the archive"
    if durability == "sync":
        assert await db.pending("t") == ("compact_summarize",)
    resumed = await db.invoke(JsonlArchive(tmp_path / "archive"), None, "t")
    check_resumed(
        resumed=resumed,
        baseline=baseline,
        crash_ref=crash_ref,
        checkpoints=db.checkpoints("t"),
        baseline_checkpoints=base.checkpoints("t"),
        refs=record_refs(tmp_path / "archive"),
        baseline_refs=record_refs(tmp_path / "baseline"),
    )


# --------------------------------------------------------------------------- 4. fifty threads

THREADS = 50
SMALL_CONFIG = CompactionConfig(context_window=1400)


def per_thread_tools(tasks: Mapping[str, DependentTask]) -> list[BaseTool]:
    """One ``run_step`` tool that answers for the calling thread's own task."""
    by_thread = {thread: task.tools()[0] for thread, task in tasks.items()}

    def run_step(step: int, previous: int, config: RunnableConfig) -> str:
        thread = (config.get("configurable") or {})["thread_id"]
        return str(by_thread[thread].invoke({"step": step, "previous": previous}))

    return [
        StructuredTool.from_function(
            run_step, name="run_step", description=by_thread[next(iter(by_thread))].description
        )
    ]


@pytest.mark.parametrize("kind", ["jsonl", "store"])
async def test_fifty_concurrent_threads_share_one_graph_and_archive_without_cross_talk(
    tmp_path: Path, kind: str
) -> None:
    tasks = {
        f"thread-{i:02d}": DependentTask(steps=8, payload_chars=400, seed=100 + i)
        for i in range(THREADS)
    }
    assert len({t.code for t in tasks.values()}) > THREADS // 2  # the tasks differ
    archive: Any = (
        JsonlArchive(tmp_path / "memory") if kind == "jsonl" else StoreArchive(InMemoryStore())
    )
    graph = build_graph(
        per_thread_tools(tasks), config=SMALL_CONFIG, archive=archive, checkpointer=InMemorySaver()
    )
    finals = await asyncio.gather(
        *(
            graph.ainvoke(task_input(task, thread), run_config(thread))
            for thread, task in tasks.items()
        )
    )

    recall = make_recall_tool(archive)
    seen_by_thread: dict[str, dict[str, BaseMessage]] = {}
    for thread in tasks:
        history = [
            list(s.values.get("messages", []))
            async for s in graph.aget_state_history(run_config(thread))
        ]
        seen_by_thread[thread] = ever_seen(list(reversed(history)))
    for (thread, task), final in zip(tasks.items(), finals, strict=True):
        verdict = task.check(final["messages"][-1].text)
        assert verdict.ok, f"{thread}: {verdict.reason}"
        assert final["compaction_count"] >= 1
        archived = archived_messages(archive, thread)
        # Only its own messages: each archived original was in this thread's state, as is.
        account(seen_by_thread[thread], archived, final["messages"])
        others = set().union(*(set(s) for t, s in seen_by_thread.items() if t != thread))
        assert not {m.id for m in archived} & others
        values = set(task.expected_values())
        for m in archived:
            if isinstance(m, ToolMessage) and is_original(m):
                match = re.search(r"RESULT step=(\d+) value=(\d+)", m.text)
                assert match and int(match.group(2)) in values
        # The recall tool answers from the caller's thread only.
        cleared = [m for m in final["messages"] if kind_of(m) == KIND_CLEARED]
        if cleared:
            call_id = cleared[0].tool_call_id
            mine, _ = recall_whole(recall, thread, tool_call_id=call_id)
            assert mine.endswith(seen_by_thread[thread][str(cleared[0].id)].text)
            other = next(t for t in tasks if t != thread)
            theirs, _ = recall_whole(recall, other, tool_call_id=call_id)
            assert theirs.startswith("No archived message")
    if kind == "jsonl":
        folders = [p for p in (tmp_path / "memory").iterdir() if p.is_dir()]
        assert len(folders) == THREADS
        for folder in folders:
            owners = {
                json.loads(p.read_text().split("\n", 1)[0])["thread_id"]
                for p in folder.glob("*.jsonl")
            }
            assert len(owners) == 1, f"{folder.name} mixes threads: {owners}"


def test_a_writer_racing_another_to_create_the_archive_folder_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "memory"
    archive = JsonlArchive(folder)
    exists = Path.exists

    def checked_just_before_the_other_writer_created_it(self: Path, **kw: Any) -> bool:
        if self == folder and not exists(self):
            folder.mkdir()  # the other writer's mkdir lands between our check and our mkdir
            return False
        return exists(self, **kw)

    monkeypatch.setattr(Path, "exists", checked_just_before_the_other_writer_created_it)
    ref = archive.write([ToolMessage("42", tool_call_id="c1")], thread_id="t", reason="r")
    assert archive.read(ref, thread_id="t")[0].content == "42"


# --------------------------------------------------------------------------- 5. redaction

OPENAI_KEY = "sk-proj-" + "Zq7Lm2Pv9Xc4Rt8Wn1Bk6Hs3Jd5Fg0Ay"
AWS_KEY = "AKIA" + "Q5Z3XN7M2KLP4R8T"


def leaky_tools(task: DependentTask) -> list[BaseTool]:
    inner = task.tools()[0]

    def run_step(step: int, previous: int) -> str:
        log = str(inner.invoke({"step": step, "previous": previous}))
        return f"export OPENAI_API_KEY={OPENAI_KEY}\n{log}" if step == 2 else log

    return [StructuredTool.from_function(run_step, name="run_step", description=inner.description)]


@pytest.mark.parametrize("redactor", [redact_secrets, None], ids=["redacted", "control"])
def test_planted_secrets_are_gone_from_archive_summary_and_state_after_compaction(
    tmp_path: Path, redactor: Callable[[str], str] | None
) -> None:
    task = CRASH_TASK
    config = dataclasses.replace(CRASH_CONFIG, redactor=redactor)
    folder = tmp_path / "memory"
    graph = build_graph(
        leaky_tools(task), config=config, archive=JsonlArchive(folder), checkpointer=InMemorySaver()
    )
    note = HumanMessage(f"FYI the deploy user has key {AWS_KEY}; never print it.", id="note")
    final = graph.invoke({"messages": [*task_input(task)["messages"], note]}, run_config("t"))
    messages = final["messages"]
    assert task.check(messages[-1].text).ok

    leaky_result = next(
        m for m in ever_seen_in_graph(graph) if isinstance(m, ToolMessage) and OPENAI_KEY in m.text
    )
    # Precondition: both secret-bearing messages were compacted away (not originals any more).
    assert "note" not in {m.id for m in messages}
    assert all(not is_original(m) for m in messages if m.id == leaky_result.id)
    assert final["compaction_count"] >= 1

    raw = b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    summaries = "\n".join(m.text for m in messages if kind_of(m) == KIND_SUMMARY)
    state_text = json.dumps(messages_to_dict(messages)) + json.dumps(
        {k: v for k, v in final.items() if k != "messages"}, default=str
    )
    if redactor is None:  # control: the test sees a leak when there is one
        assert OPENAI_KEY.encode() in raw and AWS_KEY.encode() in raw
        return
    for secret in (OPENAI_KEY, AWS_KEY):
        assert secret.encode() not in raw
        assert secret not in summaries
        assert secret not in state_text
    assert b"[REDACTED:openai_key]" in raw and b"[REDACTED:aws_access_key]" in raw
    assert task.prompt() in {m.text for m in messages}, "the pinned task is kept verbatim"


def ever_seen_in_graph(graph: CompiledStateGraph[Any, Any, Any, Any]) -> list[BaseMessage]:
    history = list(graph.get_state_history(run_config("t")))
    return list(ever_seen([s.values.get("messages", []) for s in reversed(history)]).values())
