"""50 concurrent threads of the compacting agent: through ``langgraph dev`` vs in-process.

Each thread runs its own demo task (``DependentTask``, 30 steps of 1000-character logs, its
own seed) on the example agent (``examples/server/compacting_graphs.py``: the scripted demo
model, a 3000-token window, archive and memory in the store), compacting twice. The same 50
threads run twice, with the same concurrency bound (10 at a time):

* ``server``: ``langgraph dev`` on a loopback port, driven with ``langgraph_sdk``
  (``threads.create`` + ``runs.wait`` per thread);
* ``in_process``: the same graph builder compiled with ``InMemorySaver`` and
  ``InMemoryStore``, ``ainvoke`` per thread.

Per mode: wall time, throughput (threads/s), p50/p95/max run time, tasks finished; and the
ratios server / in-process. Run: ``python bench/server_threads.py [--threads N]
[--concurrency C]`` (needs the ``serve`` extra; ~2 min on 2 busy cores). Writes
``bench/results/server_threads.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # python bench/server_threads.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._langgraph_dev import EXAMPLE_DIR, EXAMPLE_MODULE, langgraph_dev
from langchain_compact.demo import DependentTask

RESULTS = Path(__file__).resolve().parent / "results" / "server_threads.json"
STEPS, PAYLOAD = 30, 1000


def _task(seed: int) -> DependentTask:
    return DependentTask(steps=STEPS, payload_chars=PAYLOAD, seed=seed)


def _config(seed: int) -> dict[str, Any]:
    return {"configurable": {"user_id": f"user-{seed}", "demo_seed": seed, "demo_steps": STEPS}}


def _stats(wall: float, times: list[float], ok: int, compactions: list[int]) -> dict[str, Any]:
    ordered = sorted(times)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return {
        "threads": len(times),
        "finished_ok": ok,
        "wall_s": round(wall, 3),
        "throughput_threads_per_s": round(len(times) / wall, 3),
        "run_s_p50": round(statistics.median(ordered), 3),
        "run_s_p95": round(p95, 3),
        "run_s_max": round(ordered[-1], 3),
        "compactions_min": min(compactions),
    }


def _summary(wall: float, results: list[tuple[float, bool, int]]) -> dict[str, Any]:
    times, oks, compactions = zip(*results, strict=True)
    return _stats(wall, list(times), sum(oks), list(compactions))


async def _server(seeds: list[int], concurrency: int) -> dict[str, Any]:
    import langgraph_sdk

    graphs = {"agent": f"{EXAMPLE_MODULE}:agent"}
    with langgraph_dev(graphs, jobs=concurrency) as server:
        async with langgraph_sdk.get_client(url=server.url) as sdk:
            gate = asyncio.Semaphore(concurrency)

            async def run(seed: int) -> tuple[float, bool, int]:
                async with gate:
                    t0 = time.perf_counter()
                    thread = await sdk.threads.create()
                    out = await sdk.runs.wait(
                        thread["thread_id"],
                        "agent",
                        input={"messages": [{"role": "user", "content": _task(seed).prompt()}]},
                        config=_config(seed),
                    )
                    elapsed = time.perf_counter() - t0
                ok = _task(seed).check(out["messages"][-1]["content"]).ok
                return elapsed, ok, int(out.get("compaction_count") or 0)

            t0 = time.perf_counter()
            results = await asyncio.gather(*(run(s) for s in seeds))
            wall = time.perf_counter() - t0
    stats = _stats(
        wall, [r[0] for r in results], sum(r[1] for r in results), [r[2] for r in results]
    )
    return {**stats, "server_start_s": round(server.start_seconds, 2)}


async def _in_process(seeds: list[int], concurrency: int) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    sys.path.insert(0, str(EXAMPLE_DIR))
    import compacting_graphs

    graph = compacting_graphs.build_agent().builder.compile(
        checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    gate = asyncio.Semaphore(concurrency)

    async def run(seed: int) -> tuple[float, bool, int]:
        async with gate:
            t0 = time.perf_counter()
            config = _config(seed)
            config["configurable"]["thread_id"] = f"thread-{seed}"
            out = await graph.ainvoke({"messages": [("user", _task(seed).prompt())]}, config)
            elapsed = time.perf_counter() - t0
        ok = _task(seed).check(out["messages"][-1].text).ok
        return elapsed, ok, int(out.get("compaction_count") or 0)

    t0 = time.perf_counter()
    results = await asyncio.gather(*(run(s) for s in seeds))
    wall = time.perf_counter() - t0
    return _stats(
        wall, [r[0] for r in results], sum(r[1] for r in results), [r[2] for r in results]
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    seeds = list(range(1000, 1000 + args.threads))
    in_process = asyncio.run(_in_process(seeds, args.concurrency))
    server = asyncio.run(_server(seeds, args.concurrency))
    result = {
        "workload": f"{args.threads} threads, DependentTask({STEPS} steps, {PAYLOAD}-char logs), "
        f"window {3000} tokens, concurrency {args.concurrency}",
        "server": server,
        "in_process": in_process,
        "ratio_server_over_in_process": {
            "wall": round(server["wall_s"] / in_process["wall_s"], 2),
            "run_s_p95": round(server["run_s_p95"] / in_process["run_s_p95"], 2),
            "throughput": round(
                server["throughput_threads_per_s"] / in_process["throughput_threads_per_s"], 2
            ),
        },
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
