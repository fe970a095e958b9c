"""Run every async path of the package under blockbuster, in a fresh process whose tiktoken
cache directory is empty (run by test_async_no_blocking.py; prints one line per path).

Everything is built first, outside the event loop (a constructor may read files: the
server builds its graphs in a worker thread); only the async calls run on the loop, with
blockbuster raising on any blocking call made from this package's code.

Usage: python tests/unit/_async_probe.py ARCHIVE_DIR [package|all]
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from blockbuster import BlockBuster
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

import langchain_compact
from langchain_compact import (
    CompactionConfig,
    CompactionMemory,
    ExtractiveSummarizer,
    JsonlArchive,
    StoreArchive,
    create_compacting_agent,
    make_recall_tool,
)
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.tokens import TiktokenCounter

WINDOW = 4000
Probe = Callable[[], Awaitable[str]]


def history(rounds: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Task: read every file and report.", id="task")]
    for i in range(rounds):
        call = {"name": "read_file", "args": {"path": f"f{i}.py"}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(ToolMessage(f"line {i} of file {i}\n" * 60, tool_call_id=f"c{i}", id=f"t{i}"))
    return out


def run_config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "ann"}, "recursion_limit": 300}


def graph(directory: str) -> Probe:
    task = DependentTask(steps=16, payload_chars=1000, seed=3)
    memory = CompactionMemory(InMemoryStore(), namespace=("memory", "{user_id}"))
    agent = create_compacting_agent(
        ContextReadingPolicy(),
        task.tools(),
        config=CompactionConfig(context_window=WINDOW, prepare=True),
        archive=JsonlArchive(directory),
        memory=memory,
        counter=TiktokenCounter("gpt-4o"),
        checkpointer=InMemorySaver(),
        summarizer=ExtractiveSummarizer(),
    )

    async def probe() -> str:
        out = await agent.ainvoke({"messages": [("user", task.prompt())]}, run_config("g"))
        assert task.check(out["messages"][-1].text).ok and out["compaction_count"] >= 1
        assert await memory.aget(config=run_config("g")) is not None
        return f"compactions={out['compaction_count']}"

    return probe


def middleware(directory: str) -> Probe:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    task = DependentTask(steps=24, payload_chars=1000, seed=4)
    agent = create_agent(
        model=ContextReadingPolicy(),
        tools=task.tools(),
        middleware=[
            CompactionMiddleware(
                config=CompactionConfig(context_window=WINDOW, prepare=True),
                archive=JsonlArchive(directory),
                counter=TiktokenCounter("gpt-4o"),
                tools=task.tools(),
            )
        ],
        checkpointer=InMemorySaver(),
    )

    async def probe() -> str:
        out = await agent.ainvoke({"messages": [("user", task.prompt())]}, run_config("m"))
        assert task.check(out["messages"][-1].text).ok and out.get("compaction_count", 0) >= 1
        return f"compactions={out['compaction_count']}"

    return probe


def lcel(directory: str) -> Probe:
    chain = langchain_compact.compact_messages(
        config=CompactionConfig(context_window=WINDOW), archive=JsonlArchive(directory)
    )

    async def probe() -> str:
        out = await chain.ainvoke(history(30), run_config("l"))
        assert len(out) < 61
        return f"messages={len(out)}"

    return probe


def archives(directory: str) -> Probe:
    stores = (JsonlArchive(directory), StoreArchive(InMemoryStore()))
    tools = [make_recall_tool(archive) for archive in stores]

    async def probe() -> str:
        found = 0
        for archive, recall in zip(stores, tools, strict=True):
            ref = await archive.awrite(history(2), thread_id="a", reason="probe")
            assert len(await archive.aread(ref, thread_id="a")) == 5
            found += len(await archive.asearch(thread_id="a", query="file"))
            assert "file" in str(await recall.ainvoke({"query": "file"}, run_config("a")))
        return f"hits={found}"

    return probe


def memory() -> Probe:
    memory = CompactionMemory(InMemoryStore(), namespace=("memory", "{user_id}"))
    chain = langchain_compact.compact_messages(config=CompactionConfig(context_window=WINDOW))

    async def probe() -> str:
        compacted = await chain.ainvoke(history(30), run_config("x"))
        await memory.aremember(compacted, config=run_config("x"))
        assert await memory.aget(config=run_config("x")) is not None
        return "remembered"

    return probe


def forget_tokenizers() -> None:
    """As in a fresh process: no encoding loaded, an empty tiktoken cache directory."""
    import tiktoken.registry

    from langchain_compact import tokens

    tiktoken.registry.ENCODINGS.clear()
    tokens._precise.clear()
    cache = Path(os.environ["TIKTOKEN_CACHE_DIR"])
    for path in cache.iterdir():
        path.unlink()


async def run(name: str, probe: Probe, scope: str) -> None:
    blockbuster = BlockBuster(None if scope == "all" else ["langchain_compact"])
    blockbuster.activate()
    try:
        print(name, "ok", await probe(), flush=True)
    except Exception as exc:
        print(name, "FAILED", type(exc).__name__, str(exc).splitlines()[0], flush=True)
        frames = traceback.extract_tb(exc.__traceback__)
        where = [f"{f.filename}:{f.lineno} {f.name}" for f in frames[-22:]]
        print("    " + "\n    ".join(where), flush=True)
    finally:
        blockbuster.deactivate()


if __name__ == "__main__":
    root, scope = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "package")
    builders: list[tuple[str, Callable[[], Probe]]] = [
        ("graph", lambda: graph(f"{root}/g")),
        ("middleware", lambda: middleware(f"{root}/m")),
        ("lcel", lambda: lcel(f"{root}/l")),
        ("archives", lambda: archives(f"{root}/a")),
        ("memory", memory),
    ]
    for name, build in builders:
        forget_tokenizers()
        asyncio.run(run(name, build(), scope))
