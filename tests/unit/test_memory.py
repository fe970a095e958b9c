"""Memory across threads (langchain_compact.memory): written after each compaction to a
store namespace per user, read back by one call that starts a new thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_compact import CompactionConfig, CompactionState, StoreArchive, add_compaction
from langchain_compact.compaction import compact_history
from langchain_compact.demo import ContextReadingPolicy
from langchain_compact.errors import ConfigError
from langchain_compact.markers import KIND_SUMMARY, kind_of
from langchain_compact.memory import (
    CompactionMemory,
    MemoryRecord,
    RunStore,
    continue_from_memory,
)
from tests import _memory as scenario


def test_stopped_thread_continues_from_in_memory_store() -> None:
    scenario.run_sync(InMemoryStore(), InMemorySaver())


async def test_stopped_thread_continues_from_in_memory_store_async() -> None:
    await scenario.run_async(InMemoryStore(), InMemorySaver())


def test_stopped_thread_continues_from_sqlite_store(tmp_path: Path) -> None:
    with (
        SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        store.setup()
        scenario.run_sync(store, saver)


async def test_stopped_thread_continues_from_sqlite_store_async(tmp_path: Path) -> None:
    # SqliteStore is sync-only: the async path runs its calls in a worker thread.
    with SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store:
        store.setup()
        await scenario.run_async(store, InMemorySaver())


def test_memory_survives_the_process_in_sqlite(tmp_path: Path) -> None:
    """Written by one store connection, read by a new one: the memory outlives the thread."""
    path = str(tmp_path / "store.db")
    with SqliteStore.from_conn_string(path) as store:
        store.setup()
        agent, _ = scenario.build(store, InMemorySaver())
        agent.invoke({"messages": [("user", scenario.TASK.prompt())]}, scenario.config("t1"))
    with SqliteStore.from_conn_string(path) as store:
        memory = CompactionMemory(store, namespace=("memory", "{user_id}"))
        record = memory.get(config=scenario.config("x"))
        assert record is not None and record.thread_id == "t1"
        seed = record.seed_messages()
        assert seed[0].text == scenario.TASK.prompt()
        assert "Memory from an earlier thread (t1)" in seed[1].text


def test_memory_is_per_user_not_per_thread() -> None:
    store = InMemoryStore()
    agent, memory = scenario.build(store, InMemorySaver())
    agent.invoke({"messages": [("user", scenario.TASK.prompt())]}, scenario.config("a1", "alice"))
    assert memory.get(config=scenario.config("zz", "bob")) is None
    assert store.search(("memory",)) and {i.namespace for i in store.search(("memory",))} == {
        ("memory", "alice")
    }
    with pytest.raises(ConfigError, match="no memory under \\('memory', 'bob'\\)"):
        continue_from_memory(agent, memory, config=scenario.config("b2", "bob"))


def test_add_compaction_user_graph_writes_memory_after_each_compaction() -> None:
    store = InMemoryStore()
    memory = CompactionMemory(store, namespace=("project", "demo"))
    from langgraph.prebuilt import ToolNode, tools_condition

    from langchain_compact.demo import DependentTask

    task = DependentTask(steps=40, payload_chars=1000)
    tools = task.tools()

    model = ContextReadingPolicy().bind_tools(tools)

    def agent(state: CompactionState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(
        builder,
        config=CompactionConfig(context_window=scenario.WINDOW, max_compactions=6),
        archive=StoreArchive(store),
        memory=memory,
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    out = graph.invoke({"messages": [("user", task.prompt())]}, scenario.config("p1"))
    assert task.check(out["messages"][-1].text).ok
    assert out["compaction_count"] >= 2
    record = memory.get()
    assert record is not None
    assert record.compaction_count == out["compaction_count"]
    # The summaries the history holds now (earlier ones may have been merged into one).
    assert len(record.summaries) == sum(kind_of(m) == KIND_SUMMARY for m in out["messages"])


def test_middleware_writes_memory() -> None:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    store = InMemoryStore()
    memory = CompactionMemory(store, namespace=("memory", "{user_id}"))
    middleware = CompactionMiddleware(
        config=CompactionConfig(context_window=scenario.WINDOW, max_compactions=1), memory=memory
    )
    agent = create_agent(
        model=ContextReadingPolicy(), tools=scenario.TASK.tools(), middleware=[middleware]
    )
    out = agent.invoke(
        {"messages": [("user", scenario.TASK.prompt())]}, scenario.config("m1", "carol")
    )
    assert out["compaction_count"] == 1
    record = memory.get(config=scenario.config("m2", "carol"))
    assert record is not None and record.thread_id == "m1"
    assert record.task["data"]["content"] == scenario.TASK.prompt()


def test_seeded_thread_counts_its_own_compactions_and_keeps_the_memory() -> None:
    """The memory is a boundary numbered 0: the new thread starts at count 0 and its own
    compaction keeps the memory verbatim in the head (then carries it into its own memory)."""
    history = [HumanMessage("Task: count to 9. Code QX-4821.", id="t")]
    history += [AIMessage(f"counted {i}", id=f"a{i}") for i in range(1, 9)]
    done = compact_history(history, config=CompactionConfig(keep_last_n=2))
    seed = MemoryRecord.from_messages(done.messages, thread_id="old").seed_messages()
    from langchain_compact import compaction_info

    assert compaction_info(seed).count == 0
    more = [*seed, *[AIMessage(f"counted again {i}", id=f"b{i}") for i in range(9)]]
    again = compact_history(more, config=CompactionConfig(keep_last_n=2))
    assert again.messages[:2] == seed
    carried = MemoryRecord.from_messages(again.messages, thread_id="new")
    assert carried.compaction_count == 1 and len(carried.summaries) == 2


def test_bad_settings_and_calls_say_what_to_fix() -> None:
    store = InMemoryStore()
    with pytest.raises(ConfigError, match="must not depend on \\{thread_id\\}"):
        CompactionMemory(store, namespace=("memory", "{thread_id}"))
    with pytest.raises(ConfigError, match="non-empty tuple"):
        CompactionMemory(store, namespace=())
    with pytest.raises(ConfigError, match="BaseStore"):
        CompactionMemory({}, namespace=("m",))  # type: ignore[arg-type]
    memory = CompactionMemory(store, namespace=("memory", "{user_id}"))
    with pytest.raises(ConfigError, match="needs 'user_id'"):
        memory.get(config={"configurable": {"thread_id": "t"}})
    with pytest.raises(ConfigError, match=r"contain no '\.'"):
        memory.get(config={"configurable": {"user_id": "a.b"}})
    with pytest.raises(ConfigError, match="not a compaction memory record"):
        MemoryRecord.from_value({"task": {}})
    with pytest.raises(ConfigError, match="no summary"):
        MemoryRecord.from_messages([HumanMessage("task")], thread_id="t")
    agent, memory = scenario.build(store, InMemorySaver())
    agent.invoke({"messages": [("user", scenario.TASK.prompt())]}, scenario.config("t1"))
    with pytest.raises(ConfigError, match="new thread's id"):
        continue_from_memory(agent, memory, config={"configurable": {"user_id": "alice"}})
    with pytest.raises(ConfigError, match="continue in a NEW thread"):
        continue_from_memory(agent, memory, config=scenario.config("t1"))


def test_run_store_outside_a_run_says_to_pass_a_store() -> None:
    with pytest.raises(ConfigError, match="store of the running graph"):
        RunStore().get(("a",), "b")
    memory = CompactionMemory(namespace=("m",))  # the run's store
    agent, _ = scenario.build(InMemoryStore(), InMemorySaver())
    agent.store = None
    with pytest.raises(ConfigError, match="graph has none"):
        continue_from_memory(agent, memory, config=scenario.config("t9"))


async def test_continue_on_server_without_memory_says_where_it_looked() -> None:
    from types import SimpleNamespace

    from langchain_compact.memory import acontinue_on_server

    class Missing(Exception):
        response = SimpleNamespace(status_code=404)

    class Store:
        async def get_item(self, namespace: list[str], key: str) -> Any:
            raise Missing

    client = SimpleNamespace(store=Store())
    with pytest.raises(ConfigError, match="no memory under \\('memory', 'zoe'\\)/'latest'"):
        await acontinue_on_server(client, "agent", namespace=("memory", "zoe"))
