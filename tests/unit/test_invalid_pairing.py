"""One policy for a broken tool-call pairing at every entry point (docs/design.md, B2).

An orphan or duplicate result, or an unanswered tool call, in the graph's state, the
middleware's state, an LCEL chain's input or ``compact_messages``' input never reaches the
model: by default the core's turn repairs it (the removed pieces archived, a
``history_repaired`` event), and with ``on_invalid_history="raise"`` it raises
``InvalidHistoryError`` naming the index. Each test below fails on the code before this
policy (the broken history went to the model untouched).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore

from langchain_compact import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    InvalidHistoryError,
    StoreArchive,
    add_compaction,
    compact_messages,
)
from langchain_compact.core import Compactor
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.history import check_pairing, validate_history
from langchain_compact.lcel import MessageCompactor
from langchain_compact.markers import EVENT_KEY

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "server"
WINDOW = 8_000
TASK = DependentTask(steps=3, payload_chars=0)


def orphan() -> list[BaseMessage]:
    """The task, then a result no call asked for."""
    return [HumanMessage(TASK.prompt()), ToolMessage("stray output", tool_call_id="nobody")]


def unanswered() -> list[BaseMessage]:
    """The task, a call that never got its result, then the user again."""
    call = {"name": "run_step", "args": {"step": 1, "previous": 0}, "id": "lost"}
    return [
        HumanMessage(TASK.prompt()),
        AIMessage("", tool_calls=[call]),
        HumanMessage("go on"),
    ]


BROKEN = {"orphan": orphan, "unanswered": unanswered}


def assert_model_saw_valid(inputs: list[list[BaseMessage]]) -> None:
    assert inputs, "the model was never called"
    for seen in inputs:
        validate_history(seen)  # raises on a broken pairing


def archived_repairs(archive: StoreArchive, thread: str) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for ref in archive.refs(thread_id=thread):
        out += archive.read(ref, thread_id=thread)
    return out


def check_archive(kind: str, archive: StoreArchive, thread: str) -> None:
    texts = [m.text for m in archived_repairs(archive, thread)]
    if kind == "orphan":  # the dropped result is kept in the archive, nothing is lost
        assert "stray output" in texts


def repaired_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == "history_repaired"]


# -- graph: add_compaction ----------------------------------------------------------------


def graph_for(model: Any, archive: StoreArchive, **cfg: Any) -> Any:
    tools = TASK.tools()
    bound = model.bind_tools(tools)

    def agent(state: CompactionState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, config=CompactionConfig(context_window=WINDOW, **cfg), archive=archive)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_graph_repairs_before_the_model_and_archives(kind: str) -> None:
    inputs: list[list[BaseMessage]] = []
    archive = StoreArchive(InMemoryStore())
    graph = graph_for(ContextReadingPolicy(recorder=inputs), archive)
    run = {"configurable": {"thread_id": "g"}}
    events = [
        chunk[EVENT_KEY]
        for chunk in graph.stream({"messages": BROKEN[kind]()}, run, stream_mode="custom")
    ]
    assert_model_saw_valid(inputs)
    assert repaired_events(events)
    check_archive(kind, archive, "g")
    final = graph.get_state(run).values["messages"]
    validate_history(final)  # the checkpoint holds the repaired history
    assert TASK.check(final[-1].text).ok


def test_graph_raises_with_the_index_when_asked() -> None:
    inputs: list[list[BaseMessage]] = []
    graph = graph_for(
        ContextReadingPolicy(recorder=inputs),
        StoreArchive(InMemoryStore()),
        on_invalid_history="raise",
    )
    with pytest.raises(InvalidHistoryError, match=r"messages\[1\]") as info:
        graph.invoke({"messages": orphan()}, {"configurable": {"thread_id": "r"}})
    assert info.value.index == 1
    assert inputs == []


# -- create_agent + CompactionMiddleware --------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_middleware_repairs_before_the_model(kind: str) -> None:
    inputs: list[list[BaseMessage]] = []
    archive = StoreArchive(InMemoryStore())
    agent = create_agent(
        model=ContextReadingPolicy(recorder=inputs),
        tools=TASK.tools(),
        middleware=[
            CompactionMiddleware(config=CompactionConfig(context_window=WINDOW), archive=archive)
        ],
    )
    run = {"configurable": {"thread_id": "m"}}
    out = await agent.ainvoke({"messages": BROKEN[kind]()}, run)
    assert_model_saw_valid(inputs)
    validate_history(out["messages"])
    check_archive(kind, archive, "m")


def test_middleware_raises_when_asked() -> None:
    agent = create_agent(
        model=ContextReadingPolicy(),
        tools=TASK.tools(),
        middleware=[
            CompactionMiddleware(
                config=CompactionConfig(context_window=WINDOW, on_invalid_history="raise")
            )
        ],
    )
    with pytest.raises(InvalidHistoryError, match=r"messages\[1\]"):
        agent.invoke({"messages": unanswered()})


# -- LCEL ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_lcel_chain_repairs_before_the_model_once(kind: str) -> None:
    inputs: list[list[BaseMessage]] = []
    archive = StoreArchive(InMemoryStore())
    compactor = MessageCompactor(
        config=CompactionConfig(context_window=WINDOW), archive=archive, thread_id="l"
    )
    chain = compactor.as_runnable() | RunnableLambda(lambda ms: inputs.append(list(ms)) or ms)
    history = BROKEN[kind]()
    chain.invoke(history)
    chain.invoke([*history, AIMessage("noted"), HumanMessage("and now?")])
    assert_model_saw_valid(inputs)
    check_archive(kind, archive, "l")
    # the second call replays the repair: it is archived once, not once per call
    assert len(archive.refs(thread_id="l")) == (1 if kind == "orphan" else 0)


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_compact_messages_returns_a_valid_history(kind: str) -> None:
    out = compact_messages(BROKEN[kind](), config=CompactionConfig(context_window=WINDOW))
    validate_history(out)
    compactor = MessageCompactor(config=CompactionConfig(context_window=WINDOW))
    validate_history(await compactor.acompact(BROKEN[kind]()))


def test_compact_messages_raises_with_the_index_when_asked() -> None:
    cfg = CompactionConfig(context_window=WINDOW, on_invalid_history="raise")
    with pytest.raises(InvalidHistoryError, match=r"messages\[1\].*repair_history"):
        compact_messages(unanswered(), config=cfg)


# -- the server example, in process --------------------------------------------------------


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    for name in ("LC_MODEL", "LC_BASE_URL", "LC_CONTEXT_WINDOW", "LC_MAX_COMPACTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    sys.modules.pop("compacting_graphs", None)
    yield importlib.import_module("compacting_graphs")
    sys.modules.pop("compacting_graphs", None)


@pytest.mark.parametrize("name", ["build_agent", "build_user_graph"])
async def test_server_example_graphs_repair_before_the_model(
    example: ModuleType, name: str
) -> None:
    inputs: list[list[BaseMessage]] = []
    built = getattr(example, name)(ContextReadingPolicy(recorder=inputs))
    store = InMemoryStore()
    graph = built.builder.compile(checkpointer=InMemorySaver(), store=store)
    run = {"configurable": {"thread_id": "s", "user_id": "ann", "demo_steps": 3}}
    await graph.ainvoke({"messages": orphan()}, run)
    assert_model_saw_valid(inputs)
    archived = store.search(("langchain_compact", "archive"), limit=100)
    assert any("stray output" in str(item.value) for item in archived)


# -- the core -----------------------------------------------------------------------------


def test_turn_reports_each_change_and_keeps_valid_histories_untouched() -> None:
    core = Compactor(config=CompactionConfig(context_window=WINDOW))
    history = [*orphan(), *unanswered()[1:]]
    turn = core.turn(history, "t")
    assert turn.repair is not None and turn.history is not None
    (event,) = repaired_events(list(turn.events))
    assert [c["action"] for c in event["changes"]] == ["dropped", "closed"]
    validate_history(turn.messages)
    again = core.turn(turn.messages, "t")
    assert again.repair is None and again.history is None


def test_incremental_check_matches_the_full_one() -> None:
    """check_pairing goes on from where it stopped on a grown history; it still sees a
    duplicate answer of a call made long before, and an orphan in the new part."""
    history: list[BaseMessage] = [HumanMessage("task")]
    for i in range(40):
        call = {"name": "ls", "args": {}, "id": f"c{i}"}
        history += [AIMessage("", tool_calls=[call]), ToolMessage("ok", tool_call_id=f"c{i}")]
    check_pairing(history)
    reused = {"name": "ls", "args": {}, "id": "c3"}
    grown = [*history, AIMessage("", tool_calls=[reused]), ToolMessage("x", tool_call_id="c3")]
    with pytest.raises(InvalidHistoryError, match="second"):
        check_pairing(grown)
    with pytest.raises(InvalidHistoryError, match="orphan"):
        check_pairing([*history, ToolMessage("x", tool_call_id="zz")])
    check_pairing([*history, AIMessage("done")])


def test_a_model_reusing_one_call_id_every_turn_is_repaired_turn_by_turn() -> None:
    """Some servers name every call ``call_0``; Anthropic refuses a request whose
    ``tool_use`` ids are not unique. Each turn renames the new call (and its result) only:
    the prefix an earlier turn found valid is not read again."""
    core = Compactor(config=CompactionConfig(context_window=200_000))
    history: list[BaseMessage] = [HumanMessage("task")]
    for turn in range(80):
        call = {"name": "ls", "args": {"n": turn}, "id": "call_0"}
        history += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"r{turn}", tool_call_id="call_0"),
        ]
        result = core.turn(history, "t")
        if turn:
            assert result.repair is not None
            assert [(c.index, c.action) for c in result.repair.changes] == [
                (len(history) - 2, "renamed"),
                (len(history) - 1, "re-paired"),
            ]
        history = list(result.messages)
        validate_history(history)
    ids = [c["id"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 80


def test_lcel_memoises_a_compaction_whose_kept_tail_holds_a_repair() -> None:
    """The kept tail of a compaction on a replayed repair (an 'interrupted' result added) is
    not the raw tail: the compaction is memoised for the whole raw list, so the next call
    replays it as it was sent, and compacts nothing again."""
    compactor = MessageCompactor(config=CompactionConfig(context_window=1500, keep_last_n=7))
    call = {"name": "ls", "args": {}, "id": "lost"}
    raw: list[BaseMessage] = [HumanMessage("Task: say hi", id="t")]
    raw += [AIMessage("old " * 300, id=f"p{i}") for i in range(6)]
    raw += [AIMessage("", tool_calls=[call], id="a"), HumanMessage("go on", id="h")]
    compactor(raw)
    raw += [AIMessage("hi " * 40, id=f"x{i}") for i in range(3)]
    sent = compactor(raw)
    assert compactor.compactions >= 1
    count = compactor.compactions
    again = compactor([*raw, HumanMessage("next", id="n")])
    validate_history(again)
    assert compactor.compactions == count
    assert again == [*sent, again[-1]] and again[-1].id == "n"
