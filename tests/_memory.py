"""The memory-across-threads scenario, shared by the unit tier (in-memory and SQLite stores)
and the PostgreSQL tier: a thread stopped by ``max_compactions=1`` continues in a new thread
from store memory with one call, and finishes the demo's dependent task."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    StoreArchive,
    create_compacting_agent,
)
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.memory import (
    CompactionMemory,
    MemoryRecord,
    acontinue_from_memory,
    continue_from_memory,
)

#: 30 steps of 1000-character logs in a 4000-token window: one compaction is not enough.
TASK = DependentTask(steps=30, payload_chars=1000)
WINDOW = 4000


def first_step(messages: list[BaseMessage]) -> tuple[int, int]:
    """``(step, previous)`` of the first ``run_step`` call in ``messages``."""
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == "run_step":
                    return int(call["args"]["step"]), int(call["args"]["previous"])
    raise AssertionError("no run_step call")


def build(store: BaseStore, checkpointer: BaseCheckpointSaver[Any]) -> tuple[Any, CompactionMemory]:
    memory = CompactionMemory(store, namespace=("memory", "{user_id}"))
    agent = create_compacting_agent(
        ContextReadingPolicy(),
        TASK.tools(),
        config=CompactionConfig(context_window=WINDOW, max_compactions=1),
        archive=StoreArchive(store),
        checkpointer=checkpointer,
        store=store,
        memory=memory,
        summarizer=ExtractiveSummarizer(),
    )
    return agent, memory


def config(thread_id: str, user_id: str = "alice") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "user_id": user_id}}


def check_stopped(out: dict[str, Any], record: MemoryRecord | None) -> None:
    """Thread 1 stopped at the limit, said how to continue, and left its memory."""
    assert out["transition"] == "stopped", out.get("stop_reason")
    assert "max_compactions=1" in out["stop_reason"]
    assert not TASK.check(out["messages"][-1].text).ok
    assert "continue_from_memory(graph, memory" in out["messages"][-1].text
    assert record is not None
    assert record.thread_id == "t1" and record.compaction_count == 1
    assert record.task["data"]["content"] == TASK.prompt()
    assert len(record.summaries) == 1


def check_continued(out: dict[str, Any]) -> None:
    """Thread 2 resumed after thread 1's summary (not from step 1), with the right value
    read from the memory, and finished the task."""
    verdict = TASK.check(out["messages"][-1].text)
    assert verdict.ok, verdict.reason
    step, previous = first_step(out["messages"])
    assert step > 1
    assert previous == TASK.expected_values()[step - 2]


def run_sync(store: BaseStore, checkpointer: BaseCheckpointSaver[Any]) -> None:
    agent, memory = build(store, checkpointer)
    first = agent.invoke({"messages": [("user", TASK.prompt())]}, config("t1"))
    check_stopped(first, memory.get(config=config("any-thread")))
    second = continue_from_memory(agent, memory, config=config("t2"))
    check_continued(second)
    # The old thread is untouched, and the new one wrote its own memory when it compacted.
    assert agent.get_state(config("t1")).values["transition"] == "stopped"
    if second.get("compaction_count"):
        record = memory.get(config=config("t2"))
        assert record is not None and record.thread_id == "t2"


async def run_async(store: BaseStore, checkpointer: BaseCheckpointSaver[Any]) -> None:
    agent, memory = build(store, checkpointer)
    first = await agent.ainvoke({"messages": [("user", TASK.prompt())]}, config("t1"))
    check_stopped(first, await memory.aget(config=config("any-thread")))
    second = await acontinue_from_memory(agent, memory, config=config("t2"))
    check_continued(second)
    assert (await agent.aget_state(config("t1"))).values["transition"] == "stopped"
