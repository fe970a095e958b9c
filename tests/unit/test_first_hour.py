"""A newcomer's first hour (issue 20): the mistakes a first try makes get an error that says
what to do, and ``help()`` documents what there is to set."""

from __future__ import annotations

import inspect
import pydoc
from dataclasses import fields
from typing import Annotated, Any

import pytest
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    add_compaction,
    compact_messages,
)
from langchain_compact.errors import ConfigError


class _History(TypedDict):
    history: Annotated[list[Any], add_messages]


def _builder() -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(_History)
    builder.add_node("agent", lambda state: {"history": [("ai", "ok")]})
    builder.add_edge(START, "agent")
    return builder


def test_a_state_without_the_messages_key_is_an_error_naming_the_option() -> None:
    """It was a silent no-op: the nodes' input schema added an empty ``messages`` list."""
    with pytest.raises(ConfigError, match=r"no 'messages' key \(its keys: \['history'\]\).*"):
        add_compaction(_builder(), config=CompactionConfig(context_window=8_000))


def test_messages_key_reaches_the_nodes() -> None:
    """With ``messages_key`` the nodes read that key (it was filtered out by their input
    schema, so the first turn raised 'the graph state has no 'history' key')."""
    builder = _builder()
    add_compaction(builder, config=CompactionConfig(context_window=8_000), messages_key="history")
    out = builder.compile().invoke({"history": [("user", "hi")]})
    assert [m.type for m in out["history"]] == ["human", "ai"]


@pytest.mark.parametrize("value", ["8k", 8000.0, "8000"])
def test_a_context_window_of_the_wrong_type_says_it_must_be_an_int(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"must be an int of tokens, e\.g\. 8000 or 8_192"):
        CompactionConfig(context_window=value)
    with pytest.raises(ConfigError, match="is out of range"):
        CompactionConfig(context_window=0)


def test_help_of_the_config_documents_every_field() -> None:
    text = pydoc.render_doc(CompactionConfig, renderer=pydoc.plaintext)
    assert "Attributes:" in text
    for f in fields(CompactionConfig):
        assert f"    {f.name}: " in text, f.name


