"""Turn ``latest.json`` into markdown tables, the context plot and the generated section of
``docs/benchmarks.md`` (``bench/README_SECTION.md``).

``python -m bench.report [results.json]`` regenerates ``<stem>.md``, the plot and (from the
committed ``latest.json`` only) ``bench/README_SECTION.md`` from an existing results file
without re-running anything.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import report_harm as harm
from bench.peers import LABELS, SUMMARIZING

OURS = "ours"
_SHORT = {
    "ours": "**ours** (graph)",
    "ours_lcel": "ours (LCEL)",
    "lc_summarization": "SummarizationMiddleware",
    "lc_context_editing": "ContextEditingMiddleware",
    "langmem": "langmem SummarizationNode",
    "trim_messages": "trim_messages",
    "deepagents": "deepagents",
    "ours_default": "ours (graph, default summarizer)",
}


def _name(system: str) -> str:
    return _SHORT.get(system, system)


def _int(n: float) -> str:
    return f"{round(n):,}"


def _ms(v: float) -> str:
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def _ratio(r: float | None) -> str:
    if r is None:
        return "n/a"
    return f"{r:.2f}x" if r < 10 else f"{r:.0f}x"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _systems(results: dict[str, Any]) -> list[str]:
    return list(results["config"]["systems"])


# --------------------------------------------------------------------------- tables


def overhead_table(results: dict[str, Any]) -> str:
    ov = results["overhead"]
    sizes = [str(n) for n in ov["sizes"]]
    header = ["system"] + [f"{int(n):,} msgs: ms/call (vs ours)" for n in sizes]
    rows = []
    for s in _systems(results):
        rows.append(
            [_name(s)]
            + [f"{_ms(ov['median_ms'][s][n])} ({_ratio(ov['ratio_to_ours'][s][n])})" for n in sizes]
        )
    return _table(header, rows)


def counting_table(results: dict[str, Any]) -> str:
    c = results["counting"]["counters"]
    header = ["counter", "used by", "English", "Chinese", "mixed (synthetic)"]
    rows = []
    for key, row in c.items():
        cells = [f"`{key}`", row["used_by"]]
        for corpus in ("english", "chinese", "mixed"):
            st = row[corpus]
            cells.append(f"{st['mean_pct']:+.1f}% (abs {st['mean_abs_pct']:.1f}%)")
        rows.append(cells)
    return _table(header, rows)


def _violations(v: dict[str, int]) -> str:
    parts = [f"{k.replace('_', ' ')} {n}" for k, n in sorted(v.items()) if n]
    return ", ".join(parts) if parts else "0"


def transcripts_table(results: dict[str, Any], window: str) -> str:
    tr = results["transcripts"][window]
    header = [
        "system",
        "calls made / scripted",
        "runs stopped",
        "peak ctx",
        "calls over window",
        "input tokens",
        "cached %",
        "summarizer calls (tokens in/out)",
        "cost $",
        "task kept (runs over trigger)",
        "invalid inputs",
        "back-to-back compactions",
        "ms/call (median)",
    ]
    rows = []
    for s in _systems(results):
        a = tr[s]
        cached = 100 * a["cached_tokens"] / a["input_tokens"] if a["input_tokens"] else 0
        rows.append(
            [
                _name(s),
                f"{a['calls']}/{a['scripted_calls']}",
                f"{a['stopped_runs']}/{a['runs']}",
                _int(a["peak_context"]),
                str(a["over_window_calls"]),
                _int(a["input_tokens"]),
                f"{cached:.0f}%",
                f"{a['summarizer_calls']} ({_int(a['summarizer_input_tokens'])}/"
                f"{_int(a['summarizer_output_tokens'])})",
                f"{a['cost_usd']:.2f}",
                f"{a['task_kept_under_pressure']}/{a['pressure_runs']}",
                str(a["invalid_calls"]),
                str(a["back_to_back_compactions"]) if s in SUMMARIZING else "n/a",
                _ms(a["hook_ms_median"]),
            ]
        )
    return _table(header, rows)


def violations_note(rows: dict[str, dict[str, Any]]) -> str:
    """One line naming the kinds of invalid inputs per system (empty when there are none)."""
    parts = [
        f"{_name(s)}: {_violations(a.get('violations', {}))}"
        for s, a in rows.items()
        if any(a.get("violations", {}).values())
    ]
    return ("Invalid inputs by kind (messages): " + "; ".join(parts) + ".") if parts else ""


def synthetic_table(results: dict[str, Any]) -> str:
    sy = results["synthetic"]
    header = [
        "system",
        "calls",
        "peak ctx",
        "calls over window",
        "input tokens",
        "cached %",
        "summarizer calls (tokens in/out)",
        "cost $ (vs SumMW)",
        "constraints kept",
        "facts kept (user / assistant / tool)",
        "tool facts kept",
        "invalid inputs",
        "back-to-back compactions",
        "ms/call (median)",
    ]
    rows = []
    peer_cost = sy["systems"].get("lc_summarization", {}).get("cost_usd", 0.0)
    for s in _systems(results):
        a = sy["systems"][s]
        cached = 100 * a["cached_tokens"] / a["input_tokens"] if a["input_tokens"] else 0
        fw = a["facts_by_where"]
        calls = f"{a['calls']}/{sy['calls']}" + (" (stopped)" if a.get("stopped") else "")
        rows.append(
            [
                _name(s),
                calls,
                _int(a["peak_context"]),
                str(a["over_window_calls"]),
                _int(a["input_tokens"]),
                f"{cached:.0f}%",
                f"{a['summarizer_calls']} ({_int(a['summarizer_input_tokens'])}/"
                f"{_int(a['summarizer_output_tokens'])})",
                f"{a['cost_usd']:.2f} ({_vs(a['cost_usd'], peer_cost)})",
                f"{a['constraints_kept']}/{a['constraints_total']}",
                f"{a['facts_kept']}/{a['facts_total']} "
                f"({fw.get('user', '-')} / {fw.get('assistant', '-')} / {fw.get('tool', '-')})",
                fw.get("tool", "-"),
                str(a["invalid_calls"]),
                str(a["back_to_back_compactions"]) if s in SUMMARIZING else "n/a",
                _ms(a["hook_ms_median"]),
            ]
        )
    return _table(header, rows)


def _vs(cost: float, peer: float) -> str:
    return f"{cost / peer:.2f}x" if peer else "n/a"


def _dependent_cell(a: dict[str, Any]) -> str:
    if not a["finished"]:
        return f"no: {a['verdict'][:80]}"
    if a["over_window_calls"]:
        return f"yes, but {a['over_window_calls']} calls over the window (a provider rejects them)"
    return "**yes**"


def dependent_table(results: dict[str, Any], key: str = "dependent") -> str:
    dep = results[key]
    header = ["system"]
    for w in dep["windows"]:
        k = f"{int(w) // 1000}k"
        header += [f"{k}: finished", f"{k}: model calls, peak ctx, summarizer calls"]
    rows = []
    for s in dep.get("systems", _systems(results)):
        row = [_name(s)]
        for w in dep["windows"]:
            a = dep["windows"][w][s]
            row += [
                _dependent_cell(a),
                f"{a['calls']}, {_int(a['peak_context'])}, {a['summarizer_calls']}",
            ]
        rows.append(row)
    return _table(header, rows)


def extras_section(results: dict[str, Any]) -> str:
    parts = []
    for mod, data in results.get("extras", {}).items():
        if "skipped" in data:
            parts.append(f"- `bench/{mod}.py`: skipped ({data['skipped']}).")
        elif "error" in data:
            parts.append(f"- `bench/{mod}.py`: failed: {data['error']}")
        else:
            parts.append(
                f"- `bench/{mod}.py` ({data.get('seconds', '?')} s): results under "
                f"`extras.{mod}` in `latest.json`."
            )
            flat = _flat(data["result"])
            if flat:
                parts.append("")
                parts.append(_table(["key", "value"], [[f"`{k}`", v] for k, v in flat[:40]]))
                parts.append("")
    return "\n".join(parts)


def _flat(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        if len(obj) <= 4 and all(not isinstance(x, (dict, list)) for x in obj):
            out.append((prefix, ", ".join(str(x) for x in obj)))
    elif isinstance(obj, float):
        out.append((prefix, f"{obj:.4g}"))
    else:
        out.append((prefix, str(obj)))
    return out


def _scenario_title(results: dict[str, Any]) -> str:
    sc = results.get("scenario") or {"turns": "?", "window": 0}
    return (
        f"{sc['turns']} tool turns, one result of about 3,100 tokens each, "
        f"{int(sc['window']):,}-token window, real agents, scripted model"
    )


def harm_sections(results: dict[str, Any], *, level: str, number: str = "") -> list[str]:
    """The do-no-harm tables over the transcript replays (markdown lines)."""
    first = next(iter(results["transcripts"].values()))[OURS]
    runs = first["runs"]
    if "fresh" not in first:  # a results file from before these measures existed
        return [f"{level} {number}Do no harm", "", "- not measured in this results file", ""]
    return [
        f"{level} {number}Do no harm: {runs} transcripts replayed at every window",
        "",
        harm.EXPLAIN,
        "",
        "Fresh tool results hidden on their first view:",
        "",
        harm.fresh_table(results),
        "",
        "The same in two small probes at a 128k-token window (a 13,000-character file read; "
        "six parallel results of about 3,000 characters):",
        "",
        harm.probe_table(results),
        "",
        "Runs stopped, and the task in the smallest window:",
        "",
        harm.stops_table(results),
        "",
        "Compactions that grew the context (the call after them larger than the previous "
        "call, its reply and the new messages together):",
        "",
        harm.grown_table(results),
        "",
        "Cached share of input tokens (cost relative to SummarizationMiddleware's):",
        "",
        harm.cache_table(results),
        "",
        "Where the uncached input comes from (shares of each system's input): *new* is "
        "content no earlier call sent (new messages, summaries, placeholders), uncached "
        "whatever a system does; *re-sent* was sent before and is sent again because the "
        "prefix broke in front of it (a compaction, a clearing, a digest). The ceiling, "
        "1 - new, is the highest cached share the system could reach with no break at all. "
        "A system that shows the same new content in less input (it compacts) has a lower "
        "ceiling than one that sends everything, whatever it does about breaks.",
        "",
        harm.uncached_table(results),
        "",
    ]


def dependent_sections(results: dict[str, Any], *, level: str, number: str = "") -> list[str]:
    """The dependent task, as the demo runs it and with values only in tool results."""
    dep = results["dependent"]
    lines = [
        f"{level} {number}Dependent task ({dep['steps']} steps, real agents, context-reading "
        "policy as the model)",
        "",
        "The policy restates each value in its next tool call (`run_step(step, previous)`):",
        "",
        dependent_table(results),
        "",
    ]
    if "dependent_tool_only" in results:
        lines += [
            "Values only in tool results: the tool calls carry only the step number, so each "
            "step's value appears only in that step's tool result and the final answer must "
            "list them all. *ours (graph, default summarizer)* is `create_compacting_agent` "
            "with its default extractive summarizer; *ours* uses `LLMSummarizer` over the "
            "shared extractive summary model.",
            "",
            dependent_table(results, "dependent_tool_only"),
            "",
        ]
    return lines


def markdown(results: dict[str, Any], *, image: str = "context.png") -> str:
    """All tables of ``results`` as one markdown document."""
    meta = results["meta"]
    cfg = results["config"]
    prices = cfg["prices"]
    budgets = ", ".join(
        f"window {int(w):,}: trigger {b['trigger']:,}, summary bound {b['summary_tokens']:,}"
        for w, b in cfg["budgets"].items()
    )
    v = meta["versions"]
    lines = [
        "# Benchmark results",
        "",
        f"{meta['date']}; Python {meta['python']}, {meta['cpu_count']} CPUs; "
        + ", ".join(f"{k} {val}" for k, val in v.items())
        + (" — **quick run (tiny workloads)**" if meta.get("quick") else "")
        + f"; total {meta['seconds'].get('total', '?')} s.",
        "",
        f"Budgets (tokens): {budgets}. Tokens are o200k_base counts of what each system "
        "sent to the model. Prices: "
        f"{prices['model']}: fresh input ${prices['fresh_input']:.2f}, cached input "
        f"${prices['cached_input']:.2f}, output ${prices['output']:.2f} (summarizer output).",
        "",
        "## 1. Decision overhead per model call (median ms; no compaction due)",
        "",
        overhead_table(results),
        "",
        "## 2. Counting error against tiktoken o200k (mean signed error, mean absolute error)",
        "",
        counting_table(results),
        "",
        *harm_sections(results, level="##", number="3. "),
    ]
    for w in results["transcripts"]:
        lines += [
            f"## 4. Transcripts replayed at a {int(w):,}-token window "
            f"({results['transcripts'][w][OURS]['runs']} runs, all summed)",
            "",
            transcripts_table(results, w),
            "",
            violations_note(results["transcripts"][w]),
            "",
        ]
    sy = results["synthetic"]
    lines += [
        f"## 5. Long synthetic run ({sy['calls']} model calls, window {sy['window']:,})",
        "",
        synthetic_table(results),
        "",
        violations_note(sy["systems"]),
        "",
        f"![context tokens per call]({image})",
        "",
        f"## 6. The 12-turn scenario ({_scenario_title(results)})",
        "",
        harm.scenario_table(results),
        "",
        *dependent_sections(results, level="##", number="7. "),
        "## 8. Other benchmarks in bench/",
        "",
        extras_section(results) or "- none",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- plot


def plot(results: dict[str, Any], path: Path) -> None:
    """Context tokens per model call on the synthetic run, one line per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sy = results["synthetic"]
    fig, ax = plt.subplots(figsize=(11, 5.2), dpi=110)
    styles = {
        "ours": {"lw": 2.2, "color": "#d62728", "zorder": 5},
        "ours_lcel": {"lw": 1.2, "color": "#ff9896", "ls": "--", "zorder": 4},
        "lc_summarization": {"lw": 1.1, "color": "#1f77b4"},
        "lc_context_editing": {"lw": 1.1, "color": "#2ca02c"},
        "langmem": {"lw": 1.1, "color": "#9467bd"},
        "trim_messages": {"lw": 1.1, "color": "#7f7f7f"},
        "deepagents": {"lw": 1.1, "color": "#8c564b"},
    }
    for s in _systems(results):
        data = sy["systems"][s]["context_per_call"]
        ax.plot(range(1, len(data) + 1), data, label=LABELS.get(s, s), **styles.get(s, {}))
    ax.axhline(sy["trigger"], color="black", ls=":", lw=1)
    ax.text(2, sy["trigger"], " trigger (0.75 x window)", va="bottom", fontsize=8)
    ax.axhline(sy["window"], color="black", ls="-", lw=0.8)
    ax.text(2, sy["window"], " window", va="bottom", fontsize=8)
    ax.set_xlabel("model call")
    ax.set_ylabel("context tokens sent (o200k)")
    ax.set_title(
        f"Long synthetic run: context per model call ({sy['calls']} calls, "
        f"{sy['window']:,}-token window)"
    )
    ax.set_xlim(1, sy["calls"])
    top = max(max(sy["systems"][s]["context_per_call"] or [0]) for s in _systems(results))
    ax.set_ylim(0, max(top, sy["window"]) * 1.08)
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- README


