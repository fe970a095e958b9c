"""``python -m bench``: run every benchmark in one process and write the results.

Writes ``bench/results/latest.json`` (every number plus the environment),
``bench/results/latest.md`` (the tables), ``bench/results/context.png`` (context per call on
the long synthetic run) and ``bench/README_SECTION.md`` (the
generated section of ``docs/benchmarks.md``), and
prints the markdown. ``--quick`` runs a tiny version of everything (for the smoke test);
``--out DIR`` writes the results elsewhere; ``--name NAME`` writes ``NAME.json`` /
``NAME.md`` / ``NAME_context.png`` instead of ``latest.*`` (and no README section).
Installs nothing: it needs the project's ``bench`` extra (``pip install -e ".[bench]"``)
and ``../shared`` beside the checkout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import importlib
import json
import logging
import os
import platform
import re
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from bench import harm, peers, report, scenarios, workloads
from bench.metrics import PRICES, CallLog, TruthCounter, error_stats, input_text, present
from bench.metrics import relative_error as rel

RESULTS_DIR = Path(__file__).resolve().parent / "results"
README_SECTION = Path(__file__).resolve().parent / "README_SECTION.md"


# --------------------------------------------------------------------------- replay


def replay(
    adapter: peers.Adapter,
    messages: Sequence[BaseMessage],
    *,
    truth: TruthCounter,
    window: int,
) -> CallLog:
    """Feed ``messages`` to ``adapter`` turn by turn; the scripted replies come from the
    transcript, with usage computed from what the system actually sent.

    ``log.extra`` gets ``first_view`` (how the fresh tool results reached the model on
    their first view, see :mod:`bench.harm`), ``grown_compactions`` (compactions after which
    the call was larger than what the system held plus the new messages) and, for a
    stopped run, ``stop_input_tokens`` and ``stop_next_fits`` (the refused call plus the
    transcript's reply fits the window)."""
    log = CallLog(window=window, truth=truth)
    trigger = peers.Budget(window).trigger
    text_commands = not harm.has_native_tool_calls(messages)
    task_id = workloads.original_task_id(messages)
    view = harm.FirstView()
    last = 0
    held: list[BaseMessage] = []  # what the system held after the previous call
    grown = 0
    for i in workloads.call_points(messages):
        new = messages[last:i]
        res = adapter.prepare(new)
        if res.stopped:  # the run ends here: no model call, but the summarizer ran
            log.stopped, log.stop_reason = True, res.stop_reason
            log.add_summarizer(res.summarizer)
            log.extra["stop_input_tokens"] = truth(res.model_input)
            log.extra["stop_next_fits"] = harm.next_call_fits(
                res.model_input, messages[i], truth=truth, window=window
            )
            break
        log.record(
            res.model_input,
            hook_seconds=res.hook_seconds,
            compacted=res.compacted,
            summarizer=res.summarizer,
        )
        # A compaction that grew the context: the call after it is larger than what the
        # system held (its previous call and reply) plus the new messages it was given.
        if res.compacted and truth(res.model_input) > truth([*held, *new]):
            grown += 1
        held = [*res.model_input, messages[i]]
        fresh = harm.fresh_results(new, text_commands=text_commands, task_id=task_id)
        view.add(harm.first_view(fresh, res.model_input, truth=truth, trigger=trigger))
        adapter.observe(peers.with_usage(messages[i], res.model_input, truth))
        last = i + 1
    log.extra["first_view"] = view
    log.extra["grown_compactions"] = grown
    return log


_SUM_KEYS = (
    "calls",
    "input_tokens",
    "cached_tokens",
    "fresh_tokens",
    "new_tokens",
    "summarizer_calls",
    "summarizer_input_tokens",
    "summarizer_output_tokens",
    "compactions",
    "back_to_back_compactions",
    "invalid_calls",
    "over_window_calls",
)


def transcripts_bench(
    transcripts: dict[str, list[BaseMessage]],
    windows: Sequence[int],
    systems: Sequence[str],
    truth: TruthCounter,
) -> dict[str, Any]:
    """Every transcript replayed by every system at every window; sums per system."""
    out: dict[str, Any] = {}
    for window in windows:
        budget = peers.Budget(window)
        per_window: dict[str, Any] = {}
        for name in systems:
            agg: dict[str, Any] = dict.fromkeys(_SUM_KEYS, 0)
            agg.update(
                scripted_calls=0,
                cost_usd=0.0,
                peak_context=0,
                violations={},
                stopped_runs=0,
                stop_reasons={},
                task_kept=0,
                pressure_runs=0,
                task_kept_under_pressure=0,
                stopped_next_fits=0,
                stopped_before_first_call=0,
                runs_with_calls=0,
                task_head_tail_kept=0,
                stopped_runs_detail=[],
                grown_compactions=0,
            )
            view = harm.FirstView()
            hook: list[float] = []
            for stem, msgs in transcripts.items():
                log = replay(peers.make(name, budget, truth), msgs, truth=truth, window=window)
                view.add(log.extra["first_view"])
                agg["grown_compactions"] += log.extra["grown_compactions"]
                task = workloads.original_task(msgs)
                if log.context:
                    agg["runs_with_calls"] += 1
                    agg["task_head_tail_kept"] += harm.task_head_tail_kept(log.last_input, task)
                if log.stopped:
                    fits = bool(log.extra["stop_next_fits"])
                    agg["stopped_next_fits"] += fits
                    agg["stopped_before_first_call"] += not log.context
                    agg["stopped_runs_detail"].append(
                        {
                            "transcript": stem,
                            "calls": len(log.context),
                            "refused_input_tokens": log.extra["stop_input_tokens"],
                            "next_call_fits": fits,
                        }
                    )
                s = log.summary()
                for k in _SUM_KEYS:
                    agg[k] += s[k]
                agg["scripted_calls"] += len(workloads.call_points(msgs))
                agg["cost_usd"] += s["cost_usd"]
                agg["peak_context"] = max(agg["peak_context"], s["peak_context"])
                for k, v in s["violations"].items():
                    agg["violations"][k] = agg["violations"].get(k, 0) + v
                if log.stopped:
                    agg["stopped_runs"] += 1
                    reason = re.sub(r"\d+", "N", log.stop_reason.split(":")[0])[:90]
                    agg["stop_reasons"][reason] = agg["stop_reasons"].get(reason, 0) + 1
                kept = peers.task_prompt_in(log.last_input, workloads.original_task(msgs))
                agg["task_kept"] += kept
                pts = workloads.call_points(msgs)
                if pts and truth(msgs[: pts[-1]]) >= budget.trigger:
                    agg["pressure_runs"] += 1
                    agg["task_kept_under_pressure"] += kept
                hook.extend(log.hook_seconds)
            agg["cost_usd"] = round(agg["cost_usd"], 4)
            agg["hook_ms_median"] = round(statistics.median(hook) * 1e3, 4) if hook else 0.0
            agg["runs"] = len(transcripts)
            agg["fresh"] = view.as_dict()
            agg["fresh_hidden_examples"] = view.examples
            per_window[name] = agg
        out[str(window)] = per_window
    return out


# --------------------------------------------------------------------------- synthetic


def synthetic_bench(
    run: workloads.SyntheticRun, window: int, systems: Sequence[str], truth: TruthCounter
) -> dict[str, Any]:
    """The long synthetic run at ``window``: per-system metrics, retention and the context
    size of every call (for the plot)."""
    budget = peers.Budget(window)
    out: dict[str, Any] = {
        "window": window,
        "trigger": budget.trigger,
        "calls": run.calls,
        "constraints": run.constraints,
        "facts": run.facts,
        "systems": {},
    }
    for name in systems:
        log = replay(peers.make(name, budget, truth), run.messages, truth=truth, window=window)
        s = log.summary()
        text = input_text(log.last_input)
        kept_facts = {f["value"]: present(f["value"], text) for f in run.facts}
        by_where: dict[str, list[int]] = {}
        for f in run.facts:
            by_where.setdefault(f["where"], [0, 0])
            by_where[f["where"]][0] += kept_facts[f["value"]]
            by_where[f["where"]][1] += 1
        s.update(
            constraints_kept=sum(present(c, text) for c in run.constraints),
            constraints_total=len(run.constraints),
            facts_kept=sum(kept_facts.values()),
            facts_total=len(run.facts),
            facts_by_where={k: f"{v[0]}/{v[1]}" for k, v in sorted(by_where.items())},
            context_per_call=log.context,
        )
        out["systems"][name] = s
    return out


# --------------------------------------------------------------------------- dependent task


def dependent_bench(
    windows: Sequence[int],
    systems: Sequence[str],
    truth: TruthCounter,
    *,
    steps: int,
    payload_chars: int,
    tool_only: bool = False,
) -> dict[str, Any]:
    """The dependent task run by a real agent of each system with the context-reading
    policy as the model: it can only finish if every earlier value survived.

    ``tool_only``: the policy's tool calls carry only the step number
    (:class:`langchain_compact.demo.ToolOnlyPolicy`), so each value appears only in its step's
    tool result."""
    from langchain_compact.demo import (
        ContextReadingPolicy,
        DependentTask,
        ToolOnlyPolicy,
        tool_only_tools,
    )

    task = DependentTask(steps=steps, payload_chars=payload_chars)
    tools = tool_only_tools(task) if tool_only else task.tools()
    from langchain_core.utils.function_calling import convert_to_openai_tool

    schema = json.dumps(
        [convert_to_openai_tool(t) for t in tools], sort_keys=True, ensure_ascii=False
    )
    schema_tokens = truth([HumanMessage(schema)])
    out: dict[str, Any] = {
        "steps": steps,
        "payload_chars": payload_chars,
        "code": task.code,
        "tool_only": tool_only,
        "systems": list(systems),
        "windows": {},
    }
    for window in windows:
        budget = peers.Budget(window)
        per: dict[str, Any] = {}
        for name in systems:
            recorder: list[list[BaseMessage]] = []
            policy: Any = ContextReadingPolicy(token_counter=truth, recorder=recorder)
            if tool_only:
                policy = ToolOnlyPolicy(inner=policy)
            provider = "scripted"  # the policy's replies carry model_provider="scripted"
            summary_model = peers.make_summary_model(budget, truth, provider=provider)
            summary_model.position = lambda rec=recorder: len(rec)  # type: ignore[misc]
            agent = peers.dependent_agent(name, budget, policy, tools, summary_model)
            error = ""
            final = ""
            try:
                result = agent.invoke(
                    {"messages": [HumanMessage(task.prompt(), id="task")]},
                    {"recursion_limit": 20 * steps + 100},
                )
                last = result["messages"][-1]
                final = last.text if isinstance(last, BaseMessage) else str(last)
            except Exception as exc:  # a peer that crashes fails the task; say how
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
            log = CallLog(window=window, truth=truth)
            positions = list(summary_model.positions)
            count = 0
            for k, model_input in enumerate(recorder):
                calls = [
                    (c[0], c[1])
                    for c, pos in zip(summary_model.log, positions, strict=False)
                    if pos == k
                ]
                ours = name.startswith("ours")
                compacted, count = peers.compacted_now(ours, count, model_input, bool(calls))
                log.record(
                    model_input,
                    hook_seconds=0.0,
                    compacted=compacted,
                    summarizer=calls,
                    extra_tokens=schema_tokens,
                )
            verdict = task.check(final)
            s = log.summary()
            s.pop("hook_ms_median", None)
            s.pop("hook_ms_total", None)
            s.pop("stopped", None)
            s.pop("stop_reason", None)
            s.update(
                finished=verdict.ok,
                verdict=error or verdict.reason,
                final_head=final[:160],
                run_steps=sum(
                    1
                    for m in (recorder[-1] if recorder else [])
                    if isinstance(m, AIMessage) and m.tool_calls
                ),
            )
            per[name] = s
        out["windows"][str(window)] = per
    return out


# --------------------------------------------------------------------------- overhead


def _with_history_usage(history: list[BaseMessage], truth: TruthCounter) -> list[BaseMessage]:
    """AI messages get the usage a provider would have reported for the raw prefix."""
    out: list[BaseMessage] = []
    running = 3
    for m in history:
        if isinstance(m, AIMessage):
            tokens_out = truth([m]) - 3
            m = m.model_copy(
                update={
                    "usage_metadata": {
                        "input_tokens": running,
                        "output_tokens": tokens_out,
                        "total_tokens": running + tokens_out,
                    },
                    "response_metadata": {"model_provider": "openai"},
                }
            )
        running += truth.message(m)
        out.append(m)
    return out


def overhead_bench(
    transcripts: dict[str, list[BaseMessage]],
    sizes: Sequence[int],
    systems: Sequence[str],
    truth: TruthCounter,
    *,
    timed: dict[int, int],
) -> dict[str, Any]:
    """Median time of each system's own pre-model work per call on a history of N messages,
    with the budget far above the history (no compaction due): the per-call tax."""
    big = _with_history_usage(
        workloads.long_history(transcripts, max(sizes) + 8 * max(timed.values()) + 50), truth
    )
    points = workloads.call_points(big)
    budget = peers.Budget(window=50 * truth(big))
    median_ms: dict[str, dict[str, float]] = {s: {} for s in systems}
    for n in sizes:
        pts = [p for p in points if p >= n][: timed[n] + 1]
        adapters = {name: peers.make(name, budget, truth) for name in systems}
        for adapter in adapters.values():
            adapter.prepare(big[: pts[0]])  # first call on the thread: untimed warm-up
            adapter.observe(big[pts[0]])
        samples: dict[str, list[float]] = {name: [] for name in systems}
        last = pts[0] + 1
        gc.collect()
        for p in pts[1:]:
            # Interleaved: every system takes the same call back to back, so background
            # load on a shared machine hits all of them alike.
            for name, adapter in adapters.items():
                res = adapter.prepare(big[last:p])
                samples[name].append(res.hook_seconds)
                adapter.observe(peers.with_usage(big[p], res.model_input, truth))
            last = p + 1
        for name in systems:
            median_ms[name][str(n)] = round(statistics.median(samples[name]) * 1e3, 4)
    ratio = {
        name: {
            n: round(v / median_ms["ours"][n], 2) if median_ms["ours"][n] else None
            for n, v in per.items()
        }
        for name, per in median_ms.items()
    }
    return {
        "sizes": list(sizes),
        "timed_calls": {str(k): v for k, v in timed.items()},
        "median_ms": median_ms,
        "ratio_to_ours": ratio,
    }


# --------------------------------------------------------------------------- counting


def counting_bench(
    transcripts: dict[str, list[BaseMessage]],
    chinese: dict[str, str],
    synthetic: workloads.SyntheticRun,
    truth: TruthCounter,
) -> dict[str, Any]:
    """Each system's own counter against the o200k reference."""
    from langchain_compact.tokens import TiktokenCounter, approximate_tokens

    counters: dict[str, tuple[str, Any]] = {
        "approximate_tokens": ("langchain-compact (default)", approximate_tokens),
        "TiktokenCounter": ("langchain-compact (exact option)", TiktokenCounter("gpt-4o")),
        "count_tokens_approximately": (
            "SummarizationMiddleware, ContextEditingMiddleware, langmem, trim_messages, deepagents",
            count_tokens_approximately,
        ),
    }
    corpora = {
        "english": list(transcripts.values()),
        "chinese": [[HumanMessage(t)] for t in chinese.values()],
        "mixed": [synthetic.messages],
    }
    out: dict[str, Any] = {}
    for key, (used_by, fn) in counters.items():
        row: dict[str, Any] = {"used_by": used_by}
        for corpus, lists in corpora.items():
            row[corpus] = error_stats([rel(fn(msgs), truth(msgs)) for msgs in lists])
        out[key] = row
    return {
        "reference": "tiktoken o200k_base, 3 tokens per message + 3 reply priming",
        "corpora": {
            "english": f"{len(transcripts)} transcripts (whole histories)",
            "chinese": f"{len(chinese)} Chinese seed articles",
            "mixed": "the synthetic run (logs with ~20% Chinese lines)",
        },
        "counters": out,
    }


# --------------------------------------------------------------------------- extras


def extras() -> dict[str, Any]:
    """``bench/recall.py`` and ``bench/counting.py`` (other engineers' benchmarks), if present."""
    out: dict[str, Any] = {}
    for mod in ("counting", "recall"):
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"bench.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bench.{mod}":
                raise
            out[mod] = {"skipped": f"bench/{mod}.py is not present"}
            continue
        try:
            out[mod] = {"result": module.run(), "seconds": round(time.perf_counter() - t0, 1)}
        except Exception as exc:  # their failure must not lose ours
            out[mod] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


# --------------------------------------------------------------------------- main


def environment() -> dict[str, Any]:
    versions = {}
    for dist in (
        "langchain-compact",
        "langchain-core",
        "langchain",
        "langgraph",
        "langmem",
        "deepagents",
        "tiktoken",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": versions,
    }


def run(
    *,
    quick: bool = False,
    out_dir: Path = RESULTS_DIR,
    section: Path | None = None,
    name: str = "latest",
) -> dict:
    """Run everything; write ``<name>.json``, ``<name>.md`` and the plot into ``out_dir``;
    return the results dict."""
    t_start = time.perf_counter()
    truth = TruthCounter()
    systems = list(peers.SYSTEMS)
    if quick:
        transcripts = workloads.load_transcripts(limit=2)
        windows: list[int] = [4000, 32000]
        synth = workloads.synthetic_run(calls=30, facts=3)
        synth_window = 4000
        sizes, timed = [50, 100], {50: 2, 100: 2}
        dep_windows, steps, payload = [4000], 4, 2500
        turns = 4
    else:
        transcripts = workloads.load_transcripts()
        windows = [4000, 8000, 32000, 128000]
        synth = workloads.synthetic_run(calls=320, facts=12)
        synth_window = 8000
        sizes, timed = [50, 500, 5000], {50: 40, 500: 25, 5000: 12}
        dep_windows, steps, payload = [4000, 8000], 14, 6000
        turns = scenarios.SCENARIO_TURNS
    timings: dict[str, float] = {}

    def timed_step(key: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        print(f"[bench] {key} ...", file=sys.stderr, flush=True)
        value = fn(*args, **kwargs)
        timings[key] = round(time.perf_counter() - t0, 1)
        return value

    results: dict[str, Any] = {
        "meta": {**environment(), "quick": quick},
        "config": {
            "windows": windows,
            "trigger_ratio": 0.75,
            "budgets": {
                str(w): {
                    "trigger": peers.Budget(w).trigger,
                    "summary_tokens": peers.Budget(w).summary_tokens,
                }
                for w in sorted({*windows, synth_window, *dep_windows})
            },
            "systems": {name: peers.LABELS[name] for name in systems},
            "prices": PRICES,
        },
    }
    results["overhead"] = timed_step(
        "overhead", overhead_bench, transcripts, sizes, systems, truth, timed=timed
    )
    results["counting"] = timed_step(
        "counting", counting_bench, transcripts, workloads.chinese_texts(), synth, truth
    )
    results["transcripts"] = timed_step(
        "transcripts", transcripts_bench, transcripts, windows, systems, truth
    )
    results["synthetic"] = timed_step(
        "synthetic", synthetic_bench, synth, synth_window, systems, truth
    )
    results["dependent"] = timed_step(
        "dependent",
        dependent_bench,
        dep_windows,
        systems,
        truth,
        steps=steps,
        payload_chars=payload,
    )
    results["dependent_tool_only"] = timed_step(
        "dependent_tool_only",
        dependent_bench,
        dep_windows,
        ["ours", "ours_default", *systems[1:]],
        truth,
        steps=steps,
        payload_chars=payload,
        tool_only=True,
    )
    results["scenario"] = timed_step("scenario", scenarios.twelve_turns, truth, turns=turns)
    results["probes"] = timed_step("probes", scenarios.probes, truth, replay)
    if quick:
        results["extras"] = {m: {"skipped": "not run with --quick"} for m in ("counting", "recall")}
    else:
        results["extras"] = timed_step("extras", extras)
    timings["total"] = round(time.perf_counter() - t_start, 1)
    results["meta"]["seconds"] = timings
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(
        json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    image = report.image_name(name)
    markdown = report.markdown(results, image=image)
    (out_dir / f"{name}.md").write_text(markdown, encoding="utf-8")
    report.plot(results, out_dir / image)
    if section is not None:
        section.write_text(report.readme_section(results), encoding="utf-8")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny workloads (smoke test)")
    parser.add_argument(
        "--out", type=Path, default=None, help=f"results directory (default {RESULTS_DIR})"
    )
    parser.add_argument(
        "--name",
        default="latest",
        help="results file stem: writes <name>.json and <name>.md (default latest); any "
        "other name leaves latest.* and the README section alone",
    )
    args = parser.parse_args(argv)
    out_dir = args.out or RESULTS_DIR
    # The README section is regenerated only by a full run into the committed results.
    committed = args.out is None and not args.quick and args.name == "latest"
    section = README_SECTION if committed else None
    logging.basicConfig(level=logging.ERROR)
    with warnings.catch_warnings():
        # Peers' own warnings (deprecations, langmem's trim fallback) are not ours to fail on.
        warnings.simplefilter("ignore")
        results = run(quick=args.quick, out_dir=out_dir, section=section, name=args.name)
    print(report.markdown(results, image=report.image_name(args.name)))
    print(
        f"[bench] wrote {out_dir}/{args.name}.json, {args.name}.md, {report.image_name(args.name)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
