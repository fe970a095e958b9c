"""Summaries written by the model by default (issue 30): every integration handed a chat
model summarises with it (or with ``summary_model=``), an explicit ``summarizer=`` wins, and
a failing model falls back to the extractive summarizer with the event saying so."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field, SkipValidation

from langchain_compact import CompactionConfig, ConfigError, ExtractiveSummarizer
from langchain_compact._compaction_phases import (
    Compaction,
    compaction_steps,
    premerge,
    premerge_steps,
)
from langchain_compact._compaction_plan import plan_compaction
from langchain_compact._ops import drive
from langchain_compact.compaction import compact_history
from langchain_compact.core import compaction_report
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.graph import CompactionNodes, add_compaction, create_compacting_agent
from langchain_compact.lcel import compact_messages
from langchain_compact.markers import EVENT_KEY, KIND_SUMMARY, kind_of
from langchain_compact.middleware import CompactionMiddleware
from langchain_compact.summarizers import DEFAULT_SUMMARY_PROMPT, LLMSummarizer
from langchain_compact.tokens import approximate_tokens

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


# -- with preparing on: what the model did not write, the event names --------------------


class FactKeeper(BaseChatModel):
    """A summary model that keeps every ``RESULT`` line it is shown; counts its calls."""

    calls: Annotated[list[int], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fact-keeper"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(len(messages))
        text = "\n".join(m.text for m in messages)
        facts = dict.fromkeys(re.findall(r"RESULT step=\d+ value=\d+", text))
        reply = AIMessage(f"- {MARK}\n" + "\n".join(f"- {fact}" for fact in facts))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _steps(n: int, *, start: int = 0) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Task: run the steps and report.", id="task")]
    for i in range(start, start + n):
        call = {"name": "run_step", "args": {"step": i}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(
            ToolMessage(
                f"log ... RESULT step={i} value={100 + i}", tool_call_id=f"c{i}", id=f"r{i}"
            )
        )
    return out


def test_newer_turns_folded_into_a_prepared_summary_are_named_extractive() -> None:
    model = FactKeeper()
    config = CompactionConfig(context_window=WINDOW, keep_last_n=4)
    history = _steps(12)
    plan = plan_compaction(history, config)
    assert plan is not None
    prepared = "\n".join(f"- RESULT step={k} value={100 + k}" for k in range(5))
    result = drive(
        compaction_steps(
            Compaction(
                history,
                plan,
                config,
                LLMSummarizer(model),
                thread_id="t",
                tokens_before=approximate_tokens(history),
                prepared_text=prepared,
                prepared_covers=10,  # steps 0-4; 5-9 are folded in at the trigger
                prepared_note="used + key lines",
            )
        )
    )
    assert model.calls == []  # no model call at the trigger
    assert result.summary_written_by == "model"
    assert result.extractive_parts == ("newer turns",)
    assert compaction_report(result)["extractive_parts"] == ["newer turns"]


PREP_RUN: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 500}


def _prepared_run(summary_model: BaseChatModel) -> list[dict[str, Any]]:
    """80 turns through the graph's nodes with preparing on; the compaction reports."""
    nodes = CompactionNodes(
        config=CompactionConfig(context_window=4000, prepare=True, micro_exclude_tools=("f",)),
        summarizer=LLMSummarizer(summary_model),
    )
    state: dict[str, Any] = {"messages": [HumanMessage("Report every value.", id="task")]}

    def apply(update: dict[str, Any]) -> None:
        for key, value in update.items():
            state[key] = add_messages(state["messages"], value) if key == "messages" else value

    reports = []
    for t in range(80):
        call = {"name": "f", "args": {"step": t}, "id": f"c{t}"}
        text = f"RESULT step={t} value={100_000 + 7 * t}\n" + "log line alpha beta\n" * 40
        apply({"messages": [AIMessage("", tool_calls=[call], id=f"a{t}")]})
        apply({"messages": [ToolMessage(text, tool_call_id=f"c{t}", name="f", id=f"r{t}")]})
        apply(nodes.micro(state, PREP_RUN))
        route = nodes.route(state)
        if isinstance(route, list):  # beside the model call
            apply(nodes.prepare(state, PREP_RUN))
            route = "continue"
        if route == "compact":
            apply(nodes.summarize(state, PREP_RUN))
            reports.append(state["last_compaction"])
    return reports


def test_merges_prepared_with_preparing_on_are_written_by_the_model() -> None:
    model = FactKeeper()
    reports = _prepared_run(model)
    merges = [r for r in reports if r["prepared"].startswith("used") and r["merged_summaries"]]
    assert merges, "the run merged summaries after prepared ones"
    for report in merges:
        assert report["summary_written_by"] == "model"
        assert "merged summaries" not in report["extractive_parts"], report


class Refuses(FactKeeper):
    """A summary model that is down."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(len(messages))
        raise RuntimeError("the summary model is down")


def test_a_merge_the_model_cannot_prepare_is_joined_and_the_event_names_it() -> None:
    config = CompactionConfig(context_window=1200, keep_last_n=2)
    history = _steps(4)
    for k in range(1, 3):  # two compactions: two summaries in the head
        history = compact_history(
            history, summarizer=ExtractiveSummarizer(), config=config
        ).messages
        history += _steps(4, start=4 * k)[1:]
    plan = plan_compaction(history, config)
    assert plan is not None
    config = config.replace(summary_budget_ratio=0.05)  # the summaries are over it already
    text = "worked on: steps 8-11"
    written, down = FactKeeper(), Refuses()
    ok = drive(premerge_steps(plan.head, text, config, approximate_tokens, LLMSummarizer(written)))
    bad = drive(premerge_steps(plan.head, text, config, approximate_tokens, LLMSummarizer(down)))
    assert written.calls and down.calls
    assert ok[2] is True and ok[1]
    assert bad[2] is False and bad[:2] == tuple(
        premerge(plan.head, text, config, approximate_tokens)
    )
    for (ids, merged, by_model), parts in ((ok, ()), (bad, ("merged summaries",))):
        result = drive(
            compaction_steps(
                Compaction(
                    history,
                    plan,
                    config,
                    LLMSummarizer(FactKeeper()),
                    prepared_text=text,
                    prepared_covers=len(plan.span),
                    prepared_merge=(tuple(ids), merged),
                    prepared_merge_by_model=by_model,
                )
            )
        )
        assert result.merged == 2
        assert result.extractive_parts == parts
