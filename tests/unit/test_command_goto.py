"""A node returning ``Command(goto="agent")`` (a human review's reject) reaches the model
through compaction too (issue 31, item 5): the graph's gate redirects edges, and a jump is
no edge, so the model node's entry runs the turn for a call that did not come through it.

The model is :class:`ScriptedChatModel`, which records every input it is called with.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from _scenarios import ScriptedChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from langchain_compact import CompactionConfig
from langchain_compact.core import Compactor
from langchain_compact.graph import add_compaction
from langchain_compact.history import validate_history
from langchain_compact.markers import KIND_SUMMARY, kind_of
from langchain_compact.tokens import approximate_tokens

WINDOW = 8_000


def read_turns(turns: int, words: int) -> list[BaseMessage]:
    """The task, then ``turns`` read tool turns of ``words`` words each."""
    history: list[BaseMessage] = [HumanMessage("Summarise the logs in /var/log/app.", id="task")]
    for t in range(turns):
        history.append(
            AIMessage(
                "",
                id=f"call-{t}",
                tool_calls=[{"name": "read", "args": {"path": f"/var/log/app/{t}"}, "id": f"c{t}"}],
            )
        )
        text = " ".join(f"line{t}-{k} status=ok" for k in range(words))
        history.append(ToolMessage(text, tool_call_id=f"c{t}", name="read", id=f"r{t}"))
    return history


def chat_turns(turns: int, words: int) -> list[BaseMessage]:
    """The task, then ``turns`` long assistant answers each followed by a short user reply:
    nothing micro-compaction clears while the next call fits."""
    history: list[BaseMessage] = [HumanMessage("Draft the quarterly report.", id="task")]
    for t in range(turns):
        text = " ".join(f"section{t}-{k} revenue={k * 7}" for k in range(words))
        history.append(AIMessage(text, id=f"answer-{t}"))
        history.append(HumanMessage(f"Go on with part {t + 1}.", id=f"user-{t}"))
    return history


def review_graph(
    model: ScriptedChatModel, reject: list[BaseMessage], *, is_async: bool = False
) -> Any:
    """``START -> agent -> review``; the review rejects the first answer once with
    ``Command(goto="agent", update=reject)`` and ends the run on the second."""
    verdicts: list[str] = []

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def review(state: MessagesState) -> Command[Literal["agent", "__end__"]]:
        if not verdicts:
            verdicts.append("reject")
            return Command(goto="agent", update={"messages": list(reject)})
        verdicts.append("accept")
        return Command(goto=END)

    builder = StateGraph(MessagesState)
    builder.add_node("agent", aagent if is_async else agent)
    builder.add_node("review", review)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "review")
    add_compaction(builder, config=CompactionConfig(context_window=WINDOW), archive=None)
    return builder.compile(checkpointer=InMemorySaver())


def run(graph: Any, history: list[BaseMessage], *, is_async: bool = False) -> dict[str, Any]:
    config = {"configurable": {"thread_id": "review"}}
    if is_async:
        return asyncio.run(graph.ainvoke({"messages": history}, config))
    return graph.invoke({"messages": history}, config)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_review_reject_over_the_trigger_is_compacted_before_the_model_call(
    is_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call fits and goes through the gate; the reject adds a long note that
    takes the history over the trigger: the model's second input is compacted (a summary,
    smaller than the history it replaced), and the turn ran at the entry once, only then."""
    config = CompactionConfig(context_window=WINDOW)
    assert config.trigger_tokens is not None and config.micro_trigger_tokens is not None
    history = chat_turns(8, 95)
    assert approximate_tokens(history) < config.micro_trigger_tokens  # the first call fits
    note = "Rejected. " + " ".join(f"reason{k}: the totals must match." for k in range(200))
    reject = [HumanMessage(note, id="reject")]
    entries: list[int] = []
    turn, aturn = Compactor.turn, Compactor.aturn

    def counted(self: Compactor, *args: Any, **kwargs: Any) -> Any:
        entries.append(len(args[0]))
        return turn(self, *args, **kwargs)

    async def acounted(self: Compactor, *args: Any, **kwargs: Any) -> Any:
        entries.append(len(args[0]))
        return await aturn(self, *args, **kwargs)

    monkeypatch.setattr(Compactor, "turn", counted)
    monkeypatch.setattr(Compactor, "aturn", acounted)
    model = ScriptedChatModel(replies=[AIMessage("Draft: all ok."), AIMessage("Totals match.")])
    state = run(review_graph(model, reject, is_async=is_async), history, is_async=is_async)

    assert model.calls == 2
    first, second = model.log.inputs
    assert [m.id for m in first] == [m.id for m in history]  # through the gate, untouched
    uncompacted = [*history, AIMessage("Draft: all ok."), *reject]
    assert approximate_tokens(uncompacted) > config.trigger_tokens
    assert any(kind_of(m) == KIND_SUMMARY for m in second), "the reject reached the model raw"
    assert approximate_tokens(second) < approximate_tokens(uncompacted)
    assert second[-1].content == note  # the reviewer's note, the current request, whole
    validate_history(second)
    assert entries == [len(uncompacted)]  # the gated call was not run through twice
    assert state["messages"][-1].content == "Totals match."
    assert any(kind_of(m) == KIND_SUMMARY for m in state["messages"])  # state holds it too


