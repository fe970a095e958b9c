"""Originals are immutable in the archive (issue 21, item 2).

A message id's first archived original is what search and recall return; a version the
package derived from it (the pinned task cut to fit the window, archived again when it is
cut a second time) is archived as what it is, and returned only when no original matches.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from _scenarios import ScriptedChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from langchain_compact import CompactionConfig, ExtractiveSummarizer
from langchain_compact.archive import (
    JsonlArchive,
    StoreArchive,
    TranscriptArchive,
    make_recall_tool,
)
from langchain_compact.graph import create_compacting_agent
from langchain_compact.markers import KIND_PINNED_TASK, get_meta, with_meta

CONFIG = {"configurable": {"thread_id": "t"}}


def make_archive(kind: str, tmp_path: Path) -> TranscriptArchive:
    return JsonlArchive(tmp_path / "memory") if kind == "jsonl" else StoreArchive(InMemoryStore())


def a_cut(task: HumanMessage, keep: int) -> BaseMessage:
    """The pinned task cut as ``microcompact.cut_task`` marks it."""
    text = str(task.content)[:keep] + f"\n[task cut: {len(str(task.content)) - keep} chars]"
    return with_meta(
        task.model_copy(update={"content": text}), kind=KIND_PINNED_TASK, truncated=True
    )


@pytest.mark.parametrize("kind", ["jsonl", "store"])
@pytest.mark.parametrize("cuts", [1, 2, 3, 6])
def test_the_first_archived_original_wins_over_any_number_of_cuts(
    kind: str, cuts: int, tmp_path: Path
) -> None:
    archive = make_archive(kind, tmp_path)
    task = HumanMessage(
        "Task: port the parser. " + " ".join(f"rule{i}" for i in range(300)), id="task"
    )
    archive.write([task], thread_id="t", reason="micro-compaction")
    for n in range(cuts):  # each later cut archives the previous version, as the nodes do
        archive.write(
            [a_cut(task, 1200 - 150 * n), ToolMessage(f"r{n}", tool_call_id=f"c{n}")],
            thread_id="t",
            reason="micro-compaction",
        )
    [hit] = archive.search(thread_id="t", message_id="task")
    assert hit.message.content == task.content and not get_meta(hit.message)
    [hit] = archive.search(thread_id="t", query="port the parser rule1")
    assert hit.message.content == task.content
    page = make_recall_tool(archive).invoke({"query": "port parser"}, CONFIG)
    assert "1 archived message(s)" in page and task.text[:3000] in page
    assert "shortened" not in page


@pytest.mark.parametrize("kind", ["jsonl", "store"])
def test_a_cut_is_returned_as_what_it_is_when_no_original_matches(
    kind: str, tmp_path: Path
) -> None:
    archive = make_archive(kind, tmp_path)
    task = HumanMessage("Task: build it. " + "detail " * 400, id="task")
    cut = a_cut(task, 300)
    archive.write([cut], thread_id="t", reason="micro-compaction")
    [hit] = archive.search(thread_id="t", message_id="task")
    assert hit.message.content == cut.content
    page = make_recall_tool(archive).invoke({"query": "build"}, CONFIG)
    assert "shortened to fit the window, not the original text" in page


@tool
def read(n: int) -> str:
    """Read chunk n."""
    return f"chunk {n}: " + " ".join(f"w{n}_{k}" for k in range(60))


def _task(window: int, lines: int) -> str:
    rows = [
        f"Requirement {i}: the module m{i} must return code Q{i}-{window} for input {i}."
        for i in range(lines)
    ]
    return "Task: implement these.\n" + "\n".join(rows)


@pytest.mark.parametrize("window", [300, 450, 600, 800, 1000, 1500, 2000, 3000, 5000, 8000])
def test_recall_returns_the_original_task_after_any_number_of_cuts(window: int) -> None:
    """Small-window graph runs cut an oversized pinned task, some of them twice (the
    intermediate cut archived under the task's id): recall still gives the original."""
    cut_twice = 0
    for div in (6, 20, 60):
        task = _task(window, max(8, window // div))
        replies: list[BaseMessage] = [
            AIMessage("", tool_calls=[{"name": "read", "args": {"n": i}, "id": f"c{i}"}])
            for i in range(12)
        ]
        archive = StoreArchive(InMemoryStore())
        agent = create_compacting_agent(
            ScriptedChatModel(replies=[*replies, AIMessage("done")]),
            [read],
            config=CompactionConfig(context_window=window),
            archive=archive,
            summarizer=ExtractiveSummarizer(),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small windows warn, and may stop the run
            out = agent.invoke(
                {"messages": [HumanMessage(task, id="task")]}, {**CONFIG, "recursion_limit": 200}
            )
        versions = [
            m
            for ref in archive.refs(thread_id="t")
            for m in archive.read(ref, thread_id="t")
            if m.id == "task"
        ]
        cut_twice += any(get_meta(m).get("truncated") for m in versions)
        if not versions:  # never cut: the state still holds it verbatim
            assert out["messages"][0].content == task
            continue
        assert versions[0].content == task  # the first archived version is the original
        [hit] = archive.search(thread_id="t", message_id="task")
        assert hit.message.content == task
        page = make_recall_tool(archive, max_chars=8000).invoke({"query": "Requirement"}, CONFIG)
        first = page.split("\n\n[2]")[0]
        assert task[:3000] in first and "shortened" not in first
    if window in (800, 1500, 2000):
        assert cut_twice >= 1  # the scenario cuts the task twice (runs that used to lose it)
