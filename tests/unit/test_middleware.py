"""CompactionMiddleware on langchain v1 ``create_agent``: same behaviour as the graph nodes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    SummarizationMiddleware,
)
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from pydantic import Field

from langchain_compact import CompactionConfig, ConfigError, ExtractiveSummarizer
from langchain_compact.archive import JsonlArchive
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.graph import CompactionNodes, create_compacting_agent
from langchain_compact.markers import (
    EVENT_KEY,
    KIND_CLEARED,
    KIND_STOP,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
)
from langchain_compact.middleware import CompactionMiddleware
from langchain_compact.summarizers import LLMSummarizer

WINDOW = 5000  # the 14-step demo task needs 3 compactions in this window (graph: the same)
# run_step results are never cleared, so full compaction (not micro-compaction) does the work.
FULL = {"micro_exclude_tools": ("run_step",)}
RUN: dict[str, Any] = {"recursion_limit": 200}


def agent_for(
    task: DependentTask, policy: ContextReadingPolicy | None = None, **kwargs: Any
) -> Any:
    config = kwargs.pop("config", CompactionConfig(context_window=WINDOW, **FULL))
    middleware = CompactionMiddleware(config=config, tools=task.tools(), **kwargs)
    checkpointer = InMemorySaver() if kwargs.get("archive") is not None else None
    return create_agent(
        model=policy or ContextReadingPolicy(),
        tools=task.tools(),
        middleware=[middleware],
        checkpointer=checkpointer,
    )


TIMINGS = ("pause_seconds", "seconds")


def run(
    agent: Any, task: DependentTask, config: dict[str, Any] | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    """Run to the end; return the final state and the custom compaction events (without
    their wall-clock timings, which differ run to run)."""
    events, state = [], None
    inputs = {"messages": [HumanMessage(task.prompt())]}
    for mode, chunk in agent.stream(
        inputs, {**RUN, **(config or {})}, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            event = chunk[EVENT_KEY]
            events.append({k: v for k, v in event.items() if k not in TIMINGS})
        else:
            state = chunk
    return state, events


def shape(messages: Sequence[BaseMessage]) -> list[tuple[str, str, str | None]]:
    return [(m.type, m.text, kind_of(m)) for m in messages]


def full_compactions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "compaction"]


# -- the dependent task ---------------------------------------------------------------------


def test_dependent_task_finishes_with_compactions_pinned_task_and_first_summary() -> None:
    task = DependentTask(steps=14)
    inputs: list[list[BaseMessage]] = []
    state, events = run(agent_for(task, ContextReadingPolicy(recorder=inputs)), task)

    verdict = task.check(state["messages"][-1].text)
    assert verdict.ok, verdict.reason
    compactions = full_compactions(events)
    assert len(compactions) >= 2
    assert state["compaction_count"] == len(compactions)
    assert "stop_reason" not in state
    # every compaction left a context that fits (no dirty-value stop); over the trigger
    # but fitting goes on
    fit = CompactionConfig(context_window=WINDOW).fit_tokens
    assert fit is not None and all(e["tokens_after"] <= fit for e in compactions)
    # the original task is pinned verbatim and the model saw it on every call
    pinned = [m for m in state["messages"] if kind_of(m) == "pinned_task"]
    assert [m.text for m in pinned] == [task.prompt()]
    assert all(any(m.text == task.prompt() for m in seen) for seen in inputs)
    # earlier summaries are kept verbatim until the summary budget merges the oldest ones
    summaries = [m for m in state["messages"] if kind_of(m) == "summary"]
    indexes = [get_meta(m)["index"] for m in summaries]
    first = indexes[0] if not get_meta(summaries[0]).get("merged_from") else 1
    assert indexes[-1] == len(compactions)
    assert indexes == [indexes[0], *range(indexes[0] + 1, len(compactions) + 1)]
    assert first == 1 or get_meta(summaries[0]).get("merged_from")


def test_same_compactions_and_final_history_as_the_graph_version() -> None:
    task = DependentTask(steps=14)
    # no archive on either side: archive refs carry their write time
    state, events = run(agent_for(task, archive=None), task)

    graph = create_compacting_agent(
        ContextReadingPolicy(),
        task.tools(),
        config=CompactionConfig(context_window=WINDOW, **FULL),
        archive=None,
        summarizer=ExtractiveSummarizer(),  # the middleware's default without a model
    )
    graph_state, graph_events = run(graph, task)

    assert events == graph_events
    assert shape(state["messages"]) == shape(graph_state["messages"])


async def test_ainvoke_gives_the_same_final_messages_as_invoke(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = DependentTask(steps=14)
    inputs = {"messages": [HumanMessage(task.prompt())]}
    sync = agent_for(task, archive=None).invoke(inputs, RUN)  # refs carry their write time

    def sync_io(*args: Any) -> Any:
        raise AssertionError("ainvoke used a sync node body")

    monkeypatch.setattr(CompactionNodes, "micro", sync_io)
    monkeypatch.setattr(CompactionNodes, "summarize", sync_io)
    async_ = await agent_for(task, archive=None).ainvoke(inputs, RUN)
    assert shape(async_["messages"]) == shape(sync["messages"])
    assert async_["compaction_count"] == sync["compaction_count"] >= 2
    assert task.check(async_["messages"][-1].text).ok


def test_max_compactions_reached_ends_with_the_stop_message() -> None:
    task = DependentTask(steps=14)
    config = CompactionConfig(context_window=WINDOW, max_compactions=1, **FULL)
    state, events = run(agent_for(task, config=config), task)

    assert len(full_compactions(events)) == 1
    last = state["messages"][-1]
    assert kind_of(last) == KIND_STOP and last.text.startswith("I stopped before finishing")
    assert "max_compactions=1" in state["stop_reason"]
    assert state["transition"] == "stopped"
    assert events[-1] == {"event": "stop", "reason": state["stop_reason"]}
    assert not task.check(last.text).ok


def test_a_stop_is_the_model_nodes_reply_without_a_model_call() -> None:
    """The middleware's one hook (``wrap_model_call``): on a stop the model is not called,
    the stop message is the model node's reply and the agent ends on it; no node of the
    middleware's own runs in a turn."""
    task = DependentTask(steps=14)
    seen: list[list[BaseMessage]] = []
    config = CompactionConfig(context_window=WINDOW, max_compactions=1, **FULL)
    agent = agent_for(task, ContextReadingPolicy(recorder=seen), config=config)
    nodes: list[str] = []
    last: Any = None
    start = {"messages": [HumanMessage(task.prompt())]}
    for chunk in agent.stream(start, RUN, stream_mode="updates"):
        for node, update in chunk.items():
            nodes.append(node)
            last = update
    assert set(nodes) == {"model", "tools"}
    assert nodes[-1] == "model" and nodes.count("model") == len(seen) + 1
    assert isinstance(last, dict) and last["transition"] == "stopped"
    assert kind_of(last["messages"][-1]) == KIND_STOP
    assert "max_compactions=1" in last["stop_reason"]


