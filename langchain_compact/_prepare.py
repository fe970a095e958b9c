"""Summaries prepared before the trigger, and the checks that decide whether one is usable.

Past ``prepare_tokens`` the integrations summarise, concurrently with the model call, the
span a compaction would take at that point (:func:`prepare_steps`). What they keep is a
plain, JSON-serialisable record (:class:`Prepared`, stored as a dict in graph state, so a
checkpoint holds it and a fork or an edit carries it along). At the trigger,
:func:`usable_prefix` accepts it only when its span is still a prefix of the span the
compaction would take now, message by message (same ids, same content or since replaced by
a placeholder), under the same boundary and the same settings; anything else is discarded,
never used. Preparing removes nothing, so it writes nothing to the archive: the
compaction at the trigger archives the span exactly as one done on the spot.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact._compaction_phases import expected_bound, premerge_steps
from langchain_compact._compaction_plan import (
    Plan,
    plan_compaction,
    read_for_summary,
    restore_originals,
    summarizer_input,
    summary_in_parts,
)
from langchain_compact._fingerprint import is_placeholder_of, message_key
from langchain_compact._ops import (
    Op,
    Outcome,
    SummarizeOp,
    summary_bound,
)
from langchain_compact._scan import FactsMemo
from langchain_compact.budget import MIN_SUMMARY_TOKENS
from langchain_compact.config import CompactionConfig
from langchain_compact.history import CALL_LISTS
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, kind_of, newest_boundary
from langchain_compact.microcompact import clear_tool_results
from langchain_compact.redaction import maybe_redact
from langchain_compact.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    check_summary_text,
    over_bound,
)
from langchain_compact.tokens import TiktokenCounter, TokenCounter, precise_counter

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

logger = logging.getLogger("langchain_compact")

__all__ = [
    "NEWER_HEADING",
    "Prepared",
    "Use",
    "boundary_key",
    "config_key",
    "counter_text",
    "prepare_steps",
    "prepares",
    "repeat_turn",
    "rolls",
    "usable_prefix",
    "use_prepared",
]


#: Messages one agent turn adds (the model's tool call and its result).
TURN_MESSAGES = 2
#: Appended to the tool-call ids of a simulated next turn (:func:`repeat_turn`).
NEXT_TURN_SUFFIX = "~next"
#: Between a prepared summary and what was summarised after it (:attr:`Prepared.newer`, and
#: the key lines a trigger folds in locally).
NEWER_HEADING = "\n\nSince then:\n"


def prepares(config: CompactionConfig, summarizer: Summarizer) -> bool:
    """Whether summaries are prepared: ``config.prepare``, else on for an
    :class:`~langchain_compact.summarizers.LLMSummarizer` (a model call worth hiding) and
    off for the local extractive one and for custom summarizers (whose cost is unknown:
    pass ``prepare=True``)."""
    if config.prepare is not None:
        return config.prepare
    return isinstance(summarizer, LLMSummarizer)


def rolls(summarizer: Summarizer) -> bool:
    """Whether a prepared summary is brought up to date on the turns after it
    (:attr:`Prepared.newer`): for a summarizer that is not local, whose summary of the newer
    turns the trigger would otherwise replace by their extracted key lines."""
    return not (
        isinstance(summarizer, ExtractiveSummarizer) or getattr(summarizer, "_local", False)
    )


def repeat_turn(turn: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The next turn as the prediction assumes it: ``turn`` (the newest ``AIMessage`` and
    what followed it) again, under fresh ids and without usage, so that ``turn`` itself
    counts as read.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> call = {"name": "ls", "args": {}, "id": "c1"}
        >>> turn = [AIMessage("", tool_calls=[call]), ToolMessage("a", tool_call_id="c1")]
        >>> again = repeat_turn(turn)
        >>> again[0].tool_calls[0]["id"] == again[1].tool_call_id != "c1"
        True
    """
    renamed: dict[str, str] = {}
    out: list[BaseMessage] = []
    for message in turn:
        if isinstance(message, AIMessage):
            update: dict[str, Any] = {"id": None, "usage_metadata": None}
            for key in CALL_LISTS:  # a malformed call and its error result are renamed too
                calls = []
                for call in getattr(message, key):
                    new = f"{call.get('id') or 'call'}{NEXT_TURN_SUFFIX}"
                    renamed[str(call.get("id"))] = new
                    calls.append({**call, "id": new})
                update[key] = calls
            out.append(message.model_copy(update=update))
        elif isinstance(message, ToolMessage):
            call_id = renamed.get(message.tool_call_id, message.tool_call_id + NEXT_TURN_SUFFIX)
            out.append(message.model_copy(update={"id": None, "tool_call_id": call_id}))
        else:
            out.append(message.model_copy(update={"id": None}))
    return out


