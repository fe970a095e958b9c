"""Markdown tables of ``bench/pause.py``'s results (``bench/results/pause.md``)."""

from __future__ import annotations

from typing import Any

__all__ = ["markdown"]

_NA = "n/a: no `prepare` flag in this build"


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pause_table(pause: dict[str, Any]) -> list[str]:
    main, small = pause["shapes"]["main"], pause["shapes"]["small"]

    def shape(x: dict[str, Any]) -> str:
        w = x["window"]
        return (
            f"window {w:,} (trigger {int(0.75 * w):,}, prepare threshold {int(0.6 * w):,}), "
            f"about {x['payload_chars']:,} characters of log per result"
        )

    reference = pause.get("reference_tokens")
    latency = (
        "L s per call"
        if not reference
        else f"L x min(1, input tokens / {reference:,}) s per call (`--proportional`)"
    )
    lines = [
        "## Pause at the trigger",
        "",
        f"Dependent task, {pause['steps']} steps; main shape: {shape(main)}; small shape: "
        f"{shape(small)}. In both the context passes the prepare threshold one turn before "
        "the trigger, and one full compaction happens (ours with "
        "`micro_exclude_tools=('run_step',)`: otherwise clearing old results would free "
        "the room and no full compaction would happen). The agent model "
        f"sleeps M s per call, the summarizer {latency}; agents run with "
        f"`{'astream' if pause.get('async') else 'stream'}`. *Pause*: wall time from the end "
        "of the tool call to the start of the next model call, on the turn where the "
        "compaction happened. *Added latency*: the run's wall time minus calls x M minus "
        "tool time (a wait that moved elsewhere, e.g. a prepare that outlasts the model "
        "call and holds the graph's superstep, shows here and in *wait after model*). "
        "Goal (issue 10): median pause <= 5% of L when M >= L, else <= L - M + 5% of L.",
        "",
        "| window | L s | M s | goal s | system | compactions | pause s (median / max) | "
        "summarizer calls: all / in the pause / overlapping a model call | added latency s | "
        "max wait after a model call s | "
        "prepared / used / discarded | finished | meets goal |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for row in pause["pairs"]:
        for system, r in row["systems"].items():
            label = pause["labels"].get(system, system)
            head = (
                f"| {row['window']:,} | {row['L']:g} | {row['M']:g} | {row['goal_s']:.2f} |"
                f" {label} |"
            )
            if r is None:
                lines.append(f"{head} {_NA} | | | | | | | |")
                continue
            ev = r.get("events", {})
            prep = (
                f"{ev.get('summary_prepared', 0)} / {ev.get('prepared_used', 0)} / "
                f"{ev.get('prepared_discarded', 0)}"
            )
            in_pause = sum(t["summarizer_calls_in_pause"] for t in r["turns"] if t["compaction"])
            sums = f"{r['summarizer_calls']} / {in_pause} / {r['summarizer_calls_during_model']}"
            meets = r.get("meets_goal")
            lines.append(
                f"{head} {r['compactions']} | {_s(r['pause_median_s'])} / {_s(r['pause_max_s'])}"
                f" | {sums} | {_s(r['added_latency_s'])} | {_s(r['max_wait_after_model_s'])}"
                f" | {prep} | {'yes' if r['finished'] else 'NO'} |"
                f" {'-' if meets is None else ('yes' if meets else 'no')} |"
            )
    return lines


def _tokens_table(replay: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Summarizer input tokens with and without preparing",
        "",
        "Transcripts replayed through a graph (`add_compaction` in front of a scripted agent "
        "whose replies come from the transcript), `LLMSummarizer` over the bench's "
        "extractive summary model, archive in a LangGraph store; o200k tokens of every "
        "summarizer call summed. Goal (issue 10): with <= 1.15x without.",
        "",
        "*Never used*: prepared, then neither used nor discarded (replaced by a newer one, or "
        "the run ended first).",
        "",
        "| window | transcripts | without: compactions / calls / input tokens | "
        "with: compactions / calls / input tokens"
        " | with / without | prepared / used / discarded / never used |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for window, w in replay["windows"].items():
        without = w["without"]
        with_ = w["with"]
        left = (
            f"{without['events']['compaction']} / {without['summarizer_calls']} / "
            f"{without['summarizer_input_tokens']:,}"
        )
        if "not_available" in with_:
            right, ratio, prep = _NA, "-", "-"
        else:
            right = (
                f"{with_['events']['compaction']} / {with_['summarizer_calls']} / "
                f"{with_['summarizer_input_tokens']:,}"
            )
            ratio = "-" if w["ratio"] is None else f"{w['ratio']:.3f}"
            ev = with_["events"]
            unused = ev["summary_prepared"] - ev["prepared_used"] - ev["prepared_discarded"]
            prep = (
                f"{ev['summary_prepared']} / {ev['prepared_used']} / "
                f"{ev['prepared_discarded']} / {unused}"
            )
            if with_["discard_reasons"]:
                prep += (
                    " ("
                    + "; ".join(f"{k}: {v}" for k, v in sorted(with_["discard_reasons"].items()))
                    + ")"
                )
        lines.append(
            f"| {int(window):,} | {len(w['transcripts'])} | {left} | {right} | {ratio} | {prep} |"
        )
    return lines


def _fidelity_table(fid: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Fidelity with and without preparing",
        "",
        f"The dependent task ({fid['steps']} steps, {fid['payload_chars']:,} characters per "
        "result) with an `LLMSummarizer` over a model that keeps every fact line it is "
        "shown; `tool_only`: the policy's calls carry only the step number, so each value "
        "lives only in its tool result.",
        "",
        "| window | via | policy | without: finished / facts / compactions | "
        "with: finished / facts / compactions | same facts |",
        "|---:|---|---|---|---|---|",
    ]

    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return _NA
        return f"{'yes' if r['finished'] else 'NO'} / {r['facts']} / {r['compactions']}"

    for row in fid["rows"]:
        same = row["same_facts"]
        lines.append(
            f"| {row['window']:,} | {row['via']} | {row['policy']} | {cell(row['without'])} |"
            f" {cell(row['with'])} | {'-' if same is None else ('yes' if same else 'NO')} |"
        )
    return lines


def _fork_table(fork: dict[str, Any] | None) -> list[str]:
    if not fork:
        return []
    lines = [
        "## Cache parity of a fork summarizer",
        "",
        "`LLMSummarizer(model, fork=True)` (the agent's own model as summarizer): the share of "
        "summarizer input tokens that repeat the start of the agent's newest request, which a "
        "provider's prompt cache would serve. The rest is the summary instructions and what "
        "changed since that request.",
        "",
        "| window | transcripts | without preparing | with preparing |",
        "|---:|---:|---:|---:|",
    ]
    for window, row in fork["windows"].items():
        lines.append(
            f"| {int(window):,} | {row['transcripts']} | {_s(row.get('without'))} | "
            f"{_s(row.get('with'))} |"
        )
    return [*lines, ""]


def markdown(results: dict[str, Any]) -> str:
    """All three tables, with a line saying whether the preparing columns ran."""
    head = [
        "# Zero-pause compaction (issue 10)",
        "",
        "`python -m bench.pause`"
        + (
            ""
            if results.get("prepare_supported")
            else " (this build has no `CompactionConfig.prepare`: only the columns without "
            "preparing ran)"
        )
        + f"; {results.get('seconds', 0):g} s.",
        "",
    ]
    body = [
        *_pause_table(results["pause"]),
        *_tokens_table(results["replay_tokens"]),
        *_fidelity_table(results["fidelity"]),
        *_fork_table(results.get("fork_cache")),
    ]
    return "\n".join([*head, *body]) + "\n"
