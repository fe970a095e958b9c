"""How the ``demo`` subcommand shows a run: progress lines, the turn table, the plot."""

from __future__ import annotations

import textwrap
from pathlib import Path

from langchain_compact.cli._demo import DemoResult, DemoTurn

__all__ = [
    "WIDTH",
    "before_call",
    "fit",
    "plot_context",
    "plot_path",
    "progress_lines",
    "turn_table",
    "verdict_lines",
]

WIDTH = 100
"""Columns every line the demo prints fits in."""
_BAR_WIDTH = 20
_BEFORE_WIDTH = 40
_INDENT = " " * 11


def fit(line: str, *, width: int = WIDTH, indent: str = "  ") -> list[str]:
    """``line`` wrapped at spaces to ``width`` columns (continuations indented); a single
    word longer than that (a long path) stays whole.

    Example:
        >>> fit("a " * 30 + "tail", width=20)[:2]
        ['a a a a a a a a a a', '  a a a a a a a a a']
    """
    return textwrap.wrap(
        line,
        width,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]


def before_call(turn: DemoTurn, *, short: bool = False) -> list[str]:
    """What was cleared, cut, summarised or trimmed just before this model call."""
    events = []
    if turn.cleared or turn.truncated:
        what = []
        if turn.cleared:
            what.append(f"cleared {turn.cleared}")
        if turn.truncated:
            what.append(f"cut {turn.truncated}" + ("" if short else " oversized"))
        n = turn.cleared + turn.truncated
        if short:
            freed = f" (-{turn.saved_tokens:,})" if turn.saved_tokens else ""
            events.append(f"micro: {', '.join(what)}{freed}")
        else:
            freed = f" (~{turn.saved_tokens:,} tokens freed)" if turn.saved_tokens else ""
            noun = " tool result" + ("s" if n > 1 else "")
            events.append(f"micro-compaction: {', '.join(what)}{noun}{freed}")
    if turn.compaction is not None:
        c = turn.compaction
        merged = c.get("merged_summaries") or 0
        events.append(
            f"compaction #{c['index']}: {c['tokens_before']:,} -> {c['tokens_after']:,}"
            + (
                f" ({c['compacted_messages']} msgs summarised)"
                if short
                else f" tokens, {c['compacted_messages']} messages summarised"
            )
            + (f", {merged} earlier summaries merged" if merged else "")
            + (
                (", prepared" if short else ", summary prepared ahead of the trigger")
                if str(c.get("prepared", "")).startswith("used")
                else ""
            )
            + (
                ""
                if short or c.get("summarizer") in (None, "ExtractiveSummarizer")
                else f", by {c['summarizer']}"
            )
        )
    if turn.trimmed:
        if short:
            events.append(f"trimmed {turn.trimmed}" + ("" if turn.task_visible else " (task lost)"))
        else:
            lost = "" if turn.task_visible else ", the original task among them"
            events.append(f"truncation: {turn.trimmed} oldest messages cut{lost}")
    return events


def progress_lines(turn: DemoTurn) -> list[str]:
    """The live view of one model turn, in at most :data:`WIDTH` columns: number, context
    size and what the model did, then what happened to the context before the call (on the
    same line when it fits, else on indented lines below).

    Example:
        >>> progress_lines(DemoTurn(number=3, context_tokens=1234, action="tool call: f"))
        ['turn   3  context  1,234 tokens  tool call: f']
    """
    action = turn.action if len(turn.action) <= 60 else turn.action[:57] + "..."
    lines = [f"turn {turn.number:>3}  context {turn.context_tokens:>6,} tokens  {action}"]
    for event in before_call(turn, short=True):
        joined = f"{lines[-1]}  | {event}"
        if len(lines) == 1 and len(joined) <= WIDTH:
            lines[-1] = joined
        else:
            lines += fit(_INDENT + event, indent=_INDENT + "  ")
    return lines


def _bar(tokens: int, trigger: int, window: int) -> str:
    scale = max(window, tokens, 1)
    filled = round(_BAR_WIDTH * tokens / scale)
    mark = min(_BAR_WIDTH - 1, round(_BAR_WIDTH * trigger / scale))
    cells = ["#" if i < filled else "." for i in range(_BAR_WIDTH)]
    cells[mark] = "|" if mark >= filled else "!"
    return "".join(cells)