def test_compact_messages_shows_its_options_and_documents_them() -> None:
    params = inspect.signature(compact_messages).parameters
    for name in ("config", "summarizer", "archive", "thread_id", "model", "counter", "tools"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert params["on_overflow"].default == "raise"
    doc = inspect.getdoc(compact_messages) or ""
    for name in ("on_overflow", "max_memo", "archive", "thread_id"):
        assert f"{name}: " in doc, name
    with pytest.raises(ConfigError, match="'bogus'"):
        compact_messages([], config=CompactionConfig(context_window=8_000), bogus=1)


def test_the_middleware_docstring_states_when_it_stops() -> None:
    pytest.importorskip("langchain.agents", reason="the middleware needs the agents extra")
    from langchain_compact import middleware

    doc = " ".join((inspect.getdoc(middleware.CompactionMiddleware) or "").split())
    assert "still over the trigger after that" not in doc
    assert "only when even the smallest context cannot fit" in doc


def test_a_compaction_that_would_grow_the_context_is_not_applied_and_says_why() -> None:
    """Issue 20: "a compaction never leaves the context larger than it found it, or says
    why". Seven two-word messages weigh less than a summary and its header: the engine's
    result grows the context (71 -> 115 tokens); the core keeps the history as it was and
    its event states both sizes and the reason."""
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_compact.compaction import compact_history
    from langchain_compact.core import Compactor

    history: list[Any] = [HumanMessage("Task: say hi", id="t")]
    for i in range(4):
        history += [AIMessage(f"hi {i}", id=f"a{i}"), HumanMessage(f"ok {i}", id=f"h{i}")]
    config = CompactionConfig(context_window=2_000, keep_last_n=1)
    engine = compact_history(history, config=config, archive=None)
    assert engine.summary is not None and engine.tokens_after > engine.tokens_before

    turn = Compactor(config=config, archive=None).compaction(history, "t")
    assert turn.outcome == "continue" and turn.transition == "nothing_to_compact"
    assert list(turn.messages) == history
    (event,) = [e for e in turn.events if e["event"] == "compaction_skipped"]
    assert event["tokens_after"] > event["tokens_before"]
    assert "the history is kept as it was" in event["reason"]
    assert not [e for e in turn.events if e["event"] == "compaction"]


def test_the_demos_compactions_all_shrink_the_context() -> None:
    """The demo's run (50 dependent steps, results of two fifths of a 4,000-token window):
    every compaction frees tokens (``freed_tokens``), and an event whose two counts
    disagree says why.
    (bench/report.py's "grew the context" table says the same of the 36 transcripts.)"""
    from langchain_compact import create_compacting_agent
    from langchain_compact.cli._demo import DEMO_PAYLOAD_CHARS, DEMO_STEPS, DEMO_WINDOW
    from langchain_compact.demo import ContextReadingPolicy, DependentTask
    from langchain_compact.markers import EVENT_KEY

    task = DependentTask(steps=DEMO_STEPS, payload_chars=DEMO_PAYLOAD_CHARS)
    config = CompactionConfig(context_window=DEMO_WINDOW, prepare=True)
    agent = create_compacting_agent(
        ContextReadingPolicy(), task.tools(), config=config, summarizer=ExtractiveSummarizer()
    )
    run = {"configurable": {"thread_id": "demo"}, "recursion_limit": 6 * (DEMO_STEPS + 2) + 20}
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    inputs = {"messages": [("user", task.prompt())]}
    for mode, chunk in agent.stream(inputs, run, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk[EVENT_KEY])
        else:
            final = chunk
    assert task.check(final["messages"][-1].text).ok
    compactions = [e for e in events if e["event"] == "compaction"]
    assert compactions
    assert all(e["freed_tokens"] > 0 for e in compactions), compactions
    # where the two counts disagree, the event says so
    unexplained = [
        e for e in compactions if e["tokens_after"] >= e["tokens_before"] and "note" not in e
    ]
    assert unexplained == []


def _goal_section(summary: str) -> list[str]:
    section = summary.split("## 1. Goal and hard constraints", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def test_a_summary_never_calls_the_tasks_constraints_absent() -> None:
    """A real OpenHands run whose task states hard constraints ("you DON'T have to modify
    the testing logic", "minimal changes to non-test files"): the span after the pinned task
    states no new one, and section 1 once read "no new goal or constraint stated"."""
    from _data import TRAJECTORY_DIR, load_trajectory

    from langchain_compact.compaction import compact_history
    from langchain_compact.summarizers import NO_NEW_GOAL

    history = load_trajectory(TRAJECTORY_DIR / "openhands__ponyc-4588__llama-4-maverick.jsonl")
    assert "DON'T have to modify the testing logic" in history[1].text
    result = compact_history(
        history[:40], config=CompactionConfig(context_window=8_000, keep_last_n=4), archive=None
    )
    assert result.summary is not None
    goal = _goal_section(result.summary.text)
    assert goal == [f"- {NO_NEW_GOAL}"]
    assert "no new goal or constraint stated" not in result.summary.text
    assert any("DON'T have to modify the testing logic" in m.text for m in result.messages)


def test_a_tools_output_sent_as_a_user_message_is_never_a_goal() -> None:
    """SWE-agent sends its tools' output back as user messages ("Wrong flag! (Open file:
    n/a) (Current directory: ...) bash-$"); OpenHands sent a tool's error as one
    ("Parameter 'command' is expected to be one of [...]"). Each is a fact, not a goal."""
    from _data import TRAJECTORY_DIR, load_trajectory
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    history = load_trajectory(TRAJECTORY_DIR / "swe-agent__ctf-crypto-eps.jsonl")
    span = history[2:40]
    observations = [m for m in span if isinstance(m, HumanMessage)]
    assert any("(Current directory:" in m.text for m in observations)
    summary = ExtractiveSummarizer().summarize(span, max_tokens=4_000)
    goal = _goal_section(summary)
    assert not [line for line in goal if "Current directory:" in line or "Wrong flag" in line]

    call = {"name": "str_replace_editor", "args": {"command": "view"}, "id": "toolu_12"}
    error = "Parameter 'command' is expected to be one of ['view', 'create']."
    tool_error = [
        AIMessage("", tool_calls=[call]),
        ToolMessage("file listing", tool_call_id="toolu_12"),
        HumanMessage(error),
        HumanMessage("Please also keep the public API unchanged."),  # the user's words
    ]
    goal = _goal_section(ExtractiveSummarizer().summarize(tool_error, max_tokens=2_000))
    assert not [line for line in goal if "Parameter 'command'" in line]
    assert goal == ["- user: Please also keep the public API unchanged."]
