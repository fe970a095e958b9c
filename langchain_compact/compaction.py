"""One full compaction as a function (docs/design.md, B5), and the decision to run one (B6).

:func:`compact_history` / :func:`acompact_history` share one body: a generator that yields
the I/O it needs (archive writes and reads, summarizer calls) and receives their outcomes,
so the sync and async twins differ only in how they perform the I/O. The phases of that
body are in :mod:`langchain_compact._compaction_phases`; this module holds the public
functions, the decision (:func:`decide`) and what the boundaries say
(:func:`compaction_info`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_compact import budget as when
from langchain_compact._compaction_phases import Compaction, compaction_steps
from langchain_compact._compaction_plan import (
    CompactionResult,
    Plan,
    newest_turn_start,
    plan_compaction,
)
from langchain_compact._ops import Op, Outcome, adrive, drive
from langchain_compact._prepare import Prepared, use_prepared
from langchain_compact._scan import FactsMemo, HistoryFacts, history_facts
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import ConfigError
from langchain_compact.history import last_boundary_index, newest_request_index
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_STOP,
    KIND_TRUNCATED,
    Action,
    Boundary,
    Saving,
    get_meta,
    kind_of,
    newest_boundary,
    with_meta,
)
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, context_tokens

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


def compaction_info(
    messages: Sequence[BaseMessage], *, memo: FactsMemo | None = None
) -> CompactionInfo:
    """Read the compaction count, turns since the last one and the refill streak (through
    ``memo``, the caller's :class:`~langchain_compact._scan.FactsMemo`, when given)."""
    facts = history_facts(messages, memo)
    if facts is not None:  # remembered for the history as it was a few messages ago
        return _info_of(facts)
    b, kept = newest_boundary(messages)
    if b < 0:
        turns = sum(isinstance(m, AIMessage) for m in messages)
        return CompactionInfo(count=0, turns_since=turns, refill_streak=0)
    boundary = Boundary.of(messages[b])
    turns = sum(isinstance(m, AIMessage) and m.id not in kept for m in messages[b + 1 :])
    return CompactionInfo(
        count=1 if boundary.index is None else boundary.index,
        turns_since=turns,
        refill_streak=boundary.refill_streak,
    )


def _info_of(facts: HistoryFacts) -> CompactionInfo:
    """:func:`compaction_info` from the facts (the counts sit on the boundary's marker)."""
    if facts.boundary < 0:
        return CompactionInfo(count=0, turns_since=facts.turns_since, refill_streak=0)
    boundary = Boundary.of(facts.boundary_meta)
    return CompactionInfo(
        count=1 if boundary.index is None else boundary.index,
        turns_since=facts.turns_since,
        refill_streak=boundary.refill_streak,
    )


def _trigger(config: CompactionConfig) -> int:
    trigger = config.trigger_tokens
    if trigger is None:
        raise ConfigError(
            "context_window is unknown: pass CompactionConfig(context_window=...) or a chat "
            "model whose profile has 'max_input_tokens'."
        )
    return trigger


def removed_since_boundary(
    messages: Sequence[BaseMessage], *, memo: FactsMemo | None = None
) -> int:
    """Tokens of tool results cleared or cut since the newest compaction in ``messages``
    (their originals are in the archive; a compaction folds them into its summary)."""
    facts = history_facts(messages, memo)
    if facts is not None:
        return facts.removed_since
    b, _kept = newest_boundary(messages)
    total = 0
    for m in messages[b + 1 :]:
        if kind_of(m) in (KIND_CLEARED, KIND_TRUNCATED):
            total += Saving.removed_in(get_meta(m))
    return total


def effective_trigger(
    messages: Sequence[BaseMessage], config: CompactionConfig, *, memo: FactsMemo | None = None
) -> int:
    """The trigger, raised after a compaction that could not get under it.

    Such a compaction leaves the kept messages over the trigger; compacting again on the
    next turn would summarise one turn at a time. The next compaction waits until the
    context has grown halfway from where that compaction left it to the fit limit.
    """
    facts = history_facts(messages, memo)
    b = newest_boundary(messages)[0] if facts is None else facts.boundary
    if b < 0:
        return _trigger(config)
    return _raised_trigger(get_meta(messages[b]) if facts is None else facts.boundary_meta, config)


def _raised_trigger(boundary_meta: dict[str, Any], config: CompactionConfig) -> int:
    """:func:`effective_trigger` given the newest boundary's marker dict."""
    trigger = _trigger(config)
    after = Boundary.of(boundary_meta).tokens_after
    budget = config.budget  # known: the trigger is
    if after is None or budget is None:
        return trigger
    return budget.raised_trigger(after)


def decide(
    messages: Sequence[BaseMessage],
    *,
    config: CompactionConfig,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    tokens: int | None = None,
    memo: FactsMemo | None = None,
) -> Decision:
    """Decide whether the next model call may go ahead, needs a compaction first, or must stop.

    Uses the usage-anchored context size, so stale usage from before a compaction never
    triggers another one. Compacts at the trigger (raised after a compaction that could not
    get under it, so there is no loop), or under it when the results cleared since the last
    compaction pass ``fold_ratio`` of the window (their facts are folded into a summary).
    Stops only when a limit the user set fires (``max_compactions``, the thrash guard) or
    when the next call cannot fit (``fit_tokens``) and nothing is left to compact.

    The rules are :func:`langchain_compact.budget.decision`'s, over the turn's numbers
    (:class:`~langchain_compact.budget.TurnNumbers`); this function gathers them, once, and
    only those the decision asks for (no plan under the trigger).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> decide([HumanMessage("hi")], config=CompactionConfig(context_window=1000)).action
        'continue'
    """
    facts = history_facts(messages, memo)  # one read of the metadata (``memo``: the caller's)
    numbers = _numbers(messages, facts, config, counter, tools, tokens)
    planned: Plan | None = None  # planned once, when the decision asks
    verdict = when.decision(numbers)
    while verdict.need is not None:
        if verdict.need == "plan":
            planned = plan_compaction(messages, config, counter, tools, memo=memo)
        numbers = replace(numbers, **_gathered(verdict.need, messages, facts, planned, counter))
        verdict = when.decision(numbers)
    return Decision(verdict.action, numbers.tokens, numbers.trigger, verdict.reason)


def _numbers(
    messages: Sequence[BaseMessage],
    facts: HistoryFacts | None,
    config: CompactionConfig,
    counter: TokenCounter,
    tools: Sequence[Any] | None,
    tokens: int | None,
) -> when.TurnNumbers:
    """The numbers every decision reads, gathered once (``tokens``: a count already made)."""
    if facts is None:
        trigger = effective_trigger(messages, config)
    else:
        trigger = _raised_trigger(facts.boundary_meta, config)
    if tokens is None:
        tokens = context_tokens(messages, counter=counter, tools=tools, facts=facts)
    budget = config.budget
    assert budget is not None  # known: the trigger is
    fit = budget.fit or trigger
    return when.TurnNumbers(
        tokens=tokens,
        trigger=trigger,
        fit=fit,
        window=config.context_window or fit,
        fold=budget.fold,
        worth=budget.worth_compacting,
        removed=removed_since_boundary(messages) if facts is None else facts.removed_since,
        cooldown_turns=config.cooldown_turns,
        max_compactions=config.max_compactions,
        thrash_limit=config.thrash_limit,
    )


def _gathered(
    need: when.Need,
    messages: Sequence[BaseMessage],
    facts: HistoryFacts | None,
    planned: Plan | None,
    counter: TokenCounter,
) -> dict[str, Any]:
    """The numbers :func:`~langchain_compact.budget.decision` asks for (``need``)."""
    if need == "info":
        info = compaction_info(messages) if facts is None else _info_of(facts)
        return {
            "count": info.count,
            "turns_since": info.turns_since,
            "refill_streak": info.refill_streak,
        }
    if need == "plan":
        return {"has_span": planned is not None}
    assert planned is not None  # asked only when there is a span
    if need == "span_removed":
        return {"span_removed": removed_since_boundary(planned.span)}
    return {"span_tokens": counter(planned.span)}


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


def compact_history(
    messages: Sequence[BaseMessage],
    *,
    summarizer: Summarizer | None = None,
    config: CompactionConfig | None = None,
    archive: TranscriptArchive | None = None,
    thread_id: str = "default",
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    prepared: Prepared | None = None,
    calibrate: bool = True,
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
        prepared: A summary prepared before the trigger (``Prepared`` from
            ``langchain_compact._prepare``, as the integrations keep it): used when its span
            is still a prefix of the span taken now, else discarded (``result.prepared``
            says which and why).
        calibrate: Scale the counts by the newest usage report (default). ``False`` where
            the reports describe another list than ``messages`` (a stateless chain that
            compacts a copy: its model's usage describes the copy): then the compacted
            history is counted with tiktoken as it is.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = [HumanMessage("Task: count to 3", id="t")]
        >>> history += [AIMessage(f"{i}", id=f"a{i}") for i in range(1, 8)]
        >>> result = compact_history(history, config=CompactionConfig(keep_last_n=2))
        >>> [m.id for m in result.messages][0], len(result.messages)
        ('t', 4)
    """
    return drive(
        history_steps(
            messages,
            summarizer=summarizer,
            config=config,
            archive=archive,
            thread_id=thread_id,
            counter=counter,
            tools=tools,
            prepared=prepared,
            calibrate=calibrate,
        )
    )


def history_steps(
    messages: Sequence[BaseMessage],
    *,
    summarizer: Summarizer | None = None,
    config: CompactionConfig | None = None,
    archive: TranscriptArchive | None = None,
    thread_id: str = "default",
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    prepared: Prepared | None = None,
    calibrate: bool = True,
) -> Generator[Op, Outcome, CompactionResult]:
    """:func:`compact_history` as its sans-IO steps (the archive writes and reads and the
    summarizer calls yielded as operations), for a caller that drives them sync or async."""
    return _steps(
        messages, summarizer, config, archive, thread_id, counter, tools, prepared, calibrate
    )


async def acompact_history(
    messages: Sequence[BaseMessage],
    *,
    summarizer: Summarizer | None = None,
    config: CompactionConfig | None = None,
    archive: TranscriptArchive | None = None,
    thread_id: str = "default",
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    prepared: Prepared | None = None,
    calibrate: bool = True,
) -> CompactionResult:
    """:func:`compact_history` with its I/O awaited (the same steps)."""
    return await adrive(
        history_steps(
            messages,
            summarizer=summarizer,
            config=config,
            archive=archive,
            thread_id=thread_id,
            counter=counter,
            tools=tools,
            prepared=prepared,
            calibrate=calibrate,
        )
    )


def _steps(
    messages: Sequence[BaseMessage],
    summarizer: Summarizer | None,
    config: CompactionConfig | None,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
    tools: Sequence[Any] | None,
    prepared: Prepared | None = None,
    calibrate: bool = True,
) -> Generator[Op, Outcome, CompactionResult]:
    """Plan, read the boundary, check a prepared summary, then the phases (a plain result
    when there is nothing to compact); a second compaction keeping the newest turn alone
    when the first one's tail leaves the next call no room."""
    config = config or CompactionConfig()
    summarizer = summarizer or ExtractiveSummarizer()
    plan = plan_compaction(messages, config, counter, tools)
    if plan is None:
        tokens = context_tokens(messages, counter=counter, tools=tools)
        return CompactionResult(list(messages), None, tokens, tokens, reason="nothing to compact")
    tokens_before = context_tokens(messages, counter=counter, tools=tools)
    in_force = None if config.trigger_tokens is None else effective_trigger(messages, config)
    cause = when.compaction_cause(tokens_before, in_force)
    job = _job(
        messages,
        plan,
        config,
        summarizer,
        prepared,
        archive=archive,
        thread_id=thread_id,
        counter=counter,
        tools=tools,
        calibrate=calibrate,
        tokens_before=tokens_before,
        cause=cause,
    )
    result = yield from compaction_steps(job)
    fit = config.fit_tokens
    if fit is None or result.tokens_after <= fit:
        return result
    # The kept tail left the next call no room: a second compaction, of the compacted
    # history, keeps the newest turn alone (the smallest context). It takes only what the
    # first one kept, so every original is archived once.
    newest = plan_compaction(result.messages, config, counter, tools, tail_tokens=0)
    if newest is None:
        if job.last_resort:
            return result
        # Nothing before the newest turn to take after all: the first compaction again,
        # allowed its last resort.
        return (yield from compaction_steps(replace(job, last_resort=True)))
    logger.info(
        "compaction #%d left %d tokens, over the %d that fit: compacting again, keeping the "
        "newest turn alone",
        job.index,
        result.tokens_after,
        fit,
    )
    second = yield from compaction_steps(
        replace(
            job,
            messages=result.messages,
            plan=newest,
            tokens_before=result.tokens_after,
            index=job.index + 1,
            turns_since=0,
            refill_streak=0,
            prepared_text=None,
            prepared_covers=0,
            prepared_note="",
            prepared_calls=0,
            prepared_merge=None,
            last_resort=True,
        )
    )
    kept = {m.id for m in second.messages}
    return replace(
        second,
        tokens_before=tokens_before,
        compacted=[*result.compacted, *second.compacted],
        removed_ids=[m.id for m in messages if m.id is not None and m.id not in kept],
        merged=result.merged + second.merged,
        summarizer_calls=result.summarizer_calls + second.summarizer_calls,
        errors=(*result.errors, *second.errors),
        extractive_parts=tuple(dict.fromkeys([*result.extractive_parts, *second.extractive_parts])),
        prepared=result.prepared,
    )


def _job(
    messages: Sequence[BaseMessage],
    plan: Plan,
    config: CompactionConfig,
    summarizer: Summarizer,
    prepared: Prepared | None,
    *,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
    tools: Sequence[Any] | None,
    calibrate: bool,
    tokens_before: int,
    cause: str,
) -> Compaction:
    """The compaction to run on ``plan``: with the prepared summary when it still covers a
    prefix of the span (:func:`~langchain_compact._prepare.use_prepared`)."""
    info = compaction_info(messages)
    use = use_prepared(
        prepared,
        messages,
        plan,
        config=config,
        summarizer=summarizer,
        counter=counter,
        tokens_before=tokens_before,
    )
    used = prepared if use.text is not None else None  # the prepared summary this one takes
    return Compaction(
        messages,
        use.plan,
        config,
        summarizer,
        archive=archive,
        thread_id=thread_id,
        counter=counter,
        tools=tools,
        calibrate=calibrate,
        tokens_before=tokens_before,
        index=info.count + 1,
        turns_since=info.turns_since,
        refill_streak=info.refill_streak,
        cause=cause,
        prepared_text=use.text,
        prepared_covers=use.covers,
        prepared_note=use.note,
        prepared_calls=used.calls if used is not None else 0,
        prepared_merge=(
            (tuple(used.merged_ids), used.merged) if used is not None and used.merged else None
        ),
        prepared_merge_by_model=prepared is not None and prepared.merged_by_model,
        # What the tail keeps beside the newest turn is summarised before anything else goes.
        last_resort=_newest_turn_alone(use.plan),
    )


def _newest_turn_alone(plan: Plan) -> bool:
    """Whether ``plan`` keeps only the newest turn (no second compaction could take more)."""
    tail = plan.tail
    if tail and newest_request_index(tail) == 0:
        tail = tail[1:]  # the user's current request, kept before the newest turn
    return not tail or newest_turn_start(tail) == 0
