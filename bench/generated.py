"""``python -m bench.generated --runs 20000``: the generated-scenario harness at scale (issue 19).

Runs seeds ``--start`` to ``--start + --runs - 1`` of ``tests/unit/_generated.py`` (every shape
of work, windows from 2k to 1M tokens, the graph, the middleware and LCEL; invariants computed
independently of the package) and writes ``bench/results/generated.json``: runs, finished,
stopped, "must finish" and violations per shape, window band and integration (and per shape x
integration x band), every violation with its seed, and the seconds taken. The normal test
command runs the first 500 seeds (``tests/unit/test_generated_runs.py``). ``--out FILE``
writes elsewhere; ``--progress N`` prints a line every N runs; ``--jobs N`` splits the seeds
over N processes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "generated.json"


def _harness() -> Any:
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    import _generated

    return _generated


def run(start: int, runs: int, *, progress: int = 0) -> dict[str, Any]:
    from langchain_compact.tokens import provision_tiktoken_cache

    provision_tiktoken_cache()  # offline: o200k_base from bpe-openai
    gen = _harness()
    logging.disable(logging.WARNING)  # stop and over-trigger lines, one per run
    try:
        return _sweep(gen, start, runs, progress)
    finally:
        logging.disable(logging.NOTSET)


def run_jobs(start: int, runs: int, *, jobs: int, progress: int = 0) -> dict[str, Any]:
    """:func:`run` over ``jobs`` processes, each a contiguous share of the seeds, merged
    into one result (the seconds are the wall time of the whole sweep)."""
    if jobs <= 1:
        return run(start, runs, progress=progress)
    import concurrent.futures

    bounds = [start + runs * k // jobs for k in range(jobs + 1)]
    began = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        parts = list(
            pool.map(
                _run_part,
                [(a, b - a, progress) for a, b in itertools.pairwise(bounds)],
            )
        )
    tables: dict[str, dict[str, Counter[str]]] = {
        k: defaultdict(Counter) for k in ("shape", "band", "integration", "cell")
    }
    violations: list[dict[str, Any]] = []
    for part in parts:
        for table in tables:
            for key, row in part[f"by_{table}"].items():
                tables[table][key].update(row)
        violations += part["all_violations"]
    return _result(start, runs, time.perf_counter() - began, tables, violations)


def _run_part(args: tuple[int, int, int]) -> dict[str, Any]:
    start, runs, progress = args
    return run(start, runs, progress=progress)


def _sweep(gen: Any, start: int, runs: int, progress: int) -> dict[str, Any]:
    tables: dict[str, dict[str, Counter[str]]] = {
        k: defaultdict(Counter) for k in ("shape", "band", "integration", "cell")
    }
    violations: list[dict[str, Any]] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-generated-") as tmp:
        for n, seed in enumerate(range(start, start + runs), 1):
            record, found = gen.run_and_check(seed, Path(tmp))
            s = record.scenario
            outcome = "finished" if record.finished else "stopped" if record.stopped else "other"
            keys = {
                "shape": s.shape,
                "band": s.band,
                "integration": s.integration,
                "cell": f"{s.shape} x {s.integration} x {s.band}",
            }
            for table, key in keys.items():
                row = tables[table][key]
                row["runs"] += 1
                row[outcome] += 1
                row["must_finish"] += gen.must_finish(record)
                row["runs_with_violations"] += bool(found)
                for v in found:
                    row[v.invariant] += 1
            violations += [v.as_dict() for v in found]
            if progress and n % progress == 0:
                print(f"{n}/{runs} runs, {len(violations)} violations", file=sys.stderr)
    return _result(start, runs, time.perf_counter() - began, tables, violations)


def _result(
    start: int,
    runs: int,
    seconds: float,
    tables: dict[str, dict[str, Counter[str]]],
    violations: list[dict[str, Any]],
) -> dict[str, Any]:
    by_invariant = Counter(v["invariant"] for v in violations)
    return {
        "start": start,
        "runs": runs,
        "seconds": round(seconds, 1),
        "runs_with_violations": sum(r["runs_with_violations"] for r in tables["shape"].values()),
        "violations": len(violations),
        "by_invariant": dict(sorted(by_invariant.items())),
        **{
            f"by_{table}": {k: dict(sorted(v.items())) for k, v in sorted(rows.items())}
            for table, rows in tables.items()
        },
        "all_violations": violations,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generated", description=__doc__)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--progress", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (seeds split)")
    args = parser.parse_args(argv)
    result = run_jobs(args.start, args.runs, jobs=args.jobs, progress=args.progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(
        f"{result['runs']} runs in {result['seconds']} s: {result['runs_with_violations']} runs "
        f"with violations, {result['violations']} violations {result['by_invariant']} -> "
        f"{args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
