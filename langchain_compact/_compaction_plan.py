"""What a compaction takes and how its summarizer reads it: the plan (head, span, tail), the
result type, the summarizer's input (archived originals restored; a fork summarizer's exact
prefix) and the summary message. Shared by the phases of a compaction
(:mod:`langchain_compact._compaction_phases`) and by summaries prepared ahead of the
trigger (:mod:`langchain_compact._prepare`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_compact._nested import in_nested_run
from langchain_compact._ops import Op, Outcome, ReadOp, SummarizeOp
from langchain_compact._provider_items import carries_provider_compaction
from langchain_compact._render import message_text, render_message
from langchain_compact._scan import FactsMemo
from langchain_compact.budget import chars_for_tokens
from langchain_compact.config import CompactionConfig
from langchain_compact.history import (
    find_safe_cut,
    last_boundary_index,
    newest_request_index,
    open_request_index,
    original_task_index,
    tool_calls_of,
)
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
    with_meta,
)
from langchain_compact.microcompact import cleared_tokens, unread_start
from langchain_compact.summarizers import (
    DEFAULT_SUMMARY_PROMPT,
    MESSAGE_CHARS,
    ROLLING_INSTRUCTIONS,
    ExtractiveSummarizer,
    Summarizer,
    check_summary_text,
    focus_instructions,
    running_summary,
)
from langchain_compact.tokens import TokenCounter, approx_text, approximate_tokens

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

__all__ = [
    "MAX_SUMMARY_CALLS",
    "CompactionResult",
    "Plan",
    "Reading",
    "newest_turn_start",
    "plan_compaction",
    "read_for_summary",
    "read_originals",
    "restore_originals",
    "summarizer_input",
    "summary_in_parts",
    "summary_message",
    "with_originals",
]

logger = logging.getLogger("langchain_compact")


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one call of :func:`~langchain_compact.compaction.compact_history` did.

    ``summary is None`` means nothing was compacted (see ``reason``) and ``messages`` is the
    input unchanged.
    """

    messages: list[BaseMessage]
    """The new full history."""
    summary: BaseMessage | None
    """The new summary message (also the boundary marker), or ``None``."""
    tokens_before: int
    tokens_after: int
    archive_ref: str | None = None
    """Reference of the archive record holding the compacted originals."""
    compacted: list[BaseMessage] = field(default_factory=list)
    """The span that was summarised, as it was in the input."""
    removed_ids: list[str] = field(default_factory=list)
    """Ids of input messages absent from the new history."""
    summarizer: str = ""
    """Which summarizer produced the summary (class name; ``"fallback:..."`` after a failure)."""
    merged: int = 0
    """How many earlier summaries were merged into one (summary budget exceeded)."""
    summarizer_calls: int = 0
    """Summarizer model calls the new summary took: one per part of the span's originals
    that a request could hold (retries included), made at the trigger or, for a summary
    prepared ahead, beside the model call; ``0`` for the local extractive summarizer."""
    errors: tuple[str, ...] = ()
    """Summarizer failures that were recovered from."""
    reason: str = ""
    summary_written_by: str = ""
    """Who wrote the new summary: ``"model"`` (an
    :class:`~langchain_compact.summarizers.LLMSummarizer`), ``"extractive"`` (the
    extractive summarizer, chosen or as the fallback after a failure), or a custom
    summarizer's class name; empty when nothing was compacted."""
    extractive_parts: tuple[str, ...] = ()
    """What the model reads as a summary that the extractive summarizer wrote although
    another summarizer is configured: ``"summary"`` (the summarizer failed: the fallback),
    ``"newer turns"`` (the turns since a prepared summary, folded in as key lines) and
    ``"merged summaries"`` (earlier summaries joined and condensed without a model: the
    model failed to prepare their merge, or the merge due was not the one prepared). Empty
    when the configured summarizer wrote everything, or is the extractive one."""
    prepared: str = ""
    """How a summary prepared before the trigger was used (``"used"``, ``"used, N newer
    messages kept"``, ``"used + incremental summary of N"``) or why it was discarded
    (``"discarded: ..."``); empty when none was offered."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How a compaction splits the history."""

    head: list[BaseMessage]
    """System messages, the pinned task, earlier summaries: kept verbatim."""
    span: list[BaseMessage]
    """What the new summary replaces."""
    tail: list[BaseMessage]
    """The newest messages, kept (``keep_last_n``, never splitting a tool-call batch)."""


