"""The LCEL transformer (docs/design.md, B7): stateless over its input, memoised by span."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    JsonlArchive,
    MessageCompactor,
    compact_messages,
)
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.history import validate_history
from langchain_compact.markers import KIND_CLEARED, KIND_SUMMARY, kind_of

CONFIG = CompactionConfig(context_window=4000)


class CountingSummarizer(ExtractiveSummarizer):
    """The extractive summarizer, counting the spans it is asked to summarise."""

    def __init__(self) -> None:
        self.spans: list[list[str | None]] = []

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int = 2000) -> str:
        if not all(kind_of(m) == KIND_SUMMARY for m in messages):  # merges counted apart
            self.spans.append([m.id for m in messages])
        return super().summarize(messages, max_tokens=max_tokens)


def drive(compactor: MessageCompactor, task: DependentTask, *, mode: str = "sync") -> Any:
    """A hand-written agent loop: the raw history grows, the model sees the compacted one."""
    tools = {t.name: t for t in task.tools()}
    model = ContextReadingPolicy().bind_tools(task.tools())
    history: list[BaseMessage] = [HumanMessage(task.prompt(), id="task")]
    calls = 0
    seen: list[list[BaseMessage]] = []
    import asyncio

    for _ in range(4 * task.steps):
        if mode == "sync":
            model_input = compactor(history)
        else:
            model_input = asyncio.run(compactor.acompact(history))
        seen.append(model_input)
        reply = model.invoke(model_input)
        calls += 1
        history.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            history.append(tools[call["name"]].invoke(call))
    return history, calls, seen


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_growing_history_finishes_and_each_span_is_summarised_once(mode: str) -> None:
    # ~1,700-token results: 4,600 characters of CI log by the piece-based estimate (the
    # default 6,000 were ~1,700 tokens only at the old 3.6 characters a token; they are
    # ~2,200 by the estimate and by o200k, and compact on nearly every call).
    task = DependentTask(steps=40, payload_chars=4_600)
    summarizer = CountingSummarizer()
    compactor = MessageCompactor(config=CONFIG, summarizer=summarizer)
    history, calls, seen = drive(compactor, task, mode=mode)
    verdict = task.check(history[-1].text)
    assert verdict.ok, verdict.reason
    assert compactor.compactions >= 1
    # Summaries are memoised by span: far fewer summarizer calls than model calls, and no
    # span is summarised twice.
    # (A 4,000-token window with ~1,700-token results that reach the model whole: about
    # one compaction per two model calls.)
    assert len(summarizer.spans) == compactor.compactions < calls / 2
    assert len({tuple(s) for s in summarizer.spans}) == len(summarizer.spans)
    # Every input the model received is a legal history, and the task stays pinned.
    for model_input in seen:
        validate_history(model_input)
        assert model_input[0].text == task.prompt()


def test_the_raw_history_is_never_modified() -> None:
    task = DependentTask(steps=30)
    compactor = MessageCompactor(config=CONFIG)
    history, _, seen = drive(compactor, task)
    assert not any(kind_of(m) for m in history)  # no placeholder or summary leaked in
    assert any(kind_of(m) == KIND_SUMMARY for m in seen[-1])


def test_clearing_is_monotonic_across_calls() -> None:
    """A result cleared in one call stays cleared in every later call (stable prefix)."""
    # 12 results of ~850 tokens in a 12,000-token window: clearing under pressure, no fold.
    task = DependentTask(steps=12, payload_chars=3000)
    compactor = MessageCompactor(config=CompactionConfig(context_window=12_000, micro_keep=2))
    _, _, seen = drive(compactor, task)
    cleared_before: set[str] = set()
    for model_input in seen:
        cleared_now = {
            m.tool_call_id
            for m in model_input
            if isinstance(m, ToolMessage) and kind_of(m) == KIND_CLEARED
        }
        assert cleared_before <= cleared_now
        cleared_before = cleared_now
        newest = [m for m in model_input if isinstance(m, ToolMessage)][-1:]
        assert all(kind_of(m) is None for m in newest), "an unread result is never cleared"
    assert compactor.compactions == 0
    assert 5 <= len(cleared_before) <= 12 - 2


def test_runnable_in_a_chain_and_one_shot_form() -> None:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history")])
    history: list[BaseMessage] = [HumanMessage("Task: list ids", id="t")]
    for i in range(12):
        history.append(
            AIMessage("", id=f"a{i}", tool_calls=[{"name": "ls", "args": {"i": i}, "id": f"c{i}"}])
        )
        history.append(ToolMessage(f"id-{i}: " + "x" * 400, tool_call_id=f"c{i}", name="ls"))
    history.append(HumanMessage("and now?", id="q"))
    config = CompactionConfig(context_window=700, keep_last_n=2)
    chain = prompt | compact_messages(config=config)
    chained = chain.invoke({"history": history})
    one_shot = compact_messages(history, config=config)
    assert [m.type for m in chained] == [m.type for m in one_shot]
    assert [m.text for m in chained] == [m.text for m in one_shot]
    assert len(one_shot) < len(history)
    assert one_shot[0].text == "Task: list ids"
    assert any(kind_of(m) == KIND_SUMMARY for m in one_shot)


def test_cleared_originals_are_archived_once() -> None:
    task = DependentTask(steps=10, payload_chars=2000)
    archive = JsonlArchive(tempfile.mkdtemp())
    compactor = MessageCompactor(
        config=CompactionConfig(context_window=6_000), archive=archive, thread_id="lcel"
    )
    history, _, _ = drive(compactor, task)
    archived = [
        m for ref in archive.refs(thread_id="lcel") for m in archive.read(ref, thread_id="lcel")
    ]
    ids = [m.tool_call_id for m in archived if isinstance(m, ToolMessage)]
    assert len(ids) == len(set(ids)) >= 3
    originals = {m.tool_call_id: m.text for m in history if isinstance(m, ToolMessage)}
    assert all(m.text == originals[m.tool_call_id] for m in archived)


def test_a_reassigned_content_is_not_served_from_the_digest_cache() -> None:
    from langchain_compact.lcel import _Digests

    digest = _Digests()
    message = HumanMessage("first")
    before = digest(message)
    message.content = "second"
    assert digest(message) != before
    assert digest(message) == digest(HumanMessage("second"))


def _growing(n: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    history: list[Any] = [HumanMessage("Task: say hi forty times", id="t")]
    history += [AIMessage("hi " * 40 + f"#{i}", id=f"a{i}") for i in range(n)]
    return history


def test_a_chain_served_by_several_processes_shares_its_memo_through_a_store() -> None:
    """Two compactors over one store stand for two worker processes: the second continues
    a thread the first compacted exactly as the first would have (no second summary of
    the same span), because the memo entry is read back from the store."""
    from langgraph.store.memory import InMemoryStore

    from langchain_compact import CompactionConfig
    from langchain_compact.lcel import MessageCompactor

    def make(store: Any) -> MessageCompactor:
        return MessageCompactor(
            config=CompactionConfig(context_window=600, keep_last_n=2), store=store
        )

    run = {"configurable": {"thread_id": "shared"}}
    alone, store = make(None), InMemoryStore()
    first, second = make(store), make(store)
    for n in range(4, 30, 3):
        expected = alone(_growing(n), run)
        worker = first if n % 2 else second
        assert worker(_growing(n), run) == expected
    assert alone.compactions == first.compactions + second.compactions >= 2


async def test_the_async_path_shares_the_memo_too() -> None:
    from langgraph.store.memory import InMemoryStore

    from langchain_compact import CompactionConfig
    from langchain_compact.lcel import MessageCompactor

    store = InMemoryStore()
    cfg = CompactionConfig(context_window=600, keep_last_n=2)
    first = MessageCompactor(config=cfg, store=store)
    second = MessageCompactor(config=cfg, store=store)
    one = await first.acompact(_growing(12))
    assert first.compactions == 1
    two = await second.acompact(_growing(13))
    assert second.compactions == 0 and two[: len(one)] == one
