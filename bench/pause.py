"""``python -m bench.pause``: the pause at the trigger, with and without a prepared summary.

Issue 10 (zero-pause compaction), must-show 1, 3 and 4, in one command that writes
``bench/results/pause.json`` and ``bench/results/pause.md``:

1. **Pause at the trigger.** A dependent task (:class:`~langchain_compact.demo.DependentTask`)
   run by a scripted agent that sleeps ``M`` seconds per model call, with a summarizer model
   that sleeps ``L`` seconds per call (:mod:`bench._pause_models`). The tool results grow
   the context so that one full compaction happens, one turn after the context passes the
   prepare threshold (ours runs with ``micro_exclude_tools=("run_step",)``: clearing old
   results would otherwise free the room, and there would be no full compaction to time).
   On each turn whose model input no longer starts with the previous turn's input (a full
   compaction ran), the *pause* is the wall time from the end of the tool call to the start
   of the next model call. *Added latency* is the run's wall time minus ``calls x M`` minus
   the tools' time: it also catches a wait that moved elsewhere (a prepare that outlasts the
   model call holds LangGraph's superstep barrier, so the wait lands after that model call).
   Systems: langchain-compact's graph (``create_compacting_agent``) and middleware
   (``CompactionMiddleware``), each with and without preparing, and langchain's
   ``SummarizationMiddleware``. Goal (issue 10): median pause <= 5% of L when M >= L, else
   <= L - M + 5% of L.
2. **Summarizer input tokens** (:func:`replay_tokens`): transcripts replayed through a real
   graph (``add_compaction`` on a scripted agent whose replies come from the transcript),
   with an :class:`~langchain_compact.summarizers.LLMSummarizer` over the bench's extractive
   summary model, which logs the input tokens of every call. Totals with and without
   preparing; goal: with <= 1.15x without.
3. **Fidelity** (:func:`fidelity`): the dependent task with a summarizer that keeps what it is
   shown, with and without preparing: both must finish with the same facts.

Columns "with preparing" need ``CompactionConfig(prepare=...)``; on a package without the
flag they are reported as not available and everything else runs unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from bench._pause_models import (
    PREPARE_SUPPORTED,
    SleepyPolicy,
    SleepySummarizer,
    Timeline,
    compaction_config,
    timed_tools,
)
from bench.pause_replay import fidelity, fork_cache_share, replay_tokens
from bench.pause_report import markdown
from langchain_compact.demo import DependentTask
from langchain_compact.markers import EVENT_KEY
from langchain_compact.summarizers import LLMSummarizer

__all__ = [
    "MAIN_SHAPE",
    "PAIRS",
    "SMALL_PAIRS",
    "SMALL_SHAPE",
    "SYSTEMS",
    "Shape",
    "goal_seconds",
    "pause_bench",
    "run",
    "run_system",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SYSTEMS = ("graph_prepare", "graph", "mw_prepare", "mw", "lc_summarization")
LABELS = {
    "graph_prepare": "ours, graph, with preparing",
    "graph": "ours, graph, without preparing",
    "mw_prepare": "ours, middleware, with preparing",
    "mw": "ours, middleware, without preparing",
    "lc_summarization": "langchain SummarizationMiddleware",
}
PAIRS: tuple[tuple[float, float], ...] = ((2.0, 2.0), (2.0, 4.0), (4.0, 2.0))
"""(L, M): summarizer latency, agent-model latency, in seconds."""

WINDOW = 6_000
"""Context window of the pause task: trigger 4,500; prepare threshold 3,600 (0.6)."""
STEPS = 4
"""Four tool calls and a final report (five model calls): the context passes the prepare
threshold after the third tool result and the trigger after the fourth."""
PAYLOAD_CHARS = 3_600
"""Characters per tool result (about 1,050 tokens, under the 0.2-of-window digest cut)."""
BRIEF_LINES = 17
"""Lines of background the user's message carries after the task (about 500 tokens), so the
model inputs are about 2,950 / 3,990 / 5,030 tokens after the 2nd / 3rd / 4th tool result:
under the prepare threshold, between it and the trigger, over the trigger (each by 400+)."""


@dataclass(frozen=True)
class Shape:
    """A task shape: window, characters per tool result, lines of background."""

    window: int
    payload_chars: int
    brief_lines: int


MAIN_SHAPE = Shape(WINDOW, PAYLOAD_CHARS, BRIEF_LINES)
SMALL_SHAPE = Shape(3_000, 1_560, 12)
"""Half the window, the same geometry (inputs about 1,590 / 2,060 / 2,530 tokens after the
2nd / 3rd / 4th result; prepare threshold 1,800, trigger 2,250). Where the main shape lets a
compaction keep the messages added since the prepare in its tail, this one may not, so
both ways of finishing a prepared compaction are timed. The server harness uses it too."""
SMALL_PAIRS: tuple[tuple[float, float], ...] = ((2.0, 2.0),)
"""(L, M) run on :data:`SMALL_SHAPE` (one pair, to keep the run short)."""
_BRIEF = (
    "Background note {i}: the build farm runs nightly; workers share one artifact cache, "
    "logs are rotated weekly, and flaky jobs are retried once by the scheduler."
)


REFERENCE_TOKENS = 2_300
"""``--proportional``: input tokens at which a summarizer call takes L (about the input of
the compaction at the trigger, ours: 2,339 by ``approximate_tokens``)."""


def task_message(task: DependentTask, *, brief_lines: int = BRIEF_LINES) -> HumanMessage:
    """The user's message: the task, then ``brief_lines`` lines of background."""
    brief = "\n".join(_BRIEF.format(i=i) for i in range(1, brief_lines + 1))
    return HumanMessage(f"{task.prompt()}\n\n{brief}" if brief else task.prompt(), id="task")


