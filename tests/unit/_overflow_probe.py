"""The async paths of the overflow retry and of compaction on demand under blockbuster, in a
fresh process with an empty tiktoken cache (run by test_overflow_async.py).

Usage: python tests/unit/_overflow_probe.py ARCHIVE_DIR
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _async_probe import Probe, forget_tokenizers, run
from test_compact_on_demand import _history
from test_overflow_retry import TURNS, EnforcingModel, _config, fetch

from langchain_compact import CompactionConfig, ExtractiveSummarizer, JsonlArchive
from langchain_compact.core import Compactor

START = {"messages": [("user", "Task: fetch every step")]}


def middleware(directory: str) -> Probe:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    model = EnforcingModel()
    mw = CompactionMiddleware(config=_config(), archive=JsonlArchive(directory))
    agent = create_agent(model=model, tools=[fetch], middleware=[mw])

    async def probe() -> str:
        out = await agent.ainvoke(START, {"recursion_limit": 200})
        assert out["messages"][-1].content == f"done after {TURNS} steps"
        assert model.refusals == 1
        return f"refusals={model.refusals}"

    return probe


def graph(directory: str) -> Probe:
    from langchain_compact.graph import create_compacting_agent

    model = EnforcingModel()
    agent = create_compacting_agent(
        model,
        [fetch],
        config=_config(),
        archive=JsonlArchive(directory),
        compact_tool=True,
        summarizer=ExtractiveSummarizer(),
    )

    async def probe() -> str:
        out = await agent.ainvoke(START, {"recursion_limit": 300})
        assert out["messages"][-1].content == f"done after {TURNS} steps"
        assert model.refusals == 1
        return f"refusals={model.refusals}"

    return probe


def lcel(directory: str) -> Probe:
    from langchain_compact.lcel import MessageCompactor

    model = EnforcingModel()
    compactor = MessageCompactor(config=_config(), archive=JsonlArchive(directory))
    chain = compactor.wrap(model)

    async def probe() -> str:
        history = list(_history())[:1]
        for _ in range(TURNS + 1):
            reply = await chain.ainvoke(history)
            history.append(reply)
            for call in reply.tool_calls:
                history.append(await fetch.ainvoke({**call, "type": "tool_call"}))
            if not reply.tool_calls:
                break
        assert model.refusals == 1
        out = await compactor.acompact_now(history, focus="RESULT")
        return f"refusals={model.refusals} on-demand={len(out)}"

    return probe


def on_demand(directory: str) -> Probe:
    core = Compactor(
        config=CompactionConfig(context_window=50_000, keep_last_n=2),
        archive=JsonlArchive(directory),
    )

    async def probe() -> str:
        turn = await core.acompact_now(_history(), "t", focus="vault")
        assert turn.outcome == "compacted"
        refused = await core.aoverflow(turn.messages, "t", write_stop=False)
        return f"{turn.outcome}, then {refused.outcome}"

    return probe


if __name__ == "__main__":
    root = sys.argv[1]
    builders: list[tuple[str, Callable[[], Probe]]] = [
        ("middleware", lambda: middleware(f"{root}/m")),
        ("graph", lambda: graph(f"{root}/g")),
        ("lcel", lambda: lcel(f"{root}/l")),
        ("on_demand", lambda: on_demand(f"{root}/o")),
    ]
    for name, build in builders:
        forget_tokenizers()
        asyncio.run(run(name, build(), "package"))