def plan_compaction(
    messages: Sequence[BaseMessage],
    config: CompactionConfig,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    *,
    tail_tokens: int | None = None,
    nested: bool | None = None,
    memo: FactsMemo | None = None,
) -> Plan | None:
    """Split ``messages`` into head, span and tail; ``None`` when the span would be empty.

    The tail is the newest ``keep_last_n`` messages (moved back to a safe cut), within the
    budget's :meth:`~langchain_compact.budget.Budget.tail` of the room the head leaves under
    the trigger: a tail over it moves forward, whole tool-call batches at a time, down to
    the newest turn (the newest ``AIMessage`` with its results, or the messages after it).
    A turn of long assistant text or large tool-call arguments then leaves the turns before
    it to summarise instead of nothing. ``tail_tokens`` replaces the budget's limit
    (``0``: the newest turn alone). The user's current request
    (:func:`~langchain_compact.history.newest_request_index`), when the model has not read
    it yet and it is not the task, is never in the span: it is kept as the first message of
    the tail, after the summary. Inside another graph (``nested``; by default whether this
    runs in a LangGraph run whose ``checkpoint_ns`` is nested) the same holds for the
    request read already while no final answer follows it
    (:func:`~langchain_compact.history.open_request_index`): a worker's subtask, handed
    after the supervisor's own task, stays verbatim while the worker works on it.
    ``memo``: the caller's :class:`~langchain_compact._scan.FactsMemo` (the boundary and
    the task are read through it).
    """
    n = len(messages)
    head, start, task_i = _head(messages, config, memo)
    cut = find_safe_cut(messages, max(start, n - config.keep_last_n))
    budget = config.budget
    if budget is not None and cut < n:
        fixed = [*head, messages[task_i]] if task_i >= 0 else head
        extra = approximate_tokens([], tools=tools) if tools else 0
        limit = budget.tail(counter(fixed) + extra) if tail_tokens is None else tail_tokens
        cut = _fit_tail(messages, cut, start, limit, counter, config)
    if task_i >= cut:
        task_i = -1
    kept, cut = _around_provider_items(messages, start, cut, task_i)
    request = _kept_request(messages, start, cut, task_i, kept, nested)
    skipped = {task_i, request, *kept}
    span = [m for i, m in enumerate(messages[start:cut], start) if i not in skipped]
    if not span:
        return None
    for i in sorted({*kept, task_i} - {-1}):
        m = messages[i]
        if i == task_i and kind_of(m) != KIND_PINNED_TASK:
            m = with_meta(m, kind=KIND_PINNED_TASK)
        head.append(m)
    tail = list(messages[cut:])
    if request >= 0:
        tail.insert(0, messages[request])
    return Plan(head=head, span=span, tail=tail)


def _head(
    messages: Sequence[BaseMessage], config: CompactionConfig, memo: FactsMemo | None = None
) -> tuple[list[BaseMessage], int, int]:
    """``(head, where the span may start, the task's index or -1)``: everything up to the
    newest boundary (the task is pinned in it already), else the leading system messages
    and, with ``pin_original_task``, the original task."""
    b = last_boundary_index(messages, memo=memo)
    if b >= 0:
        return list(messages[: b + 1]), b + 1, -1
    start = 0
    while start < len(messages) and isinstance(messages[start], SystemMessage):
        start += 1
    task_i = original_task_index(messages, memo=memo) if config.pin_original_task else -1
    return list(messages[:start]), start, task_i


def _kept_request(
    messages: Sequence[BaseMessage],
    start: int,
    cut: int,
    task_i: int,
    kept: Collection[int],
    nested: bool | None,
) -> int:
    """The user's request the model has not answered yet (``-1``: none): it is never
    summarised, it stays verbatim after the summary, the first message of the tail
    (``keep_last_n=0`` too)."""
    request = newest_request_index(messages)
    if (
        not (start <= request < cut)
        or request == task_i
        or request in kept
        or (request < unread_start(messages) and not _open_subtask(messages, request, nested))
    ):
        return -1
    return request