def goal_seconds(summarizer_latency: float, model_latency: float) -> float:
    """Issue 10's bound on the median pause: 5% of L when M >= L, else L - M + 5% of L."""
    slack = 0.05 * summarizer_latency
    if model_latency >= summarizer_latency:
        return slack
    return summarizer_latency - model_latency + slack


def _agent(system: str, policy: Any, tools: list[Any], summarizer: Any, window: int) -> Any:
    """The compiled agent of ``system``, or ``None`` when it needs a flag not installed."""
    if system == "lc_summarization":
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware

        middleware: Any = SummarizationMiddleware(
            model=summarizer, trigger=("tokens", int(0.75 * window)), keep=("messages", 4)
        )
        return create_agent(policy, tools, middleware=[middleware])
    config = compaction_config(
        prepare=system.endswith("_prepare"),
        context_window=window,
        micro_exclude_tools=("run_step",),  # no clearing: the trigger needs a full compaction
    )
    if config is None:
        return None
    if system.startswith("graph"):
        from langchain_compact.graph import create_compacting_agent

        return create_compacting_agent(
            policy,
            tools,
            config=config,
            summarizer=LLMSummarizer(summarizer),
            archive=None,
            recall_tool=False,
        )
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    mw = CompactionMiddleware(config=config, summarizer=LLMSummarizer(summarizer), archive=None)
    return create_agent(policy, tools, middleware=[mw])


def run_system(
    system: str,
    *,
    summarizer_latency: float,
    model_latency: float,
    window: int = WINDOW,
    steps: int = STEPS,
    payload_chars: int = PAYLOAD_CHARS,
    make_summarizer: Callable[[Timeline], BaseChatModel] | None = None,
    reference_tokens: int | None = None,
    brief_lines: int = BRIEF_LINES,
    use_async: bool = False,
) -> dict[str, Any] | None:
    """One run of ``system`` on the dependent task; ``None`` when the system needs the
    ``prepare`` flag and the installed package has none.

    ``make_summarizer(timeline)``: the summarizer model, logging ``summarizer`` events into
    the run's timeline (default: :class:`SleepySummarizer` with ``summarizer_latency``;
    the server harness passes a real model). ``reference_tokens``: the default summarizer's
    latency scales with its input, L at ``reference_tokens`` (see :data:`REFERENCE_TOKENS`).
    ``use_async``: run the agent with ``astream`` (async nodes and hooks) instead of
    ``stream``."""
    timeline = Timeline()
    task = DependentTask(steps=steps, payload_chars=payload_chars)
    tools = timed_tools(task.tools(), timeline)
    policy = SleepyPolicy(latency=model_latency, timeline=timeline)
    if make_summarizer is None:
        summarizer: BaseChatModel = SleepySummarizer(
            latency=summarizer_latency, timeline=timeline, reference_tokens=reference_tokens
        )
    else:
        summarizer = make_summarizer(timeline)
    agent = _agent(system, policy, tools, summarizer, window)
    if agent is None:
        return None
    config: Any = {"configurable": {"thread_id": f"pause-{system}"}, "recursion_limit": 200}
    events: dict[str, int] = {}
    reported: list[float] = []  # the package's own pause_seconds, where it reports one
    final: Any = None
    inputs = {"messages": [task_message(task, brief_lines=brief_lines)]}

    def take(mode: str, chunk: Any) -> None:
        nonlocal final
        if mode == "values":
            final = chunk
        elif isinstance(chunk, dict) and isinstance(chunk.get(EVENT_KEY), dict):
            event = chunk[EVENT_KEY]
            name = str(event.get("event"))
            events[name] = events.get(name, 0) + 1
            if name == "compaction" and isinstance(event.get("pause_seconds"), (int, float)):
                reported.append(round(float(event["pause_seconds"]), 4))

    async def astream() -> None:
        async for mode, chunk in agent.astream(inputs, config, stream_mode=["values", "custom"]):
            take(mode, chunk)

    begin = time.perf_counter()
    if use_async:
        asyncio.run(astream())
    else:
        for mode, chunk in agent.stream(inputs, config, stream_mode=["values", "custom"]):
            take(mode, chunk)
    wall = time.perf_counter() - begin
    messages = (final or {}).get("messages", [])
    text = messages[-1].text if messages else ""
    out = measure(timeline, model_latency=model_latency, wall=wall)
    verdict = task.check(text)
    out.update(
        events=events,
        reported_pause_s=reported,
        finished=verdict.ok,
        verdict=verdict.reason,
    )
    return out


