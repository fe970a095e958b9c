"""A usage report anchors only the list it describes, and a re-fed history is recognised.

Issue 28 item 3, issue 29 item 2, issue 31 item 3: a compacting worker used as a node of a
supervisor graph (sharing ``messages``) is handed back, on its next call, the messages its
compaction replaced; a usage report on a kept reply without an id describes the longer list
it answered, not the compacted one. Every model input must fit the window by the exact o200k
count, and nothing a compaction replaced is sent again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import Field, SkipValidation

from langchain_compact import (
    CompactionConfig,
    CompactionMiddleware,
    ExtractiveSummarizer,
    compact_messages,
    create_compacting_agent,
)
from langchain_compact._refed import REPLACED_KEY, STALE_REPORTS_KEY
from langchain_compact.core import Compactor
from langchain_compact.markers import KIND_SUMMARY, get_meta, kind_of
from langchain_compact.tokens import TiktokenCounter, context_tokens

WINDOW = 8_000
SUBTASKS = 3
CALLS_PER_SUBTASK = 6
_O200K = TiktokenCounter(encoding="o200k_base")


def exact(messages: Sequence[BaseMessage]) -> int:
    """The o200k count of a model input (what the provider of the fake model reports)."""
    return _O200K.count_messages(list(messages))


def _page(label: str, words: int = 520) -> str:
    return f"page {label}: " + " ".join(f"{label}-w{i}" for i in range(words))


@tool
def read(part: str) -> str:
    """Read one part of the material."""
    return _page(part)


class Worker(BaseChatModel):
    """Per subtask: ``CALLS_PER_SUBTASK`` reads, then an answer; reports its input as the
    exact o200k count, and records every input."""

    inputs: Annotated[list[list[BaseMessage]], SkipValidation()] = Field(default_factory=list)
    state: Annotated[list[int], SkipValidation()] = Field(default_factory=lambda: [0, 0])

    @property
    def _llm_type(self) -> str:
        return "refed-worker"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.inputs.append(list(messages))
        subtask, calls = self.state
        if isinstance(messages[-1], HumanMessage) and kind_of(messages[-1]) != KIND_SUMMARY:
            subtask, calls = subtask + 1, 0
        usage = {"input_tokens": exact(messages), "output_tokens": 12, "total_tokens": 0}
        if calls < CALLS_PER_SUBTASK:
            call = {
                "name": "read",
                "args": {"part": f"{subtask}.{calls}"},
                "id": f"c{subtask}_{calls}",
            }
            reply = AIMessage("", tool_calls=[call], usage_metadata=usage)
            calls += 1
        else:
            reply = AIMessage(f"Subtask {subtask} done.", usage_metadata=usage)
        self.state[:] = [subtask, calls]
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _done(messages: Sequence[BaseMessage]) -> int:
    return sum(
        1 for m in messages if isinstance(m, AIMessage) and str(m.content).startswith("Subtask ")
    )


def supervisor_graph(worker: Any) -> Any:
    def supervise(state: MessagesState) -> dict[str, Any]:
        done = _done(state["messages"])
        if done >= SUBTASKS:
            return {}
        k = done + 1
        return {"messages": [HumanMessage(f"Subtask {k}: read parts {k}.0 to {k}.5.", id=f"s{k}")]}

    def route(state: MessagesState) -> str:
        return END if _done(state["messages"]) >= SUBTASKS else "worker"

    builder = StateGraph(MessagesState)
    builder.add_node("supervisor", supervise)
    builder.add_node("worker", worker)
    builder.add_edge(START, "supervisor")
    builder.add_conditional_edges("supervisor", route, ["worker", END])
    builder.add_edge("worker", "supervisor")
    return builder.compile()


def _graph_worker(model: Worker) -> Any:
    return create_compacting_agent(
        model,
        [read],
        config=CompactionConfig(context_window=WINDOW),
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )


def _middleware_worker(model: Worker) -> Any:
    middleware = CompactionMiddleware(config=CompactionConfig(context_window=WINDOW))
    return create_agent(model=model, tools=[read], middleware=[middleware])


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("build", [_graph_worker, _middleware_worker], ids=["graph", "middleware"])
def test_supervisor_refeeds_are_recognised(build: Any, mode: str) -> None:
    model = Worker()
    parent = supervisor_graph(build(model))
    start = {"messages": [HumanMessage("Project: three subtasks, one answer each.", id="task")]}
    run = {"recursion_limit": 200}
    sync = mode == "sync"
    out = parent.invoke(start, run) if sync else asyncio.run(parent.ainvoke(start, run))
    assert _done(out["messages"]) == SUBTASKS
    sizes = [exact(m) for m in model.inputs]
    assert max(sizes) <= WINDOW, f"model inputs over the {WINDOW}-token window: {sizes}"
    replaced: set[str] = set()
    compacted = False
    for n, sent in enumerate(model.inputs):
        again = [m.id for m in sent if m.id in replaced]
        assert not again, f"call {n} was sent {len(again)} message(s) a summary had replaced"
        for m in sent:
            if kind_of(m) == KIND_SUMMARY:
                compacted = True
                replaced.update(str(i) for i in get_meta(m).get("span_ids") or [] if i)
    assert compacted  # the worker did compact, so a re-fed history was possible


def _refed_history() -> tuple[list[BaseMessage], list[BaseMessage]]:
    """A history a worker compacted, and the parent's list handed back: the replaced
    messages ahead of the summary, then a reply whose report describes the compacted list."""
    history: list[BaseMessage] = [HumanMessage("Task: read twelve parts.", id="task")]
    for i in range(12):
        call = {"name": "read", "args": {"part": str(i)}, "id": f"c{i}"}
        history += [
            AIMessage("", tool_calls=[call], id=f"a{i}"),
            ToolMessage(_page(str(i), 300), tool_call_id=f"c{i}", id=f"t{i}"),
        ]
    core = Compactor(config=CompactionConfig(context_window=WINDOW, keep_last_n=4), archive=None)
    compacted = core.compact(history, "t").messages
    reply = AIMessage(
        "All parts read.",
        id="answer",
        usage_metadata={"input_tokens": exact(compacted), "output_tokens": 5, "total_tokens": 0},
    )
    compacted = [*compacted, reply]
    boundary = next(i for i, m in enumerate(compacted) if kind_of(m) == KIND_SUMMARY)
    refed = [*history[:-4], *compacted[boundary:], HumanMessage("Next subtask.", id="s2")]
    return compacted, refed


@pytest.mark.parametrize("integration", ["graph", "middleware"])
def test_a_report_anchors_only_the_list_it_describes(integration: str) -> None:
    _compacted, refed = _refed_history()
    config = CompactionConfig(context_window=WINDOW)
    if integration == "graph":
        from langchain_compact.graph import CompactionNodes

        core = CompactionNodes(config=config, archive=None).core
    else:
        core = CompactionMiddleware(config=config, archive=None).core
    assert core.count(refed) >= 0.95 * exact(refed)


@pytest.mark.parametrize("integration", ["graph", "middleware"])
def test_refed_messages_are_dropped_before_the_call(integration: str) -> None:
    compacted, refed = _refed_history()
    config = CompactionConfig(context_window=WINDOW)
    if integration == "graph":
        from langchain_compact.graph import CompactionNodes

        core = CompactionNodes(config=config, archive=None).core
    else:
        core = CompactionMiddleware(config=config, archive=None).core
    turn = core.turn(refed, "t")
    assert [m.id for m in turn.messages] == [*(m.id for m in compacted), "s2"]
    assert any(e["event"] == "refed_dropped" for e in turn.events)
    assert turn.history is not None  # the state is rewritten without them


def test_an_edited_or_new_message_is_never_dropped() -> None:
    _compacted, refed = _refed_history()
    edited = [  # the user edited one call and its result (same ids, new content)
        m.model_copy(update={"content": f"edited by the user ({m.id})"})
        if m.id in ("a0", "t0")
        else m
        for m in refed
    ]
    edited.insert(1, HumanMessage("Inserted by update_state.", id="new"))
    core = Compactor(config=CompactionConfig(context_window=WINDOW), archive=None)
    turn = core.turn(edited, "t")
    kept = {m.id for m in turn.messages}
    assert {"a0", "t0", "new"} <= kept
    assert not kept & {"a1", "t1", "a5", "t5"}
    assert turn.repair is None  # whole calls with their results were dropped


def _id_less_history() -> list[BaseMessage]:
    """Ten tool turns without message ids and a kept reply reporting the whole list."""
    history: list[BaseMessage] = [HumanMessage("Task: run the ten steps, then report.")]
    for i in range(10):
        call = {"name": "read", "args": {"part": str(i)}, "id": f"call{i}"}
        history += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(_page(str(i), 215), tool_call_id=f"call{i}"),
        ]
    usage = {"input_tokens": 9000, "output_tokens": 20, "total_tokens": 9020}
    history.append(AIMessage("Step 9 done.", usage_metadata=usage))
    return history


def test_lcel_retry_of_the_same_call_does_not_raise() -> None:
    history = _id_less_history()
    chain = compact_messages(config=CompactionConfig(context_window=WINDOW), archive=None)
    first = chain.invoke(history)
    second = chain.invoke(history)
    assert exact(second) <= WINDOW
    fed_back = chain.invoke(first)
    assert exact(fed_back) <= WINDOW
    more = chain.invoke([*first, HumanMessage("And now?")])
    assert exact(more) <= WINDOW


def test_a_kept_id_less_report_is_stale_after_the_compaction() -> None:
    history = _id_less_history()
    assert context_tokens(history, verify_anchor=True) == 9020  # it describes the raw list
    core = Compactor(config=CompactionConfig(context_window=WINDOW, keep_last_n=2), archive=None)
    compacted = core.compact(history, "t").messages
    assert isinstance(compacted[-1], AIMessage) and compacted[-1].usage_metadata  # kept
    # The kept reply answered the raw list: the compacted list is counted, not anchored.
    assert context_tokens(compacted) < 0.5 * 9020
    assert context_tokens(compacted) >= 0.95 * exact(compacted)
    boundary = next(m for m in compacted if kind_of(m) == KIND_SUMMARY)
    assert get_meta(boundary)[STALE_REPORTS_KEY]
    assert get_meta(boundary)[REPLACED_KEY] == {}  # nothing with an id was removed