def _open_subtask(messages: Sequence[BaseMessage], request: int, nested: bool | None) -> bool:
    """Whether the read ``request`` is a sub-agent's subtask still being worked on."""
    if nested is None:
        nested = in_nested_run()
    return nested and open_request_index(messages) == request


def newest_turn_start(messages: Sequence[BaseMessage], start: int = 0) -> int:
    """Index where the newest turn begins: the newest ``AIMessage`` with its results, or
    the last message when it answers none (never before ``start``).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}])
        >>> newest_turn_start([HumanMessage("go"), call, ToolMessage("x", tool_call_id="c1")])
        1
    """
    if not messages:
        return 0
    return max(start, find_safe_cut(messages, len(messages) - 1))


def _fit_tail(
    messages: Sequence[BaseMessage],
    cut: int,
    start: int,
    limit: int,
    counter: TokenCounter,
    config: CompactionConfig,
) -> int:
    """The first safe cut at or after ``cut`` whose tail takes at most ``limit`` tokens, but
    never past the start of the newest turn."""
    newest = newest_turn_start(messages, start)
    if cut >= newest:
        return cut
    # A read result before the newest turn counts as the placeholder a crowded compaction
    # leaves of it (its facts kept): clearing it is cheaper than summarising its turn.
    sizes = [
        _tail_tokens(m, counter, config) if i < newest else counter([m])
        for i, m in enumerate(messages[cut:], cut)
    ]
    tail = sum(sizes)
    if tail <= limit:
        return cut
    for j in range(cut + 1, newest + 1):
        tail -= sizes[j - cut - 1]
        if tail <= limit and find_safe_cut(messages, j) == j:
            return j
    return newest if find_safe_cut(messages, newest) == newest else cut


def _tail_tokens(message: BaseMessage, counter: TokenCounter, config: CompactionConfig) -> int:
    """Tokens of ``message`` as the compaction's tail slimming would leave it: a tool result
    cleared to its placeholder (when clearing applies to it and the placeholder is shorter),
    anything else as it is."""
    if (
        not isinstance(message, ToolMessage)
        or kind_of(message) is not None
        or (message.name or "") in config.micro_exclude_tools
        or len(message.text) < config.micro_min_chars
    ):
        return counter([message])
    return cleared_tokens(message, counter)


def _around_provider_items(
    messages: Sequence[BaseMessage], start: int, cut: int, task_i: int
) -> tuple[set[int], int]:
    """Keep a provider's compaction items in place (:mod:`langchain_compact._provider_items`):
    never in a span. One at the front of the span (nothing but the task before it) joins the
    head with the results of its own tool calls, so what follows it can be summarised after
    it; the span ends before any other, which stays in the tail with all after it.

    Returns:
        The indices moved to the head, and the (possibly earlier) end of the span.
    """
    kept: set[int] = set()
    i = start
    while i < cut:
        if i == task_i:
            i += 1
        elif carries_provider_compaction(messages[i]):
            kept.add(i)
            calls = {c.id for c in tool_calls_of(messages[i]) if c.id}
            i += 1
            while i < cut and getattr(messages[i], "tool_call_id", None) in calls:
                kept.add(i)
                i += 1
        else:  # the first message to summarise: the span runs to the next item or the cut
            ahead = range(i + 1, cut)
            return kept, next((k for k in ahead if carries_provider_compaction(messages[k])), cut)
    return kept, cut


def restore_originals(
    span: list[BaseMessage],
    archive: TranscriptArchive | None,
    thread_id: str,
    budget: int | None,
    counter: TokenCounter,
) -> Generator[Op, Outcome, list[BaseMessage]]:
    """The span as the summarizer should read it: cleared and cut results replaced by their
    archived originals (newest first, within ``budget`` extra tokens; ``None``: all of
    them), so facts that only tool results held reach the summary instead of vanishing
    with the placeholders."""
    originals = yield from read_originals(span, archive, thread_id)
    return with_originals(span, originals, budget, counter)