def measure(timeline: Timeline, *, model_latency: float, wall: float) -> dict[str, Any]:
    """Pauses, waits and summarizer calls of one run, from its timeline."""
    starts = timeline.of("model_start")
    ends = [t for t, _ in timeline.of("model_end")]
    tool_starts = [t for t, _ in timeline.of("tool_start")]
    tool_ends = [t for t, _ in timeline.of("tool_end")]
    calls = [(info["start"], end, info["tokens"]) for end, info in timeline.of("summarizer")]
    tool_time = sum(e - s for s, e in zip(tool_starts, tool_ends, strict=False))
    turns: list[dict[str, Any]] = []
    for k in range(1, min(len(starts), len(ends) + 1)):
        start, info = starts[k]
        before = [t for t in tool_ends if ends[k - 1] <= t <= start]
        if not before:
            continue
        tool_end = before[-1]
        overlapping = [(s, e) for s, e, _ in calls if s < start and e > tool_end]
        turns.append(
            {
                "call": k + 1,
                "pause_s": round(start - tool_end, 4),
                # After a full compaction the previous input is no longer a prefix of this one
                # (micro-compaction keeps message ids; appending keeps the prefix).
                "compaction": info["ids"][: len(starts[k - 1][1]["ids"])]
                != starts[k - 1][1]["ids"],
                "summarizer_calls_in_pause": len(overlapping),
                "summarizer_s_in_pause": round(
                    sum(min(e, start) - max(s, tool_end) for s, e in overlapping), 4
                ),
                "input_tokens": info["tokens"],
            }
        )
    # Wait after a model call before the tool step starts (a prepare that outlasts the model
    # call holds the graph's superstep barrier).
    waits = [min((t for t in tool_starts if t >= end), default=end) - end for end in ends[:-1]]
    spans = [(s, e) for (s, _), e in zip(starts, ends, strict=False)]
    during_model = sum(1 for s, e, _ in calls if any(s < b and e > a for a, b in spans))
    pauses = [t["pause_s"] for t in turns if t["compaction"]]
    other = [t["pause_s"] for t in turns if not t["compaction"]]
    return {
        "calls": len(starts),
        "wall_s": round(wall, 3),
        "tool_s": round(tool_time, 4),
        "added_latency_s": round(wall - len(starts) * model_latency - tool_time, 3),
        "compactions": len(pauses),
        "pause_median_s": round(statistics.median(pauses), 4) if pauses else None,
        "pause_max_s": max(pauses) if pauses else None,
        "other_pause_median_s": round(statistics.median(other), 4) if other else None,
        "max_wait_after_model_s": round(max(waits), 4) if waits else 0.0,
        "summarizer_calls": len(calls),
        "summarizer_calls_during_model": during_model,
        "summarizer_call_s": [round(e - s, 3) for s, e, _ in calls],
        "summarizer_input_tokens": sum(tokens for _, _, tokens in calls),
        "turns": turns,
    }


