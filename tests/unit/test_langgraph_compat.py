"""The langgraph builder internals ``add_compaction`` relies on, pinned.

``langchain_compact/graph/wiring.py`` rewires an uncompiled ``StateGraph`` in place, and
langgraph has no public API to move an edge: it reads and edits ``builder.edges``,
``builder.waiting_edges`` and ``builder.branches`` and rebuilds ``BranchSpec`` tuples with
``_replace``. These tests fail loudly, naming what changed and the installed langgraph
version, when one of those internals moves; then the behavioural checks below say whether
every kind of edge into the model node still goes through the compaction gate.

``Command(goto=...)`` from a node is routed by the node's return value at run time, not by
an edge, so ``add_compaction`` cannot redirect it: such a jump reaches the model node without
passing the gate (pinned by ``test_command_goto_bypasses_the_gate``).
"""

from __future__ import annotations

import operator
from importlib.metadata import version
from typing import Annotated, Any, Literal

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send

from langchain_compact.config import CompactionConfig
from langchain_compact.graph.wiring import add_compaction

LANGGRAPH = version("langgraph")
GATE = "compact_micro"


def _changed(what: str) -> str:
    return (
        f"langgraph {LANGGRAPH}: {what}. langchain_compact/graph/wiring.py relies on it to "
        "redirect edges into the model node; adapt wiring.py and the langgraph pin in "
        "pyproject.toml."
    )


# --- the internals -------------------------------------------------------------------------


def test_branchspec_is_importable_namedtuple_with_path_ends_and_replace() -> None:
    try:
        from langgraph.graph._branch import BranchSpec
    except ImportError as error:  # pragma: no cover - only when langgraph moved it
        pytest.fail(_changed(f"langgraph.graph._branch.BranchSpec is gone ({error})"))
    assert issubclass(BranchSpec, tuple), _changed("BranchSpec is no longer a NamedTuple")
    fields = getattr(BranchSpec, "_fields", ())
    assert {"path", "ends"} <= set(fields), _changed(f"BranchSpec fields are now {fields}")
    assert callable(getattr(BranchSpec, "_replace", None)), _changed("BranchSpec has no _replace")


def _builder() -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("a", lambda state: {})
    builder.add_node("b", lambda state: {})
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "a")
    builder.add_edge(["a", "b"], "agent")
    builder.add_conditional_edges("agent", lambda state: "b", {"b": "b", "end": END})
    return builder


def test_builder_exposes_edges_waiting_edges_branches_and_nodes() -> None:
    from langgraph.graph._branch import BranchSpec

    builder = _builder()
    for name in ("edges", "waiting_edges", "branches", "nodes"):
        assert hasattr(builder, name), _changed(f"StateGraph has no attribute {name!r}")
    assert isinstance(builder.edges, set), _changed(f"edges is a {type(builder.edges)}")
    assert (START, "a") in builder.edges, _changed(f"edges holds {builder.edges!r}")
    assert isinstance(builder.waiting_edges, set), _changed("waiting_edges is not a set")
    assert (("a", "b"), "agent") in builder.waiting_edges, _changed(
        f"waiting_edges holds {builder.waiting_edges!r}, not ((start, ...), end) pairs"
    )
    assert isinstance(builder.branches, dict), _changed("branches is not a dict")
    specs = builder.branches.get("agent")
    assert isinstance(specs, dict) and len(specs) == 1, _changed(
        f"branches is not dict[source, dict[name, BranchSpec]]: {builder.branches!r}"
    )
    [spec] = specs.values()
    assert isinstance(spec, BranchSpec), _changed(f"a branch is a {type(spec)}")
    assert spec.ends == {"b": "b", "end": END}, _changed(f"a path map is stored as {spec.ends}")
    assert {"a", "b", "agent"} <= set(builder.nodes), _changed("nodes is not keyed by name")


# --- the behaviour: every way into the model node goes through the gate --------------------


class TraceState(MessagesState):
    trace: Annotated[list[str], operator.add]


