"""``python -m bench.overhead``: the per-turn decision cost at 5,000 and 50,000 messages.

Each system's own pre-model work per call (what :func:`bench.__main__.overhead_bench`
times: for ``ours`` the graph path ``CompactionNodes.micro`` + ``route`` as ``add_compaction``
wires them, for ``lc_summarization`` langchain's ``SummarizationMiddleware.before_model``),
on a history of N messages whose AI messages carry the usage a provider would have
reported, with the budget far above the history (no compaction due). Both systems take the
same calls back to back (interleaved), in one run. Writes ``bench/results/overhead.json``
and prints a short table: the medians, ours / SummarizationMiddleware at each size, and
ours at the largest size / ours at the smallest (flat means close to 1).

Takes a few minutes (most of it building the 50,000-message history and the untimed
``add_messages`` state updates). ``--sizes`` and ``--calls`` change the workload.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import workloads
from bench.metrics import TruthCounter

RESULTS = Path(__file__).resolve().parent / "results" / "overhead.json"
SYSTEMS = ("ours", "lc_summarization")


def run(sizes: Sequence[int], calls: int) -> dict[str, Any]:
    """The overhead numbers for ``sizes`` (``calls`` timed calls at each)."""
    from bench.__main__ import environment, overhead_bench

    t0 = time.perf_counter()
    truth = TruthCounter()
    transcripts = workloads.load_transcripts()
    result = overhead_bench(transcripts, sizes, SYSTEMS, truth, timed={n: calls for n in sizes})
    ms = result["median_ms"]
    peer = ms["lc_summarization"]
    small, large = str(min(sizes)), str(max(sizes))
    for name in ("ours",):
        ours = ms[name]
        result[f"{name}_over_lc_summarization"] = {
            n: round(ours[n] / peer[n], 3) if peer[n] else None for n in ours
        }
        result[f"{name}_growth"] = {
            f"{large}/{small}": round(ours[large] / ours[small], 3) if ours[small] else None
        }
    result["meta"] = {**environment(), "seconds": round(time.perf_counter() - t0, 1)}
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 50_000])
    parser.add_argument("--calls", type=int, default=12, help="timed calls per size")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # peers' deprecation warnings are not ours
        result = run(args.sizes, args.calls)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    ms = result["median_ms"]
    print("messages | SummarizationMiddleware ms | ours (graph nodes) ms | ratio")
    for n in map(str, args.sizes):
        print(
            f"{n} | {ms['lc_summarization'][n]} | {ms['ours'][n]} | "
            f"{result['ours_over_lc_summarization'][n]}"
        )
    print(f"growth (largest / smallest size): {result['ours_growth']}")
    print(f"[bench] wrote {args.out} in {result['meta']['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
