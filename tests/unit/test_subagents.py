"""A sub-agent's compaction stays in the sub-agent (issue 29, item 1).

A supervisor graph calls a compacting worker as a node sharing ``messages`` (three
subtasks, one call each), and a ``Send`` fans two subtasks out to compacting sub-agents;
the worker is ``create_compacting_agent`` or ``create_agent`` + ``CompactionMiddleware``, with
an 8k window and tool results large enough to force clearing and a summary. LangGraph merges
a subgraph's messages into the parent by id, so before this change the parent ended with
the worker's placeholders in place of its originals and the worker's summaries in its
history. Now: the parent's final state holds no message the package made or changed, each
worker call's model input holds its current subtask, no call is over the window by the
exact o200k count, and every original the worker removed from its view is recallable.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, Send, interrupt
from pydantic import Field, SkipValidation

from langchain_compact import (
    CompactionConfig,
    CompactionMiddleware,
    ExtractiveSummarizer,
    StoreArchive,
    add_compaction,
    create_compacting_agent,
)
from langchain_compact.markers import KIND_CLEARED, KIND_SUMMARY, KIND_TRUNCATED, kind_of
from langchain_compact.tokens import TiktokenCounter

VIEW_KEY = "compaction_view"  # the worker's private state key (CompactionKeys)

WINDOWS = (8_000, 32_000)
READS = 6
_O200K = TiktokenCounter(encoding="o200k_base")
TASK = "Project: several subtasks, one answer each."
HANDED = "Transferred to worker."  # a handoff tool's result (test_subagent_wirings.py)


def exact(messages: Sequence[BaseMessage]) -> int:
    """The o200k count of a model input (what the fake model's provider reports)."""
    return _O200K.count_messages(list(messages))


def page(part: str, window: int) -> str:
    """A part of the material: about a third of the window, so that a subtask's six reads
    overflow it (clearing, then a summary)."""
    words = 520 * window // 8_000
    return f"page {part}: " + " ".join(f"{part}-w{i}" for i in range(words))


def reader(window: int) -> Any:
    @tool
    def read(part: str) -> str:
        """Read one part of the material."""
        return page(part, window)

    return read


def subtask_text(k: int) -> str:
    return f"Subtask {k}: read parts {k}.0 to {k}.{READS - 1}."


def _subtask_in(messages: Sequence[BaseMessage]) -> int | None:
    """The newest subtask whose text a model input holds verbatim (as its own message, or
    in the goal section of a summary)."""
    text = "\n".join(m.text for m in messages)
    found = [k for k in range(1, 10) if subtask_text(k) in text]
    return max(found) if found else None


class Worker(BaseChatModel):
    """Per subtask (the newest one in its input): ``READS`` reads, then an answer; reports
    its input's exact o200k count and records every input with the subtask it was for."""

    inputs: Annotated[list[tuple[int | None, list[BaseMessage]]], SkipValidation()] = Field(
        default_factory=list
    )
    calls: Annotated[dict[int, int], SkipValidation()] = Field(default_factory=dict)
    current: Annotated[list[int | None], SkipValidation()] = Field(default_factory=lambda: [None])
    window: int = 8_000

    @property
    def _llm_type(self) -> str:
        return "subagent-worker"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        k = _subtask_in(messages)
        self.inputs.append((k, list(messages)))
        usage = {"input_tokens": exact(messages), "output_tokens": 12, "total_tokens": 0}
        n = self.calls.get(k or 0, 0)
        if k is not None and n < READS:
            call = {"name": "read", "args": {"part": f"{k}.{n}"}, "id": f"c{k}_{n}"}
            reply = AIMessage("", tool_calls=[call], usage_metadata=usage)
        else:
            reply = AIMessage(f"Subtask {k} done.", usage_metadata=usage)
        self.calls[k or 0] = n + 1
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _done(messages: Sequence[BaseMessage]) -> int:
    return sum(
        1 for m in messages if isinstance(m, AIMessage) and str(m.content).startswith("Subtask ")
    )


Build = Callable[..., Any]


def _config(model: Worker, share: bool) -> CompactionConfig:
    extra = {"share_compaction": True} if share else {}  # the default is not to share
    return CompactionConfig(context_window=model.window, **extra)


def graph_worker(model: Worker, archive: StoreArchive, share: bool = False) -> Any:
    return create_compacting_agent(
        model,
        [reader(model.window)],
        config=_config(model, share),
        archive=archive,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),  # a scripted model cannot write summaries
    )


def middleware_worker(model: Worker, archive: StoreArchive, share: bool = False) -> Any:
    config = _config(model, share)
    middleware = CompactionMiddleware(config=config, archive=archive)
    return create_agent(model=model, tools=[reader(model.window)], middleware=[middleware])