def _visit(name: str, reply: bool = False) -> Any:
    def node(state: TraceState) -> dict[str, Any]:
        update: dict[str, Any] = {"trace": [name]}
        if reply:
            update["messages"] = [AIMessage(f"reply {len(state['trace'])}")]
        return update

    return node


def _with_agent(builder: StateGraph[Any, Any, Any, Any]) -> None:
    builder.add_node("agent", _visit("agent", reply=True))


def _edges_into(builder: StateGraph[Any, Any, Any, Any], target: str) -> set[str]:
    plain = {start for start, end in builder.edges if end == target}
    waiting = {"+".join(starts) for starts, end in builder.waiting_edges if end == target}
    return plain | waiting


def test_plain_edge_is_redirected() -> None:
    builder = StateGraph(TraceState)
    _with_agent(builder)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=8_000))
    assert _edges_into(builder, "agent") == set(), _changed("a plain edge kept its target")
    assert (START, GATE) in builder.edges, _changed("a plain edge was not moved to the gate")
    assert _ran_through_gate(builder)


def test_waiting_edge_is_redirected() -> None:
    builder = StateGraph(TraceState)
    builder.add_node("a", _visit("a"))
    builder.add_node("b", _visit("b"))
    _with_agent(builder)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=8_000))
    assert (("a", "b"), GATE) in builder.waiting_edges, _changed(
        "add_edge([a, b], model) was not moved to the gate"
    )
    assert _edges_into(builder, "agent") == set()
    assert _ran_through_gate(builder)


def test_conditional_edge_with_a_path_map_is_redirected() -> None:
    builder = StateGraph(TraceState)
    builder.add_node("a", _visit("a"))
    _with_agent(builder)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda state: "go", {"go": "agent", "end": END})
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=8_000))
    [spec] = builder.branches["a"].values()
    assert spec.ends == {"go": GATE, "end": END}, _changed(f"path map is now {spec.ends}")
    assert _ran_through_gate(builder)


def _to_agent(state: TraceState) -> Literal["agent"]:
    return "agent"


def _to_agent_list(state: TraceState) -> list[str]:
    return ["agent"]


def _to_agent_send(state: TraceState) -> list[Send]:
    return [Send("agent", state)]


@pytest.mark.parametrize("path", [_to_agent, _to_agent_list], ids=["name", "list"])
def test_conditional_edge_without_a_path_map_is_redirected(path: Any) -> None:
    builder = StateGraph(TraceState)
    builder.add_node("a", _visit("a"))
    _with_agent(builder)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", path)
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=8_000))
    assert _ran_through_gate(builder)


def test_send_to_the_model_node_bypasses_the_gate() -> None:
    """A ``Send("agent", ...)`` names its target in an object, not a node name: it is not
    redirected (documented in ``add_compaction``)."""
    builder = StateGraph(TraceState)
    builder.add_node("a", _visit("a"))
    _with_agent(builder)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", _to_agent_send)
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=8_000))
    assert not _ran_through_gate(builder)


def test_command_goto_bypasses_the_gate() -> None:
    """``Command(goto="agent")`` from a node is not an edge: it reaches the model directly."""

    def jump(state: TraceState) -> Command[Literal["agent"]]:
        return Command(goto="agent", update={"trace": ["jump"]})

    builder = StateGraph(TraceState)
    builder.add_node("jump", jump)
    _with_agent(builder)
    builder.add_edge(START, "jump")
    builder.add_edge("agent", END)
    add_compaction(builder, config=CompactionConfig(context_window=8_000))
    assert not _ran_through_gate(builder)


# --- helpers -------------------------------------------------------------------------------


def _ran_through_gate(builder: StateGraph[Any, Any, Any, Any]) -> bool:
    """Run the graph; True when the gate ran, and ran before every model call."""
    seen: list[str] = []
    graph = builder.compile()
    for chunk in graph.stream(
        {"messages": [HumanMessage("go")], "trace": []}, stream_mode="updates"
    ):
        seen.extend(chunk)
    assert "agent" in seen, f"the model node never ran: {seen}"
    return all(i > 0 and seen[i - 1] == GATE for i, name in enumerate(seen) if name == "agent")
