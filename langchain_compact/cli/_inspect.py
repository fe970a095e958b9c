"""``inspect`` and ``compact``: where a transcript's tokens go, and compacting it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_compact.cli._common import message_tokens
from langchain_compact.cli.transcripts import Transcript
from langchain_compact.compaction import CompactionResult, compact_history
from langchain_compact.config import CompactionConfig
from langchain_compact.markers import KIND_CLEARED, kind_of, with_meta
from langchain_compact.microcompact import micro_compact
from langchain_compact.summarizers import Summarizer
from langchain_compact.tokens import TokenCounter

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

__all__ = [
    "CompactOutcome",
    "MicroReport",
    "analyse",
    "micro_step",
    "preview",
    "render_inspect",
    "role_of",
    "run_compaction",
]

_ROLE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_PREVIEW_CHARS = 70


def role_of(message: BaseMessage) -> str:
    """OpenAI role name of a message (``user``, ``assistant``, ``system``, ``tool``...)."""
    return _ROLE.get(message.type, message.type)


def preview(message: BaseMessage, limit: int = _PREVIEW_CHARS) -> str:
    """One line showing the start of a message (its tool calls when it has no text)."""
    text = " ".join(message.text.split())
    if not text and isinstance(message, AIMessage) and message.tool_calls:
        text = "calls " + ", ".join(c["name"] for c in message.tool_calls)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(slots=True)
class MicroReport:
    """What micro-compaction did to a history."""

    messages: list[BaseMessage]
    cleared: list[int] = field(default_factory=list)
    """Indices of tool results replaced by a placeholder."""
    truncated: list[int] = field(default_factory=list)
    """Indices of oversized tool results cut to head + tail."""


def micro_step(
    messages: Sequence[BaseMessage], config: CompactionConfig, counter: TokenCounter
) -> MicroReport:
    """Cut oversized tool results, then clear old ones (what the graph's gate node does),
    with the library's :func:`~langchain_compact.microcompact.micro_compact`, and say which
    messages each change touched."""
    out = micro_compact(messages, config, counter=counter)
    result = MicroReport(out)
    for i, (old, new) in enumerate(zip(messages, out, strict=True)):
        if old is new or kind_of(old) == kind_of(new):
            continue
        (result.cleared if kind_of(new) == KIND_CLEARED else result.truncated).append(i)
    return result


def analyse(
    transcript: Transcript,
    *,
    config: CompactionConfig,
    counter: TokenCounter,
    counter_label: str,
    top: int = 5,
    source: str = "",
) -> dict[str, Any]:
    """Where the tokens go, and what micro-compaction and a full compaction would do."""
    messages = transcript.messages
    tokens = message_tokens(counter, messages)
    total = sum(tokens)
    by_role: dict[str, dict[str, int]] = {}
    by_tool: dict[str, dict[str, int]] = {}
    for message, n in zip(messages, tokens, strict=True):
        row = by_role.setdefault(role_of(message), {"messages": 0, "tokens": 0})
        row["messages"] += 1
        row["tokens"] += n
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                by_tool.setdefault(call["name"], {"calls": 0, "results": 0, "tokens": 0})
                by_tool[call["name"]]["calls"] += 1
        if isinstance(message, ToolMessage):
            name = message.name or "(unknown tool)"
            tool = by_tool.setdefault(name, {"calls": 0, "results": 0, "tokens": 0})
            tool["results"] += 1
            tool["tokens"] += n
    order = sorted(range(len(messages)), key=lambda i: -tokens[i])[: max(0, top)]
    largest = [
        {
            "index": i,
            "where": transcript.where(i),
            "role": role_of(messages[i]),
            "tool": messages[i].name if isinstance(messages[i], ToolMessage) else None,
            "tokens": tokens[i],
            "preview": preview(messages[i]),
        }
        for i in order
    ]
    micro = micro_step(messages, config, counter)
    micro_tokens = sum(message_tokens(counter, micro.messages))
    trigger = config.trigger_tokens or 0
    result = compact_history(micro.messages, config=config, counter=counter)
    after = sum(message_tokens(counter, result.messages))
    return {
        "file": source,
        "format": transcript.fmt,
        "messages": len(messages),
        "counter": counter_label,
        "total_tokens": total,
        "by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1]["tokens"])),
        "by_tool": dict(sorted(by_tool.items(), key=lambda kv: -kv[1]["tokens"])),
        "largest": largest,
        "window": config.context_window,
        "trigger": trigger,
        "micro": {
            "tokens_before": total,
            "tokens_after": micro_tokens,
            "cleared": len(micro.cleared),
            "truncated": len(micro.truncated),
        },
        "compaction": {
            "would_trigger": micro_tokens >= trigger,
            "tokens_before": micro_tokens,
            "tokens_after": after,
            "summarised": len(result.compacted),
            "kept": len(result.messages) - (1 if result.summary is not None else 0),
            "summary_tokens": (
                message_tokens(counter, [result.summary])[0] if result.summary else 0
            ),
            "reason": result.reason,
        },
    }


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def render_inspect(report: dict[str, Any]) -> str:
    """The human-readable form of :func:`analyse`'s report."""
    total = report["total_tokens"]
    out = [
        f"{report['file']}: {report['messages']} messages, {report['format']} format",
        f"tokens: {total:,} (counted with {report['counter']})",
        "",
        "by role             messages     tokens   share",
    ]
    for role, row in report["by_role"].items():
        out.append(
            f"  {role:<16} {row['messages']:>9} {row['tokens']:>10,}  {_pct(row['tokens'], total)}"
        )
    if report["by_tool"]:
        out += ["", "tool results by tool   calls  results     tokens   share"]
        for name, row in report["by_tool"].items():
            out.append(
                f"  {name[:20]:<20} {row['calls']:>6} {row['results']:>8} {row['tokens']:>10,}"
                f"  {_pct(row['tokens'], total)}"
            )
    else:
        out += ["", "no tool messages (tool output, if any, comes back as user messages)"]
    out += ["", "largest messages"]
    for row in report["largest"]:
        who = row["role"] + (f" ({row['tool']})" if row["tool"] else "")
        out.append(f"  {row['where']:<10} {who[:30]:<30} {row['tokens']:>8,}  {row['preview']}")
    micro, comp = report["micro"], report["compaction"]
    window, trigger = report["window"], report["trigger"]
    out += [
        "",
        f"at --window {window:,} (full compaction triggers at {trigger:,} tokens):",
        f"  micro-compaction: {micro['cleared']} old tool results cleared, {micro['truncated']}"
        f" oversized ones cut: {micro['tokens_before']:,} -> {micro['tokens_after']:,} tokens",
    ]
    if comp["summarised"]:
        when = (
            "would run now"
            if comp["would_trigger"]
            else f"would not run yet ({comp['tokens_before']:,} < {trigger:,}); if forced"
        )
        out.append(
            f"  full compaction {when}: {comp['summarised']} messages summarised into one of "
            f"{comp['summary_tokens']:,} tokens, {comp['kept']} kept: "
            f"{comp['tokens_before']:,} -> {comp['tokens_after']:,} tokens"
        )
    else:
        out.append(f"  full compaction: nothing to compact ({comp['reason']})")
    return "\n".join(out)


@dataclass(slots=True)
class CompactOutcome:
    """What ``compact`` did: micro-compaction, then one full compaction."""

    micro: MicroReport
    micro_ref: str | None
    result: CompactionResult


def run_compaction(
    messages: Sequence[BaseMessage],
    *,
    config: CompactionConfig,
    summarizer: Summarizer | None,
    archive: TranscriptArchive,
    thread_id: str,
    counter: TokenCounter,
) -> CompactOutcome:
    """Micro-compact (archiving the originals first), then compact the history once."""
    micro = micro_step(messages, config, counter)
    ref = None
    changed = sorted(micro.cleared + micro.truncated)
    if changed:
        ref = archive.write(
            [messages[i] for i in changed], thread_id=thread_id, reason="micro-compaction"
        )
        for i in changed:
            micro.messages[i] = with_meta(micro.messages[i], archive_ref=ref)
    result = compact_history(
        micro.messages,
        summarizer=summarizer,
        config=config,
        archive=archive,
        thread_id=thread_id,
        counter=counter,
    )
    return CompactOutcome(micro=micro, micro_ref=ref, result=result)
