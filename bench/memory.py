"""Resident memory over a long graph run with large tool results.

A scripted model calls a ``fetch`` tool on every turn; each result is a distinct text of about
``--result-kb`` KB (500 by default). The graph is :func:`create_compacting_agent` with a
:class:`JsonlArchive`, no checkpointer, and a 6,000-token window, so micro-compaction cuts
and archives every large result and full compaction keeps the history short (well under 100
messages). The token caches see every original text once; if they kept the texts alive, RSS
would grow by about the result size per turn.

RSS is sampled (after ``gc.collect()``) every ``--every`` turns inside the tool. The archive
folder is emptied at each sample so the disk does not fill (files are not held in memory).

Run: ``python -m bench.memory`` (2,000 turns, about 2-4 minutes); writes
``bench/results/memory.json`` and prints a summary. ``--turns 200`` for a quick look.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from pydantic import Field

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    JsonlArchive,
    create_compacting_agent,
    tokens,
)

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")


def rss_mb() -> float:
    """Current resident set size of this process in MB (psutil, else /proc)."""
    try:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20
    except ImportError:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class LoopModel(BaseChatModel):
    """Calls ``fetch(i)`` for turns 1..``turns``, then answers; no usage reports, so every
    turn is counted locally (the path the token caches serve)."""

    turns: int
    cursor: list[int] = Field(default_factory=lambda: [0])

    @property
    def _llm_type(self) -> str:
        return "bench-loop-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.cursor[0] += 1
        turn = self.cursor[0]
        if turn > self.turns:
            reply = AIMessage("done", id=f"ai-final-{turn}")
        else:
            reply = AIMessage(
                "",
                id=f"ai-{turn}",
                tool_calls=[{"name": "fetch", "args": {"i": turn}, "id": f"call-{turn}"}],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run(*, turns: int, result_kb: int, every: int) -> dict[str, Any]:
    """Run the loop and return the RSS samples and the run's shape."""
    body = " ".join(_WORDS[i % len(_WORDS)] for i in range(result_kb * 1024 // 6))
    body = body[: result_kb * 1024]
    folder = Path(tempfile.mkdtemp(prefix="lc-bench-memory-"))
    samples: list[dict[str, Any]] = []
    lengths: list[int] = []
    started = time.perf_counter()

    @tool
    def fetch(i: int) -> str:
        """Fetch page ``i`` of the log."""
        if i == 1 or i % every == 0:
            gc.collect()
            samples.append({"turn": i, "rss_mb": round(rss_mb(), 1)})
            for child in folder.iterdir():
                shutil.rmtree(child, ignore_errors=True)
        return f"page {i}: " + body  # a new, distinct ~result_kb text every turn

    graph = create_compacting_agent(
        LoopModel(turns=turns),
        [fetch],
        config=CompactionConfig(context_window=6_000),
        archive=JsonlArchive(folder),
        summarizer=ExtractiveSummarizer(),
    )
    final: dict[str, Any] = {}
    for state in graph.stream(
        {"messages": [HumanMessage("Read every page of the log.")]},
        {"configurable": {"thread_id": "bench-memory"}, "recursion_limit": 10 * turns + 50},
        stream_mode="values",
    ):
        lengths.append(len(state["messages"]))
        final = state
    gc.collect()
    samples.append({"turn": turns, "rss_mb": round(rss_mb(), 1), "end": True})
    shutil.rmtree(folder, ignore_errors=True)
    first = samples[1] if len(samples) > 2 else samples[0]  # after warm-up (imports, caches)
    return {
        "turns": turns,
        "result_kb": result_kb,
        "seconds": round(time.perf_counter() - started, 1),
        "max_messages_in_state": max(lengths),
        "final_messages": len(final.get("messages", [])),
        "rss_start_mb": samples[0]["rss_mb"],
        "rss_after_warmup_mb": first["rss_mb"],
        "rss_end_mb": samples[-1]["rss_mb"],
        "rss_max_mb": max(s["rss_mb"] for s in samples),
        "growth_after_warmup_mb": round(samples[-1]["rss_mb"] - first["rss_mb"], 1),
        # The figures: RSS after the first turn (the tokenizer is loaded by then),
        # the peak over it, and the growth over the last half of the run.
        "rss_first_turn_mb": samples[0]["rss_mb"],
        "peak_over_first_turn": round(max(s["rss_mb"] for s in samples) / samples[0]["rss_mb"], 3),
        "growth_last_half_mb": round(samples[-1]["rss_mb"] - _at(samples, turns - turns // 2), 1),
        # Two generations of 4,096 entries at most each, small keys only: (length, hash).
        "token_cache_entries": {
            "messages": len(tokens._APPROX_CACHE),
            "texts": len(tokens._APPROX_TEXT_CACHE),
        },
        "samples": samples,
        "python": sys.version.split()[0],
    }


def _at(samples: list[dict[str, Any]], turn: int) -> float:
    """RSS of the last sample taken at or before ``turn``."""
    return float([s for s in samples if s["turn"] <= turn][-1]["rss_mb"])


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: run, write the JSON, print a one-line summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--result-kb", type=int, default=500)
    parser.add_argument("--every", type=int, default=100, help="sample RSS every N turns")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = run(turns=args.turns, result_kb=args.result_kb, every=args.every)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.out == RESULTS:  # the figures docs/benchmarks.md quotes
        from bench import perf_docs

        perf_docs.write()
    print(
        f"{result['turns']} turns x {result['result_kb']} KB results in {result['seconds']} s; "
        f"max {result['max_messages_in_state']} messages in state; RSS start "
        f"{result['rss_start_mb']} MB, after warm-up {result['rss_after_warmup_mb']} MB, end "
        f"{result['rss_end_mb']} MB (max {result['rss_max_mb']} MB, "
        f"{result['peak_over_first_turn']}x the first turn's); growth over the last "
        f"{args.turns - args.turns // 2} turns {result['growth_last_half_mb']} MB; wrote {args.out}"
    )


if __name__ == "__main__":
    main()