def read_originals(
    span: Sequence[BaseMessage], archive: TranscriptArchive | None, thread_id: str
) -> Generator[Op, Outcome, dict[str, BaseMessage]]:
    """The archived originals of the span's cleared and cut messages, by id (a record that
    cannot be read is logged and skipped: its placeholders stay what the summarizer reads)."""
    refs: dict[str, None] = {}
    for m in span:
        meta = get_meta(m)
        if meta.get("kind") in (KIND_CLEARED, KIND_TRUNCATED) and meta.get("archive_ref"):
            refs.setdefault(str(meta["archive_ref"]), None)
    originals: dict[str, BaseMessage] = {}
    if archive is None:
        return originals
    for ref in refs:
        outcome = yield ReadOp(archive, ref, thread_id)
        if outcome.error is not None:
            logger.warning("could not read archived originals %s: %s", ref, outcome.error)
            continue
        for original in outcome.value:
            for key in _original_keys(original):
                originals.setdefault(key, original)
    return originals


def _original_keys(message: BaseMessage) -> list[str]:
    """What a placeholder and its original share: the message id, and a tool result's call
    id (an LCEL chain's messages often have no id)."""
    keys = [message.id] if message.id else []
    if isinstance(message, ToolMessage) and message.tool_call_id:
        keys.append(f"tool-call:{message.tool_call_id}")
    return keys


def with_originals(
    span: Sequence[BaseMessage],
    originals: dict[str, BaseMessage],
    budget: int | None,
    counter: TokenCounter,
) -> list[BaseMessage]:
    """``span`` with each message that has an original in ``originals`` replaced by it,
    newest first, within ``budget`` extra tokens by ``counter`` (``None``: every one)."""
    out = list(span)
    for i in range(len(span) - 1, -1, -1):
        m = span[i]
        keys = _original_keys(m)  # its id, else its call id
        original = originals.get(keys[0]) if keys else None
        if original is None or type(original) is not type(m):
            continue
        if budget is not None:
            extra = counter([original]) - counter([m])
            if extra > budget:
                continue
            budget -= extra
        out[i] = original
    return out


# --------------------------------------------------------------------------- reading in parts

#: The most summarizer calls one summary takes when its span is read in parts: past it,
#: the oldest originals are read as their placeholders (their facts kept), newest first.
MAX_SUMMARY_CALLS = 8
#: The least room a part may have; a request that leaves less is made in one call.
MIN_PART_TOKENS = 256
#: The tokens a request adds beside its instructions and messages (wrapping, the ask).
REQUEST_FRAMING_TOKENS = 48


@dataclass(frozen=True, slots=True)
class Reading:
    """What the summarizer of a compaction reads: the span with its originals restored,
    and, for a summarizer that reads it in parts, those parts and the request's limits."""

    readable: list[BaseMessage]
    """The span with the archived originals restored, message for message."""
    parts: list[BaseMessage] | None = None
    """``readable`` as the parts a summarizer reads in turn (a long message split, each at
    most a request's room); ``None``: one call (:func:`summarizer_input`)."""
    fit: int = 0
    """The most tokens one request and its reply may take (the window less the reply
    reserve)."""
    fixed: int = 0
    """Tokens of the instructions and framing of every request."""
    bound: int = 0
    """The summary's bound: the reply's ``max_tokens``."""

    def room(self, lead: int) -> int:
        """Tokens of messages a request whose lead (the summary so far) takes ``lead`` may
        add: the fit, less the instructions, the lead and the reply."""
        return self.fit - self.fixed - lead - self.bound


def part_tokens(message: BaseMessage) -> int:
    """Tokens of ``message`` as a summarizer's transcript shows it (an estimate that errs
    high: the request must fit the window)."""
    return approx_text(render_message(message)) + 4


