"""The "do no harm" tables: fresh results hidden, runs stopped, the task at 4k, cached share
per window, the 12-turn scenario (used by :mod:`bench.report`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.scenarios import SCENARIO_SYSTEMS

OURS = "ours"
PEER = "lc_summarization"
_SHORT = {
    "ours": "**ours** (graph)",
    "ours_lcel": "ours (LCEL)",
    "ours_default": "ours (graph, default summarizer)",
    "lc_summarization": "SummarizationMiddleware",
    "lc_context_editing": "ContextEditingMiddleware",
    "langmem": "langmem SummarizationNode",
    "trim_messages": "trim_messages",
    "deepagents": "deepagents",
}


def name(system: str) -> str:
    return _SHORT.get(system, system)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _k(window: str) -> str:
    return f"{int(window) // 1000}k"


def _systems(results: dict[str, Any]) -> list[str]:
    return list(results["config"]["systems"])


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def fresh_cell(fresh: dict[str, int]) -> str:
    """``hidden/results (would fit N)``; bold zero when nothing was hidden."""
    if not fresh.get("hidden"):
        return f"**0**/{fresh.get('results', 0)}"
    return f"{fresh['hidden']}/{fresh['results']} ({fresh['hidden_would_fit']} would fit)"


def _window_table(
    results: dict[str, Any], column: str, cell: Callable[[dict[str, Any], str], str]
) -> str:
    """One row per system, one ``{window}: {column}`` column per transcript window;
    ``cell(window_results, system)`` writes a cell."""
    tr = results["transcripts"]
    windows = list(tr)
    header = ["system"] + [f"{_k(w)}: {column}" for w in windows]
    rows = [[name(s), *(cell(tr[w], s) for w in windows)] for s in _systems(results)]
    return table(header, rows)


def fresh_table(results: dict[str, Any]) -> str:
    """Fresh tool results hidden on their first view, per system and window."""
    return _window_table(
        results, "hidden / fresh (would fit)", lambda per, s: fresh_cell(per[s]["fresh"])
    )


def stops_table(results: dict[str, Any]) -> str:
    """Runs stopped (of them, next call would have fitted) per window; the task at 4k."""
    tr = results["transcripts"]
    windows = list(tr)
    small = min(windows, key=int)
    header = ["system"] + [f"{_k(w)}: stopped (next call fits)" for w in windows]
    header += [
        f"{_k(small)}: stopped before 1st call",
        f"{_k(small)}: task head+tail in final input",
    ]
    rows = []
    for s in _systems(results):
        row = [name(s)]
        for w in windows:
            a = tr[w][s]
            row.append(f"{a['stopped_runs']}/{a['runs']} ({a.get('stopped_next_fits', 0)})")
        a = tr[small][s]
        row += [
            f"{a.get('stopped_before_first_call', 0)}/{a['runs']}",
            f"{a.get('task_head_tail_kept', 0)}/{a.get('runs_with_calls', 0)}",
        ]
        rows.append(row)
    return table(header, rows)


def grown_table(results: dict[str, Any]) -> str:
    """Compactions that left the context larger than they found it, of all compactions,
    per system and window ("n/a": a results file from before this was measured)."""

    def cell(per: dict[str, Any], s: str) -> str:
        grown = per[s].get("grown_compactions")
        return "n/a" if grown is None else f"{grown}/{per[s]['compactions']}"

    return _window_table(results, "grew the context / compactions", cell)


def cache_table(results: dict[str, Any]) -> str:
    """Cached share of input tokens and cost per window (cost relative to
    SummarizationMiddleware's), side by side."""

    def cell(per: dict[str, Any], s: str) -> str:
        a, p = per[s], per.get(PEER, {})
        ratio = f"{a['cost_usd'] / p['cost_usd']:.2f}x" if p.get("cost_usd") else "n/a"
        return f"{_pct(a['cached_tokens'], a['input_tokens'])} ({ratio})"

    return _window_table(results, "cached (cost vs SumMW)", cell)


def uncached_table(results: dict[str, Any]) -> str:
    """Where each system's uncached input comes from, per window: content sent for the
    first time (new messages, summaries, placeholders), and content re-sent because the
    cached prefix broke in front of it; shares of the system's input tokens. ``1 - new``
    is the highest cached share the system could reach without any break."""

    def cell(per: dict[str, Any], s: str) -> str:
        a = per[s]
        total, new = a["input_tokens"], a.get("new_tokens")
        if not total or new is None:
            return "n/a"
        resent = a["fresh_tokens"] - new
        return (
            f"{100 * new / total:.1f}% / {100 * resent / total:.1f}% "
            f"({100 - 100 * new / total:.1f}%)"
        )

    return _window_table(results, "new / re-sent (ceiling)", cell)


def overview_table(results: dict[str, Any]) -> str:
    """Per window: calls made / scripted, calls over the window, invalid inputs."""

    def cell(per: dict[str, Any], s: str) -> str:
        a = per[s]
        return f"{a['calls']}/{a['scripted_calls']}, {a['over_window_calls']}, {a['invalid_calls']}"

    return _window_table(results, "calls, over window, invalid", cell)


def scenario_table(results: dict[str, Any]) -> str:
    """The 12-turn scenario: per page kind and system, calls, outcome, fresh hidden."""
    sc = results.get("scenario")
    if not sc:
        return "- not run"
    header = ["pages", "system", "model calls", "outcome", "peak input", "fresh hidden"]
    rows = []
    for kind, per in sc["kinds"].items():
        label = f"{kind}: {per['result_tokens']:,} tokens, {per['result_chars']:,} chars"
        for s, a in per["systems"].items():
            outcome = "**finished**" if a["finished"] else a["outcome"][:70]
            if a["over_window_calls"]:
                outcome += f" ({a['over_window_calls']} calls over the window)"
            rows.append(
                [
                    label,
                    SCENARIO_SYSTEMS.get(s, s),
                    str(a["model_calls"]),
                    outcome,
                    f"{a['peak_input']:,}",
                    fresh_cell(a["fresh"]),
                ]
            )
    return table(header, rows)


def probe_table(results: dict[str, Any]) -> str:
    """Fresh results hidden in the two probe histories (a 128k window, nothing near it)."""
    pr = results.get("probes")
    if not pr:
        return "- not run"
    labels = list(pr["histories"])
    header = ["system", *[f"{label}: hidden (would fit)" for label in labels]]
    rows = [
        [name(s), *[fresh_cell(pr["histories"][label][s]) for label in labels]]
        for s in _systems(results)
    ]
    return table(header, rows)


def synthetic_cost_vs_peer(results: dict[str, Any]) -> str:
    """'ours costs N x SummarizationMiddleware' on the long synthetic run."""
    sy = results["synthetic"]["systems"]
    if not sy.get(PEER, {}).get("cost_usd"):
        return "n/a"
    return f"{sy[OURS]['cost_usd'] / sy[PEER]['cost_usd']:.2f}x"


def closing_sentence(results: dict[str, Any]) -> str:
    """The do-no-harm numbers of ours in one sentence (for the closing note)."""
    tr = results["transcripts"]
    first = next(iter(tr.values()))[OURS]
    if "fresh" not in first:
        return ""
    parts = []
    for w, per in tr.items():
        a = per[OURS]
        share = a["cached_tokens"] / a["input_tokens"] if a["input_tokens"] else 0.0
        best = max(
            (
                per[p]["cached_tokens"] / per[p]["input_tokens"]
                for p in per
                if p not in (OURS, "ours_lcel") and per[p]["input_tokens"]
            ),
            default=0.0,
        )
        parts.append(
            f"{_k(w)}: {a['fresh']['hidden']} fresh results hidden "
            f"({a['fresh']['hidden_would_fit']} would fit), {a['stopped_runs']} runs stopped "
            f"({a['stopped_next_fits']} with a next call that fits), cached "
            f"{100 * share:.1f}% (best peer {100 * best:.1f}%)"
        )
    small = tr[min(tr, key=int)][OURS]
    text = (
        "Do no harm, ours on the transcripts: "
        + "; ".join(parts)
        + f". In the smallest window {small['stopped_before_first_call']} runs stopped before "
        f"the first call and {small['task_head_tail_kept']}/{small['runs_with_calls']} of the "
        "others kept the task's head and tail."
    )
    sc = results.get("scenario")
    if sc:
        outcomes = [
            f"{kind} pages, {SCENARIO_SYSTEMS[s]}: "
            + ("finished" if a["finished"] else "stopped")
            + f" after {a['model_calls']} calls"
            for kind, per in sc["kinds"].items()
            for s, a in per["systems"].items()
            if s != PEER
        ]
        text += " 12-turn scenario: " + "; ".join(outcomes) + "."
    dep = results.get("dependent_tool_only")
    if dep:
        done = [
            f"{_k(w)} {'finished' if per[OURS]['finished'] else 'not finished'}"
            for w, per in dep["windows"].items()
        ]
        text += " Dependent task with values only in tool results: " + ", ".join(done) + "."
    return text


EXPLAIN = (
    "*Fresh results hidden*: tool results (and, for text-command agents, the observation "
    "user messages) that reached the model cut, cleared or removed on their first view (the "
    "first model call after they arrived), judged from what was sent (content differs from "
    "the original with the same tool-call id), not from the package's metadata; *would fit*: "
    "the call's input with that result whole would still have been at or under the trigger. "
    "*Stopped (next call fits)*: runs that ended without calling the model, and of those how "
    "many had a refused call that, with the reply the transcript gives, fitted the window. "
    "*Task head+tail*: the first and the last 200 characters of the original task are both "
    "in the final model input (runs that made at least one call). *Cached*: share of input "
    "tokens served by an unchanged prompt prefix; cost is relative to "
    "SummarizationMiddleware's at the same window."
)


__all__ = [
    "EXPLAIN",
    "cache_table",
    "closing_sentence",
    "fresh_cell",
    "fresh_table",
    "name",
    "overview_table",
    "probe_table",
    "scenario_table",
    "stops_table",
    "synthetic_cost_vs_peer",
    "table",
    "uncached_table",
]