def _better(ours: float, peer: float, *, tolerance: float = 0.05) -> bool:
    """True when the peer's value is lower than ours by more than ``tolerance`` (relative)."""
    return peer < ours * (1 - tolerance)


_CHEAPER = {
    "trim_messages": "one approximate count of the history and a cut",
    "lc_summarization": "one approximate count of the history; nothing else until the trigger",
    "lc_context_editing": "one approximate count (plus a deep copy of the history)",
    "langmem": "one approximate count per message",
    "ours_lcel": "a digest lookup per message to replay its memo, then the same work",
    "deepagents": "one approximate count of the history with the system prompt and tool "
    "schemas; nothing else until the trigger",
}

WHY: dict[str, Callable[[str], str]] = {
    "overhead": lambda p: (
        f"{_name(p)} does {_CHEAPER.get(p, 'less per call')}; ours runs micro-compaction on "
        "every call (a scan for read results to digest, and the pressure check) and "
        "the usage-anchored count twice (once in micro-compaction, once in the routing "
        "decision), each a few passes over the message metadata. That fixed work dominates "
        "at 50 messages; at thousands of messages it is the metadata passes (a known "
        "optimisation: compute the count once per turn and scan back only to the anchor)."
    ),
    "counting": lambda p: (
        "on English text and code, chars/4 happens to sit close to o200k; ours is calibrated "
        "at 3.6 chars per token and errs on the side of over-counting (compacting a little "
        "early), theirs under-counts (overflowing a little late). On Chinese theirs is off by "
        "half."
    ),
    "stopped": lambda p: (
        "ours ends the run, with a message to the user, instead of calling the model only "
        "when its estimate of the next call is over the window minus a reply reserve (a "
        "twentieth of the window) even after compacting. In a 4k window that is mostly the "
        "SWE-agent and OpenHands transcripts, whose system prompt, pinned task and newest "
        "observation leave little room; the 'next call fits' count judges with the reply the "
        "transcript actually gave, which is smaller than the reserve. Peers never stop: they "
        "keep calling the model, over the window or without the task (see those columns)."
    ),
    "input_tokens": lambda p: (
        f"{_name(p)} "
        + {
            "trim_messages": "keeps only the last T tokens and adds nothing (no summary, no "
            "pinned task, no placeholders), so its inputs are the smallest; the price is the "
            "task and every older fact",
            "lc_summarization": "keeps one summary and no pinned task or system-prompt accounting",
            "langmem": "keeps one running summary and no pinned task",
            "lc_context_editing": "clears tool results only",
            "deepagents": "keeps one summary and a tenth of the window of recent messages, "
            "with no pinned task or system-prompt accounting",
        }.get(p, "sends less per call")
        + "."
    ),
    "cost": lambda p: (
        f"cost follows input tokens and summarizer calls; {_name(p)} sends fewer tokens per "
        "call (see above)."
    ),
    "peak": lambda p: (
        f"{_name(p)} "
        + (
            "keeps only a tenth of the window of recent messages beside its summary, so it "
            "peaks lower"
            if p == "deepagents"
            else "cuts every input to its budget, so it peaks lower"
        )
        + "; ours lets the context grow to the trigger and keeps the system prompt, the "
        "pinned task, every summary and the kept tail."
    ),
    "facts": lambda p: (
        f"{_name(p)} "
        + (
            "never removes a user or assistant message (it only clears tool results), so "
            "facts stated in them stay, at the price of calls far over the window"
            if p == "lc_context_editing"
            else "kept more of the planted values in its summary"
        )
        + "; ours summarises user and assistant messages (the shared extractive "
        "summarizer keeps the first and the newest key lines within its bound) and, under "
        "pressure, clears old tool results to a placeholder that keeps their fact lines "
        "(originals archived, reachable with the recall tool)."
    ),
    "task": lambda p: (
        f"{_name(p)} never removes a user message; ours pins the task in every compacted "
        "history, and misses it only in runs it stopped before the first model call."
    ),
    "fresh": lambda p: (
        f"{_name(p)} leaves a result whole until its trigger (and then sends calls over the "
        "window, or summarises it away); ours never hides a result the model has not read "
        "unless the call could not fit with it whole: none of ours' hidden results would "
        "have fitted."
    ),
    "dependent": lambda p: (
        f"{_name(p)} kept calling the model where ours stopped (see 'runs stopped' above)."
    ),
}


