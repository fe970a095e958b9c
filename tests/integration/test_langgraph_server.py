"""The compacting agent served by ``langgraph dev`` and driven only through ``langgraph_sdk``.

The server (``examples/server`` plus ``_server_graphs.py``) is started once per module on a
free loopback port by ``bench/_langgraph_dev.py`` (readiness on ``/ok``, stopped by process
group at the end). Offline: the scripted demo model and the demo task's tool. The last test
(marked ``server``) serves the same agent over the real llama.cpp server through ChatOpenAI.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import langgraph_sdk
import pytest
from langchain_core.messages import convert_to_messages

from bench._langgraph_dev import EXAMPLE_MODULE, DevServer, langgraph_dev
from langchain_compact import compaction_info
from langchain_compact._archive_records import thread_key
from langchain_compact.demo import DependentTask
from langchain_compact.history import validate_history
from langchain_compact.markers import EVENT_KEY
from langchain_compact.memory import MemoryRecord, acontinue_on_server

pytestmark = [pytest.mark.langgraph_server, pytest.mark.timeout(600)]

TEST_GRAPHS = Path(__file__).with_name("_server_graphs.py")
STEPS = 30  # 30 steps of 1000-character logs in a 3000-token window: 2 compactions
THREADS = 50
CONCURRENCY = 10


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    # An empty tiktoken cache, as on a newcomer's machine: the server fills it off its loop.
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path_factory.mktemp("tiktoken"))}
    graphs = {
        "agent": f"{EXAMPLE_MODULE}:agent",
        "user_graph": f"{EXAMPLE_MODULE}:user_graph",
        "recall_agent": f"{TEST_GRAPHS}:recall_agent",
        "limited_agent": f"{TEST_GRAPHS}:limited_agent",
    }
    with langgraph_dev(graphs, env=env, jobs=CONCURRENCY) as server:
        yield server


@pytest.fixture
async def sdk(dev_server: DevServer) -> AsyncIterator[Any]:
    """A ``langgraph_sdk`` client of the module's server (closed after the test)."""
    async with langgraph_sdk.get_client(url=dev_server.url) as client:
        yield client


def task_for(seed: int, steps: int = STEPS) -> DependentTask:
    return DependentTask(steps=steps, payload_chars=1000, seed=seed)


def run_config(seed: int, user: str, steps: int = STEPS) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "demo_seed": seed, "demo_steps": steps}}


def kinds(messages: list[dict[str, Any]]) -> list[str | None]:
    return [((m.get("response_metadata") or {}).get(EVENT_KEY) or {}).get("kind") for m in messages]


@pytest.mark.parametrize("graph", ["agent", "user_graph"])
async def test_compacting_run_streams_events_and_state_survives_json(sdk: Any, graph: str) -> None:
    task = task_for(seed=101)
    thread = await sdk.threads.create()
    events = [
        chunk.data[EVENT_KEY]
        async for chunk in sdk.runs.stream(
            thread["thread_id"],
            graph,
            input={"messages": [{"role": "user", "content": task.prompt()}]},
            config=run_config(101, "erin"),
            stream_mode="custom",
        )
        if chunk.event == "custom"
    ]
    compactions = [e for e in events if e["event"] == "compaction"]
    n = len(compactions)
    assert n >= 2 and [e["index"] for e in compactions] == list(range(1, n + 1))
    assert all(e["tokens_after"] <= e["tokens_before"] + 200 for e in compactions)
    assert any(e["event"] == "micro_compaction" for e in events)

    state = (await sdk.threads.get_state(thread["thread_id"]))["values"]
    json.dumps(state)  # plain JSON all the way
    messages = state["messages"]
    assert task.check(messages[-1]["content"]).ok
    assert state["compaction_count"] == n and state["transition"] in (
        "continue",
        "compacted",
        "micro_compacted",
    )
    assert state["last_compaction"]["index"] == n
    marks = kinds(messages)
    assert marks[0] == "pinned_task" and messages[0]["content"] == task.prompt()
    assert marks.count("summary") >= 1  # one per compaction, the oldest merged at the budget
    restored = convert_to_messages(messages)  # the markers survive the round trip
    assert compaction_info(restored).count == n
    # Memory in the server's store, per user, with the pinned task.
    item = await sdk.store.get_item(["memory", "erin"], "latest")
    record = MemoryRecord.from_value(item["value"])
    assert record.thread_id == thread["thread_id"] and record.compaction_count == n
    assert record.task["data"]["content"] == task.prompt()


