"""``python -m bench.perf``: the engine's speed and memory, against a stored baseline, in one run.

Measures, on today's code:

* ``turns``: ordinary turns of a graph run whose tool returns a distinct 50,000-character
  log on every turn (``CompactionNodes.micro`` + ``route`` as ``add_compaction`` wires them,
  the extractive summarizer, no usage reports): the 50th / 90th / 99th percentile and the
  slowest ordinary turn (no full compaction). Run first, before anything else in the
  process has loaded a tokenizer: the first turn waits for the load the compactor started
  when it was built (so the slowest turn is that one), and no later turn loads anything.
  The model call between two turns is a 20 ms pause (a real one takes longer).
  ``ordinary_cpu_ms``: the same turns' CPU time on the turn's thread (``time.thread_time``),
  which a loaded machine does not inflate.
* ``merge``: :func:`merge_bench`, the pause at the trigger of compactions that merge earlier
  summaries beside those that do not (an LLM summarizer sleeping 0.1 s per call, preparing
  on).
* ``decision``: the per-turn decision (``micro`` + ``route``) on histories of 150 / 2,000 /
  10,000 messages whose model reports no usage (everything is counted locally), median of 12
  turns each.
* ``extractive``: ``ExtractiveSummarizer`` on 8,000 messages (best of 3).
* ``one_shot``: ``compact_history`` and ``compact_messages`` on 10,000 and 50,000 messages
  (wall and CPU seconds of one untraced run, the peak memory of one ``tracemalloc`` run).
* ``import``: ``python -X importtime -c "import langchain_compact"`` (best of 3, in
  subprocesses) and whether langsmith was imported.

Histories are the shared transcripts concatenated (:func:`bench.workloads.long_history`).

The baseline, ``bench/results/perf_baseline.json``, holds the same measurements taken on the
commit it names (``--record-baseline`` writes it; run it on a checkout of that commit with
this file copied in, and ``LC_TRAJECTORY_DIR`` set to the transcripts this checkout uses:
``same_workload`` in the output says whether both runs read the same files).
``bench/results/perf.json`` gets today's figures, the baseline's, and
the ratios baseline / today for times and memory (above 1: today is faster or smaller), plus
today's growth from the small size to the large one. Both runs take one process each; on a
loaded machine compare ratios of figures taken close in time.

``--sizes`` changes the one-shot sizes, ``--quick`` runs a small version (smoke test).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import statistics
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
BASELINE = RESULTS / "perf_baseline.json"
OUT = RESULTS / "perf.json"

_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")


# --------------------------------------------------------------------------- helpers


def _cold() -> None:
    """Forget what an earlier run of the same workload left in the summarizers' memo of
    tool-result outcome lines (where the code has one), so each run pays for its own."""
    from langchain_compact import summarizers

    memo = getattr(summarizers, "_OUTCOMES", None)
    if memo is not None:
        memo.clear()


def _seconds(fn: Callable[[], object]) -> float:
    return _timed(fn)[0]


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (CPU time is less sensitive to a loaded machine)."""
    _cold()
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def _peak_mib(fn: Callable[[], object]) -> float:
    _cold()
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return round(peak / 2**20, 2)


def _log_text(rng: random.Random, chars: int, turn: int) -> str:
    """A distinct tool output of about ``chars`` characters: log lines, a few facts."""
    lines: list[str] = []
    size = 0
    while size < chars:
        k = rng.random()
        if k < 0.05:
            line = f"step_{len(lines)} = {rng.randint(1000, 999_999)} (turn {turn})"
        elif k < 0.08:
            line = f"see /srv/app/mod{rng.randint(1, 99)}/main.py line {rng.randint(1, 999)}"
        elif k < 0.09:
            line = f"ticket QX-{rng.randint(100, 9999)} updated"
        else:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
            line = f"INFO 03:{rng.randint(10, 59)}:{rng.randint(10, 59)} worker {turn} {words}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _nodes(window: int) -> Any:
    from langchain_compact import CompactionConfig, CompactionNodes, ExtractiveSummarizer

    return CompactionNodes(
        config=CompactionConfig(context_window=window),
        summarizer=ExtractiveSummarizer(),
        archive=None,
    )