def wired_worker(model: Worker, archive: StoreArchive, share: bool = False) -> Any:
    """A user's own ``StateGraph(MessagesState)`` with ``add_compaction``: its model node
    reads only ``messages``, so the view reaches it from the gate."""
    read = reader(model.window)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([read]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    config = _config(model, share)
    add_compaction(builder, config=config, archive=archive)
    return builder.compile()


BUILDS = pytest.mark.parametrize(
    "build",
    [graph_worker, middleware_worker, wired_worker],
    ids=["graph", "middleware", "add_compaction"],
)
SIZES = pytest.mark.parametrize("window", WINDOWS, ids=["8k", "32k"])


class Seen:
    """What the parent had: every message it held at each supervisor step, by id."""

    def __init__(self) -> None:
        self.by_id: dict[str, tuple[str, Any, Any]] = {}
        self.lock = threading.Lock()

    def note(self, messages: Sequence[BaseMessage]) -> None:
        with self.lock:
            for m in messages:
                self.by_id.setdefault(str(m.id), _shape(m))


def _shape(m: BaseMessage) -> tuple[str, Any, Any]:
    calls = [(c["id"], c["args"]) for c in m.tool_calls] if isinstance(m, AIMessage) else None
    return (m.type, m.content, calls)


def supervisor(
    worker: Any, model: Worker, seen: Seen, subtasks: int = 3, checkpointer: Any = None
) -> Any:
    def supervise(state: MessagesState) -> dict[str, Any]:
        seen.note(state["messages"])
        done = _done(state["messages"])
        if done >= subtasks:
            return {}
        model.current[0] = done + 1
        return {"messages": [HumanMessage(subtask_text(done + 1), id=f"s{done + 1}")]}

    def route(state: MessagesState) -> str:
        return END if _done(state["messages"]) >= subtasks else "worker"

    builder = StateGraph(MessagesState)
    builder.add_node("supervisor", supervise)
    builder.add_node("worker", worker)
    builder.add_edge(START, "supervisor")
    builder.add_conditional_edges("supervisor", route, ["worker", END])
    builder.add_edge("worker", "supervisor")
    return builder.compile(checkpointer=checkpointer)


def fan_out(worker: Any, subtasks: int = 2) -> Any:
    def fan(state: MessagesState) -> list[Send]:
        task = state["messages"][0]
        return [
            Send("worker", {"messages": [task, HumanMessage(subtask_text(k), id=f"s{k}")]})
            for k in range(1, subtasks + 1)
        ]

    builder = StateGraph(MessagesState)
    builder.add_node("worker", worker)
    builder.add_conditional_edges(START, fan, ["worker"])
    builder.add_edge("worker", END)
    return builder.compile()


def check_parent(final: Sequence[BaseMessage], seen: Seen, subtasks: int, window: int) -> None:
    """No message in the parent's final state was made or changed by the package."""
    made = [(m.id, kind_of(m)) for m in final if kind_of(m) is not None]
    assert not made, f"the parent holds {len(made)} package-made or marked messages: {made[:5]}"
    changed = [
        m.id for m in final if str(m.id) in seen.by_id and seen.by_id[str(m.id)] != _shape(m)
    ]
    assert not changed, f"{len(changed)} of the parent's messages changed: {changed[:5]}"
    results = [m for m in final if isinstance(m, ToolMessage)]
    assert len(results) == subtasks * READS
    for m in results:
        k, n = m.tool_call_id[1:].split("_")
        assert m.content == page(f"{k}.{n}", window), f"result {m.tool_call_id} is not the original"
    assert final[0].content == TASK
    assert _done(final) == subtasks


def check_worker(
    model: Worker,
    archive: StoreArchive,
    current: list[int] | None,
    *,
    parallel: bool = False,
    thread: str = "default",
) -> None:
    """Each call saw its subtask and fit the window; the worker did clear and summarise;
    every original it took out of its view is recallable (``parallel``: one agent per
    subtask, whose calls interleave)."""
    sizes = [exact(inp) for _, inp in model.inputs]
    assert max(sizes) <= model.window, f"inputs over the {model.window}-token window: {sizes}"
    if current is not None:
        assert [k for k, _ in model.inputs] == current, "a call lost its current subtask"
    assert all(k is not None for k, _ in model.inputs), "a call lost its current subtask"
    kinds = {kind_of(m) for _, inp in model.inputs for m in inp}
    assert KIND_SUMMARY in kinds, kinds  # the worker did compact
    assert {KIND_CLEARED, KIND_TRUNCATED} & kinds, kinds  # and put placeholders in its view
    shown: dict[int, set[str]] = {}  # results some earlier call of the same agent was sent
    for k, inp in model.inputs:
        seen = shown.setdefault(k if parallel else 0, set())
        here = {m.tool_call_id for m in inp if isinstance(m, ToolMessage) and kind_of(m) is None}
        for call_id in sorted(seen - here):  # taken out of the view (cleared, cut, summarised)
            part = call_id[1:].replace("_", ".")
            original = page(part, model.window) if call_id.startswith("c") else HANDED
            hits = archive.search(thread_id=thread, tool_call_id=call_id)
            assert any(h.message.content == original for h in hits), call_id
        seen |= {m.tool_call_id for m in inp if isinstance(m, ToolMessage)}


@SIZES
@BUILDS
def test_a_supervisor_keeps_its_history_when_its_worker_compacts(build: Build, window: int) -> None:
    model, seen = Worker(window=window), Seen()
    archive = StoreArchive(InMemoryStore())
    parent = supervisor(build(model, archive), model, seen)
    _run_supervisor(parent, model, seen, archive, window)


@BUILDS
def test_a_node_that_invokes_the_worker_keeps_the_parents_history(build: Build) -> None:
    """The worker called from a node function (``worker.invoke(...)``), not added as a
    node: its messages reach the parent the same way, by id."""
    model, seen = Worker(), Seen()
    archive = StoreArchive(InMemoryStore())
    worker = build(model, archive)

    def call_worker(state: MessagesState) -> dict[str, Any]:
        out = worker.invoke({"messages": state["messages"]}, {"recursion_limit": 300})
        return {"messages": out["messages"]}

    parent = supervisor(call_worker, model, seen)
    _run_supervisor(parent, model, seen, archive, model.window)


def _run_supervisor(
    parent: Any, model: Worker, seen: Seen, archive: StoreArchive, window: int
) -> None:
    current: list[int] = []
    real = model._generate

    def tracked(messages: list[BaseMessage], *a: Any, **kw: Any) -> ChatResult:
        current.append(model.current[0] or 0)
        return real(messages, *a, **kw)

    object.__setattr__(model, "_generate", tracked)
    out = parent.invoke({"messages": [HumanMessage(TASK, id="task")]}, {"recursion_limit": 300})
    check_parent(out["messages"], seen, 3, window)
    check_worker(model, archive, current)


@SIZES
@BUILDS
def test_a_send_fan_out_keeps_the_parents_history(build: Build, window: int) -> None:
    model, seen = Worker(window=window), Seen()
    archive = StoreArchive(InMemoryStore())
    parent = fan_out(build(model, archive))
    start = [HumanMessage(TASK, id="task")]
    seen.note(start)
    out = parent.invoke({"messages": start}, {"recursion_limit": 300})
    check_parent(out["messages"], seen, 2, window)
    check_worker(model, archive, None, parallel=True)
    assert {k for k, _ in model.inputs} == {1, 2}


@BUILDS
def test_share_compaction_lets_the_worker_rewrite_the_parent(build: Build) -> None:
    """The option restores the old behaviour: placeholders reach the parent by id."""
    model = Worker()
    archive = StoreArchive(InMemoryStore())
    worker = build(model, archive, share=True)
    out = fan_out(worker, subtasks=1).invoke({"messages": [HumanMessage(TASK, id="task")]})
    assert any(kind_of(m) is not None for m in out["messages"])


def test_an_interrupt_inside_a_worker_resumes_with_its_view() -> None:
    """A tool of the worker asks for approval (``interrupt``) after the worker compacted:
    the pending decision survives, the worker's checkpointed state holds its view privately
    (its shared list untouched), and after the resume the parent's history still holds
    what it had."""
    window, approved = 8_000, []

    @tool
    def read(part: str) -> str:
        """Read one part of the material."""
        if part.endswith(".4"):
            approved.append(interrupt({"approve": part}))
        return page(part, window)

    model, seen = Worker(window=window), Seen()
    archive = StoreArchive(InMemoryStore())
    worker = create_compacting_agent(
        model,
        [read],
        config=CompactionConfig(context_window=window),
        archive=archive,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),  # a scripted model cannot write summaries
    )
    parent = supervisor(worker, model, seen, subtasks=1, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "hitl"}, "recursion_limit": 300}
    out = parent.invoke({"messages": [HumanMessage(TASK, id="task")]}, config)
    assert "__interrupt__" in out
    pending = len(model.inputs)
    held = parent.get_state(config, subgraphs=True).tasks[0].state.values  # the worker's
    assert {kind_of(m) for m in held[VIEW_KEY]["messages"]} & {KIND_CLEARED, KIND_TRUNCATED}
    assert all(kind_of(m) is None for m in held["messages"])  # its shared list: untouched
    out = parent.invoke(Command(resume="yes"), config)
    assert approved == ["yes"]
    assert len(model.inputs) > pending
    check_parent(out["messages"], seen, 1, window)
    check_worker(model, archive, None, thread="hitl")


@pytest.mark.parametrize("build", [graph_worker, middleware_worker], ids=["graph", "middleware"])
def test_the_async_path_keeps_the_parents_history(build: Build) -> None:
    model, seen = Worker(), Seen()
    archive = StoreArchive(InMemoryStore())
    parent = supervisor(build(model, archive), model, seen, subtasks=2)
    start = {"messages": [HumanMessage(TASK, id="task")]}
    out = asyncio.run(parent.ainvoke(start, {"recursion_limit": 300}))
    check_parent(out["messages"], seen, 2, model.window)
    check_worker(model, archive, None)
