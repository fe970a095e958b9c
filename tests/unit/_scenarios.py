"""Shared helpers for the compaction scenario tests: fakes, recorders, graphs and loops.

Nothing here asserts; tests compare what these helpers record with independent facts
(``DependentTask.expected_values()``, the inputs they built, token counts they compute).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field, SkipValidation

from langchain_compact import CompactionConfig, SummarizerError
from langchain_compact.compaction import (
    CompactionResult,
    Decision,
    compact_history,
    decide,
    stop_message,
)
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.graph import add_compaction
from langchain_compact.markers import EVENT_KEY, KIND_STOP, kind_of
from langchain_compact.microcompact import micro_compact
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer
from langchain_compact.tokens import approximate_tokens

Prepare = Callable[[list[BaseMessage]], list[BaseMessage]]

# ----------------------------------------------------------------------------- archive


class MemoryArchive:
    """In-memory :class:`~langchain_compact.archive.TranscriptArchive`: records every write."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        ref = f"mem:{thread_id}:{len(self.records) + 1}"
        self.records.append(
            {
                "ref": ref,
                "thread_id": thread_id,
                "reason": reason,
                "metadata": dict(metadata or {}),
                "messages": list(messages),
            }
        )
        return ref

    async def awrite(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        return self.write(messages, thread_id=thread_id, reason=reason, metadata=metadata)

    def read(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        for record in self.records:
            if record["ref"] == ref and record["thread_id"] == thread_id:
                return list(record["messages"])
        raise KeyError(ref)

    async def aread(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        return self.read(ref, thread_id=thread_id)

    def refs(self, *, thread_id: str) -> list[str]:
        return [r["ref"] for r in self.records if r["thread_id"] == thread_id]

    def search(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[Any]:
        """Not used by compaction; present so the fake satisfies the protocol."""
        return []

    async def asearch(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[Any]:
        return []


# ----------------------------------------------------------------------------- summarizers


@dataclass
class SummarizerCall:
    messages: list[BaseMessage]
    max_tokens: int
    output: str | None = None
    error: BaseException | None = None


class RecordingSummarizer:
    """Wraps a summarizer and records each call's input messages and output."""

    def __init__(self, inner: Summarizer | None = None) -> None:
        self.inner: Summarizer = inner or ExtractiveSummarizer()
        self.calls: list[SummarizerCall] = []

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        call = SummarizerCall(list(messages), max_tokens)
        self.calls.append(call)
        try:
            call.output = self.inner.summarize(messages, max_tokens=max_tokens)
        except BaseException as exc:
            call.error = exc
            raise
        return call.output

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        call = SummarizerCall(list(messages), max_tokens)
        self.calls.append(call)
        try:
            call.output = await self.inner.asummarize(messages, max_tokens=max_tokens)
        except BaseException as exc:
            call.error = exc
            raise
        return call.output


OVERLONG_TEXT = "overlong summary line with detail. " * 3000
"""About 30,000 tokens: far over any summary bound the tests use."""


class FailingSummarizer:
    """A summarizer that fails in one way every time: ``exception``, ``timeout`` (hangs for
    ``sleep`` seconds, far beyond any timeout the tests set, so nothing races the clock),
    ``empty`` text or ``overlong`` text. Counts its calls."""

    def __init__(self, mode: str, *, sleep: float = 30.0) -> None:
        if mode not in ("exception", "timeout", "empty", "overlong"):
            raise ValueError(mode)
        self.mode = mode
        self.sleep = sleep
        self.calls = 0

    def _result(self) -> str:
        if self.mode == "exception":
            raise RuntimeError("summarizer backend is down (HTTP 503)")
        if self.mode == "empty":
            return "   "
        if self.mode == "overlong":
            return OVERLONG_TEXT
        return "too late"

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        self.calls += 1
        if self.mode == "timeout":
            threading.Event().wait(self.sleep)  # in a daemon thread, abandoned at the timeout
        return self._result()

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        self.calls += 1
        if self.mode == "timeout":
            await asyncio.sleep(self.sleep)
        return self._result()


class RaisingExtractive(ExtractiveSummarizer):
    """The extractive summarizer, made to fail (for "every summarizer failed")."""

    calls = 0

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int = 2000) -> str:
        type(self).calls += 1
        raise SummarizerError("extractive summarizer broken on purpose")


# ----------------------------------------------------------------------------- chat model


@dataclass
class ModelLog:
    """What :class:`ScriptedChatModel` saw, shared by every copy of one model."""

    inputs: list[list[BaseMessage]] = field(default_factory=list)
    temperatures: list[Any] = field(default_factory=list)
    max_tokens: list[Any] = field(default_factory=list)
    bound_tools: list[list[Any]] = field(default_factory=list)


class ScriptedChatModel(BaseChatModel):
    """A chat model that replays ``replies`` in order (the last one repeats), has
    ``temperature`` and ``max_tokens`` fields like real providers, records its inputs, and
    streams (one chunk per word) when a streaming callback asks for it."""

    replies: Annotated[list[BaseMessage], SkipValidation()]
    temperature: float | None = 0.7
    max_tokens: int | None = None
    log: Annotated[ModelLog, SkipValidation()] = Field(default_factory=ModelLog)
    cursor: Annotated[list[int], SkipValidation()] = Field(default_factory=lambda: [0])

    @property
    def _llm_type(self) -> str:
        return "scripted-test-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        self.log.bound_tools.append(list(tools))
        return self

    def _next(self, messages: list[BaseMessage]) -> BaseMessage:
        self.log.inputs.append(list(messages))
        self.log.temperatures.append(self.temperature)
        self.log.max_tokens.append(self.max_tokens)
        i = min(self.cursor[0], len(self.replies) - 1)
        self.cursor[0] += 1
        return self.replies[i]

    @property
    def calls(self) -> int:
        return self.cursor[0]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        from langchain_core.messages import AIMessageChunk
        from langchain_core.outputs import ChatGenerationChunk

        reply = self._next(messages)
        words = str(reply.content).split(" ")
        for i, word in enumerate(words):
            text = word if i == len(words) - 1 else word + " "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
            if run_manager is not None:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk


class KeepsWhatItIsShown(BaseChatModel):
    """A summarizer model that keeps every fact line it is shown (each match of
    ``pattern`` in the request's text, by default ``RESULT step=K value=V``), as a good
    summarizer would, and nothing else but its ``preface``; ``requests`` records every
    request."""

    pattern: str = r"RESULT step=\d+ value=\d+"
    preface: str = ""
    """A line of summary before the facts (none by default)."""
    requests: Annotated[list[list[BaseMessage]], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "keeps-what-it-is-shown"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        text = "\n".join(m.text for m in messages)
        facts = dict.fromkeys(re.findall(self.pattern, text))
        lines = "\n".join(f"- {f}" for f in facts) or "- nothing yet"
        reply = AIMessage(f"{self.preface}\n{lines}" if self.preface else lines)
        return ChatResult(generations=[ChatGeneration(message=reply)])


# ----------------------------------------------------------------------------- graphs


def policy(
    task: DependentTask,
    *,
    extra_tools: Sequence[Any] = (),
    recorder: list[list[BaseMessage]] | None = None,
) -> Runnable[Any, AIMessage]:
    """The scripted policy bound to the task's tools (plus ``extra_tools``); its reported
    usage is counted with the package's own ``approximate_tokens``."""
    model = ContextReadingPolicy(token_counter=approximate_tokens, recorder=recorder)
    return model.bind_tools([*task.tools(), *extra_tools])


def build_graph(
    task: DependentTask,
    *,
    config: CompactionConfig,
    summarizer: Summarizer | None = None,
    archive: Any = None,
    extra_tools: Sequence[Any] = (),
    compaction_tools: Sequence[Any] | None = None,
    recorder: list[list[BaseMessage]] | None = None,
    checkpointer: Any = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A graph built the usual way (``StateGraph(MessagesState)``, an ``agent`` node calling
    the bound model, ``ToolNode``, ``tools_condition``), then ``add_compaction``."""
    bound = policy(task, extra_tools=extra_tools, recorder=recorder)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"], config)]}

    async def aagent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    from langchain_core.runnables import RunnableLambda

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("tools", ToolNode([*task.tools(), *extra_tools]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(
        builder, config=config, summarizer=summarizer, archive=archive, tools=compaction_tools
    )
    return builder.compile(checkpointer=checkpointer or InMemorySaver())


@dataclass
class GraphRun:
    """One graph run: the node path, state updates, custom events and final state."""

    path: list[str]
    updates: list[tuple[str, dict[str, Any]]]
    events: list[dict[str, Any]]
    state: dict[str, Any]

    @property
    def messages(self) -> list[BaseMessage]:
        return list(self.state["messages"])

    @property
    def final(self) -> BaseMessage:
        return self.messages[-1]

    def count(self, event: str) -> int:
        return sum(e.get("event") == event for e in self.events)

    @property
    def compactions(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == "compaction"]


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 1000}


def _collect(chunk: Any, run: GraphRun) -> None:
    mode, data = chunk
    if mode == "custom":
        run.events.append(data[EVENT_KEY])
    elif mode == "updates":
        for node, update in data.items():
            run.path.append(node)
            run.updates.append((node, update or {}))


def run_graph(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    messages: Sequence[Any],
    *,
    thread: str = "t",
) -> GraphRun:
    """Stream ``graph`` (``["custom", "updates"]``) from ``messages`` to the end."""
    run = GraphRun([], [], [], {})
    for chunk in graph.stream(
        {"messages": list(messages)}, _config(thread), stream_mode=["custom", "updates"]
    ):
        _collect(chunk, run)
    run.state = dict(graph.get_state(_config(thread)).values)
    return run


async def arun_graph(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    messages: Sequence[Any],
    *,
    thread: str = "t",
) -> GraphRun:
    """Async twin of :func:`run_graph` (``astream``)."""
    run = GraphRun([], [], [], {})
    async for chunk in graph.astream(
        {"messages": list(messages)}, _config(thread), stream_mode=["custom", "updates"]
    ):
        _collect(chunk, run)
    run.state = dict((await graph.aget_state(_config(thread))).values)
    return run


def states_before(
    graph: CompiledStateGraph[Any, Any, Any, Any], node: str, *, thread: str = "t"
) -> list[list[BaseMessage]]:
    """Message lists of every checkpoint whose next node is ``node``, oldest first."""
    found = [
        list(s.values.get("messages", []))
        for s in graph.get_state_history(_config(thread))
        if s.next == (node,)
    ]
    return found[::-1]


def all_checkpoint_histories(
    graph: CompiledStateGraph[Any, Any, Any, Any], *, thread: str = "t"
) -> list[list[BaseMessage]]:
    return [list(s.values.get("messages", [])) for s in graph.get_state_history(_config(thread))][
        ::-1
    ]


# ----------------------------------------------------------------------------- manual loop


@dataclass
class LoopRun:
    """A manual agent loop driven by :func:`decide` and :func:`compact_history`."""

    history: list[BaseMessage]
    model_inputs: list[list[BaseMessage]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    results: list[CompactionResult] = field(default_factory=list)
    histories: list[list[BaseMessage]] = field(default_factory=list)
    """Every history the loop held (after each appended message or compaction)."""

    @property
    def final(self) -> BaseMessage:
        return self.history[-1]

    @property
    def stopped(self) -> bool:
        return kind_of(self.history[-1]) == KIND_STOP


def manual_loop(
    task: DependentTask,
    *,
    config: CompactionConfig | None = None,
    summarizer: Summarizer | None = None,
    archive: Any = None,
    prepare: Prepare | None = None,
    micro: bool = True,
    start: Sequence[BaseMessage] | None = None,
    max_turns: int = 200,
) -> LoopRun:
    """Model -> tools -> model ..., with compaction as pure functions in front of the model.

    With ``config`` the loop runs micro-compaction (``micro``) and ``decide`` before every
    model call, compacting or stopping as told. ``prepare`` instead (or too) transforms the
    history the model sees, e.g. ``trim_messages``.
    """
    model = policy(task)
    tools = {t.name: t for t in task.tools()}
    run = LoopRun(list(start) if start else [HumanMessage(task.prompt(), id="task")])
    summarizer = summarizer or ExtractiveSummarizer()

    def keep() -> None:
        run.histories.append(list(run.history))

    keep()
    for _ in range(max_turns):
        if config is not None:
            if micro:
                run.history = micro_compact(run.history, config, archived=archive is not None)
            decision = decide(run.history, config=config)
            run.decisions.append(decision)
            if decision.action == "stop":
                run.history.append(stop_message(run.history, decision.reason))
                keep()
                return run
            if decision.action == "compact":
                result = compact_history(
                    run.history, summarizer=summarizer, config=config, archive=archive
                )
                run.results.append(result)
                run.history = list(result.messages)
                keep()
        seen = prepare(list(run.history)) if prepare else list(run.history)
        run.model_inputs.append(seen)
        reply = model.invoke(seen)
        run.history.append(reply)
        keep()
        if not reply.tool_calls:
            return run
        for call in reply.tool_calls:
            result_msg = tools[call["name"]].invoke(call)
            assert isinstance(result_msg, ToolMessage)
            run.history.append(result_msg.model_copy(update={"id": f"tool-{call['id']}"}))
            keep()
    raise RuntimeError(f"no final answer after {max_turns} model turns")


def play(task: DependentTask, *, rounds: int) -> list[BaseMessage]:
    """The task's history after ``rounds`` model + tool rounds, no compaction (ids set)."""
    model = policy(task)
    tool = task.tools()[0]
    history: list[BaseMessage] = [HumanMessage(task.prompt(), id="task")]
    for _ in range(rounds):
        reply = model.invoke(history)
        history.append(reply)
        for call in reply.tool_calls:
            result = tool.invoke(call)
            history.append(result.model_copy(update={"id": f"tool-{call['id']}"}))
    return history