# -- stale usage ----------------------------------------------------------------------------


def _history(pairs: int, usage: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Do the task in 3 steps.", id="task")]
    for i in range(pairs):
        call = {"name": "look", "args": {"i": i}, "id": f"c{i}"}
        meta = {"input_tokens": usage, "output_tokens": 5, "total_tokens": usage + 5}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}", usage_metadata=meta))
        messages.append(
            ToolMessage(f"result {i}: ok", tool_call_id=f"c{i}", name="look", id=f"t{i}")
        )
    return messages


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_stale_usage_after_a_compaction_does_not_retrigger(mode: str) -> None:
    middleware = CompactionMiddleware(config=CompactionConfig(context_window=1000, keep_last_n=2))
    # the newest response reports 5000 input tokens: far over the trigger of 750
    messages = _history(pairs=6, usage=5000)

    reply = AIMessage("Next step.", id="reply")

    async def hook(msgs: list[BaseMessage]) -> dict[str, Any]:
        """The middleware's one hook around a model that answers ``reply``: the state
        update it returns beside the reply."""
        request: Any = ModelRequest(
            model=FakeListChatModel(responses=["unused"]),
            messages=list(msgs),
            state={"messages": msgs},
            runtime=Runtime(),
        )
        if mode == "sync":
            out = middleware.wrap_model_call(request, lambda r: ModelResponse(result=[reply]))
        else:

            async def handler(r: Any) -> ModelResponse[Any]:
                return ModelResponse(result=[reply])

            out = await middleware.awrap_model_call(request, handler)
        assert isinstance(out, ExtendedModelResponse) and out.command is not None
        assert out.model_response.result == [reply]
        return dict(out.command.update or {})

    first = await hook(messages)
    assert first["transition"] == "compacted" and first["compaction_count"] == 1
    assert first["messages"][-1] is reply  # the new history, then the reply again
    after: Any = add_messages(add_messages(list(messages), [reply]), first["messages"])
    assert any(m.id == "a5" for m in after)  # the response with the stale 5000 is kept
    assert after[-1].id == "reply" and sum(m.id == "reply" for m in after) == 1

    second = await hook(after)
    assert second == {"transition": "continue"}