def _request_limits(
    summarizer: Summarizer, config: CompactionConfig, bound: int
) -> tuple[int, int, int] | None:
    """``(fit, fixed, lead)`` of a summarizer's requests when it reads a span in parts (the
    lead: the most a summary so far may take); ``None`` for the local extractive
    summarizer (it reads everything at once), a fork summarizer (its request is the
    agent's own prefix), an unknown window, and a window too small for parts."""
    local = isinstance(summarizer, ExtractiveSummarizer) or getattr(summarizer, "_local", False)
    fit = config.fit_tokens
    if local or getattr(summarizer, "fork", False) is True or fit is None:
        return None
    prompt = getattr(summarizer, "prompt", None)
    focus = getattr(summarizer, "focus", None)  # LLMSummarizer.focused
    fixed = (
        approx_text(prompt if isinstance(prompt, str) else DEFAULT_SUMMARY_PROMPT)
        + approx_text(ROLLING_INSTRUCTIONS)
        + (approx_text(focus_instructions(focus)) if focus else 0)
        + REQUEST_FRAMING_TOKENS
    )
    # A summary may run 25% + 20 tokens over its bound (over_bound), plus the lead's header.
    lead = bound * 5 // 4 + 20 + part_tokens(running_summary(""))
    if fit - fixed - bound - lead < MIN_PART_TOKENS:
        return None
    return fit, fixed, lead


