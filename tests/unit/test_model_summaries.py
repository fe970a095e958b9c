"""Summaries written by the model by default (issue 30): every integration handed a chat
model summarises with it (or with ``summary_model=``), an explicit ``summarizer=`` wins, and
a failing model falls back to the extractive summarizer with the event saying so."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field, SkipValidation

from langchain_compact import CompactionConfig, ConfigError, ExtractiveSummarizer
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.graph import add_compaction, create_compacting_agent
from langchain_compact.lcel import compact_messages
from langchain_compact.markers import EVENT_KEY, KIND_SUMMARY, kind_of
from langchain_compact.middleware import CompactionMiddleware
from langchain_compact.summarizers import DEFAULT_SUMMARY_PROMPT

WINDOW = 5000
FULL = {"micro_exclude_tools": ("run_step",)}  # full compactions, not only clearing
RUN: dict[str, Any] = {"recursion_limit": 200}
MARK = "MODEL-WRITTEN SUMMARY"
#: How a summarizer's request starts (the agent's requests never do).
SUMMARY_PROMPT_START = DEFAULT_SUMMARY_PROMPT[:40]


class SummarizingPolicy(ContextReadingPolicy):
    """The demo policy as the agent; a summarizer's request (recognised by its prompt) is
    recorded in ``summary_calls`` and answered with a short model-written summary, or
    refused with an error when ``fail`` is set."""

    summary_calls: Annotated[list[list[BaseMessage]], SkipValidation()] = Field(
        default_factory=list
    )
    fail: bool = False

    def _respond(self, messages: list[BaseMessage]) -> ChatResult:
        first = messages[0] if messages else None
        if isinstance(first, SystemMessage) and first.text.startswith(SUMMARY_PROMPT_START):
            self.summary_calls.append(list(messages))
            if self.fail:
                raise RuntimeError("the summary model is down")
            text = f"## 1. Goal and hard constraints\n- {MARK}\n## 4. Status\n- in progress"
            return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
        return super()._respond(messages)


def policy(*, fail: bool = False) -> SummarizingPolicy:
    return SummarizingPolicy(summary_calls=[], fail=fail)


def config() -> CompactionConfig:
    return CompactionConfig(context_window=WINDOW, **FULL)


def run(agent: Any, task: DependentTask) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The final state and the compaction events of a run."""
    events, state = [], None
    inputs = {"messages": [HumanMessage(task.prompt())]}
    for mode, chunk in agent.stream(inputs, RUN, stream_mode=["custom", "values"]):
        if mode == "custom":
            if chunk[EVENT_KEY]["event"] == "compaction":
                events.append(chunk[EVENT_KEY])
        else:
            state = chunk
    assert state is not None
    return state, events


def graph_agent(model: Any, task: DependentTask, **kwargs: Any) -> Any:
    return create_compacting_agent(model, task.tools(), config=config(), archive=None, **kwargs)


def middleware_agent(model: Any, task: DependentTask, **kwargs: Any) -> Any:
    middleware = CompactionMiddleware(
        config=config(), model=model, tools=task.tools(), archive=None, **kwargs
    )
    return create_agent(model=model, tools=task.tools(), middleware=[middleware])


def wired_agent(model: Any, task: DependentTask, **kwargs: Any) -> Any:
    bound = model.bind_tools(task.tools())
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode(task.tools()))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(
        builder, config=config(), model=model, tools=task.tools(), archive=None, **kwargs
    )
    return builder.compile()


AGENTS = {
    "create_compacting_agent": graph_agent,
    "CompactionMiddleware": middleware_agent,
    "add_compaction": wired_agent,
}


def model_summaries(state: dict[str, Any]) -> list[str]:
    return [m.text for m in state["messages"] if kind_of(m) == KIND_SUMMARY and MARK in m.text]


@pytest.mark.parametrize("build", AGENTS.values(), ids=AGENTS.keys())
def test_the_integrations_model_writes_the_summaries_by_default(build: Any) -> None:
    task = DependentTask(steps=14)
    model = policy()
    state, events = run(build(model, task), task)

    assert events, "the run compacted"
    assert model.summary_calls, "the agent's model was asked for the summaries"
    assert model_summaries(state), "what the agent reads as a summary is the model's"
    assert state["last_compaction"]["summary_written_by"] == "model"
    assert {e["summary_written_by"] for e in events} == {"model"}


@pytest.mark.parametrize("build", AGENTS.values(), ids=AGENTS.keys())
def test_summary_model_writes_the_summaries_instead_of_the_agents_model(build: Any) -> None:
    task = DependentTask(steps=14)
    agent_model, cheap = policy(), policy()
    state, events = run(build(agent_model, task, summary_model=cheap), task)

    assert events and cheap.summary_calls
    assert agent_model.summary_calls == []
    assert model_summaries(state)


@pytest.mark.parametrize("build", AGENTS.values(), ids=AGENTS.keys())
def test_an_explicit_summarizer_wins_over_the_model(build: Any) -> None:
    task = DependentTask(steps=14)
    model, cheap = policy(), policy()
    state, events = run(
        build(model, task, summarizer=ExtractiveSummarizer(), summary_model=cheap), task
    )

    assert events
    assert model.summary_calls == [] and cheap.summary_calls == []
    assert model_summaries(state) == []
    assert {e["summary_written_by"] for e in events} == {"extractive"}
    assert all(e["extractive_parts"] == [] for e in events)


@pytest.mark.parametrize("build", AGENTS.values(), ids=AGENTS.keys())
def test_a_failing_model_falls_back_to_extractive_and_the_event_says_so(build: Any) -> None:
    task = DependentTask(steps=14)
    model = policy(fail=True)
    state, events = run(build(model, task), task)

    assert events and model.summary_calls
    assert model_summaries(state) == []
    assert task.check(state["messages"][-1].text).ok  # nothing lost: the run goes on
    for event in events:
        assert event["summary_written_by"] == "extractive"
        assert "summary" in event["extractive_parts"]
        assert event["summarizer"].startswith("fallback:ExtractiveSummarizer")


def lcel_history() -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("Task: say hi ten times", id="t")]
    history += [AIMessage(f"hi {i} " * 40, id=f"a{i}") for i in range(10)]
    return history


LCEL_CONFIG = CompactionConfig(context_window=400, keep_last_n=2, prepare=False)


def test_compact_messages_summarises_with_its_model() -> None:
    model = policy()
    out = compact_messages(lcel_history(), config=LCEL_CONFIG, model=model, archive=None)

    assert len(model.summary_calls) == 1
    assert any(kind_of(m) == KIND_SUMMARY and MARK in m.text for m in out)


def test_compact_messages_summary_model_and_explicit_summarizer() -> None:
    model, cheap = policy(), policy()
    out = compact_messages(
        lcel_history(), config=LCEL_CONFIG, model=model, summary_model=cheap, archive=None
    )
    assert model.summary_calls == [] and len(cheap.summary_calls) == 1
    assert any(MARK in m.text for m in out)

    out = compact_messages(
        lcel_history(),
        config=LCEL_CONFIG,
        model=model,
        summary_model=cheap,
        summarizer=ExtractiveSummarizer(),
        archive=None,
    )
    assert model.summary_calls == [] and len(cheap.summary_calls) == 1
    assert not any(MARK in m.text for m in out)
    assert any(kind_of(m) == KIND_SUMMARY for m in out)


def test_summary_model_must_be_a_chat_model() -> None:
    with pytest.raises(ConfigError, match="summary_model must be a langchain chat model"):
        CompactionMiddleware(config=config(), summary_model="gpt-4o-mini")  # type: ignore[arg-type]