_RUN = {"configurable": {"thread_id": "perf"}}


class _Run:
    """A graph's state fed by hand: messages appended with ``add_messages``, the compaction
    nodes called as ``add_compaction`` calls them before each model call."""

    def __init__(self, window: int) -> None:
        self.nodes = _nodes(window)
        self.state: dict[str, Any] = {"messages": []}

    def add(self, new: Sequence[Any]) -> None:
        from langgraph.graph.message import add_messages

        self.state["messages"] = add_messages(self.state["messages"], list(new))

    def _apply(self, update: dict[str, Any]) -> None:
        for key, value in update.items():
            if key == "messages":
                self.add(value)
            else:
                self.state[key] = value

    cpu: float = 0.0
    """CPU seconds of the last turn on this thread, its compaction included (``time.thread_time``:
    the machine's other load and the package's own background threads left out)."""

    def turn(self) -> tuple[float, bool]:
        """The decision before one model call: (seconds, whether a full compaction ran)."""
        start, cpu = time.perf_counter(), time.thread_time()
        self._apply(self.nodes.micro(self.state, _RUN))
        route = self.nodes.route(self.state, _RUN)  # as LangGraph calls it
        seconds = time.perf_counter() - start
        self.cpu = time.thread_time() - cpu
        if isinstance(route, list):  # the prepare node runs beside the model call: untimed
            self._apply(self.nodes.prepare(self.state, _RUN))
            route = "continue"
        if route == "compact":
            start, cpu = time.perf_counter(), time.thread_time()
            self._apply(self.nodes.summarize(self.state, _RUN))
            self.cpu += time.thread_time() - cpu
            return seconds + time.perf_counter() - start, True
        return seconds, False


# --------------------------------------------------------------------------- sections