def _split(message: BaseMessage, room: int) -> list[BaseMessage]:
    """``message`` as parts of at most ``room`` tokens and :data:`MESSAGE_CHARS`
    characters each, cut at line ends where it can be (a fact line stays whole); the
    message itself when it is within both."""
    text = message_text(message)
    tokens = part_tokens(message)
    if tokens <= room and len(text) <= MESSAGE_CHARS:
        return [message]
    # 80% of the characters the text's own ratio gives: a part denser than the whole
    # must still fit
    chars = chars_for_tokens(max(1, room - 32), text=text, text_tokens=max(1, tokens))
    limit = max(200, min(MESSAGE_CHARS - 64, chars * 4 // 5))
    pieces: list[str] = []
    start = 0
    while len(text) - start > limit:
        end = start + limit
        cut = text.rfind("\n", start, end)
        if cut < start + limit // 2:
            cut = text.rfind(" ", start, end)
        if cut < start + limit // 2:
            cut = end
        pieces.append(text[start:cut])
        start = cut + 1 if text[cut : cut + 1] == "\n" else cut
    pieces.append(text[start:])
    out: list[BaseMessage] = []
    for k, piece in enumerate(pieces, 1):
        update: dict[str, Any] = {
            "content": f"(part {k} of {len(pieces)} of this message)\n{piece}",
            "id": f"{message.id}:part{k}" if message.id else None,
        }
        if isinstance(message, AIMessage) and k < len(pieces):
            update.update(tool_calls=[], invalid_tool_calls=[])  # the calls go with the last
        out.append(message.model_copy(update=update))
    return out


def _planned_calls(parts: Sequence[BaseMessage], room: int) -> int:
    """Requests of at most ``room`` tokens of messages that ``parts`` take, in order."""
    calls, used = 0, room
    for m in parts:
        size = part_tokens(m)
        if used + size > room:
            calls, used = calls + 1, 0
        used += size
    return calls


def read_for_summary(
    summarizer: Summarizer,
    span: list[BaseMessage],
    archive: TranscriptArchive | None,
    thread_id: str,
    config: CompactionConfig,
    bound: int,
    counter: TokenCounter,
    restore_budget: int,
) -> Generator[Op, Outcome, Reading]:
    """What the summarizer reads of ``span``.

    A model summarizer in a known window reads the archived original of every message the
    span holds as a placeholder or a digest (what the agent read, not what the package
    left of it), in parts that each fit one request beside the summary so far
    (:func:`summary_in_parts`), at most :data:`MAX_SUMMARY_CALLS` of them (past that the
    oldest originals are read as their placeholders). The extractive summarizer and a fork
    summarizer read the span in one call, the originals restored within
    ``restore_budget`` extra tokens (what one call leaves under the fit limit)."""
    originals = yield from read_originals(span, archive, thread_id)
    limits = _request_limits(summarizer, config, bound)
    if limits is None:
        return Reading(with_originals(span, originals, restore_budget, counter))
    fit, fixed, lead = limits
    reading = Reading(list(span), [], fit=fit, fixed=fixed, bound=bound)
    room = reading.room(lead)  # the room of a request whose lead is a full summary
    readable = with_originals(span, originals, None, counter)
    parts = [p for m in readable for p in _split(m, room)]
    if _planned_calls(parts, room) > MAX_SUMMARY_CALLS:
        # Newest first, within what the calls hold (a tenth left for the parts' ends).
        held = MAX_SUMMARY_CALLS * room * 9 // 10 - sum(part_tokens(m) for m in span)
        readable = with_originals(
            span, originals, max(0, held), lambda ms: sum(part_tokens(m) for m in ms)
        )
        parts = [p for m in readable for p in _split(m, room)]
        logger.info(
            "the span's originals need more than %d summarizer calls: the oldest are read "
            "as their placeholders",
            MAX_SUMMARY_CALLS,
        )
    return replace(reading, readable=readable, parts=parts)


def summary_in_parts(
    summarizer: Summarizer,
    reading: Reading,
    config: CompactionConfig,
    bound: int,
    *,
    attempts: int,
) -> Generator[Op, Outcome, tuple[str | None, list[str], int]]:
    """The rolling summary of ``reading.parts``: the first request holds as many parts as
    fit, each next one the summary so far (:func:`~langchain_compact.summarizers.
    running_summary`) and the parts that fit beside it, so the summary of the last request
    carries the facts of every part. Each request may be tried ``attempts`` times.

    Returns:
        ``(text, errors, calls)``: the summary (``None`` when a request failed every
        attempt: the caller falls back), the failures, and the calls made.
    """
    parts = reading.parts or []
    text: str | None = None
    errors: list[str] = []
    calls = 0
    i = 0
    while i < len(parts):
        lead = [running_summary(text)] if text is not None else []
        room = reading.room(sum(part_tokens(m) for m in lead))
        chunk: list[BaseMessage] = []
        size = 0
        while i < len(parts) and (not chunk or size + part_tokens(parts[i]) <= room):
            size += part_tokens(parts[i])
            chunk.append(parts[i])
            i += 1
        written: str | None = None
        for _ in range(attempts):
            calls += 1
            outcome = yield SummarizeOp(
                summarizer, [*lead, *chunk], bound, config.summarizer_timeout
            )
            try:
                if outcome.error is not None:
                    raise outcome.error
                written = check_summary_text(outcome.value, bound)
            except Exception as exc:
                errors.append(f"{type(summarizer).__name__}: {type(exc).__name__}: {exc}")
                logger.warning("summarizer failed on a part of the span (%s)", errors[-1])
                continue
            break
        if written is None:
            return None, errors, calls
        text = written
    return text, errors, calls


def summarizer_input(
    summarizer: Summarizer,
    head: list[BaseMessage],
    span: list[BaseMessage],
    restored: list[BaseMessage],
) -> list[BaseMessage]:
    """What the summarizer reads: the span with archived originals restored; for a fork
    summarizer (``fork=True``: the agent's own model, prefix-cached) the head and the span
    exactly as the agent last sent them, so the provider's prompt cache serves the request
    up to the summary instructions."""
    if getattr(summarizer, "fork", False) is True:
        return [*head, *span]
    return restored


def _digest(messages: Sequence[BaseMessage]) -> str:
    h = hashlib.sha256()
    for m in messages:
        h.update(f"{m.id}|{m.type}|".encode())
        if kind_of(m) == KIND_SUMMARY:
            continue  # its id already digests its span; its text quotes time-stamped refs
        h.update(json.dumps(m.content, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def summary_message(
    text: str, config: CompactionConfig, span: Sequence[BaseMessage], **meta: Any
) -> BaseMessage:
    """A summary message (the boundary marker); its id digests the span it replaces."""
    cls = SystemMessage if config.summary_role == "system" else HumanMessage
    return with_meta(cls(text, id=f"lc-compact-summary-{_digest(span)}"), kind=KIND_SUMMARY, **meta)
