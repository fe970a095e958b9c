"""Plumbing tests: LangGraph's Postgres checkpointer and store against a real PostgreSQL.

Needs ``LC_POSTGRES_URI``: ``eval "$(bash .ci/postgres.sh)"``. Without it the fixtures FAIL.
Every test gets its own schema (see ``postgres_uri`` in conftest.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

pytestmark = pytest.mark.postgres


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _echo_graph() -> StateGraph[Any]:
    """START -> agent -> END; the agent answers from its context and logs each turn to the store."""

    def agent(state: MessagesState, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
        humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        turn = len(humans)
        reply = AIMessage(f"turn {turn}: you said {humans[-1].content!r}; history={len(humans)}")
        if runtime.store is not None:
            thread_id = config["configurable"]["thread_id"]
            runtime.store.put(("turns", thread_id), f"turn-{turn}", {"reply": reply.content})
        return {"messages": [reply]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


def _async_echo_graph() -> StateGraph[Any]:
    async def agent(
        state: MessagesState, config: RunnableConfig, runtime: Runtime
    ) -> dict[str, Any]:
        humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        turn = len(humans)
        reply = AIMessage(f"turn {turn}: you said {humans[-1].content!r}; history={len(humans)}")
        if runtime.store is not None:
            thread_id = config["configurable"]["thread_id"]
            await runtime.store.aput(("turns", thread_id), f"turn-{turn}", {"reply": reply.content})
        return {"messages": [reply]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


def test_tables_live_in_the_per_test_schema(postgres_saver: Any, postgres_store: Any) -> None:
    with postgres_saver.conn.cursor() as cur:
        cur.execute("SELECT current_schema() AS s")
        schema = cur.fetchone()["s"]
        cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        )
        tables = {row["table_name"] for row in cur.fetchall()}
    assert schema.startswith("lc_test_")
    assert {"checkpoints", "checkpoint_writes", "checkpoint_blobs", "store"} <= tables


def test_two_turns_then_resume_on_a_new_connection(
    postgres_uri: str, postgres_saver: Any, postgres_store: Any
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    thread = f"t-{uuid.uuid4().hex}"
    graph = _echo_graph().compile(checkpointer=postgres_saver, store=postgres_store)
    graph.invoke({"messages": [HumanMessage("first: order #4711")]}, _config(thread))
    out = graph.invoke({"messages": [HumanMessage("second")]}, _config(thread))
    assert [m.type for m in out["messages"]] == ["human", "ai", "human", "ai"]
    assert out["messages"][-1].content.startswith("turn 2:")

    # A different process would see exactly this: fresh connections, fresh graph, same thread.
    with (
        PostgresSaver.from_conn_string(postgres_uri) as saver2,
        PostgresStore.from_conn_string(postgres_uri) as store2,
    ):
        graph2 = _echo_graph().compile(checkpointer=saver2, store=store2)
        state = graph2.get_state(_config(thread))
        assert state.values["messages"][0].content == "first: order #4711"
        assert len(state.values["messages"]) == 4
        out3 = graph2.invoke({"messages": [HumanMessage("third")]}, _config(thread))
        assert len(out3["messages"]) == 6
        assert out3["messages"][-1].content.startswith("turn 3:")
        # Message ids survive the round trip (needed for replace-by-id in microcompaction).
        assert [m.id for m in out3["messages"][:4]] == [m.id for m in out["messages"]]

        turns = store2.search(("turns", thread))
        assert sorted(item.key for item in turns) == ["turn-1", "turn-2", "turn-3"]

        # Another thread id starts empty.
        assert graph2.get_state(_config("other-thread")).values == {}
        history = list(graph2.get_state_history(_config(thread)))
        assert len(history) >= 3


def test_resume_after_a_crash_reruns_only_the_failed_node(
    postgres_saver: Any,
) -> None:
    """A node that raises leaves the earlier node's write checkpointed; invoke(None) resumes."""
    calls = {"prepare": 0, "flaky": 0}

    def prepare(state: MessagesState) -> dict[str, Any]:
        calls["prepare"] += 1
        return {"messages": [AIMessage("prepared")]}

    def flaky(state: MessagesState) -> dict[str, Any]:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise RuntimeError("simulated crash")
        return {"messages": [AIMessage("done")]}

    builder = StateGraph(MessagesState)
    builder.add_node("prepare", prepare)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "flaky")
    builder.add_edge("flaky", END)
    graph = builder.compile(checkpointer=postgres_saver)
    config = _config(f"t-{uuid.uuid4().hex}")

    with pytest.raises(RuntimeError, match="simulated crash"):
        graph.invoke({"messages": [HumanMessage("go")]}, config)
    assert graph.get_state(config).next == ("flaky",)

    out = graph.invoke(None, config)
    assert [m.content for m in out["messages"]] == ["go", "prepared", "done"]
    assert calls == {"prepare": 1, "flaky": 2}


def test_store_put_get_search_delete(postgres_store: Any) -> None:
    ns = ("archive", "thread-ü", "transcripts")
    value = {"text": "上下文压缩 / context compaction", "n": 3, "nested": {"ids": ["call_1"]}}
    postgres_store.put(ns, "a", value)
    postgres_store.put(ns, "b", {"text": "other"})
    assert postgres_store.get(ns, "a").value == value
    assert {i.key for i in postgres_store.search(("archive", "thread-ü"))} == {"a", "b"}
    assert [i.key for i in postgres_store.search(ns, filter={"n": 3})] == ["a"]
    assert postgres_store.list_namespaces(prefix=("archive",)) == [ns]
    postgres_store.delete(ns, "a")
    assert postgres_store.get(ns, "a") is None


async def test_async_two_turns_then_resume(
    postgres_uri: str, async_postgres_saver: Any, async_postgres_store: Any
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore

    thread = f"t-{uuid.uuid4().hex}"
    graph = _async_echo_graph().compile(
        checkpointer=async_postgres_saver, store=async_postgres_store
    )
    await graph.ainvoke({"messages": [HumanMessage("one")]}, _config(thread))
    out = await graph.ainvoke({"messages": [HumanMessage("two")]}, _config(thread))
    assert len(out["messages"]) == 4

    async with (
        AsyncPostgresSaver.from_conn_string(postgres_uri) as saver2,
        AsyncPostgresStore.from_conn_string(postgres_uri) as store2,
    ):
        graph2 = _async_echo_graph().compile(checkpointer=saver2, store=store2)
        state = await graph2.aget_state(_config(thread))
        assert [m.content for m in state.values["messages"]][::2] == ["one", "two"]
        out3 = await graph2.ainvoke({"messages": [HumanMessage("three")]}, _config(thread))
        assert out3["messages"][-1].content.startswith("turn 3:")
        items = await store2.asearch(("turns", thread))
        assert sorted(i.key for i in items) == ["turn-1", "turn-2", "turn-3"]