def _cache_why(tr: dict[str, Any], ahead: list[str]) -> str:
    """Why peers reach a higher cached share at one window, from the numbers: what the
    peers ahead send, and the highest share ours could reach with no break at all."""
    if not ahead:
        return ""
    rejected = [p for p in ahead if tr[p]["over_window_calls"] or tr[p]["invalid_calls"]]
    parts = []
    if rejected:
        parts.append(
            ", ".join(
                f"{_name(p)} sends {tr[p]['over_window_calls']} calls over the window and "
                f"{tr[p]['invalid_calls']} invalid inputs"
                for p in rejected
            )
            + " (a provider rejects those; here they count, mostly cached)"
        )
    idle = [p for p in ahead if p not in rejected]
    if idle:
        parts.append(
            ", ".join(_name(p) for p in idle)
            + " never call over the window here and change the history less or not at all"
        )
    o = tr[OURS]
    new = o.get("new_tokens")
    if new is None or not o["input_tokens"]:
        return "; ".join(parts) + "."
    ceiling = 100 - 100 * new / o["input_tokens"]
    resent = 100 * (o["fresh_tokens"] - new) / o["input_tokens"]
    best = max(100 * tr[p]["cached_tokens"] / tr[p]["input_tokens"] for p in ahead)
    if ceiling < best:
        tail = (
            "ours acts at the trigger and shows every fresh result whole, so its new "
            "content is a larger share of a smaller input: even with no break of the prefix "
            f"its ceiling (1 - new / input) is {ceiling:.1f}%, under the peers' {best:.1f}%"
        )
    else:
        tail = f"ours re-sends {resent:.1f}% of its input after breaks of the prefix"
    return "; ".join([*parts, tail]) + "."