def turn_table(result: DemoResult) -> str:
    """The per-turn table (``--view table``), in at most :data:`WIDTH` columns: context
    tokens, a bar against the trigger, what was cleared or summarised before each call (wrapped
    onto extra rows when long) and what the model did."""
    window, trigger = result.options.window, result.trigger
    legend = f"(| = trigger {trigger:,})"
    title = "before the call (cleared / summarised)"
    header = f"turn context  {legend:<{_BAR_WIDTH}}  {title:<{_BEFORE_WIDTH}}  model"
    rows = [header, "-" * WIDTH]
    model_width = WIDTH - len(header) + len("model")
    for turn in result.turns:
        before = "; ".join(before_call(turn, short=True)) or "-"
        parts = textwrap.wrap(before, _BEFORE_WIDTH, break_on_hyphens=False) or ["-"]
        action = turn.action.removeprefix("tool call: ").removeprefix("stop: ")
        if len(action) > model_width:
            action = action[: model_width - 3] + "..."
        bar = _bar(turn.context_tokens, trigger, window)
        rows.append(
            f"{turn.number:>4} {turn.context_tokens:>7,}  {bar}  {parts[0]:<{_BEFORE_WIDTH}}  "
            f"{action}".rstrip()
        )
        blank = " " * (4 + 1 + 7 + 2 + _BAR_WIDTH + 2)
        rows += [f"{blank}{part}" for part in parts[1:]]
    return "\n".join(rows)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def verdict_lines(result: DemoResult) -> list[str]:
    """The closing lines: the verdict with DependentTask.check's reason, and why it failed."""
    v = result.verdict
    n = len(result.compactions)
    micro = sum(1 for t in result.turns if t.cleared or t.truncated)
    peak = max((t.context_tokens for t in result.turns), default=0)
    stats = (
        f"{_count(len(result.turns), 'model turn')}, {_count(n, 'compaction')}, "
        f"{_count(micro, 'micro-compaction')}, peak context {peak:,} tokens "
        f"(trigger {result.trigger:,}, window {result.options.window:,}), {result.seconds:.1f} s"
    )
    lines = []
    if v.ok:
        lines.append(f"VERDICT: task finished: {v.reason} ({stats})")
        return lines
    lines.append(f"VERDICT: task NOT finished: {v.reason} ({stats})")
    if result.stop_reason:
        lines.append(f"why: compaction stopped the run: {result.stop_reason}")
    lines += [f"why: {note}" for note in result.notes]
    if result.options.strategy == "truncate":
        dropped = next((t for t in result.turns if not t.task_visible), None)
        if dropped is not None:
            lines.append(
                f"why: plain truncation keeps only the newest messages that fit in "
                f"{result.trigger:,} tokens; from turn {dropped.number} the original task "
                "(step count, starting value, REPORT code) was cut from the model's input, "
                "so it could not go on. Compaction pins the task and summarises the values."
            )
        else:
            lines.append(
                "why: plain truncation cut messages the model needed (the values of earlier "
                "steps) from its input; compaction keeps them in a summary."
            )
    return lines


def plot_path(out_dir: Path, strategy: str) -> Path:
    """Where the demo's plot goes: one file per strategy, so runs do not overwrite each other.

    Example:
        >>> plot_path(Path("demo-out"), "truncate").name
        'context-truncate.png'
    """
    return out_dir / f"context-{strategy}.png"


def plot_context(result: DemoResult, path: Path) -> Path:
    """Save a PNG of context tokens per model turn, with compactions and the trigger marked.

    Raises:
        ImportError: when matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = result.turns
    xs = [t.number for t in turns]
    ys = [t.context_tokens for t in turns]
    window, trigger = result.options.window, result.trigger
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    try:
        ax.plot(xs, ys, "-o", color="#1f77b4", markersize=4, label="context tokens per model call")
        ax.axhline(
            trigger,
            color="#d62728",
            linestyle="--",
            linewidth=1.2,
            label=f"compaction trigger ({trigger:,})",
        )
        ax.axhline(
            window,
            color="#7f7f7f",
            linestyle=":",
            linewidth=1.2,
            label=f"context window ({window:,})",
        )
        micro = [t for t in turns if t.cleared or t.truncated]
        if micro:
            ax.scatter(
                [t.number for t in micro],
                [t.context_tokens for t in micro],
                marker="v",
                color="#ff7f0e",
                zorder=3,
                s=28,
                label="micro-compaction before the call",
            )
        first = True
        for t in turns:
            c = t.compaction
            if c is None:
                continue
            x = t.number - 0.5
            ax.annotate(
                "",
                xy=(x, c["tokens_after"]),
                xytext=(x, c["tokens_before"]),
                arrowprops={"arrowstyle": "->", "color": "#2ca02c", "linewidth": 1.6},
            )
            ax.scatter(
                [x],
                [c["tokens_before"]],
                marker="o",
                facecolors="none",
                edgecolors="#2ca02c",
                s=40,
                zorder=3,
                label="full compaction (before -> after)" if first else None,
            )
            ax.text(
                x, c["tokens_before"], f" #{c['index']}", color="#2ca02c", va="bottom", fontsize=9
            )
            first = False
        dropped = next((t for t in turns if not t.task_visible), None)
        if dropped is not None:
            ax.axvline(
                dropped.number,
                color="#9467bd",
                linestyle="-.",
                linewidth=1,
                label="original task cut by truncation",
            )
        ok = "finished" if result.verdict.ok else "FAILED"
        ax.set_title(
            f"{result.options.steps}-step dependent task, strategy={result.options.strategy}: {ok}"
        )
        ax.set_xlabel("model turn")
        ax.set_ylabel("context tokens (model input)")
        ax.set_ylim(0, max([window, *ys]) * 1.1)
        if xs:
            ax.set_xticks(xs if len(xs) <= 30 else xs[:: max(1, len(xs) // 15)])
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