def pause_bench(
    pairs: Sequence[tuple[float, float]] = PAIRS,
    systems: Sequence[str] = SYSTEMS,
    *,
    small_pairs: Sequence[tuple[float, float]] = SMALL_PAIRS,
    steps: int = STEPS,
    reference_tokens: int | None = None,
    use_async: bool = False,
) -> dict[str, Any]:
    """Every system at every (L, M) of ``pairs`` on the main task shape, then at every
    (L, M) of ``small_pairs`` on the small one; one run after the other (no parallel runs)."""
    out: dict[str, Any] = {
        "steps": steps,
        "shapes": {"main": asdict(MAIN_SHAPE), "small": asdict(SMALL_SHAPE)},
        "prepare_supported": PREPARE_SUPPORTED,
        "summarizer_latency": "fixed" if reference_tokens is None else "proportional",
        "reference_tokens": reference_tokens,
        "async": use_async,
        "labels": {s: LABELS[s] for s in systems},
        "pairs": [],
    }
    plan = [(MAIN_SHAPE, p) for p in pairs] + [(SMALL_SHAPE, p) for p in small_pairs]
    for shape, (summarizer_latency, model_latency) in plan:
        row: dict[str, Any] = {
            "L": summarizer_latency,
            "M": model_latency,
            "window": shape.window,
            "goal_s": round(goal_seconds(summarizer_latency, model_latency), 4),
            "systems": {},
        }
        for system in systems:
            print(
                f"[pause] window={shape.window} L={summarizer_latency} M={model_latency} "
                f"{system} ...",
                file=sys.stderr,
                flush=True,
            )
            result = run_system(
                system,
                summarizer_latency=summarizer_latency,
                model_latency=model_latency,
                window=shape.window,
                steps=steps,
                payload_chars=shape.payload_chars,
                brief_lines=shape.brief_lines,
                reference_tokens=reference_tokens,
                use_async=use_async,
            )
            if result is not None and result["pause_median_s"] is not None:
                result["meets_goal"] = result["pause_median_s"] <= row["goal_s"]
            row["systems"][system] = result
        out["pairs"].append(row)
    return out


def run(
    *,
    pairs: Sequence[tuple[float, float]] = PAIRS,
    systems: Sequence[str] = SYSTEMS,
    small_pairs: Sequence[tuple[float, float]] = SMALL_PAIRS,
    transcripts: int = 8,
    quick: bool = False,
    reference_tokens: int | None = None,
    use_async: bool = False,
    out_dir: Path | None = RESULTS_DIR,
    name: str = "pause",
) -> dict[str, Any]:
    """Run the three parts; write ``<name>.json`` and ``<name>.md`` into ``out_dir`` (not
    written when ``out_dir`` is ``None``); return the results. ``quick``: one window and a
    short task for the replay and fidelity parts (the smoke test)."""
    t0 = time.perf_counter()
    windows = (4_000,) if quick else (4_000, 8_000)
    results: dict[str, Any] = {
        "prepare_supported": PREPARE_SUPPORTED,
        "quick": quick,
        "pause": pause_bench(
            pairs,
            systems,
            small_pairs=small_pairs,
            reference_tokens=reference_tokens,
            use_async=use_async,
        ),
        "replay_tokens": replay_tokens(limit=transcripts, windows=windows),
        "fidelity": fidelity(windows=windows, steps=6 if quick else 14),
        "fork_cache": fork_cache_share(limit=transcripts, windows=windows),
    }
    results["seconds"] = round(time.perf_counter() - t0, 1)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{name}.json").write_text(
            json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8"
        )
        (out_dir / f"{name}.md").write_text(markdown(results), encoding="utf-8")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pause", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every latency (e.g. 0.01 for a smoke run; default 1)",
    )
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {SYSTEMS}"
    )
    parser.add_argument(
        "--transcripts", type=int, default=36, help="transcripts to replay (all 36)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="one window, short fidelity task (smoke run)"
    )
    parser.add_argument(
        "--proportional",
        action="store_true",
        help=f"summarizer latency proportional to its input (L at {REFERENCE_TOKENS:,} "
        "tokens, the whole span), so a short incremental call costs less than L; default: "
        "every summarizer call takes L",
    )
    parser.add_argument(
        "--async", dest="use_async", action="store_true", help="run the agents with astream"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results directory")
    parser.add_argument("--name", default="pause", help="results file stem (default pause)")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {SYSTEMS}")
    pairs = [(a * args.scale, b * args.scale) for a, b in PAIRS]
    small_pairs = [(a * args.scale, b * args.scale) for a, b in SMALL_PAIRS]
    logging.basicConfig(level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = run(
            pairs=pairs,
            systems=systems,
            small_pairs=small_pairs,
            transcripts=args.transcripts,
            quick=args.quick,
            reference_tokens=REFERENCE_TOKENS if args.proportional else None,
            use_async=args.use_async,
            out_dir=args.out,
            name=args.name,
        )
    print(markdown(results))
    print(f"[pause] wrote {args.out}/{args.name}.json and {args.name}.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