def boundary_key(messages: Sequence[BaseMessage]) -> str:
    """The id of the newest boundary (``""`` before the first compaction)."""
    b, _kept = newest_boundary(messages)
    return str(messages[b].id) if b >= 0 else ""


def config_key(config: CompactionConfig, summarizer: Summarizer) -> str:
    """What a prepared summary depends on besides the messages: the summarizer and the
    settings that shape the span and the summary. A change of either discards it."""
    model = getattr(summarizer, "model", None)
    parts = [
        type(summarizer).__qualname__,
        str(getattr(summarizer, "prompt", "")),
        type(model).__qualname__ if model is not None else "",
        str(getattr(model, "model_name", "") or getattr(model, "model", "") or ""),
        config.keep_last_n,
        config.pin_original_task,
        config.summary_max_tokens,
        config.summary_budget_ratio,
        config.summary_role,
        config.context_window,
        config.redactor is not None,
    ]
    raw = json.dumps(parts, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A summary prepared ahead of the trigger (kept in state as :meth:`as_dict`)."""

    text: str
    """The summary of the span (empty when preparing failed)."""
    span_ids: list[str]
    """Ids of the span's messages, in order."""
    span_keys: list[str]
    """A content digest per span message, in order."""
    boundary: str
    """Id of the boundary the span starts after (``""``: none yet)."""
    settings: str
    """:func:`config_key` when it was prepared."""
    bound: int
    """The token bound the summary was written for."""
    summarizer: str
    input_messages: int = 0
    failed: str = ""
    """Why preparing failed (the compaction at the trigger then calls the summarizer the
    usual way, with its retries and fallback)."""
    errors: list[str] = field(default_factory=list)
    merged: str = ""
    """The merge of the earlier summaries (their content keys: ``merged_ids``) that a
    compaction with this summary will be due to make
    (:func:`~langchain_compact._compaction_phases.premerge`; empty: none)."""
    merged_ids: list[str] = field(default_factory=list)
    merged_by_model: bool = False
    """Whether the summarizer wrote ``merged`` (else it was joined and condensed locally)."""
    calls: int = 0
    """Summarizer calls the summary took (one per part of the span's originals a request
    could hold; :func:`~langchain_compact._compaction_plan.summary_in_parts`)."""
    newer: str = ""
    """The summarizer's summary of the span's last ``newer_messages`` messages, written on
    the turns after ``text`` (beside those model calls: :func:`prepare_steps` given the
    record before), so a trigger two or more turns after the summary was prepared finds
    those turns model-written too instead of folding in their key lines."""
    newer_messages: int = 0
    """How many of ``span_ids`` (the last ones) ``newer`` covers."""

    @property
    def full_text(self) -> str:
        """``text``, then ``newer`` under :data:`NEWER_HEADING`: the summary of the span."""
        return f"{self.text}{NEWER_HEADING}{self.newer}" if self.newer else self.text

    def base(self) -> Prepared:
        """The record without its update (``newer``): the summary as first prepared."""
        if not self.newer_messages:
            return self
        n = len(self.span_ids) - self.newer_messages
        return replace(
            self,
            span_ids=self.span_ids[:n],
            span_keys=self.span_keys[:n],
            newer="",
            newer_messages=0,
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict, for graph state and checkpoints."""
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Any) -> Prepared | None:
        """Read a record back; ``None`` for anything that is not one (never raises)."""
        if isinstance(value, Prepared):
            return value
        if not isinstance(value, dict):
            return None
        try:
            return cls(**value)
        except TypeError:
            return None


def _keys(span: Sequence[BaseMessage]) -> tuple[list[str], list[str]]:
    return [str(m.id) for m in span], [message_key(m) for m in span]


def prepare_steps(
    messages: Sequence[BaseMessage],
    *,
    config: CompactionConfig,
    summarizer: Summarizer,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
    tools: Sequence[Any] | None = None,
    before: Any = None,
    memo: FactsMemo | None = None,
) -> Generator[Op, Outcome, Prepared | None]:
    """Summarise the span a compaction of ``messages`` would take now (sans-IO; ``memo``:
    the thread's :class:`~langchain_compact._scan.FactsMemo`, the plan reads through it).

    ``before``: the record prepared on an earlier turn under the same boundary. When it
    still covers a prefix of that span (:func:`usable_prefix`) and the summarizer
    :func:`rolls`, only the messages after it are summarised, and the record comes back
    with that summary added (:attr:`Prepared.newer`): one call over the newest turn, beside
    the model call, as the first summary was.

    The summarizer reads what it would read at the trigger: the redacted span with the
    archived originals of cleared results restored (without an archive, the span with its
    read results cleared, as micro-compaction will have left it). One attempt, no fallback:
    a failure is recorded (``failed``), and the compaction at the trigger retries the usual
    way.
    Returns ``None`` when there is nothing to summarise.
    """
    # One turn ahead: the model call running beside this adds a turn (a call and its
    # result), so the compaction at the next trigger keeps those in its tail and takes the
    # two messages that are the newest now: summarise them too, and a trigger on the next
    # turn finds a summary of exactly its span.
    ahead = config.replace(keep_last_n=max(0, config.keep_last_n - TURN_MESSAGES))
    plan = plan_compaction(messages, ahead, counter, tools, memo=memo)
    if plan is None:
        return None
    earlier = Prepared.from_dict(before)
    if earlier is not None and rolls(summarizer):
        covers, _reason = usable_prefix(
            earlier, messages, plan, config=config, summarizer=summarizer
        )
        if 0 < covers < len(plan.span):
            return (
                yield from _newer_steps(
                    earlier, plan, config, summarizer, archive, thread_id, counter
                )
            )
    span = maybe_redact(plan.span, config.redactor)
    precise = precise_counter()
    if precise is not None and not isinstance(counter, TiktokenCounter):
        precise(messages)  # the swap recounts with it: its cache makes that a lookup
    # The bound the room at the trigger will allow: its kept tail is the newest turn and
    # the next one, which grows as the newest did. At least half the full bound: the turn
    # that brings the trigger may grow less, and a summary written too tight loses facts no
    # condensing can bring back (one condensed at the trigger keeps its key facts).
    full = summary_bound(config)
    at_trigger = Plan(head=plan.head, span=[], tail=[*plan.tail, *plan.tail])
    bound = max(full // 2, expected_bound(messages, at_trigger, config, counter, tools))
    rooms = config.budget
    budget = 0 if rooms is None else rooms.restore(counter(span), bound)
    # Without an archive, what the trigger will read: by then micro-compaction has cleared
    # these read results, and nothing restores them for the summarizer.
    read = span if archive is not None else _as_cleared(span, config, counter)
    reading = yield from read_for_summary(
        summarizer, read, archive, thread_id, config, bound, counter, budget
    )
    readable = summarizer_input(summarizer, plan.head, span, reading.readable)
    ids, keys = _keys(plan.span)
    record = Prepared(
        text="",
        span_ids=ids,
        span_keys=keys,
        boundary=boundary_key(messages),
        settings=config_key(config, summarizer),
        bound=bound,
        summarizer=type(summarizer).__name__,
        input_messages=len(readable),
    )
    if reading.parts is not None:
        # The originals of the whole span, in as many calls as the window needs.
        written, errors, calls = yield from summary_in_parts(
            summarizer, reading, config, bound, attempts=1
        )
        if written is None:
            return Prepared(
                **{**record.as_dict(), "failed": errors[-1], "errors": errors, "calls": calls}
            )
        text = written
    else:
        calls = 1
        outcome = yield SummarizeOp(summarizer, readable, bound, config.summarizer_timeout)
        try:
            if outcome.error is not None:
                raise outcome.error
            text = check_summary_text(outcome.value, bound)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            return Prepared(
                **{**record.as_dict(), "failed": reason, "errors": [reason], "calls": calls}
            )
    merged_ids, merged, by_model = yield from premerge_steps(
        plan.head, text, config, counter, summarizer
    )
    return Prepared(
        **{
            **record.as_dict(),
            "text": text,
            "merged": merged,
            "merged_ids": merged_ids,
            "merged_by_model": by_model,
            "calls": calls,
        }
    )


def _restored(
    span: list[BaseMessage],
    config: CompactionConfig,
    archive: TranscriptArchive | None,
    thread_id: str,
    budget: int,
    counter: TokenCounter,
) -> Generator[Op, Outcome, list[BaseMessage]]:
    """What the summarizer at the trigger will read of ``span``: with an archive, the
    originals of cleared results restored within ``budget``; without one, the span with its
    read results cleared, as micro-compaction will have left it."""
    if archive is None:
        return _as_cleared(span, config, counter)
    return (yield from restore_originals(span, archive, thread_id, budget, counter))


def _as_cleared(
    span: list[BaseMessage], config: CompactionConfig, counter: TokenCounter
) -> list[BaseMessage]:
    """``span`` with its read results cleared, as micro-compaction will have left it by the
    trigger (without an archive nothing restores them)."""
    return clear_tool_results(
        span,
        keep=0,
        min_chars=config.micro_min_chars,
        exclude_tools=config.micro_exclude_tools,
        archived=False,
        counter=counter,
    )


def _newer_steps(
    earlier: Prepared,
    plan: Plan,
    config: CompactionConfig,
    summarizer: Summarizer,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
) -> Generator[Op, Outcome, Prepared]:
    """``earlier`` brought up to ``plan.span``: the messages after the ones it covers
    summarised by ``summarizer`` (one attempt; on a failure ``earlier`` comes back as it
    was, and the trigger folds those messages in as key lines), within the share of the
    bound they are of the span, as the trigger's fold would be."""
    covered = len(earlier.span_ids)
    rest = maybe_redact(plan.span[covered:], config.redactor)
    share = counter(rest) / max(1, counter(plan.span))
    used = counter_text(earlier.full_text, counter)
    bound = max(MIN_SUMMARY_TOKENS, min(earlier.bound - used, int(earlier.bound * share)))
    rooms = config.budget
    budget = 0 if rooms is None else rooms.restore(counter(rest), bound)
    restored = yield from _restored(rest, config, archive, thread_id, budget, counter)
    readable = summarizer_input(summarizer, plan.head, rest, restored)
    outcome = yield SummarizeOp(summarizer, readable, bound, config.summarizer_timeout)
    try:
        if outcome.error is not None:
            raise outcome.error
        text = check_summary_text(outcome.value, bound)
    except Exception as exc:
        logger.info("summarising the newer turns failed (%s); the trigger folds them in", exc)
        return earlier
    ids, keys = _keys(plan.span[covered:])
    record = replace(
        earlier,
        span_ids=[*earlier.span_ids, *ids],
        span_keys=[*earlier.span_keys, *keys],
        newer=f"{earlier.newer}\n{text}" if earlier.newer else text,
        newer_messages=earlier.newer_messages + len(ids),
        input_messages=earlier.input_messages + len(readable),
    )
    if not earlier.merged_ids:  # the longer summary may make a merge due: prepare it too
        merged_ids, merged, by_model = yield from premerge_steps(
            plan.head, record.full_text, config, counter, summarizer
        )
        record = replace(record, merged=merged, merged_ids=merged_ids, merged_by_model=by_model)
    return record


def usable_prefix(
    prepared: Prepared | None,
    messages: Sequence[BaseMessage],
    plan: Plan,
    *,
    config: CompactionConfig,
    summarizer: Summarizer,
) -> tuple[int, str]:
    """How many messages of ``plan.span`` the prepared summary covers (``0``: unusable) and
    why. Usable only when it was written under the same boundary and settings, within the
    current summary bound, and its span is a prefix of ``plan.span`` message by message:
    the same id, and the same content or a placeholder of it (micro-compaction cleared or
    cut it since: the prepared summary read the original)."""
    if prepared is None:
        return 0, "none prepared"
    if prepared.failed or not prepared.text:
        return 0, f"preparing failed ({prepared.failed})"
    if prepared.boundary != boundary_key(messages):
        return 0, "prepared before another compaction (or on another branch)"
    if prepared.settings != config_key(config, summarizer):
        return 0, "the settings or the summarizer changed"
    if over_bound(prepared.text, summary_bound(config)):
        # The rule the summary passed when it was written (a summary within it is condensed
        # to the room at the trigger); discarding one the trigger would accept as written
        # threw a summarizer call away and made another.
        return 0, "longer than the summary bound"
    span = plan.span
    if len(prepared.span_ids) > len(span):
        return 0, "the span is shorter than the prepared one (messages removed or replaced)"
    for i, (mid, key) in enumerate(zip(prepared.span_ids, prepared.span_keys, strict=True)):
        m = span[i]
        if str(m.id) != mid:
            return 0, f"the span changed at message {i} (id {m.id!r}, prepared {mid!r})"
        if message_key(m) != key and not (
            kind_of(m) in (KIND_CLEARED, KIND_TRUNCATED) and is_placeholder_of(m, key)
        ):
            return 0, f"message {mid!r} was edited after the summary was prepared"
    return len(prepared.span_ids), "covers a prefix of the span"


def counter_text(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text`` as one human message, by ``counter``."""
    return counter([HumanMessage(text)])


@dataclass(frozen=True, slots=True)
class Use:
    """How a compaction uses a prepared summary."""

    plan: Plan
    """The plan to run (the span may end where the prepared one did, the rest kept)."""
    text: str | None
    """The prepared summary, or ``None`` when it is not used."""
    covers: int
    """Messages of ``plan.span`` the text covers; the rest get an incremental summary."""
    note: str
    """What happened, for events and logs: ``used``, ``used, N kept in the tail``,
    ``used + incremental summary of N``, or ``discarded: <reason>``."""


def use_prepared(
    prepared: Prepared | None,
    messages: Sequence[BaseMessage],
    plan: Plan,
    *,
    config: CompactionConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    tokens_before: int,
) -> Use:
    """Decide how the compaction at hand uses ``prepared``.

    The messages the span took on since it was prepared stay in the kept tail when the
    compacted context still ends well under the trigger (halfway between the prepare point
    and the trigger); otherwise they get a short incremental summary.
    """
    if prepared is None:
        return Use(plan, None, 0, "")
    covers, reason = usable_prefix(prepared, messages, plan, config=config, summarizer=summarizer)
    if covers == 0 and prepared.newer_messages:
        # its update reaches past the span taken now (a plan with a longer tail): the
        # summary as first prepared may still cover a prefix
        prepared = prepared.base()
        covers, reason = usable_prefix(
            prepared, messages, plan, config=config, summarizer=summarizer
        )
    if covers == 0:
        return Use(plan, None, 0, f"discarded: {reason}")
    first = covers - prepared.newer_messages  # what the first summary covers
    rest = plan.span[first:]
    if not rest:
        return Use(plan, prepared.text, covers, "used")
    after = tokens_before - counter(plan.span[:first]) + counter_text(prepared.text, counter)
    rooms = config.budget
    if rooms is not None and after <= rooms.prepared_keeps_newer:
        kept = Plan(head=plan.head, span=plan.span[:first], tail=[*rest, *plan.tail])
        return Use(kept, prepared.text, first, f"used, {len(rest)} newer messages kept")
    note = "used"
    if prepared.newer_messages:
        note += f" + model summary of {prepared.newer_messages} newer messages"
    left = len(plan.span) - covers
    if left:
        note += f" + key lines of {left} newer messages"
    return Use(plan, prepared.full_text, covers, note)