@pytest.mark.parametrize("is_async", [False, True])
def test_a_review_jump_with_a_broken_pairing_reaches_the_model_repaired(is_async: bool) -> None:
    """The reject's update carries a result whose call is not in the history (an orphan
    that OpenAI answers with HTTP 400): the pairing check at the entry repairs it."""
    history = read_turns(2, 20)
    orphan = ToolMessage("late output", tool_call_id="gone", name="read", id="orphan")
    reject = [orphan, HumanMessage("Rejected: check the second log again.", id="reject")]
    model = ScriptedChatModel(replies=[AIMessage("Draft."), AIMessage("Done.")])
    run(review_graph(model, reject, is_async=is_async), history, is_async=is_async)

    assert model.calls == 2
    second = model.log.inputs[1]
    assert "orphan" not in [m.id for m in second]
    validate_history(second)
    assert second[-1].id == "reject"


def test_a_graph_wired_by_edges_alone_runs_no_turn_at_the_model_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call of a graph reached by edges only came through the gate: the entry
    checks nothing again (one turn per call, not two)."""
    entries: list[int] = []
    turn = Compactor.turn

    def counted(self: Compactor, *args: Any, **kwargs: Any) -> Any:
        entries.append(len(args[0]))
        return turn(self, *args, **kwargs)

    monkeypatch.setattr(Compactor, "turn", counted)
    model = ScriptedChatModel(replies=[AIMessage("Done.")])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=WINDOW), archive=None)
    graph = builder.compile()
    graph.invoke({"messages": read_turns(3, 20)})
    assert model.calls == 1
    assert entries == []


def test_a_send_to_the_model_node_is_compacted_at_its_entry_without_the_overflow_guard() -> None:
    """A ``Send`` is no edge either, and the entry does not depend on ``overflow_retry``."""
    from langgraph.types import Send

    config = CompactionConfig(context_window=WINDOW)
    history = chat_turns(12, 95)
    assert approximate_tokens(history) > (config.trigger_tokens or 0)
    model = ScriptedChatModel(replies=[AIMessage("Done.")])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_conditional_edges(START, lambda state: [Send("agent", state)], ["agent"])
    builder.add_edge("agent", END)
    add_compaction(builder, config=config, archive=None, overflow_retry=False)
    builder.compile().invoke({"messages": history})
    assert model.calls == 1
    seen = model.log.inputs[0]
    assert any(kind_of(m) == KIND_SUMMARY for m in seen)
    assert approximate_tokens(seen) <= (config.fit_tokens or 0)
