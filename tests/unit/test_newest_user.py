"""The user's newest message is the current request (issue 31, item 4): it is never
summarised, and never digested while the context fits with it whole; when something must be
digested, the other unread items go first, largest first, and the request last.

Each case runs through the three integrations (the graph's nodes, the middleware on
``create_agent``, the LCEL transformer); the model is :class:`ScriptedChatModel`, which
records the input it is called with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _scenarios import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_compact import CompactionConfig
from langchain_compact.graph import add_compaction
from langchain_compact.history import validate_history
from langchain_compact.lcel import compact_messages
from langchain_compact.markers import KIND_SUMMARY, KIND_TRUNCATED, kind_of
from langchain_compact.middleware import CompactionMiddleware
from langchain_compact.tokens import approximate_tokens


def pasted_csv(rows: int) -> str:
    lines = ["id,name,city,amount,date"]
    for i in range(rows):
        amount = f"{(i * 37) % 1000}.{i % 100:02d}"
        lines.append(f"{i},name{i * 7 % 113},city{i % 17},{amount},2024-{1 + i % 12:02d}-01")
    return "\n".join(lines)


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{k} value={k * 3}" for k in range(n))


def history(unread: list[int], rows: int) -> list[BaseMessage]:
    """A system prompt, the task, ten read tool turns, a last call whose results
    (``unread``: words each) the model has not read, then the user's pasted CSV."""
    h: list[BaseMessage] = [
        SystemMessage("You are a data agent.", id="sys"),
        HumanMessage("Analyse the sales files in /data and report totals.", id="task"),
    ]
    for t in range(10):
        call = {"name": "read_file", "args": {"path": f"/data/f{t}.txt"}, "id": f"c{t}"}
        h.append(AIMessage("", tool_calls=[call], id=f"a{t}"))
        text = words(f"w{t}_", 500)
        h.append(ToolMessage(text, tool_call_id=f"c{t}", name="read_file", id=f"r{t}"))
    calls = [
        {"name": "read_file", "args": {"path": f"/data/u{k}.txt"}, "id": f"u{k}"}
        for k in range(len(unread))
    ]
    h.append(AIMessage("", tool_calls=calls, id="last"))
    for k, n in enumerate(unread):
        text = words(f"u{k}_", n)
        h.append(ToolMessage(text, tool_call_id=f"u{k}", name="read_file", id=f"t{k}"))
    h.append(HumanMessage("Here is the extra CSV, add it:\n" + pasted_csv(rows), id="csv"))
    return h


def via_lcel(config: CompactionConfig, messages: list[BaseMessage]) -> list[BaseMessage]:
    return compact_messages(config=config, archive=None).invoke(messages)


def via_graph(config: CompactionConfig, messages: list[BaseMessage]) -> list[BaseMessage]:
    model = ScriptedChatModel(replies=[AIMessage("Totals added.")])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, config=config, archive=None)
    builder.compile().invoke({"messages": messages})
    assert model.calls == 1
    return model.log.inputs[0]


def via_middleware(config: CompactionConfig, messages: list[BaseMessage]) -> list[BaseMessage]:
    model = ScriptedChatModel(replies=[AIMessage("Totals added.")])
    agent = create_agent(
        model=model, tools=[], middleware=[CompactionMiddleware(config=config, archive=None)]
    )
    agent.invoke({"messages": messages})
    assert model.calls == 1
    return [m for m in model.log.inputs[0] if not isinstance(m, SystemMessage) or m.id == "sys"]


WAYS: dict[str, Callable[[CompactionConfig, list[BaseMessage]], list[BaseMessage]]] = {
    "lcel": via_lcel,
    "graph": via_graph,
    "middleware": via_middleware,
}


def by_id(messages: list[BaseMessage], mid: str) -> BaseMessage:
    return next(m for m in messages if m.id == mid)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_with_keep_last_n_0_the_newest_user_message_stays_verbatim_after_the_summary(
    way: str,
) -> None:
    config = CompactionConfig(context_window=8_000, keep_last_n=0)
    messages = history([], rows=60)
    out = WAYS[way](config, messages)
    summaries = [i for i, m in enumerate(out) if kind_of(m) == KIND_SUMMARY]
    assert summaries, "no compaction ran"
    assert out[-1].id == "csv" and out[-1].content == messages[-1].content
    assert summaries[-1] < len(out) - 1  # after the summary
    assert approximate_tokens(out) <= (config.fit_tokens or 0)
    validate_history(out)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_the_unread_csv_stays_whole_while_a_larger_unread_result_makes_the_room(way: str) -> None:
    """An unread batch that cannot fit whole beside the rest: the results are digested,
    largest first, and the user's CSV (2,273 o200k tokens, second in size) is left whole because
    cutting the others is enough."""
    config = CompactionConfig(context_window=9_000)
    messages = history([1500, 300], rows=125)
    csv = by_id(messages, "csv")
    assert approximate_tokens([csv]) > approximate_tokens([by_id(messages, "t1")])
    out = WAYS[way](config, messages)
    fit = config.fit_tokens or 0
    assert approximate_tokens(out) <= fit
    assert by_id(out, "csv").content == csv.content, "the current request was digested"
    assert kind_of(by_id(out, "t0")) == KIND_TRUNCATED  # the largest went first
    validate_history(out)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_a_request_that_cannot_fit_whole_is_digested_last_and_the_call_fits(way: str) -> None:
    """The last resort still applies: a pasted CSV larger than the window is digested (its
    original archived by the caller's archive; here none), and the call fits."""
    config = CompactionConfig(context_window=4_000)
    messages = history([300], rows=500)
    out = WAYS[way](config, messages)
    assert approximate_tokens(out) <= (config.fit_tokens or 0)
    assert kind_of(by_id(out, "csv")) == KIND_TRUNCATED
    validate_history(out)


def test_tail_slimming_cuts_a_read_observation_and_spares_only_the_current_request() -> None:
    """An agent without native tool calls gets its observations as user messages: the
    read ones in a compaction's tail are still cut (keep=0); the newest, unread one (the
    current request) stays whole, and so does a newest one the model has read."""
    from langchain_compact._compaction_phases import slim_tail
    from langchain_compact._ops import drive

    config = CompactionConfig(context_window=4_000)
    observation = "\n".join(f"{k}: def field_{k}(self): return {k}" for k in range(200))
    read = [
        AIMessage("open fields.py", id="a1"),
        HumanMessage(observation, id="o1"),
        AIMessage("scroll down", id="a2"),
    ]
    tail = [*read, HumanMessage(observation, id="o2")]
    out = drive(slim_tail(tail, config, None, "th", approximate_tokens, keep=0))
    assert kind_of(by_id(out, "o1")) == KIND_TRUNCATED
    assert by_id(out, "o2").content == observation
    out = drive(slim_tail(read, config, None, "th", approximate_tokens, keep=0))
    assert by_id(out, "o1").content == observation  # the newest human message, read
