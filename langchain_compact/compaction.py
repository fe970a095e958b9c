"""One full compaction as a function (DESIGN.md B5), and the decision to run one (B6).

:func:`compact_history` / :func:`acompact_history` share one body: a generator that yields
the two kinds of I/O it needs (an archive write, a summarizer call) and receives their
outcomes, so the sync and async twins differ only in how they perform the I/O.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_compact._ops import (
    _archive_step,
    _Op,
    _Outcome,
    _summarize_steps,
    _summary_bound,
)
from langchain_compact._restore import _ReadOp
from langchain_compact.config import DEFAULT_LARGE_TOOL_RESULT_CHARS, CompactionConfig
from langchain_compact.errors import ConfigError
from langchain_compact.history import find_safe_cut, last_boundary_index, original_task_index
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    Action,
    get_meta,
    kind_of,
    newest_boundary,
    with_meta,
)
from langchain_compact.microcompact import (
    clear_tool_results,
    cut_task,
    large_result_limit,
    shrink_unread,
    truncate_large_tool_results,
    unread_start,
)
from langchain_compact.redaction import maybe_redact
from langchain_compact.summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    dense_merge,
    fidelity_supplement,
)
from langchain_compact.tokens import TokenCounter, approximate_tokens, calibration, context_tokens

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

__all__ = [
    "CompactionInfo",
    "CompactionResult",
    "Decision",
    "acompact_history",
    "compact_history",
    "compaction_info",
    "decide",
    "effective_trigger",
    "removed_since_boundary",
    "stop_message",
]

logger = logging.getLogger("langchain_compact")

SUMMARY_HEADER = (
    "[Summary #{index} of the earlier conversation: {count} messages were compacted{archived}. "
    "It replaces them; the original task is pinned above. Continue the task from here.]\n\n"
)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one call of :func:`compact_history` did.

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
    errors: tuple[str, ...] = ()
    """Summarizer failures that were recovered from."""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CompactionInfo:
    """Compaction history derived from the messages themselves (no extra state needed)."""

    count: int
    """Full compactions so far (the index of the newest summary)."""
    turns_since: int
    """Model turns (AIMessages) since the newest compaction."""
    refill_streak: int
    """Compactions in a row whose context refilled within one model turn."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the routing edge should do next."""

    action: Action
    tokens: int
    trigger: int
    reason: str


# --------------------------------------------------------------------------- decisions


def compaction_info(messages: Sequence[BaseMessage]) -> CompactionInfo:
    """Read the compaction count, turns since the last one and the refill streak."""
    b, kept = newest_boundary(messages)
    if b < 0:
        turns = sum(isinstance(m, AIMessage) for m in messages)
        return CompactionInfo(count=0, turns_since=turns, refill_streak=0)
    meta = get_meta(messages[b])
    turns = sum(isinstance(m, AIMessage) and m.id not in kept for m in messages[b + 1 :])
    return CompactionInfo(
        count=int(meta.get("index", 1)),
        turns_since=turns,
        refill_streak=int(meta.get("refill_streak", 0)),
    )


def _trigger(config: CompactionConfig) -> int:
    trigger = config.trigger_tokens
    if trigger is None:
        raise ConfigError(
            "context_window is unknown: pass CompactionConfig(context_window=...) or a chat "
            "model whose profile has 'max_input_tokens'."
        )
    return trigger


def removed_since_boundary(messages: Sequence[BaseMessage]) -> int:
    """Tokens of tool results cleared or cut since the newest compaction in ``messages``
    (their originals are in the archive; a compaction folds them into its summary)."""
    b, _kept = newest_boundary(messages)
    total = 0
    for m in messages[b + 1 :]:
        meta = get_meta(m)
        if meta.get("kind") in (KIND_CLEARED, KIND_TRUNCATED):
            total += int(meta.get("removed_tokens", meta.get("saved_tokens", 0)))
    return total