def turns_bench(turns: int, chars: int = 50_000, model_ms: float = 20.0) -> dict[str, Any]:
    """Ordinary turns with ``chars``-character tool results, no usage reports; the model
    call between two turns is a pause of ``model_ms`` (untimed)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    rng = random.Random(7)
    texts = [_log_text(rng, chars, t) for t in range(turns)]
    run = _Run(window=200_000)
    run.add([HumanMessage("Fetch every page and report the step values.", id="task")])
    ordinary: list[float] = []
    ordinary_cpu: list[float] = []
    compactions: list[float] = []
    for t in range(turns):
        call = {"name": "fetch", "args": {"page": t}, "id": f"call_{t}"}
        run.add([AIMessage("", tool_calls=[call], id=f"ai_{t}")])
        run.add([ToolMessage(texts[t], tool_call_id=f"call_{t}", name="fetch", id=f"tool_{t}")])
        texts[t] = ""  # the state holds the only copy
        seconds, compacted = run.turn()
        time.sleep(model_ms / 1e3)
        (compactions if compacted else ordinary).append(seconds)
        if not compacted:
            ordinary_cpu.append(run.cpu)
    q = statistics.quantiles(ordinary, n=100, method="inclusive")
    qc = statistics.quantiles(ordinary_cpu, n=100, method="inclusive")
    return {
        "turns": turns,
        "result_chars": chars,
        "model_ms": model_ms,
        "ordinary_ms": {
            "p50": round(q[49] * 1e3, 3),
            "p90": round(q[89] * 1e3, 3),
            "p99": round(q[98] * 1e3, 3),
            "max": round(max(ordinary) * 1e3, 3),
        },
        # The same turns' CPU time on the turn's thread: what the package costs, without the
        # waits a loaded machine adds to the wall time above.
        "ordinary_cpu_ms": {
            "p50": round(qc[49] * 1e3, 3),
            "p90": round(qc[89] * 1e3, 3),
            "p99": round(qc[98] * 1e3, 3),
            "max": round(max(ordinary_cpu) * 1e3, 3),
        },
        "compactions": len(compactions),
        "compaction_ms_median": round(statistics.median(compactions) * 1e3, 1)
        if compactions
        else None,
    }


def merge_bench(
    turns: int = 160,
    window: int = 6_000,
    latency: float = 0.1,
    result_chars: int = 1_200,
    runs: int = 3,
) -> dict[str, Any]:
    """The pause at the trigger of compactions with a prepared summary that merge earlier
    summaries, beside those that do not, with an LLM summarizer (a chat model that sleeps
    ``latency`` seconds per call) and preparing on: the prepare node runs beside the model
    call (untimed, as in ``turns``), the pause is the timed turn (micro, route, the
    compaction). Tool results of ``result_chars`` characters, each with a ``key = value``
    fact, in a ``window``-token window, so compactions come every few turns and the
    summaries soon pass their budget. The run is made ``runs`` times (other values, the
    same shape) and the pauses pooled: a run has only a few compactions before the first
    merge, and one slow pause must not decide a median of five."""
    plain: list[tuple[float, float]] = []  # (wall, CPU on the turn's thread) per pause
    merged: list[tuple[float, float]] = []
    unprepared: list[tuple[float, float]] = []
    facts_kept = 0
    for seed in range(runs):
        facts_kept += _merge_run(
            turns, window, latency, result_chars, seed, plain, merged, unprepared
        )

    def ms(
        pauses: list[tuple[float, float]], q: Callable[[list[float]], float], at: int = 0
    ) -> float | None:
        return round(q([p[at] for p in pauses]) * 1e3, 2) if pauses else None

    plain_ms, merged_ms = ms(plain, statistics.median), ms(merged, statistics.median)
    plain_cpu, merged_cpu = ms(plain, statistics.median, 1), ms(merged, statistics.median, 1)
    return {
        "turns": turns,
        "runs": runs,
        "window": window,
        "summarizer_latency_ms": round(latency * 1e3),
        "compactions": len(plain) + len(merged) + len(unprepared),
        # compactions that found no prepared summary (their pause holds the model call);
        # the two figures below are over the prepared ones
        "unprepared": len(unprepared),
        "unprepared_pause_ms_median": ms(unprepared, statistics.median),
        "merges": len(merged),
        # values still stated in the final histories (the summaries, merged or not, included)
        "facts_kept": facts_kept,
        "facts": turns * runs,
        "compaction_pause_ms": {"median": plain_ms, "max": ms(plain, max)},
        "merge_pause_ms": {"median": merged_ms, "max": ms(merged, max)},
        "merge_over_compaction": _ratio(merged_ms, plain_ms),
        # the same pauses in CPU time on the turn's thread (the machine's load left out)
        "compaction_pause_cpu_ms": {"median": plain_cpu},
        "merge_pause_cpu_ms": {"median": merged_cpu},
        "merge_over_compaction_cpu": _ratio(merged_cpu, plain_cpu),
    }


def _merge_run(
    turns: int,
    window: int,
    latency: float,
    result_chars: int,
    seed: int,
    plain: list[tuple[float, float]],
    merged: list[tuple[float, float]],
    unprepared: list[tuple[float, float]],
) -> int:
    """One run of :func:`merge_bench`: its pauses appended to the three lists; returns how
    many of its values the final history still states."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from bench._pause_models import SleepySummarizer
    from langchain_compact import CompactionConfig, CompactionNodes, LLMSummarizer

    rng = random.Random(11 + seed)
    run = _Run(window)
    run.nodes = CompactionNodes(
        config=CompactionConfig(context_window=window, prepare=True, micro_exclude_tools=("f",)),
        summarizer=LLMSummarizer(SleepySummarizer(latency=latency)),
    )
    run.add([HumanMessage("Fetch every page; report every value.", id="task")])
    facts: list[str] = []
    for t in range(turns):
        call = {"name": "f", "args": {"page": t}, "id": f"c{t}"}
        facts.append(f"value_{t} = {rng.randint(10**5, 10**6)}")
        text = facts[-1] + "\n" + _log_text(rng, result_chars, t)
        run.add([AIMessage("", tool_calls=[call], id=f"a{t}")])
        run.add([ToolMessage(text, tool_call_id=f"c{t}", name="f", id=f"r{t}")])
        before = run.state.get("last_compaction")
        seconds, compacted = run.turn()
        report = run.state.get("last_compaction")
        if compacted and report is not None and report is not before:
            pause = (seconds, run.cpu)
            if not report.get("prepared"):  # no prepared summary: the model is called
                unprepared.append(pause)
            else:
                (merged if report.get("merged_summaries") else plain).append(pause)
    final = "\n".join(m.text for m in run.state["messages"])
    return sum(f in final for f in facts)