# -- kept tail alone over the trigger, and the peer's behaviour -----------------------------

SIZES = [300, 300, 300] + [4000] * 9
"""Tool result sizes: three small ones, then large ones, two of which exceed the trigger."""


class ScriptedCaller(BaseChatModel):
    """Calls ``fetch(i)`` once per turn for every size in SIZES, then answers "done"."""

    turns: list[int] = Field(default_factory=list)
    """Per model call: how many summaries the summarizer had written before it."""
    summaries: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-caller"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        i = len(self.turns)
        self.turns.append(len(self.summaries))
        if i < len(SIZES):
            call = {"name": "fetch", "args": {"i": i}, "id": f"call-{i}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class CountingSummaryModel(BaseChatModel):
    """A chat model used as summarizer; appends to ``calls`` on every call."""

    calls: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "counting-summarizer"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(1)
        reply = AIMessage("Goal: fetch every page. Done: the first pages. Next: the rest.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def fetch(i: int) -> str:
    """Fetch page ``i``."""
    return "".join(f"page {i} line {j}: value {i * 1000 + j}\n" for j in range(SIZES[i] // 28))


def peer_run(middleware_for: Any) -> tuple[dict[str, Any], ScriptedCaller, CountingSummaryModel]:
    caller, summary_model = ScriptedCaller(), CountingSummaryModel()
    caller.summaries = summary_model.calls  # shared list: the caller sees the count
    tools: list[BaseTool] = [fetch]
    agent: Any = create_agent(model=caller, tools=tools, middleware=[middleware_for(summary_model)])
    state = agent.invoke({"messages": [HumanMessage("Fetch all pages.")]}, RUN)
    return state, caller, summary_model


def test_kept_tail_over_the_trigger_shrinks_to_the_newest_turn_and_goes_on() -> None:
    """Results that can be neither cleared nor cut (about 1,700 o200k tokens each), two of
    which exceed the fit limit of a 2,600-token window: the kept tail is a budget, not a
    count, so it shrinks to the newest turn (one result, which fits beside the reply) and
    the run goes on to the end. (With a fixed four-message tail it would stop: the two
    kept results alone are over the fit limit.)"""
    state, caller, summary_model = peer_run(
        lambda m: CompactionMiddleware(
            config=CompactionConfig(
                context_window=2600,
                keep_last_n=4,
                micro_exclude_tools=("fetch",),
                large_tool_result_chars=None,
                prepare=False,  # one summarizer call per compaction (and merge)
            ),
            summarizer=LLMSummarizer(m),
        )
    )
    assert state["messages"][-1].text == "done"
    assert not state.get("stop_reason")
    assert len(caller.turns) == len(SIZES) + 1  # every page fetched, then the answer
    # at most one compaction per model turn: no loop on the same content
    assert 1 <= state["compaction_count"] <= len(SIZES)
    assert len(summary_model.calls) <= 2 * state["compaction_count"]


def test_kept_tail_over_the_trigger_but_fitting_goes_on_to_the_end() -> None:
    """The same agent in a 2,048-token window: the two kept results (about 1,800 tokens)
    fit the 1,946 left beside the reply (with a few tokens to spare: at 2,040 the kept
    messages came within one token of the fit limit, and a count's rounding decided).
    Each compaction that leaves the history over the trigger but fitting goes on (before
    the summary's room ended at the trigger, the first
    compaction here left 2,264 tokens and the run stopped); each follows a new tool
    result."""
    state, caller, _summary_model = peer_run(
        lambda m: CompactionMiddleware(
            config=CompactionConfig(
                context_window=2048,
                keep_last_n=4,
                micro_exclude_tools=("fetch",),
                large_tool_result_chars=None,
                prepare=False,
            ),
            summarizer=LLMSummarizer(m),
        )
    )
    assert state["messages"][-1].text == "done"
    assert not state.get("stop_reason")
    assert len(caller.turns) == len(SIZES) + 1  # every page fetched, then the answer
    assert 1 <= state["compaction_count"] < len(SIZES)


def test_peer_summarization_middleware_resummarises_before_every_call() -> None:
    """langchain's SummarizationMiddleware (langchain 1.5) on the same kept-tail case.

    Observed: once the 4 kept messages alone exceed the trigger, it calls its summary model
    before every single model call until the task ends (8 times here, against our 1), and the
    original task text is summarised away.
    """
    state, caller, summary_model = peer_run(
        lambda m: SummarizationMiddleware(model=m, trigger=("tokens", 1500), keep=("messages", 4))
    )
    first = caller.turns.index(1)
    after_first = caller.turns[first:]
    assert after_first == list(range(1, len(after_first) + 1))  # one new summary per call
    assert len(summary_model.calls) == len(after_first) == 8
    assert len(caller.turns) == len(SIZES) + 1  # it never stops early
    assert state["messages"][-1].text == "done"
    assert not any(m.text == "Fetch all pages." for m in state["messages"])


# -- archive --------------------------------------------------------------------------------


@pytest.mark.parametrize(("payload_chars", "kind"), [(None, KIND_TRUNCATED), (1500, KIND_CLEARED)])
def test_cleared_and_truncated_originals_are_recoverable_from_the_archive(
    tmp_path: Path, payload_chars: int | None, kind: str
) -> None:
    task = (
        DependentTask(steps=14)
        if payload_chars is None
        else DependentTask(steps=14, payload_chars=payload_chars)
    )
    archive = JsonlArchive(tmp_path)
    inputs: list[list[BaseMessage]] = []
    config = CompactionConfig(context_window=WINDOW)  # micro-compaction clears run_step too
    agent = agent_for(task, ContextReadingPolicy(recorder=inputs), archive=archive, config=config)
    state, events = run(agent, task, {"configurable": {"thread_id": "thread-a"}})
    assert task.check(state["messages"][-1].text).ok

    seen = [m for messages in inputs for m in messages]
    calls = {c["id"]: c["args"] for m in seen if isinstance(m, AIMessage) for c in m.tool_calls}
    replaced = {m.tool_call_id for m in seen if isinstance(m, ToolMessage) and kind_of(m) == kind}
    assert len(replaced) >= 5
    run_step = task.tools()[0]
    for call_id in replaced:
        found = archive.search(thread_id="thread-a", tool_call_id=call_id)
        assert [f.message.text for f in found] == [run_step.invoke(calls[call_id])]
    # every micro and full compaction recorded where its originals went, in this thread only
    refs = [e["archive_ref"] for e in events if e["event"] != "stop"]
    assert refs and all(refs)
    assert set(refs) <= set(archive.refs(thread_id="thread-a"))
    assert archive.refs(thread_id="default") == []


# -- construction and the optional extra ----------------------------------------------------


def test_context_window_comes_from_the_config_or_the_model_profile() -> None:
    with pytest.raises(ConfigError, match=r"unknown \(no model= was given .*context_window="):
        CompactionMiddleware()
    with pytest.raises(ConfigError, match=r"ContextReadingPolicy has no profile"):
        CompactionMiddleware(model=ContextReadingPolicy())
    model = ContextReadingPolicy(profile={"max_input_tokens": 8000})
    assert CompactionMiddleware(model=model).config.context_window == 8000
    explicit = CompactionConfig(context_window=1234)
    assert CompactionMiddleware(config=explicit, model=model).config.context_window == 1234


def test_the_package_imports_without_langchain_and_the_middleware_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['langchain'] = None\n"
        "import langchain_compact, langchain_compact.graph\n"
        "try:\n"
        "    import langchain_compact.middleware\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'langchain-compact[agents]'" in out.stdout