def peer_wins(results: dict[str, Any]) -> list[str]:
    """Plain sentences for every metric on which some peer beats ours."""
    out: list[str] = []
    peers_only = [s for s in _systems(results) if s not in (OURS, "ours_lcel")]

    def add(metric: str, where: str, winners: list[tuple[str, str, str]], why: str = "") -> None:
        if winners:
            names = "; ".join(f"{_name(p)} {pv} vs ours {ov}" for p, pv, ov in winners)
            out.append(f"- **{where}**: {names}. Why: {why or WHY[metric](winners[0][0])}")

    ov = results["overhead"]
    parts = []
    first = ""
    for n in ov["sizes"]:
        ms = {s: ov["median_ms"][s][str(n)] for s in _systems(results)}
        beat = [p for p in peers_only if _better(ms[OURS], ms[p], tolerance=0.1)]
        if beat:
            first = first or beat[0]
            parts.append(
                f"at {n:,} messages "
                + ", ".join(f"{_name(p)} {_ms(ms[p])} ms" for p in beat)
                + f" vs ours {_ms(ms[OURS])} ms"
            )
    if parts:
        out.append(f"- **decision overhead**: {'; '.join(parts)}. Why: {WHY['overhead'](first)}")
    cnt = results["counting"]["counters"]
    if "count_tokens_approximately" in cnt and "approximate_tokens" in cnt:
        for corpus in ("english", "chinese", "mixed"):
            theirs = cnt["count_tokens_approximately"][corpus]["mean_abs_pct"]
            mine = cnt["approximate_tokens"][corpus]["mean_abs_pct"]
            if theirs < mine:
                add(
                    "counting",
                    f"counting error on {corpus} text",
                    [("count_tokens_approximately", f"{theirs}%", f"{mine}% (approximate_tokens)")],
                )
    for w, tr in results["transcripts"].items():
        o = tr[OURS]
        label = f"transcripts at {int(w):,} tokens"
        add(
            "stopped",
            f"{label}: runs completed",
            [
                (
                    p,
                    f"{tr[p]['runs'] - tr[p]['stopped_runs']}/{tr[p]['runs']}",
                    f"{o['runs'] - o['stopped_runs']}/{o['runs']}",
                )
                for p in peers_only
                if tr[p]["stopped_runs"] < o["stopped_runs"]
            ],
        )
        add(
            "peak",
            f"{label}: peak context",
            [
                (p, _int(tr[p]["peak_context"]), _int(o["peak_context"]))
                for p in peers_only
                if _better(o["peak_context"], tr[p]["peak_context"])
            ],
        )
        per_call = {s: tr[s]["input_tokens"] / max(1, tr[s]["calls"]) for s in _systems(results)}
        add(
            "input_tokens",
            f"{label}: input tokens per call",
            [
                (p, _int(per_call[p]), _int(per_call[OURS]))
                for p in peers_only
                if _better(per_call[OURS], per_call[p])
            ],
        )
        add(
            "fresh",
            f"{label}: fresh tool results hidden on their first view",
            [
                (p, harm.fresh_cell(tr[p]["fresh"]), harm.fresh_cell(o["fresh"]))
                for p in peers_only
                if "fresh" in o and tr[p]["fresh"]["hidden"] < o["fresh"]["hidden"]
            ],
        )
        share = {
            s: tr[s]["cached_tokens"] / tr[s]["input_tokens"] if tr[s]["input_tokens"] else 0.0
            for s in _systems(results)
        }
        ahead = [p for p in peers_only if share[p] > share[OURS] + 0.005]
        add(
            "cache",
            f"{label}: cached share of input tokens",
            [(p, f"{100 * share[p]:.1f}%", f"{100 * share[OURS]:.1f}%") for p in ahead],
            _cache_why(tr, ahead),
        )
        add(
            "task",
            f"{label}: task still in the final input (runs over the trigger)",
            [
                (
                    p,
                    f"{tr[p]['task_kept_under_pressure']}/{tr[p]['pressure_runs']}",
                    f"{o['task_kept_under_pressure']}/{o['pressure_runs']}",
                )
                for p in peers_only
                if tr[p]["task_kept_under_pressure"] > o["task_kept_under_pressure"]
            ],
        )
    sy = results["synthetic"]["systems"]
    o = sy[OURS]
    total = results["synthetic"]["calls"]
    add(
        "stopped",
        "synthetic run: calls completed",
        [
            (p, f"{sy[p]['calls']}/{total}", f"{o['calls']}/{total}")
            for p in peers_only
            if sy[p]["calls"] > o["calls"]
        ],
    )
    per_call = {s: sy[s]["input_tokens"] / max(1, sy[s]["calls"]) for s in _systems(results)}
    add(
        "input_tokens",
        "synthetic run: input tokens per call",
        [
            (p, _int(per_call[p]), _int(per_call[OURS]))
            for p in peers_only
            if _better(per_call[OURS], per_call[p])
        ],
    )
    cost = {s: sy[s]["cost_usd"] / max(1, sy[s]["calls"]) for s in _systems(results)}
    add(
        "cost",
        "synthetic run: cost per call",
        [
            (p, f"${1000 * cost[p]:.2f}/1k calls", f"${1000 * cost[OURS]:.2f}/1k calls")
            for p in peers_only
            if _better(cost[OURS], cost[p])
        ],
    )
    add(
        "peak",
        "synthetic run: peak context",
        [
            (p, _int(sy[p]["peak_context"]), _int(o["peak_context"]))
            for p in peers_only
            if _better(o["peak_context"], sy[p]["peak_context"])
        ],
    )
    add(
        "facts",
        "synthetic run: planted facts in the final input",
        [
            (
                p,
                f"{sy[p]['facts_kept']}/{sy[p]['facts_total']}",
                f"{o['facts_kept']}/{o['facts_total']}",
            )
            for p in peers_only
            if sy[p]["facts_kept"] > o["facts_kept"]
        ],
    )
    for w, dep in results["dependent"]["windows"].items():
        add(
            "dependent",
            f"dependent task at {int(w):,} tokens",
            [
                (p, _dependent_cell(dep[p]).replace("**", ""), "not finished")
                for p in peers_only
                if dep[p]["finished"] and not dep[OURS]["finished"]
            ],
        )
    return out


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The numbers the closing note quotes."""
    ov = results["overhead"]
    big = str(max(ov["sizes"]))
    h: dict[str, Any] = {
        "overhead_size": int(big),
        "overhead_ratio": {p: ov["ratio_to_ours"][p][big] for p in _systems(results)},
    }
    sy = results["synthetic"]["systems"]
    h["synthetic_cost_ratio"] = {
        p: round(sy[p]["cost_usd"] / sy[OURS]["cost_usd"], 2) if sy[OURS]["cost_usd"] else None
        for p in _systems(results)
    }
    h["synthetic_retention"] = {
        p: f"{sy[p]['constraints_kept']}/{sy[p]['constraints_total']} constraints, "
        f"{sy[p]['facts_kept']}/{sy[p]['facts_total']} facts"
        for p in _systems(results)
    }
    return h


def readme_section(results: dict[str, Any]) -> str:
    """The benchmark section of ``docs/benchmarks.md``, generated from ``results``."""
    cfg = results["config"]
    meta = results["meta"]
    prices = cfg["prices"]
    sy = results["synthetic"]
    h = headline(results)
    ws = [f"{int(w):,}" for w in results["transcripts"]]
    windows = ", ".join(ws[:-1]) + " and " + ws[-1] if len(ws) > 1 else ws[0]
    runs = next(iter(results["transcripts"].values()))[OURS]["runs"]
    lines = [
        "## Benchmark",
        "",
        "One command reproduces every number below (it installs nothing: the `bench` extra "
        "must be installed). The transcript tables need the full set of 36 real agent "
        "transcripts (OpenAI chat format): point `LC_TRAJECTORY_DIR` at them; the repository "
        "ships 8 of them (`tests/data/trajectories`), and without the others the tables cover "
        "those 8:",
        "",
        "```bash",
        'pip install -e ".[bench]"',
        "python -m bench            # writes bench/results/latest.{json,md} and context.png",
        "```",
        "",
        f"Last run: {meta['date']}, {meta['cpu_count']} CPUs, "
        f"{meta['seconds'].get('total', '?')} s; "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + ".",
        "",
        "**What is compared.** Each system runs in its real package, configured the way its "
        "documentation shows, at the same budget (trigger = 0.75 x window, summaries bounded "
        'to window / 8): langchain `SummarizationMiddleware(trigger=("tokens", T), '
        'keep=("messages", 4))` and `ContextEditingMiddleware(edits=[ClearToolUsesEdit('
        "trigger=T, keep=3)])` through their real hooks, langmem `SummarizationNode("
        "max_tokens=T, max_tokens_before_summary=T, max_summary_tokens=S)`, "
        '`trim_messages(strategy="last", max_tokens=T, start_on="human", '
        "include_system=True)`, and deepagents' own `SummarizationMiddleware` with the "
        "settings `create_deep_agent` gives it for a model whose profile states the window "
        '(`keep=("fraction", 0.10)`, tool-argument truncation, the history offloaded to its '
        'default `StateBackend`) except the trigger, `("tokens", T)` like the others, behind '
        "its `FilesystemMiddleware`'s eviction of tool results over 20,000 tokens (how it "
        "is wired: the top of this page). Ours is `add_compaction`'s graph nodes with "
        "`CompactionConfig(context_window=W)` defaults; `compact_messages` (the LCEL "
        "transformer) is shown too. **Every system that summarises uses the same "
        "summarizer model**: a deterministic fake chat model that returns an extractive "
        "summary (the salient lines of the text it is given, within the bound), so no "
        "system gets an advantage from a better LLM, and the runs are reproducible. "
        "The agent model is scripted: transcripts replay their own next message, with "
        "provider-style usage computed from what each system actually sent.",
        "",
        f"**Workloads.** All {runs} "
        f"real agent transcripts (OpenAI chat format) replayed turn by turn at {windows}-token "
        f"windows; a {sy['calls']}-call synthetic run (large logs, constraints stated once, "
        f"{len(sy['facts'])} planted facts, Chinese content) at {sy['window']:,}; the "
        f"{results['dependent']['steps']}-step dependent task run by real agents "
        "(`create_agent`, langmem's node graph, `create_compacting_agent`) with a "
        "context-reading policy that can only finish if earlier values survived (as the demo "
        "runs it, and with each value only in its step's tool result); the 12-turn scenario "
        "(a scripted model reads 12 pages of about 3,100 tokens in an 8k window, then "
        "answers) through `create_agent` and `create_compacting_agent`. "
        f"Cost: {prices['model']}, fresh input ${prices['fresh_input']:.2f}, cached input "
        f"${prices['cached_input']:.2f} (when a call extends the previous call's prompt "
        f"prefix unchanged), output ${prices['output']:.2f} for summaries.",
        "",
        "**How to read the tables.** Token numbers are o200k_base counts of what each system "
        "actually sent. *Calls over window*: inputs larger than the window (a provider rejects "
        "them). *Invalid inputs*: model inputs that break provider rules (orphan tool results, "
        "dangling tool calls, a system message mid-list, a first message that is not the "
        "user's, or an empty message list). *Back-to-back compactions*: a compaction on two "
        "consecutive model calls (in a turn-by-turn replay every call brings new messages, so "
        "this is the observable form of a compaction loop: the summary plus the kept tail was "
        "still over the trigger). *Runs stopped*: ours ended the run with a stop message "
        "instead of calling the model (by design it stops rather than loop or overflow); the "
        "calls it did not make are not counted, so compare tokens and cost per call. Timings "
        "are medians of interleaved calls on a shared 2-core machine; treat differences under "
        "~30% as noise.",
        "",
        "### Decision overhead per model call (median ms, ratio to ours)",
        "",
        overhead_table(results),
        "",
        "### Counting error against tiktoken o200k",
        "",
        counting_table(results),
        "",
    ]
    lines += harm_sections(results, level="###")
    lines += [
        "### Transcripts: calls made, calls over the window, invalid inputs",
        "",
        "Per window: model calls made / scripted, calls over the window, invalid inputs "
        "(summed over the runs). Peak context, tokens, summarizer calls and task retention "
        "per window are in `bench/results/latest.md`.",
        "",
        harm.overview_table(results),
        "",
    ]
    lines += [
        f"### Long synthetic run ({sy['calls']} calls, {sy['window']:,}-token window)",
        "",
        synthetic_table(results),
        "",
        violations_note(sy["systems"]),
        "",
        "![Context tokens per model call on the long synthetic run](../bench/results/context.png)",
        "",
        f"### The 12-turn scenario ({_scenario_title(results)})",
        "",
        "*dense* pages (base64) stay under the package's 5,000-character cut size; *log* pages "
        "are over it.",
        "",
        harm.scenario_table(results),
        "",
        *dependent_sections(results, level="###"),
        "### Where a peer wins, and why",
        "",
    ]
    wins = peer_wins(results)
    lines += wins or ["- No peer beats ours on any measured metric in this run."]
    ratio = h["overhead_ratio"]
    cost = h["synthetic_cost_ratio"]
    ret = h["synthetic_retention"]
    others = [p for p in _systems(results) if p != OURS]
    lines += [
        "",
        "### Closing note",
        "",
        f"Per-call decision overhead at {h['overhead_size']:,} messages, relative to ours: "
        + ", ".join(f"{_name(p)} {_ratio(ratio[p])}" for p in others)
        + ". Cache-aware cost of the long synthetic run: ours "
        + harm.synthetic_cost_vs_peer(results)
        + " SummarizationMiddleware's; relative to ours: "
        + ", ".join(
            f"{_name(p)} {cost[p]:.2f}x" if cost[p] is not None else f"{_name(p)} n/a"
            for p in others
        )
        + f". Retention in its final model input: ours {ret[OURS]}; "
        + "; ".join(f"{_name(p)} {ret[p]}" for p in others)
        + ". "
        + harm.closing_sentence(results)
        + " Full tables: `bench/results/latest.md`; every number: "
        "`bench/results/latest.json`.",
        "",
    ]
    return "\n".join(lines)


def image_name(stem: str) -> str:
    """The plot's file name for results ``<stem>.json``."""
    return "context.png" if stem == "latest" else f"{stem}_context.png"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    here = Path(__file__).resolve().parent
    path = Path(args[0]) if args else here / "results" / "latest.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    image = image_name(path.stem)
    (path.parent / f"{path.stem}.md").write_text(markdown(results, image=image), encoding="utf-8")
    plot(results, path.parent / image)
    if not results["meta"].get("quick") and not args:  # only from the committed results
        (here / "README_SECTION.md").write_text(readme_section(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