def decision_bench(history: list[Any], sizes: Sequence[int], calls: int = 12) -> dict[str, Any]:
    """Median per-turn decision at each size, the model reporting no usage."""
    from langchain_core.messages import AIMessage

    points = [i for i, m in enumerate(history) if isinstance(m, AIMessage) and i > 0]
    out: dict[str, Any] = {}
    for n in sizes:
        pts = [p for p in points if p >= n][: calls + 1]
        run = _Run(window=10**9)  # far above the history: no compaction is due
        run.add(history[: pts[0]])
        run.turn()  # the first call on the thread: untimed warm-up
        run.add([history[pts[0]]])
        last = pts[0] + 1
        samples = []
        for p in pts[1:]:
            run.add(history[last:p])
            samples.append(run.turn()[0])
            run.add([history[p]])
            last = p + 1
        out[str(n)] = round(statistics.median(samples) * 1e3, 4)
    return {"median_ms": out}


def extractive_bench(history: list[Any], n: int) -> dict[str, Any]:
    from langchain_compact.summarizers import ExtractiveSummarizer

    span = history[:n]
    best = min(
        _seconds(lambda: ExtractiveSummarizer().summarize(span, max_tokens=2_000)) for _ in range(3)
    )
    return {"messages": n, "seconds": round(best, 3)}


def one_shot_bench(history: list[Any], sizes: Sequence[int]) -> dict[str, Any]:
    from langchain_compact import CompactionConfig
    from langchain_compact.compaction import compact_history
    from langchain_compact.lcel import compact_messages

    config = CompactionConfig(context_window=128_000)
    fns: dict[str, Callable[[list[Any]], object]] = {
        "compact_history": lambda h: compact_history(h),
        "compact_messages": lambda h: compact_messages(h, config=config, archive=None),
    }
    out: dict[str, Any] = {name: {} for name in fns}
    for n in sizes:
        span = history[:n]
        for name, fn in fns.items():
            seconds, cpu = _timed(lambda f=fn, h=span: f(h))  # type: ignore[misc]
            peak = _peak_mib(lambda f=fn, h=span: f(h))  # type: ignore[misc]
            out[name][str(n)] = {
                "seconds": round(seconds, 3),
                "cpu_seconds": round(cpu, 3),
                "peak_mib": peak,
            }
            print(f"[perf] {name} {n}: {seconds:.2f} s, {peak} MiB", file=sys.stderr, flush=True)
    return out


_IMPORT_RE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| langchain_compact$")
_LANGSMITH_RE = re.compile(r"\|\s+langsmith$")


def import_bench(repeat: int = 3) -> dict[str, Any]:
    """Cumulative import time of the package (``-X importtime``) and whether langsmith is
    imported, each in a fresh interpreter."""
    best = None
    langsmith = None
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import langchain_compact"],
            capture_output=True,
            text=True,
            check=True,
        )
        lines = proc.stderr.splitlines()
        total = next(int(m.group(1)) for line in reversed(lines) if (m := _IMPORT_RE.search(line)))
        best = total if best is None else min(best, total)
        langsmith = any(_LANGSMITH_RE.search(line) for line in lines)
    return {"seconds": round((best or 0) / 1e6, 3), "langsmith_imported": langsmith}


# --------------------------------------------------------------------------- run


