"""``python -m bench.pause_server``: the pause at the trigger with a real summarizer.

Issue 10, must-show 2: the same task as ``bench/pause.py`` (a scripted agent that sleeps
``M`` seconds per call, one full compaction), but the summarizer is the local llama.cpp
server (gemma3-270m, started by :mod:`bench._llama`; needs the ``server`` extra). The
summarizer's latency is whatever the server takes; ``M`` defaults to 1.25x the latency of
one calibration call on a span of the same size, so the run sits in the "M >= L" regime
where a prepared summary should leave almost no pause. Writes
``bench/results/pause_server.json`` / ``.md``.

:func:`server_pause` takes any server address (``base_url``, ``model``), so an integration
test can pass the ``llama_server`` fixture of ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from bench._llama import ServerAddress, chat_model
from bench._pause_models import PREPARE_SUPPORTED, TimedChatModel, Timeline
from bench.pause import LABELS, RESULTS_DIR, SMALL_SHAPE, STEPS, run_system
from langchain_compact.demo import DependentTask
from langchain_compact.summarizers import LLMSummarizer

__all__ = [
    "DEFAULT_SERVER_SYSTEMS",
    "SERVER_SYSTEMS",
    "calibrate",
    "server_markdown",
    "server_pause",
]

SERVER_SYSTEMS = ("graph_prepare", "graph", "mw_prepare", "mw", "lc_summarization")
DEFAULT_SERVER_SYSTEMS = ("graph_prepare", "graph")
"""Each run takes about 7x the summarizer call (5 model calls at 1.25x, and the call): on a
loaded 2-core machine the 270m model needs ~20 s for the span, so two systems by default."""
WINDOW = SMALL_SHAPE.window
PAYLOAD_CHARS = SMALL_SHAPE.payload_chars
BRIEF_LINES = SMALL_SHAPE.brief_lines
"""``bench/pause.py``'s small task shape, so the CPU server's summarizer call stays short."""
SUMMARY_TOKENS = 160
"""Output cap of the server's summaries (``extra_body.max_tokens``)."""


def calibrate(model: Any, *, steps: int = 2, payload_chars: int = PAYLOAD_CHARS) -> float:
    """Seconds of one ``LLMSummarizer`` call on a span like the one compacted in the task
    (the task plus ``steps`` tool calls and results). One call, no warm-up: the server
    keeps the last prompt's cache, so a repeated call would measure only the decoding."""
    # Another seed than the run's task: the same size, but no prompt the server has cached.
    task = DependentTask(steps=STEPS, payload_chars=payload_chars, seed=1_000)
    span: list[Any] = [HumanMessage(task.prompt())]
    previous = task.starting_value
    for k in range(1, steps + 1):
        call_id = f"c{k}"
        call = {"name": "run_step", "args": {"step": k, "previous": previous}, "id": call_id}
        span.append(AIMessage("", tool_calls=[call]))
        span.append(ToolMessage(task.tools()[0].invoke(call["args"]), tool_call_id=call_id))
        previous = task.step_value(k, previous)
    summarizer = LLMSummarizer(model)

    t0 = time.perf_counter()
    with contextlib.suppress(Exception):  # a refused summary still took the server's time
        summarizer.summarize(span, max_tokens=2_000)
    return time.perf_counter() - t0


def server_pause(
    server: ServerAddress,
    *,
    systems: Sequence[str] = DEFAULT_SERVER_SYSTEMS,
    model_latency: float | None = None,
    window: int = WINDOW,
    steps: int = STEPS,
    payload_chars: int = PAYLOAD_CHARS,
    brief_lines: int = BRIEF_LINES,
) -> dict[str, Any]:
    """Run ``systems`` with the server's model as the summarizer; per system the pause at the
    trigger and its share of the summarizer call's median duration."""
    chat = chat_model(server, max_tokens=SUMMARY_TOKENS)
    calibrated = calibrate(chat, payload_chars=payload_chars)
    m = model_latency if model_latency is not None else round(1.25 * calibrated, 2)
    out: dict[str, Any] = {
        "server_model": server.model,
        "prepare_supported": PREPARE_SUPPORTED,
        "calibration_call_s": round(calibrated, 3),
        "M": m,
        "window": window,
        "steps": steps,
        "labels": {s: LABELS[s] for s in systems},
        "systems": {},
    }
    for system in systems:
        print(f"[pause_server] M={m} {system} ...", file=sys.stderr, flush=True)

        def make(timeline: Timeline) -> Any:
            return TimedChatModel(inner=chat, timeline=timeline)

        result = run_system(
            system,
            summarizer_latency=0.0,
            model_latency=m,
            window=window,
            steps=steps,
            payload_chars=payload_chars,
            make_summarizer=make,
            brief_lines=brief_lines,
        )
        if result is not None:
            durations = result["summarizer_call_s"]
            median_call = statistics.median(durations) if durations else None
            pause = result["pause_median_s"]
            result["summarizer_call_median_s"] = median_call
            result["pause_share_of_call"] = (
                round(pause / median_call, 3) if pause is not None and median_call else None
            )
        out["systems"][system] = result
    return out


def server_markdown(results: dict[str, Any]) -> str:
    """One table: per system, the pause against the real summarizer call."""
    lines = [
        "## Pause at the trigger, real summarizer (llama.cpp server)",
        "",
        f"Summarizer: `{results['server_model']}` on the local llama.cpp server "
        f"(calibration call {results['calibration_call_s']:.2f} s); agent model: the "
        f"scripted policy sleeping M = {results['M']:.2f} s per call; window "
        f"{results['window']:,}, {results['steps']} steps.",
        "",
        "| system | compactions | pause s | summarizer call s (median) | pause / call |"
        " summarizer calls: all / overlapping a model call | added latency s | finished |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for system, r in results["systems"].items():
        label = results["labels"].get(system, system)
        if r is None:
            lines.append(f"| {label} | n/a: no `prepare` flag in this build | | | | | | |")
            continue
        pause = "-" if r["pause_median_s"] is None else f"{r['pause_median_s']:.2f}"
        call = r["summarizer_call_median_s"]
        share = r["pause_share_of_call"]
        lines.append(
            f"| {label} | {r['compactions']} | {pause} | {'-' if call is None else f'{call:.2f}'}"
            f" | {'-' if share is None else f'{share:.0%}'} |"
            f" {r['summarizer_calls']} / {r['summarizer_calls_during_model']} |"
            f" {r['added_latency_s']:.2f} | {'yes' if r['finished'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from bench._llama import llama_server

    parser = argparse.ArgumentParser(
        prog="python -m bench.pause_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--systems",
        default=",".join(DEFAULT_SERVER_SYSTEMS),
        help=f"comma-separated subset of {SERVER_SYSTEMS}",
    )
    parser.add_argument(
        "--model-latency",
        type=float,
        default=None,
        help="agent model latency M in seconds (default: 1.25x the calibrated summarizer call)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results directory")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SERVER_SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {SERVER_SYSTEMS}")
    logging.basicConfig(level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with llama_server() as server:
            results = server_pause(server, systems=systems, model_latency=args.model_latency)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pause_server.json").write_text(
        json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8"
    )
    text = server_markdown(results)
    (args.out / "pause_server.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