@pytest.mark.parametrize("graph", ["agent", "user_graph"])
async def test_a_broken_tool_pairing_sent_to_the_server_is_repaired(sdk: Any, graph: str) -> None:
    """An orphan result and an unanswered call in a run's input reach the model repaired
    (docs/design.md, B2): the event names each change and the thread's checkpoint holds a
    valid history. Before the one policy, the server passed them to the model as they were."""
    task = task_for(seed=7, steps=3)
    call = {"name": "run_step", "args": {"step": 1, "previous": 0}, "id": "lost"}
    broken = [
        {"role": "user", "content": task.prompt()},
        {"role": "tool", "content": "stray output", "tool_call_id": "nobody"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "user", "content": "go on"},
    ]
    thread = await sdk.threads.create()
    events = [
        chunk.data[EVENT_KEY]
        async for chunk in sdk.runs.stream(
            thread["thread_id"],
            graph,
            input={"messages": broken},
            config=run_config(7, "rita", steps=3),
            stream_mode="custom",
        )
        if chunk.event == "custom"
    ]
    (repaired,) = [e for e in events if e["event"] == "history_repaired"]
    assert [c["action"] for c in repaired["changes"]] == ["dropped", "closed"]
    state = (await sdk.threads.get_state(thread["thread_id"]))["values"]
    messages = convert_to_messages(state["messages"])
    validate_history(messages)
    assert "stray output" not in [m.text for m in messages]
    assert task.check(messages[-1].text).ok


async def test_recall_reads_the_server_store_only_for_its_own_thread(sdk: Any) -> None:
    mine, other = task_for(seed=201), task_for(seed=202)
    threads = {}
    for seed, task in ((201, mine), (202, other)):
        thread = await sdk.threads.create()
        out = await sdk.runs.wait(
            thread["thread_id"],
            "recall_agent",
            input={"messages": [{"role": "user", "content": task.prompt()}]},
            config=run_config(seed, f"recall-{seed}"),
        )
        assert task.check(out["messages"][-1]["content"]).ok
        threads[seed] = thread["thread_id"]
    # A tool result of thread 201 that is no longer in its context: cleared to a
    # placeholder, or folded into a summary (then absent from the final state).
    state = (await sdk.threads.get_state(threads[201]))["values"]
    marks = kinds(state["messages"])
    cleared = [m for m, k in zip(state["messages"], marks, strict=True) if k == "cleared"]
    present = {m.get("tool_call_id") for m in state["messages"] if m.get("type") == "tool"}
    earlier = await sdk.threads.get_history(threads[201], limit=500)
    folded = [
        m
        for h in earlier
        for m in h["values"].get("messages", [])
        if m.get("type") == "tool" and m.get("tool_call_id") not in present
    ]
    call_id = (cleared or folded)[0]["tool_call_id"]
    step = int(call_id.split("_")[2])
    previous = ([mine.starting_value, *mine.expected_values()])[step - 1]
    original = mine.tools()[0].invoke({"step": step, "previous": previous})
    assert original not in json.dumps(state["messages"], ensure_ascii=False)

    out = await sdk.runs.wait(
        threads[201], "recall_agent", input={"messages": [{"role": "user",
        "content": f"RECALL {call_id}"}]}, config=run_config(201, "recall-201"),
    )  # fmt: skip
    answer = out["messages"][-1]["content"]
    assert f"tool_call_id={call_id}" in answer
    assert original.splitlines()[-1] in answer  # RESULT step=K value=V
    assert original[:300] in answer

    out = await sdk.runs.wait(
        threads[202], "recall_agent", input={"messages": [{"role": "user",
        "content": f"RECALL {call_id}"}]}, config=run_config(202, "recall-202"),
    )  # fmt: skip
    answer = out["messages"][-1]["content"]
    assert answer.startswith("No archived message in this conversation matches")
    assert original.splitlines()[-1] not in answer


async def test_stopped_thread_continues_on_server_from_memory(sdk: Any) -> None:
    task = task_for(seed=301)
    thread = await sdk.threads.create()
    first = await sdk.runs.wait(
        thread["thread_id"],
        "limited_agent",
        input={"messages": [{"role": "user", "content": task.prompt()}]},
        config=run_config(301, "dave"),
    )
    assert "max_compactions=1" in first["stop_reason"]
    assert "continue_from_memory" in first["messages"][-1]["content"]
    new_thread, second = await acontinue_on_server(
        sdk, "limited_agent", namespace=("memory", "dave"), config=run_config(301, "dave")
    )
    assert new_thread != thread["thread_id"]
    assert task.check(second["messages"][-1]["content"]).ok
    first_call = next(m for m in second["messages"] if m["type"] == "ai" and m["tool_calls"])
    assert first_call["tool_calls"][0]["args"]["step"] > 1  # resumed, not restarted