def effective_trigger(messages: Sequence[BaseMessage], config: CompactionConfig) -> int:
    """The trigger, raised after a compaction that could not get under it.

    Such a compaction leaves the kept messages over the trigger; compacting again on the
    next turn would summarise one turn at a time. The next compaction waits until the
    context has grown halfway from where that compaction left it to the fit limit.
    """
    trigger = _trigger(config)
    b, _kept = newest_boundary(messages)
    if b < 0:
        return trigger
    after = get_meta(messages[b]).get("tokens_after")
    fit = config.fit_tokens or trigger
    if not isinstance(after, int) or after < trigger:
        return trigger
    return max(trigger, min(fit, (after + fit) // 2))


def decide(
    messages: Sequence[BaseMessage],
    *,
    config: CompactionConfig,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    tokens: int | None = None,
) -> Decision:
    """Decide whether the next model call may go ahead, needs a compaction first, or must stop.

    Uses the usage-anchored context size, so stale usage from before a compaction never
    triggers another one. Compacts at the trigger (raised after a compaction that could not
    get under it, so there is no loop), or under it when the results cleared since the last
    compaction pass ``fold_ratio`` of the window (their facts are folded into a summary).
    Stops only when a limit the user set fires (``max_compactions``, the thrash guard) or
    when the next call cannot fit (``fit_tokens``) and nothing is left to compact.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> decide([HumanMessage("hi")], config=CompactionConfig(context_window=1000)).action
        'continue'
    """
    trigger = effective_trigger(messages, config)
    if tokens is None:
        tokens = context_tokens(messages, counter=counter, tools=tools)
    fit = config.fit_tokens or trigger
    window = config.context_window or fit
    fold_limit = config._tokens(config.fold_ratio)
    fold = fold_limit is not None and removed_since_boundary(messages) >= fold_limit
    info = compaction_info(messages) if fold or tokens >= trigger else None
    if fold and info is not None:
        # Folding is routine upkeep: it waits out the cooldown and never spends the last
        # compaction the user allows.
        if info.count and info.turns_since < config.cooldown_turns:
            fold = False
        if config.max_compactions is not None and info.count + 1 >= config.max_compactions:
            fold = False
    if tokens < trigger and not fold:
        return Decision("continue", tokens, trigger, "under the trigger")
    plan = _plan(messages, config)
    if tokens < trigger:  # fold the cleared results' facts into a summary, if due
        if plan is None or removed_since_boundary(plan.span) < (fold_limit or 0):
            return Decision("continue", tokens, trigger, "cleared results wait in the tail")
        return Decision(
            "compact", tokens, trigger, "the results cleared since the last compaction are due"
        )
    assert info is not None  # computed above whenever tokens >= trigger
    if config.max_compactions is not None and info.count >= config.max_compactions:
        return Decision(
            "stop",
            tokens,
            trigger,
            f"the compaction limit max_compactions={config.max_compactions} is reached",
        )
    if info.count and info.turns_since < config.cooldown_turns and tokens <= fit:
        return Decision("continue", tokens, trigger, "cooldown: micro-compaction only")
    if info.count and info.turns_since <= 1 and info.refill_streak >= config.thrash_limit:
        return Decision(
            "stop",
            tokens,
            trigger,
            f"thrash guard: {config.thrash_limit} compactions in a row, each one model turn "
            "after the last, left the context over the trigger and no smaller",
        )
    if plan is None:
        if tokens <= fit:  # nothing new to summarise yet, but the call still fits
            return Decision("continue", tokens, trigger, "over the trigger, nothing to compact yet")
        return Decision(
            "stop",
            tokens,
            trigger,
            f"the next call cannot fit: {tokens} tokens with {window - fit} reserved for the "
            f"reply exceed the {window}-token window, and nothing is left to compact",
        )
    return Decision("compact", tokens, trigger, f"{tokens} tokens >= trigger {trigger}")


def stop_message(messages: Sequence[BaseMessage], reason: str, *, advice: str = "") -> AIMessage:
    """The message the run ends with when it must stop: what is done, pending, blocked, next."""
    b = last_boundary_index(messages)
    recent = [m for m in messages[b + 1 :] if kind_of(m) != KIND_STOP]
    status = ExtractiveSummarizer().summarize(recent or list(messages), max_tokens=700)
    how = advice or (
        "raise CompactionConfig.max_compactions or context_window, lower keep_last_n, or start "
        "a new thread with the pinned task and the latest summary; archived originals stay "
        "available through recall_archived."
    )
    text = (
        f"I stopped before finishing, to avoid overflowing or thrashing the context.\n\n"
        f"Blocked: {reason}.\n\nWhat is done and pending (from the recent context):\n{status}\n\n"
        f"How to continue: {how}"
    )
    digest = hashlib.sha1(f"{reason}|{len(messages)}".encode()).hexdigest()[:12]
    msg = AIMessage(text, id=f"lc-compact-stop-{digest}")
    result = with_meta(msg, kind=KIND_STOP, reason=reason)
    assert isinstance(result, AIMessage)
    return result


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class _Plan:
    head: list[BaseMessage]  # system messages, pinned task, earlier summaries: verbatim
    span: list[BaseMessage]
    tail: list[BaseMessage]


def _plan(messages: Sequence[BaseMessage], config: CompactionConfig) -> _Plan | None:
    n = len(messages)
    b = last_boundary_index(messages)
    if b >= 0:
        head = list(messages[: b + 1])
        start = b + 1
        task_i = -1
    else:
        start = 0
        while start < n and isinstance(messages[start], SystemMessage):
            start += 1
        head = list(messages[:start])
        task_i = original_task_index(messages) if config.pin_original_task else -1
    cut = find_safe_cut(messages, max(start, n - config.keep_last_n))
    if task_i >= cut:
        task_i = -1
    span = [m for i, m in enumerate(messages[start:cut], start) if i != task_i]
    if not span:
        return None
    if task_i >= 0:
        task = messages[task_i]
        head.append(
            task if kind_of(task) == KIND_PINNED_TASK else with_meta(task, kind=KIND_PINNED_TASK)
        )
    return _Plan(head=head, span=span, tail=list(messages[cut:]))


_AnyOp = _Op | _ReadOp
_Steps = Generator[_AnyOp, _Outcome, CompactionResult]
_HEADER_TOKENS = 80  # the summary header and message framing


def _slim_tail(
    tail: list[BaseMessage],
    config: CompactionConfig,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
    *,
    keep: int = 1,
    unread_need: int = 0,
) -> Generator[_AnyOp, _Outcome, list[BaseMessage]]:
    """Clear the kept tail's older read tool results (keeping the newest ``keep``) and cut
    long read user observations, archiving the originals first: a tail of big results must
    not leave the compacted history over the trigger. What the model has not read stays
    whole, unless ``unread_need`` tokens must still be freed for the next call to fit."""
    archived = archive is not None
    slim = clear_tool_results(
        tail,
        keep=keep,
        min_chars=config.micro_min_chars,
        exclude_tools=config.micro_exclude_tools,
        archived=archived,
        counter=counter,
    )
    # Agents without native tool calls (SWE-agent's text commands) get their observations
    # as user messages: cut the ones the model has read as well.
    read = unread_start(slim)
    size, unit = large_result_limit(config, counter)
    max_chars = size if unit == "chars" else DEFAULT_LARGE_TOOL_RESULT_CHARS
    slim = (
        truncate_large_tool_results(
            slim[:read],
            max_chars=max(max_chars, config.large_tool_result_keep_chars + 1),
            keep_chars=config.large_tool_result_keep_chars,
            digest=config.digest,
            archived=archived,
            include_human=True,
            counter=counter,
        )
        + slim[read:]
    )
    if unread_need > 0:
        slim = shrink_unread(
            slim, need=unread_need, config=config, counter=counter, archived=archived
        )
    changed = [a for a, b in zip(tail, slim, strict=True) if a is not b]
    todo = [m for m in changed if not get_meta(m).get("archive_ref")]
    todo = maybe_redact(todo, config.redactor)
    ref = yield from _archive_step(archive, todo, thread_id, "compaction-tail", {})
    return [
        with_meta(b, archive_ref=ref) if a is not b and ref else b
        for a, b in zip(tail, slim, strict=True)
    ]


def _slim_task(
    head: list[BaseMessage],
    config: CompactionConfig,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
) -> Generator[_AnyOp, _Outcome, list[BaseMessage]]:
    """Pin an oversized original task as head + tail + key lines, archived whole first."""
    found = cut_task(head, config, counter, archive is not None, None)
    if found is None:
        return head
    i, new = found
    original = maybe_redact([head[i]], config.redactor)
    ref = yield from _archive_step(archive, original, thread_id, "task", {})
    out = list(head)
    out[i] = with_meta(new, archive_ref=ref) if ref else new
    return out


def _restore_originals(
    span: list[BaseMessage],
    archive: TranscriptArchive | None,
    thread_id: str,
    budget: int,
    counter: TokenCounter,
) -> Generator[_AnyOp, _Outcome, list[BaseMessage]]:
    """The span as the summarizer should read it: cleared and cut results replaced by their
    archived originals (newest first, within ``budget`` extra tokens), so facts that only
    tool results held reach the summary instead of vanishing with the placeholders."""
    refs: dict[str, None] = {}
    for m in span:
        meta = get_meta(m)
        if meta.get("kind") in (KIND_CLEARED, KIND_TRUNCATED) and meta.get("archive_ref"):
            refs.setdefault(str(meta["archive_ref"]), None)
    if archive is None or not refs:
        return span
    originals: dict[str, BaseMessage] = {}
    for ref in refs:
        outcome = yield _ReadOp(archive, ref, thread_id)
        if outcome.error is not None:
            logger.warning("could not read archived originals %s: %s", ref, outcome.error)
            continue
        for original in outcome.value:
            if original.id is not None:
                originals.setdefault(original.id, original)
    out = list(span)
    for i in range(len(span) - 1, -1, -1):
        m = span[i]
        original = originals.get(m.id or "")
        if original is None or type(original) is not type(m):
            continue
        extra = counter([original]) - counter([m])
        if extra > budget:
            continue
        out[i] = original
        budget -= extra
    return out


def _digest(messages: Sequence[BaseMessage]) -> str:
    h = hashlib.sha256()
    for m in messages:
        h.update(f"{m.id}|{m.type}|".encode())
        if kind_of(m) == KIND_SUMMARY:
            continue  # its id already digests its span; its text quotes time-stamped refs
        h.update(json.dumps(m.content, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _summary_message(
    text: str, config: CompactionConfig, span: Sequence[BaseMessage], **meta: Any
) -> BaseMessage:
    cls = SystemMessage if config.summary_role == "system" else HumanMessage
    return with_meta(cls(text, id=f"lc-compact-summary-{_digest(span)}"), kind=KIND_SUMMARY, **meta)


def _steps(
    messages: Sequence[BaseMessage],
    summarizer: Summarizer,
    config: CompactionConfig,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
    tools: Sequence[Any] | None,
) -> _Steps:
    tokens_before = context_tokens(messages, counter=counter, tools=tools)
    plan = _plan(messages, config)
    if plan is None:
        return CompactionResult(
            list(messages), None, tokens_before, tokens_before, reason="nothing to compact"
        )
    span = plan.span
    span = maybe_redact(span, config.redactor)
    info = compaction_info(messages)
    index = info.count + 1
    ref = yield from _archive_step(archive, span, thread_id, "compaction", {"index": index})
    extra = approximate_tokens([], tools=tools) if tools else 0
    trigger = config.trigger_tokens
    tail = plan.tail
    head = plan.head
    # Provider tokens per local token: from the newest usage report, else the last boundary.
    measured = calibration(messages, counter=counter, tools=tools)
    if measured is None:
        b, _kept = newest_boundary(messages)
        previous = get_meta(messages[b]) if b >= 0 else {}
        measured = (
            float(previous.get("calibration", 1.0)),
            int(previous.get("overhead", 0)),
        )
    scale, overhead = measured
    if config.context_window is not None:
        # The part of a usage report the local count cannot explain is taken as fixed
        # overhead (tool schemas, templates), but never more than a quarter of the window:
        # an estimate that runs high stops runs whose next call would fit.
        overhead = min(overhead, config.context_window // 4)

    def local(tokens: int | None) -> int | None:
        """A context size in the provider's tokens, as a local count."""
        return None if tokens is None else int((tokens - overhead) / scale)

    local_trigger = local(trigger)
    # The summary may use room up to halfway between the trigger and the fit limit: a
    # compacted history over the trigger but fitting goes on (and the next compaction waits
    # for the context to grow), so squeezing the summary under the trigger only loses facts.
    fit = config.fit_tokens
    roof = local(trigger if fit is None or trigger is None else (trigger + fit) // 2)

    def room(kept: list[BaseMessage]) -> int | None:
        """Local tokens left under the trigger for the new summary, beside what is kept."""
        if roof is None:
            return None
        return roof - counter([*head, *kept]) - extra - _HEADER_TOKENS

    bound = _summary_bound(config)
    left = room(tail)
    if left is not None and left < bound // 2:
        # The kept messages leave little room: slim the tail before summarising.
        tail = yield from _slim_tail(tail, config, archive, thread_id, counter)
        left = room(tail)
    if left is not None and left < bound // 2:
        # Still no room: an oversized original task is pinned as head + tail + key lines.
        head = yield from _slim_task(head, config, archive, thread_id, counter)
        left = room(tail)
    if left is not None:  # the summary gets what is left, so the result fits
        bound = max(64, min(bound, int(left * 0.7)))
    # The summarizer reads the originals of results cleared since the last compaction.
    restore_budget = 0 if fit is None else max(0, fit - counter(span) - bound)
    readable = yield from _restore_originals(span, archive, thread_id, restore_budget, counter)
    text, used, errors = yield from _summarize_steps(summarizer, readable, config, bound)
    spare = bound // 2 if left is None else max(32, min(bound // 2, left - bound))
    supplement = fidelity_supplement(readable, text, max_tokens=spare)
    archived = f", archived as {ref} (recall_archived returns the originals)" if ref else ""
    body = SUMMARY_HEADER.format(index=index, count=len(span), archived=archived) + text
    if supplement:
        body += "\n\n" + supplement
    merged = 0
    earlier = [m for m in head if kind_of(m) == KIND_SUMMARY]
    window = config.context_window
    # In the counter's own units, like the window and the earlier summaries it is compared
    # with (a custom counter need not count approximate tokens).
    body_tokens = counter([HumanMessage(body)])
    if window and earlier and counter(earlier) + body_tokens > config.summary_budget_ratio * window:
        # Over the summary budget: merge the earlier summaries into one (the only time a
        # summary is summarised), into what the budget leaves beside the new summary but at
        # least half of it (a large new summary must not squeeze the older facts out), dense:
        # beyond a quarter of the budget only key facts stay (a merge that refilled the
        # budget with calls and log lines would be due again at the next compaction).
        budget = int(config.summary_budget_ratio * window)
        merge_bound = max(64, budget - body_tokens, budget // 2)
        merge_ref = yield from _archive_step(
            archive, earlier, thread_id, "summary-merge", {"index": index}
        )
        merged_text, _, merge_errors = yield from _summarize_steps(
            summarizer, earlier, config, min(merge_bound, max(64, budget // 2))
        )
        errors += merge_errors
        merged_text = dense_merge(earlier, merged_text, merge_bound, soft_tokens=budget // 4)
        merged_msg = _summary_message(
            f"[Merged summary of compactions 1-{index - 1}.]\n\n{merged_text}",
            config,
            earlier,
            index=index - 1,
            merged_from=[m.id for m in earlier],
            archive_ref=merge_ref,
        )
        first = head.index(earlier[0])
        head = [m for m in head if kind_of(m) != KIND_SUMMARY]
        head.insert(min(first, len(head)), merged_msg)
        merged = len(earlier)

    def size() -> int:
        return counter([*head, HumanMessage(body), *tail]) + extra

    if local_trigger is not None and size() >= local_trigger:
        tail = yield from _slim_tail(tail, config, archive, thread_id, counter)
    local_fit = local(config.fit_tokens)
    if local_fit is not None and size() > local_fit:
        # The next call would not fit: every read result in the tail goes, and as the last
        # resort the unread ones are digested, largest first.
        tail = yield from _slim_tail(tail, config, archive, thread_id, counter, keep=0)
        if size() > local_fit and supplement:  # then the new summary's supplement
            body = body[: len(body) - len(supplement) - 2]
        if size() > local_fit:
            need = size() - local_fit
            tail = yield from _slim_tail(
                tail, config, archive, thread_id, counter, keep=0, unread_need=need
            )
    cause = (
        "trigger"
        if trigger is None or tokens_before >= effective_trigger(messages, config)
        else "fold"
    )
    meta: dict[str, Any] = {
        "index": index,
        "archive_ref": ref,
        "span_ids": [m.id for m in plan.span],
        "kept_ids": [m.id for m in tail if m.id is not None],
        "turns_since_previous": info.turns_since,
        "summarizer": used,
        "tokens_before": tokens_before,
        "cause": cause,
        "calibration": round(scale, 4),
        "overhead": overhead,
    }
    draft = [*head, _summary_message(body, config, plan.span, **meta), *tail]
    tokens_after = round((counter(draft) + extra) * scale) + overhead
    # The thrash guard counts compactions in a row, each within one model turn of the last,
    # that left the context over the trigger and no smaller than they found it: no
    # progress. One that frees room is progress even when the next large result fills a
    # small window again; one that folds cleared results in under the trigger is routine.
    stuck = (
        cause == "trigger"
        and trigger is not None
        and tokens_after >= trigger
        and tokens_after >= tokens_before
    )
    chained = info.count and info.turns_since <= 1
    meta["refill_streak"] = (info.refill_streak + 1 if chained else 1) if stuck else 0
    summary = _summary_message(body, config, plan.span, **meta, tokens_after=tokens_after)
    new = [*head, summary, *tail]
    kept = {m.id for m in new}
    logger.info(
        "compaction #%d: %d -> %d tokens, %d messages summarised by %s%s",
        index,
        tokens_before,
        tokens_after,
        len(span),
        used,
        archived,
    )
    return CompactionResult(
        messages=new,
        summary=summary,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        archive_ref=ref,
        compacted=list(plan.span),
        removed_ids=[m.id for m in messages if m.id is not None and m.id not in kept],
        summarizer=used,
        merged=merged,
        errors=tuple(errors),
        reason="compacted",
    )


def compact_history(
    messages: Sequence[BaseMessage],
    *,
    summarizer: Summarizer | None = None,
    config: CompactionConfig | None = None,
    archive: TranscriptArchive | None = None,
    thread_id: str = "default",
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
) -> CompactionResult:
    """Run one full compaction over ``messages`` and return the new history.

    New history: leading system message(s), the original task pinned verbatim, earlier
    summaries verbatim (never summarised again unless they pass the summary budget), the
    new summary (tagged as the boundary), then the kept tail, cut so that no tool-call
    batch is split. The span is archived before anything is replaced; a summarizer failure
    is retried, then replaced by the extractive summarizer; if everything fails,
    :class:`SummarizerError` is raised and nothing is lost.

    Args:
        messages: The full history (not modified).
        summarizer: Defaults to :class:`ExtractiveSummarizer`.
        config: Settings; ``context_window`` is needed only for the summary budget.
        archive: Where the compacted originals go (``None``: not archived).
        thread_id: Archive namespace.
        counter: Token counter for the before/after numbers.
        tools: Tool schemas the model is called with (counted when no usage is known).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = [HumanMessage("Task: count to 3", id="t")]
        >>> history += [AIMessage(f"{i}", id=f"a{i}") for i in range(1, 8)]
        >>> result = compact_history(history, config=CompactionConfig(keep_last_n=2))
        >>> [m.id for m in result.messages][0], len(result.messages)
        ('t', 4)
    """
    steps = _steps(
        messages,
        summarizer or ExtractiveSummarizer(),
        config or CompactionConfig(),
        archive,
        thread_id,
        counter,
        tools,
    )
    outcome: _Outcome | None = None
    while True:
        try:
            op = steps.send(outcome) if outcome is not None else next(steps)
        except StopIteration as done:
            result: CompactionResult = done.value
            return result
        outcome = op.run()


async def acompact_history(
    messages: Sequence[BaseMessage],
    *,
    summarizer: Summarizer | None = None,
    config: CompactionConfig | None = None,
    archive: TranscriptArchive | None = None,
    thread_id: str = "default",
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
) -> CompactionResult:
    """Async twin of :func:`compact_history` (same body; async I/O)."""
    steps = _steps(
        messages,
        summarizer or ExtractiveSummarizer(),
        config or CompactionConfig(),
        archive,
        thread_id,
        counter,
        tools,
    )
    outcome: _Outcome | None = None
    while True:
        try:
            op = steps.send(outcome) if outcome is not None else next(steps)
        except StopIteration as done:
            result: CompactionResult = done.value
            return result
        outcome = await op.arun()
