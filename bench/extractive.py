"""ExtractiveSummarizer and compact_history at scale: time and peak memory.

Histories are the shared transcripts concatenated to 1,000 / 8,000 / 50,000 messages
(:func:`bench.workloads.long_history`). Time is the best of ``--repeat`` untraced runs; peak
memory is what ``tracemalloc`` sees allocated during one more run (the history itself is built
before tracing starts, so it is not counted). ``compact_history`` (default settings,
extractive summarizer, no archive) is measured at 12,000 messages too.

Run: ``python -m bench.extractive`` (writes ``bench/results/extractive.json`` and prints it).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from bench.workloads import load_transcripts, long_history
from langchain_compact.compaction import compact_history
from langchain_compact.summarizers import ExtractiveSummarizer

RESULTS = Path(__file__).resolve().parent / "results" / "extractive.json"
SIZES = (1_000, 8_000, 50_000)
COMPACT_SIZE = 12_000


def measure(fn: Callable[[], object], *, repeat: int) -> dict[str, float]:
    """Best wall time of ``repeat`` runs, then the tracemalloc peak of one run."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"seconds": round(min(times), 3), "peak_mib": round(peak / 2**20, 1)}


def run(sizes: Sequence[int] = SIZES, *, repeat: int = 3) -> dict[str, Any]:
    transcripts = load_transcripts()
    out: dict[str, Any] = {"extractive": {}, "compact_history": {}}
    for n in sizes:
        history: list[BaseMessage] = long_history(transcripts, n)[:n]
        row = measure(
            lambda h=history: ExtractiveSummarizer().summarize(h, max_tokens=2_000), repeat=repeat
        )
        out["extractive"][str(n)] = {"messages": n, **row}
        print(f"ExtractiveSummarizer {n:>6} messages: {row}", flush=True)
    history = long_history(transcripts, COMPACT_SIZE)[:COMPACT_SIZE]
    row = measure(lambda: compact_history(history), repeat=1)
    out["compact_history"][str(COMPACT_SIZE)] = {"messages": COMPACT_SIZE, **row}
    print(f"compact_history {COMPACT_SIZE} messages: {row}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size (best kept)")
    args = parser.parse_args()
    results = run(repeat=args.repeat)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