def measure(*, quick: bool, sizes: Sequence[int]) -> dict[str, Any]:
    from bench.workloads import load_transcripts, long_history

    warnings.simplefilter("ignore")
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    out["turns"] = turns_bench(40 if quick else 400)
    print(f"[perf] turns: {out['turns']['ordinary_ms']}", file=sys.stderr, flush=True)
    out["merge"] = merge_bench(turns=60 if quick else 160, runs=1 if quick else 3)
    print(f"[perf] merge: {out['merge']}", file=sys.stderr, flush=True)
    out["import"] = import_bench(1 if quick else 3)
    transcripts = load_transcripts()
    decision_sizes = (150, 400) if quick else (150, 2_000, 10_000)
    largest = max([*sizes, *decision_sizes, 8_000])
    history = long_history(transcripts, largest + 200)
    out["decision"] = decision_bench(history, decision_sizes, calls=4 if quick else 12)
    print(f"[perf] decision: {out['decision']}", file=sys.stderr, flush=True)
    out["extractive"] = extractive_bench(history, 1_000 if quick else 8_000)
    print(f"[perf] extractive: {out['extractive']}", file=sys.stderr, flush=True)
    out["one_shot"] = one_shot_bench(history, sizes)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _ratio(base: float | None, now: float | None) -> float | None:
    return round(base / now, 2) if base and now else None


def compare(base: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """baseline / today for every time and memory figure both runs have (above 1: today is
    faster or smaller), and today's growth from the smallest size to the largest."""
    ratios: dict[str, Any] = {}
    growth: dict[str, Any] = {}
    for key in ("p50", "p90", "p99", "max"):
        ratios[f"turns_{key}"] = _ratio(
            base.get("turns", {}).get("ordinary_ms", {}).get(key),
            now["turns"]["ordinary_ms"][key],
        )
    dec_now, dec_base = now["decision"]["median_ms"], base.get("decision", {}).get("median_ms", {})
    for n, ms in dec_now.items():
        ratios[f"decision_{n}"] = _ratio(dec_base.get(n), ms)
    sizes = sorted(dec_now, key=int)
    growth["decision"] = _ratio(dec_now[sizes[-1]], dec_now[sizes[0]])
    ratios["extractive"] = _ratio(
        base.get("extractive", {}).get("seconds"), now["extractive"]["seconds"]
    )
    ratios["import"] = _ratio(base.get("import", {}).get("seconds"), now["import"]["seconds"])
    for name, per in now["one_shot"].items():
        sizes = sorted(per, key=int)
        for n in sizes:
            old = base.get("one_shot", {}).get(name, {}).get(n, {})
            for field in ("seconds", "cpu_seconds", "peak_mib"):
                ratios[f"{name}_{n}_{field}"] = _ratio(old.get(field), per[n][field])
        for field in ("seconds", "cpu_seconds", "peak_mib"):
            growth[f"{name}_{field}_{sizes[-1]}/{sizes[0]}"] = _ratio(
                per[sizes[-1]][field], per[sizes[0]][field]
            )
    return {"baseline_over_today": ratios, "today_growth": growth}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.perf", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small version (smoke test)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--record-baseline", action="store_true", help=f"write {BASELINE}")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([500, 2_500] if args.quick else [10_000, 50_000])
    figures = measure(quick=args.quick, sizes=sizes)
    from bench import workloads

    figures["meta"] = {
        "commit": _commit(),
        "python": sys.version.split()[0],
        "transcripts": sorted(p.name for p in workloads.TRAJECTORY_DIR.glob("*.jsonl")),
    }
    if args.record_baseline:
        out = args.out or args.baseline
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(figures, indent=1))
        return 0
    base = json.loads(args.baseline.read_text(encoding="utf-8")) if args.baseline.exists() else {}
    same = base.get("meta", {}).get("transcripts") == figures["meta"]["transcripts"]
    if base and not same:
        print(
            "[perf] warning: the baseline was measured on other transcripts; set "
            "LC_TRAJECTORY_DIR to the same folder for both runs",
            file=sys.stderr,
        )
    result = {"today": figures, "baseline": base, "same_workload": same, **compare(base, figures)}
    out = args.out or OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("baseline_over_today", "today_growth")}, indent=1))
    print(f"[perf] wrote {out} in {figures['seconds']} s", file=sys.stderr)
    if out == OUT:  # the figures docs/benchmarks.md quotes
        from bench import perf_docs

        perf_docs.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