async def test_fifty_threads_concurrently_finish_without_leaks(sdk: Any) -> None:
    tasks = {seed: task_for(seed) for seed in range(1000, 1000 + THREADS)}
    assert len({t.code for t in tasks.values()}) == THREADS  # distinguishable tasks
    gate = asyncio.Semaphore(CONCURRENCY)

    async def run(seed: int) -> tuple[int, str, dict[str, Any]]:
        async with gate:
            thread = await sdk.threads.create()
            out = await sdk.runs.wait(
                thread["thread_id"],
                "agent",
                input={"messages": [{"role": "user", "content": tasks[seed].prompt()}]},
                config=run_config(seed, f"user-{seed}"),
            )
            return seed, thread["thread_id"], out

    results = await asyncio.gather(*(run(seed) for seed in tasks))
    for seed, thread_id, out in results:
        task = tasks[seed]
        assert task.check(out["messages"][-1]["content"]).ok, (seed, thread_id)
        assert out["compaction_count"] >= 2
        state = json.dumps((await sdk.threads.get_state(thread_id))["values"])
        namespace = ["langchain_compact", "archive", thread_key(thread_id)]
        items = (await sdk.store.search_items(namespace, limit=1000))["items"]
        assert items and {item["value"]["thread_id"] for item in items} == {thread_id}
        archive = json.dumps(items)
        memory = json.dumps(await sdk.store.get_item(["memory", f"user-{seed}"], "latest"))
        assert task.code in state and f"Starting value: {task.starting_value}" in memory
        assert f"RESULT step=1 value={task.expected_values()[0]}" in archive
        for other in (t for s, t in tasks.items() if s != seed):
            for text, where in ((state, "state"), (archive, "archive"), (memory, "memory")):
                assert other.code not in text, (seed, where, other.code)
                assert f"Starting value: {other.starting_value}" not in text, (seed, where)


# --------------------------------------------------------------------------------------------
# The same agent on the real llama.cpp server (ChatOpenAI), served by langgraph dev
# --------------------------------------------------------------------------------------------

REAL_WINDOW = 2000  # small: prompt evaluation runs at tens of tokens/s on 2 busy cores
REAL_TURNS = 6


@pytest.fixture(scope="module")
def real_dev_server(llama_server: Any) -> Iterator[DevServer]:
    env = {
        "LC_BASE_URL": llama_server.base_url,
        "LC_MODEL": llama_server.model,
        "LC_CHAT_CLASS": "bench._llama:LlamaCppChatOpenAI",
        "LC_MAX_TOKENS": "32",
        "LC_CONTEXT_WINDOW": str(REAL_WINDOW),
    }
    with langgraph_dev({"agent": f"{EXAMPLE_MODULE}:agent"}, env=env, jobs=2) as server:
        yield server


@pytest.mark.server
async def test_real_model_agent_compacts_on_the_langgraph_server(
    real_dev_server: DevServer, llama_server: Any
) -> None:
    """A chat of long user turns on one thread, each turn a run through the server: the
    model answers (ChatOpenAI against llama.cpp), the context crosses the trigger, the run
    compacts and streams the event, and the state keeps the pinned first turn."""
    logs = DependentTask(steps=REAL_TURNS, payload_chars=400, seed=5)
    turns = [
        f"Build log {k}:\n{logs.tools()[0].invoke({'step': k, 'previous': k})}\n"
        "Reply with one short sentence about this log."
        for k in range(1, REAL_TURNS + 1)
    ]
    events: list[dict[str, Any]] = []
    async with langgraph_sdk.get_client(url=real_dev_server.url, timeout=600) as sdk:
        thread = await sdk.threads.create()
        for text in turns:
            async for chunk in sdk.runs.stream(
                thread["thread_id"],
                "agent",
                input={"messages": [{"role": "user", "content": text}]},
                config={"configurable": {"user_id": "real"}},
                stream_mode="custom",
            ):
                if chunk.event == "custom":
                    events.append(chunk.data[EVENT_KEY])
                assert chunk.event != "error", (chunk.data, real_dev_server.log_tail())
        state = (await sdk.threads.get_state(thread["thread_id"]))["values"]
        memory = await sdk.store.get_item(["memory", "real"], "latest")
    assert state["transition"] != "stopped", state.get("stop_reason")
    answers = [m for m in state["messages"] if m["type"] == "ai"]
    assert answers and all(m["response_metadata"].get("model_name") for m in answers)
    assert all((m.get("usage_metadata") or {}).get("input_tokens") for m in answers)
    assert [e["index"] for e in events if e["event"] == "compaction"][:1] == [1]
    assert state["compaction_count"] >= 1
    marks = kinds(state["messages"])
    assert marks[0] == "pinned_task" and state["messages"][0]["content"] == turns[0]
    assert "summary" in marks
    assert MemoryRecord.from_value(memory["value"]).task["data"]["content"] == turns[0]
