"""One full compaction, as named phases over a sans-IO generator.

:func:`compaction_steps` runs the phases in order; each yields the I/O it needs (archive
writes and reads, summarizer calls; :mod:`langchain_compact._ops`) and
:func:`langchain_compact.compaction.compact_history` drives it, sync or async:

1. :func:`~langchain_compact._compaction_plan.plan_compaction`: what stays verbatim
   (system messages, the pinned task, earlier summaries; the kept tail, cut so no
   tool-call batch is split) and the span to summarise.
2. Archive the span (redacted first) before anything is replaced.
3. :func:`measure_scale`: provider tokens per local token and fixed overhead, so local
   counts after the compaction speak the provider's units.
4. :func:`make_room`: when the kept messages leave the summary too little room, slim the
   tail (read results cleared, long read observations digested), then an oversized task.
5. :func:`summarize_span`: the summarizer reads the span with the archived originals of
   results cleared since the last compaction restored; a fidelity supplement adds the
   constraints and facts it dropped.
6. :func:`merge_summaries`: over the summary budget, earlier summaries merge into one.
7. :func:`fit_next_call`: the result must fit the next call; the tail is slimmed further
   and, as the last resort, unread results are digested, largest first.
8. :func:`finish`: the boundary marker and its metadata (count, calibration, streak).
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_compact._compaction_plan import (
    CompactionResult,
    Plan,
    read_for_summary,
    summarizer_input,
    summary_in_parts,
    summary_message,
)
from langchain_compact._facts import condense_summary
from langchain_compact._fingerprint import message_key
from langchain_compact._ops import (
    Op,
    Outcome,
    SummarizeOp,
    archive_and_tag,
    archive_originals,
    facts_bound,
    summarize_steps,
    summary_bound,
)
from langchain_compact._placeholders import (
    merged_summary_header,
    split_summary_header,
    summary_header,
)
from langchain_compact._provider_items import carries_provider_compaction
from langchain_compact._refed import boundary_record
from langchain_compact.budget import (
    CHARS_PER_TOKEN,
    MIN_SUMMARY_TOKENS,
    SUMMARY_HEADER_TOKENS,
    Budget,
    refill_streak,
)
from langchain_compact.config import CompactionConfig
from langchain_compact.history import newest_request_index
from langchain_compact.markers import (
    KIND_SUMMARY,
    Boundary,
    kind_of,
    newest_boundary,
    with_meta,
)
from langchain_compact.microcompact import (
    clear_tool_results,
    cut_task,
    large_result_limit,
    reduce_assistant,
    shrink_unread,
    truncate_large_tool_results,
    unread_start,
)
from langchain_compact.redaction import maybe_redact
from langchain_compact.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    check_summary_text,
    dense_merge,
    fidelity_supplement,
    merger,
)
from langchain_compact.tokens import (
    RATIO_BOUNDS,
    TiktokenCounter,
    TokenCounter,
    approx_text,
    approximate_tokens,
    calibration,
    least_scale,
    precise_counter,
)

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

__all__ = [
    "Compaction",
    "compaction_steps",
    "expected_bound",
    "premerge",
    "premerge_steps",
    "slim_tail",
]

logger = logging.getLogger("langchain_compact")

Steps = Generator[Op, Outcome, "CompactionResult"]


# --------------------------------------------------------------------------- the compaction


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction to run: the history and how to split it, the settings, the
    summarizer, where the originals go, the summary prepared for it, and where it stands
    among the thread's compactions. :func:`compaction_steps` runs it; a second compaction
    of its result is a :func:`dataclasses.replace` of it."""

    messages: Sequence[BaseMessage]
    plan: Plan
    config: CompactionConfig
    summarizer: Summarizer
    archive: TranscriptArchive | None = None
    thread_id: str = "default"
    counter: TokenCounter = approximate_tokens
    tools: Sequence[Any] | None = None
    calibrate: bool = True
    """``False``: the usage reports describe another list (see
    :func:`~langchain_compact.compaction.compact_history`)."""
    tokens_before: int = 0
    """The context size the compaction starts from."""
    index: int = 1
    """The new summary's number."""
    turns_since: int = 0
    """Model turns since the previous boundary (the thrash guard)."""
    refill_streak: int = 0
    """The previous boundary's streak (the thrash guard)."""
    cause: str = "trigger"
    """``"trigger"`` or ``"fold"``."""
    prepared_text: str | None = None
    """A summary of ``plan.span[:prepared_covers]`` prepared before the trigger."""
    prepared_covers: int = 0
    prepared_note: str = ""
    """How the prepared summary is used, for the result."""
    prepared_calls: int = 0
    """Summarizer calls the prepared summary took."""
    prepared_merge: tuple[tuple[str, ...], str] | None = None
    """``(keys, text)``: the merge of the earlier summaries (their content keys) prepared
    with the summary (:func:`premerge`), used when a merge is due over those very ones."""
    prepared_merge_by_model: bool = False
    """Whether the summarizer wrote ``prepared_merge`` (:func:`premerge_steps`); ``False``:
    joined and condensed without a model."""
    last_resort: bool = True
    """Whether the compaction may cut what nothing else can make room for: the earlier
    summaries condensed, the task cut, the unread results digested. ``False`` while a
    second compaction keeping the newest turn alone can still make the room (those cuts
    wait for it)."""

    def tool_tokens(self) -> int:
        return approximate_tokens([], tools=self.tools) if self.tools else 0


# --------------------------------------------------------------------------- the draft


@dataclass(slots=True)
class _Draft:
    """The compaction being built; the phases fill it in."""

    job: Compaction
    counter: TokenCounter
    extra: int  # tool schema tokens, counted once
    head: list[BaseMessage]
    tail: list[BaseMessage]
    scale: float = 1.0
    overhead: int = 0
    bound: int = 0
    left: int | None = None
    body: str = ""
    header: str = ""
    supplement: str = ""
    used: str = ""
    extractive: list[str] = field(default_factory=list)
    """What the extractive summarizer wrote in place of the configured one
    (:attr:`~langchain_compact.compaction.CompactionResult.extractive_parts`)."""
    errors: list[str] = field(default_factory=list)
    merged: int = 0
    span_tokens: int = 0
    """Local tokens of the span the summary replaces (its size never exceeds them)."""
    calls: int = 0
    """Summarizer model calls the new summary took (at the trigger, or ahead when it was
    prepared; :attr:`CompactionResult.summarizer_calls`)."""
    units: tuple[TokenCounter, int] | None = None
    """The caller's counter and tool tokens, once the draft counts precisely (see
    :func:`count_precisely`); ``None`` while it counts with the caller's counter."""

    @classmethod
    def of(cls, job: Compaction) -> _Draft:
        return cls(
            job=job,
            counter=job.counter,
            extra=job.tool_tokens(),
            head=job.plan.head,
            tail=job.plan.tail,
            bound=summary_bound(job.config),
        )

    @property
    def config(self) -> CompactionConfig:
        return self.job.config

    def note_extractive(self, part: str) -> None:
        """Record that the extractive summarizer wrote ``part`` in place of the configured
        summarizer (nothing to record when that is the extractive one)."""
        if not isinstance(self.job.summarizer, ExtractiveSummarizer):
            self.extractive.append(part)

    def written_by(self) -> str:
        """Who wrote the new summary (:attr:`CompactionResult.summary_written_by`)."""
        summarizer = self.job.summarizer
        if self.used.startswith("fallback:") or isinstance(summarizer, ExtractiveSummarizer):
            return "extractive"
        return "model" if isinstance(summarizer, LLMSummarizer) else type(summarizer).__name__

    @property
    def archive(self) -> TranscriptArchive | None:
        return self.job.archive

    @property
    def thread_id(self) -> str:
        return self.job.thread_id

    def local(self, tokens: int | None) -> int | None:
        """A context size in the provider's tokens, as a local count."""
        return None if tokens is None else int((tokens - self.overhead) / self.scale)

    def room(self, *, facts: bool = False, key_facts: bool = False) -> int | None:
        """Local tokens left for the new summary beside what is kept, up to the trigger.

        The roof is the trigger, not the fit limit: a summary that takes the room up to
        the fit limit leaves the compacted history over the trigger, so the very next turn
        compacts again and writes another summary (and soon a merge). ``facts``: the room
        up to halfway between the trigger and the fit limit, which the fidelity supplement
        may use for the facts the shorter summary dropped (a compacted history over the
        trigger but fitting goes on, and facts are the last thing a small room gives
        up). ``key_facts``: the room up to the fit limit itself, for the key facts of the
        supplement (values, ids) when the room up to halfway is gone."""
        rooms = self.config.budget
        if rooms is None:
            return None
        if key_facts:
            roof = self.local(rooms.fit)
        elif facts:
            roof = self.local(rooms.facts_roof)
        else:
            roof = self.local(rooms.trigger)
        if roof is None:
            return None
        return roof - self.counter([*self.head, *self.tail]) - self.extra - SUMMARY_HEADER_TOKENS

    def crowded(self) -> bool:
        """The kept messages leave the summary too little room (``left`` as last measured;
        :meth:`~langchain_compact.budget.Budget.crowded`)."""
        return self.left is not None and Budget.crowded(self.left, self.bound)

    def fitted_bound(self) -> int:
        """The bound sized to the room left
        (:meth:`~langchain_compact.budget.Budget.summary_bound_in`)."""
        if self.left is None:
            return self.bound
        return Budget.summary_bound_in(self.left, self.bound)

    def size(self) -> int:
        """Local tokens of the compacted history as it stands."""
        return self.counter([*self.head, HumanMessage(self.body), *self.tail]) + self.extra


# --------------------------------------------------------------------------- 3. calibration


def measure_scale(
    messages: Sequence[BaseMessage],
    config: CompactionConfig,
    counter: TokenCounter,
    tools: Sequence[Any] | None,
) -> tuple[float, int]:
    """Provider tokens per local token and fixed overhead: from the newest usage report,
    else from the last boundary; the overhead is capped at the budget's
    :attr:`~langchain_compact.budget.Budget.max_overhead`."""
    measured = calibration(messages, counter=counter, tools=tools)
    if measured is None:
        b, _kept = newest_boundary(messages)
        previous = Boundary.of(messages[b]) if b >= 0 else Boundary()
        recorded = 1.0 if previous.calibration is None else previous.calibration
        measured = (max(least_scale(counter), recorded), previous.overhead)
    return _capped(measured, config)


def _capped(measured: tuple[float, int], config: CompactionConfig) -> tuple[float, int]:
    scale, overhead = measured
    if config.budget is not None:
        overhead = min(overhead, config.budget.max_overhead)
    return scale, overhead


# --------------------------------------------------------------------------- 4. room


def slim_tail(
    tail: list[BaseMessage],
    config: CompactionConfig,
    archive: TranscriptArchive | None,
    thread_id: str,
    counter: TokenCounter,
    *,
    keep: int = 1,
    unread_need: int = 0,
) -> Generator[Op, Outcome, list[BaseMessage]]:
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
    request = newest_request_index(slim)  # the user's current request stays whole here
    size, unit = large_result_limit(config, counter)
    max_chars = size if unit == "chars" else size * CHARS_PER_TOKEN
    if keep == 0:  # the next call cannot fit: every long read observation is digested
        max_chars = 0
    slim = (
        truncate_large_tool_results(
            slim[:read],
            max_chars=max(max_chars, config.large_tool_result_keep_chars + 1),
            keep_chars=config.large_tool_result_keep_chars,
            digest=config.digest,
            archived=archived,
            include_human=True,
            counter=counter,
            request=request if request < read else -1,
        )
        + slim[read:]
    )
    if keep == 0:
        # The smallest context: every call's long arguments stubbed (the newest one's too)
        # and the older assistant turns' text cut, before anything unread is cut.
        newest = max((i for i, m in enumerate(slim) if isinstance(m, AIMessage)), default=-1)
        for i, m in enumerate(slim):
            if isinstance(m, AIMessage) and not carries_provider_compaction(m):
                reduced = reduce_assistant(
                    m,
                    text=i != newest,
                    min_chars=config.micro_min_chars,
                    keep_chars=config.large_tool_result_keep_chars,
                    archived=archived,
                    counter=counter,
                )
                if reduced is not None:
                    slim[i] = reduced
    if unread_need > 0:
        slim = shrink_unread(
            slim,
            need=unread_need,
            config=config,
            counter=counter,
            archived=archived,
            has_task=False,
        )
    out, _ref = yield from archive_and_tag(
        tail,
        slim,
        archive=archive,
        thread_id=thread_id,
        reason="compaction-tail",
        redactor=config.redactor,
    )
    return out


def _slim_draft_tail(
    draft: _Draft, *, keep: int = 1, unread_need: int = 0
) -> Generator[Op, Outcome, None]:
    draft.tail = yield from slim_tail(
        draft.tail,
        draft.config,
        draft.archive,
        draft.thread_id,
        draft.counter,
        keep=keep,
        unread_need=unread_need,
    )


def _slim_task(draft: _Draft) -> Generator[Op, Outcome, None]:
    """Pin an oversized original task as head + tail + key lines, archived whole first."""
    found = cut_task(draft.head, draft.config, draft.counter, draft.archive is not None, None)
    if found is None:
        return
    i, new = found
    ref = yield from archive_originals(
        draft.archive,
        [draft.head[i]],
        thread_id=draft.thread_id,
        reason="task",
        redactor=draft.config.redactor,
    )
    draft.head = list(draft.head)
    draft.head[i] = with_meta(new, archive_ref=ref) if ref else new


def make_room(draft: _Draft) -> Generator[Op, Outcome, None]:
    """Give the summary room: slim the tail, then an oversized task, when the kept messages
    leave it too little room (:meth:`~langchain_compact.budget.Budget.crowded`); then size
    the bound to the room (:meth:`~langchain_compact.budget.Budget.summary_bound_in`), so
    the result fits."""
    draft.left = draft.room()
    if draft.crowded():
        yield from _slim_draft_tail(draft)
        draft.left = draft.room()
    if draft.crowded():
        yield from _slim_task(draft)
        draft.left = draft.room()
    draft.bound = draft.fitted_bound()


def expected_bound(
    messages: Sequence[BaseMessage],
    plan: Plan,
    config: CompactionConfig,
    counter: TokenCounter,
    tools: Sequence[Any] | None,
) -> int:
    """The summary bound :func:`make_room` would give a compaction of ``messages`` by
    ``plan`` (slimming the tail's older read results first when it would), for a summary
    prepared before the trigger."""
    job = Compaction(messages, plan, config, ExtractiveSummarizer(), counter=counter, tools=tools)
    draft = _Draft.of(job)
    draft.scale, draft.overhead = measure_scale(messages, config, counter, tools)
    draft.left = draft.room()
    if draft.crowded():
        draft.tail = clear_tool_results(
            draft.tail,
            keep=1,
            min_chars=config.micro_min_chars,
            exclude_tools=config.micro_exclude_tools,
            counter=counter,
        )
        draft.left = draft.room()
    return draft.fitted_bound()


# --------------------------------------------------------------------------- 5. summary


def summarize_span(
    draft: _Draft, span: list[BaseMessage], header: str
) -> Generator[Op, Outcome, None]:
    """Summarise the span (originals of cleared results restored within the room left under
    the fit limit), then add a fidelity supplement for what the summary dropped.

    With a prepared summary of ``span[:prepared_covers]`` only the rest is summarised, by
    the local extractive summarizer (no model call at the trigger)."""
    job = draft.job
    summarizer, prepared_text, prepared_covers = (
        job.summarizer,
        job.prepared_text,
        job.prepared_covers,
    )
    config = draft.config
    rooms = config.budget
    restore_budget = 0 if rooms is None else rooms.restore(draft.counter(span), draft.bound)
    reading = yield from read_for_summary(
        summarizer,
        span,
        draft.archive,
        draft.thread_id,
        config,
        draft.bound,
        draft.counter,
        restore_budget,
    )
    readable = reading.readable
    if prepared_text is None and reading.parts is not None:
        # The originals of the whole span, in as many calls as the window needs.
        rolled, errors, draft.calls = yield from summary_in_parts(
            summarizer, reading, config, draft.bound, attempts=config.summarizer_retries + 1
        )
        if rolled is not None:
            text, draft.used = rolled, type(summarizer).__name__
        else:  # the extractive fallback, over the same originals
            text, local_used, local_errors = yield from summarize_steps(
                ExtractiveSummarizer(), readable, config, draft.bound
            )
            draft.used, errors = f"fallback:{local_used}", [*errors, *local_errors]
            draft.note_extractive("summary")
    elif prepared_text is None:
        text, draft.used, errors = yield from summarize_steps(
            summarizer,
            summarizer_input(summarizer, draft.head, span, readable),
            config,
            draft.bound,
        )
        if not _is_model(summarizer):
            draft.calls = 0
        elif draft.used.startswith("fallback:"):
            draft.calls = config.summarizer_retries + 1
        else:
            draft.calls = len(errors) + 1
        if draft.used.startswith("fallback:"):
            draft.note_extractive("summary")
    else:
        if draft.counter([HumanMessage(prepared_text)]) > draft.bound:
            # Written at the full bound, before the room at the trigger was known: calls,
            # prose and log lines go down to the room, key facts stay (within the full
            # bound). A summary larger than the room leaves the history over the trigger,
            # and the next turn compacts again.
            prepared_text = condense_summary(
                prepared_text, summary_bound(draft.config), soft_tokens=draft.bound
            )
        text, draft.used, errors = prepared_text, f"{type(summarizer).__name__} (prepared)", []
        draft.calls = job.prepared_calls
        rest = readable[prepared_covers:]
        if rest:
            # The turn or two since it was prepared: their key lines, locally. A model call
            # here would be the very pause preparing removes, and a second summary of the
            # same size; the next merge folds these lines in with the model.
            used = draft.counter([HumanMessage(prepared_text)])
            share = draft.counter(rest) / max(1, draft.counter(readable))
            bound = max(MIN_SUMMARY_TOKENS, min(draft.bound - used, int(draft.bound * share)))
            more, more_used, errors = yield from summarize_steps(
                ExtractiveSummarizer(), rest, draft.config, bound
            )
            text = f"{prepared_text}\n\nSince then:\n{more}"
            draft.used += f" + {more_used}"
            draft.note_extractive("newer turns")
    draft.errors += errors
    # Facts the text dropped: up to the facts bound (half the configured summary bound,
    # more in a large window; not the bound the room squeezed), within the room up to
    # halfway to the fit limit; its key facts (a value a tool computed, an id) within the
    # room up to the fit limit: a tail that fills the room to halfway (an unread result,
    # digests, or an estimate that counts them high) must not cost the values the next
    # step needs (the README's LCEL run lost one so without tiktoken's files).
    left, cap = draft.room(facts=True), facts_bound(draft.config)
    written = draft.counter([HumanMessage(text)])
    spare = cap if left is None else max(Budget.supplement_floor(), min(cap, left - written))
    up_to_fit = draft.room(key_facts=True)
    keys = spare if up_to_fit is None else max(spare, min(cap, up_to_fit - written))
    draft.supplement = fidelity_supplement(readable, text, max_tokens=spare, key_fact_tokens=keys)
    draft.header = header
    draft.body = header + text
    if draft.supplement:
        draft.body += "\n\n" + draft.supplement


def _is_model(summarizer: Summarizer) -> bool:
    """Whether ``summarizer`` makes a call that is counted (not the local extractive one)."""
    local = isinstance(summarizer, ExtractiveSummarizer) or getattr(summarizer, "_local", False)
    return not local


# --------------------------------------------------------------------------- 6. merge


def merge_summaries(
    draft: _Draft, summarizer: Summarizer, index: int, *, force: bool = False
) -> Generator[Op, Outcome, None]:
    """Over the summary budget (``summary_budget_ratio`` of the window, in the counter's own
    units): merge the earlier summaries into one (the only time a summary is summarised;
    the earlier ones are archived), into what the budget leaves beside the new summary but
    at least half of it (a large new summary must not squeeze the older facts out), and
    dense: beyond a quarter of the budget only key facts stay (a merge that refilled the
    budget with calls and log lines would be due again at the next compaction)."""
    config = draft.config
    earlier = [m for m in draft.head if kind_of(m) == KIND_SUMMARY]
    rooms = config.budget
    body_tokens = draft.counter([HumanMessage(draft.body)])
    if rooms is None or not earlier:
        return
    if draft.counter(earlier) + body_tokens <= rooms.summaries and not force:
        return
    if force and len(earlier) < 2:
        return
    merge_ref = yield from archive_originals(
        draft.archive,
        earlier,
        thread_id=draft.thread_id,
        reason="summary-merge",
        redactor=None,
        metadata={"index": index},
    )
    merged_text = yield from _merged_text(draft, summarizer, earlier, body_tokens, rooms)
    merged_msg = summary_message(
        # counted as the header plus the text, which a prepared merge counted ahead
        merged_summary_header(last=index - 1) + merged_text,
        config,
        earlier,
        index=index - 1,
        merged_from=[m.id for m in earlier],
        archive_ref=merge_ref,
    )
    first = draft.head.index(earlier[0])
    head = [m for m in draft.head if kind_of(m) != KIND_SUMMARY]
    head.insert(min(first, len(head)), merged_msg)
    draft.head = head
    draft.merged = len(earlier)


def _merged_text(
    draft: _Draft,
    summarizer: Summarizer,
    earlier: list[BaseMessage],
    body_tokens: int,
    rooms: Budget,
) -> Generator[Op, Outcome, str]:
    """The merged text of the ``earlier`` summaries: the one prepared beside the model call
    when it merges these very summaries (no work at the trigger), else written now (by the
    summarizer, or joined and condensed after a prepared summary), dense and checked. The
    draft notes a merge that no model wrote."""
    ready = draft.job.prepared_merge
    if ready is not None and ready[0] == tuple(message_key(m) for m in earlier):
        if not draft.job.prepared_merge_by_model:
            draft.note_extractive("merged summaries")  # joined and condensed (premerge)
        return ready[1]
    merging = merger(summarizer, prepared=draft.used.endswith("(prepared)"))
    merged_text, merge_used, merge_errors = yield from summarize_steps(
        merging, earlier, draft.config, rooms.merge_call_bound(body_tokens)
    )
    draft.errors += merge_errors
    if merging is not summarizer or merge_used.startswith("fallback:"):
        draft.note_extractive("merged summaries")
    merge_bound = rooms.merge_bound(body_tokens)
    return dense_merge(earlier, merged_text, merge_bound, soft_tokens=rooms.merge_dense)


def _merge_due(
    head: Sequence[BaseMessage], text: str, config: CompactionConfig, counter: TokenCounter
) -> tuple[list[BaseMessage], int, int, Budget] | None:
    """``(earlier summaries, merge bound, summarizer bound, the budget's rooms)`` when a
    compaction whose new summary is ``text`` will have to merge the earlier summaries in
    ``head`` (their size and the new one's over the summary budget); ``None`` when no merge
    will be due."""
    earlier = [m for m in head if kind_of(m) == KIND_SUMMARY]
    rooms = config.budget
    if rooms is None or not earlier:
        return None
    body_tokens = counter([HumanMessage(text)]) + SUMMARY_HEADER_TOKENS
    # The summary the trigger writes is this text plus its fidelity supplement (known only
    # then): a merge that its supplement could make due is prepared too (unused if not).
    if counter(earlier) + body_tokens + facts_bound(config) <= rooms.summaries:
        return None
    return earlier, rooms.merge_bound(body_tokens), rooms.merge_call_bound(body_tokens), rooms


def _premerged(
    earlier: list[BaseMessage], joined: str, merge_bound: int, rooms: Budget, counter: TokenCounter
) -> tuple[list[str], str]:
    """The prepared merge of ``earlier`` from a summarizer's ``joined`` text: dense and
    checked (:func:`dense_merge`), and counted ahead."""
    merged = dense_merge(earlier, joined, merge_bound, soft_tokens=rooms.merge_dense)
    # Counted here too, so the trigger counts only the merged summary's new header (a
    # merged summary is counted as its header plus this text: ``tokens.parts_cut``).
    approx_text(merged)
    for each in (counter, precise_counter()):
        if isinstance(each, TiktokenCounter):
            each.count_text(merged)
    return [message_key(m) for m in earlier], merged


def premerge(
    head: Sequence[BaseMessage], text: str, config: CompactionConfig, counter: TokenCounter
) -> tuple[list[str], str]:
    """``(keys, merged text)`` of the earlier summaries in ``head`` (their content keys,
    :func:`~langchain_compact._fingerprint.message_key`) when a compaction whose
    new summary is ``text`` will have to merge them (their size and the new one's over the
    summary budget), merged the way it would merge them after a prepared summary (joined and
    condensed, no model); ``([], "")`` when no merge will be due. Run beside the model call
    with the summary it prepares, so a merge costs the trigger nothing either."""
    due = _merge_due(head, text, config, counter)
    if due is None:
        return [], ""
    earlier, merge_bound, bound, rooms = due
    joined = merger(ExtractiveSummarizer(), prepared=True).summarize(earlier, max_tokens=bound)
    return _premerged(earlier, joined, merge_bound, rooms, counter)


def premerge_steps(
    head: Sequence[BaseMessage],
    text: str,
    config: CompactionConfig,
    counter: TokenCounter,
    summarizer: Summarizer,
) -> Generator[Op, Outcome, tuple[list[str], str, bool]]:
    """:func:`premerge` written by ``summarizer`` (a model): ``(keys, merged text, whether
    the summarizer wrote it)``. Run beside the model call with the summary it prepares, so
    a model-written merge costs the trigger nothing. The model is called only when the merge
    is due on this summary alone; one that only the trigger's fidelity supplement could make
    due (it may never come) is joined and condensed without a model, as a local summarizer's
    and a failed call's are. One attempt: a failure leaves the joined merge."""
    due = _merge_due(head, text, config, counter)
    if due is None:
        return [], "", False
    earlier, merge_bound, bound, rooms = due
    local = isinstance(summarizer, ExtractiveSummarizer) or getattr(summarizer, "_local", False)
    body_tokens = counter([HumanMessage(text)]) + SUMMARY_HEADER_TOKENS
    if not local and counter(earlier) + body_tokens > rooms.summaries:  # due without the supplement
        outcome = yield SummarizeOp(summarizer, earlier, bound, config.summarizer_timeout)
        try:
            if outcome.error is not None:
                raise outcome.error
            written = check_summary_text(outcome.value, bound)
        except Exception as exc:
            logger.info("preparing a merge with the summarizer failed (%s); joined instead", exc)
        else:
            return (*_premerged(earlier, written, merge_bound, rooms, counter), True)
    keys, merged = premerge(head, text, config, counter)
    return keys, merged, False


# --------------------------------------------------------------------------- 7. fit


def count_precisely(draft: _Draft) -> bool:
    """Count the draft with tiktoken, calibrated on the same usage report.

    The size of the compacted history decides whether the tail is slimmed, unread results
    are digested or the run stops, and (stored as the boundary's calibration) the counts
    until the next usage report. An estimate errs by content type, so a scale measured on
    the whole history runs high or low once the compaction has removed the content that
    set it; a tokenizer's count of the draft, scaled by the report that described the
    history, does not depend on the mix. Results cleared since the report are credited as
    tiktoken counts them (``saved_precise``; ``tokens._tiktoken_credit``). It costs one
    tiktoken pass over the messages not counted before (cached per text). Skipped when the
    caller counts with tiktoken already or when the encoding cannot be loaded here. Without
    a usage report that describes the history (none yet, or ``calibrate`` off: the reports
    describe another list) tiktoken's count is taken as it is: the estimate errs high by
    design, and what the compaction cuts as its last resort must not follow from that.
    Returns whether the draft now counts precisely."""
    if draft.units is not None or isinstance(draft.counter, TiktokenCounter):
        return False
    precise = precise_counter()
    if precise is None:
        return False
    job = draft.job
    tools = job.tools
    measured = calibration(job.messages, counter=precise, tools=tools) if job.calibrate else None
    if measured is None:  # no report describes the history: tiktoken's count as it is
        measured = (1.0, 0)
    draft.units = (draft.counter, draft.extra)
    draft.counter = precise
    draft.extra = precise.count_tools(tools) if tools else 0
    draft.scale, draft.overhead = _capped(measured, draft.config)
    return True


def fit_next_call(draft: _Draft) -> Generator[Op, Outcome, None]:
    """Slim the tail when the result is over the trigger; when the next call would not fit,
    every read result in the tail goes and the earlier summaries are merged into one. Then,
    as the last resort (:attr:`Compaction.last_resort`: the tail is the newest turn alone),
    the new summary's supplement goes, the earlier summaries are condensed, the task is cut
    and unread results are digested, largest first."""
    summarizer, index = draft.job.summarizer, draft.job.index
    local_trigger = draft.local(draft.config.trigger_tokens)
    if local_trigger is not None and draft.size() >= local_trigger:
        yield from _slim_draft_tail(draft)
    local_fit = draft.local(draft.config.fit_tokens)
    if local_fit is None or draft.size() <= local_fit:
        return
    yield from _slim_draft_tail(draft, keep=0)
    if draft.size() > local_fit:
        # Earlier summaries under their budget still carry a header each: one dense merge
        # (their facts stay), before the new summary's supplement of facts goes. Kept only
        # if it is smaller.
        before, head, merged = draft.size(), draft.head, draft.merged
        yield from merge_summaries(draft, summarizer, index, force=True)
        if draft.size() >= before:
            draft.head, draft.merged = head, merged
    if not draft.job.last_resort:
        return  # a second compaction keeps the newest turn alone first
    if draft.size() > local_fit and draft.supplement:
        draft.body = draft.body[: len(draft.body) - len(draft.supplement) - 2]
    if draft.size() > local_fit:
        yield from _condense_earlier(draft, index, need=draft.size() - local_fit)
    if draft.size() > local_fit:
        _condense_new(draft, need=draft.size() - local_fit)
    if draft.size() > local_fit:
        yield from _slim_task(draft)  # the smallest context pins the task's head and tail
    if draft.size() > local_fit:
        yield from _slim_draft_tail(draft, keep=0, unread_need=draft.size() - local_fit)


def _condense_new(draft: _Draft, *, need: int) -> None:
    """The new summary condensed to its key facts, by ``need`` tokens at most (never under
    :data:`MIN_SUMMARY_TOKENS`): the summary this compaction writes gives way before the
    task or anything the model has not read (its span is archived)."""
    text = draft.body[len(draft.header) :]
    size = draft.counter([HumanMessage(text)])
    if size <= MIN_SUMMARY_TOKENS:
        return
    # in the estimate's units, which condense_summary counts lines in
    estimate = approx_text(text)
    bound = max(MIN_SUMMARY_TOKENS, estimate * (size - need) // size)
    condensed = condense_summary(text, bound)
    if len(condensed) < len(text):
        draft.body = draft.header + condensed


def _condense_earlier(draft: _Draft, index: int, *, need: int) -> Generator[Op, Outcome, None]:
    """The earlier summaries condensed to key facts (archived first), by ``need`` tokens at
    most: the smallest context holds the condensed summaries, not the whole ones, before
    anything the model has not read is cut."""
    earlier = [m for m in draft.head if kind_of(m) == KIND_SUMMARY]
    if not earlier:
        return
    size = draft.counter(earlier)
    target = max(MIN_SUMMARY_TOKENS * len(earlier), size - need)
    if target >= size:
        return
    ref = yield from archive_originals(
        draft.archive,
        earlier,
        thread_id=draft.thread_id,
        reason="summary-condense",
        redactor=None,
        metadata={"index": index},
    )
    share = target / size
    head = list(draft.head)
    for i, m in enumerate(head):
        if kind_of(m) != KIND_SUMMARY:
            continue
        goal = max(MIN_SUMMARY_TOKENS, int(draft.counter([m]) * share))
        header, body = split_summary_header(m.text)  # it still says what it is
        # in the estimate's units, which condense_summary counts lines in; its line of
        # omitted entries can eat a small saving, so it is aimed again, lower
        bound = max(MIN_SUMMARY_TOKENS, int(approx_text(body) * share))
        text = header + condense_summary(body, bound)
        for _ in range(3):
            if draft.counter([m.model_copy(update={"content": text})]) <= goal:
                break
            bound = max(MIN_SUMMARY_TOKENS, bound * 9 // 10)
            text = header + condense_summary(body, bound)
        if len(text) < len(m.text):
            new = m.model_copy(update={"content": text})
            head[i] = with_meta(new, condensed_ref=ref) if ref else new
    draft.head = head


# --------------------------------------------------------------------------- the phases


def compaction_steps(job: Compaction) -> Steps:
    """One compaction, as a sans-IO generator: the phases in order (see the module)."""
    plan, config = job.plan, job.config
    # Redacted once: the archive and the summarizer both get the redacted span.
    span = maybe_redact(plan.span, config.redactor)
    ref = yield from archive_originals(
        job.archive,
        span,
        thread_id=job.thread_id,
        reason="compaction",
        redactor=None,
        metadata={"index": job.index},
    )
    draft = _Draft.of(job)
    if not count_precisely(draft) and job.calibrate:
        draft.scale, draft.overhead = measure_scale(job.messages, config, job.counter, job.tools)
    yield from make_room(draft)
    # The summary's prose compresses what it replaces (Budget.summary_prose). Its fidelity
    # supplement (the facts the prose dropped) may still take the room: facts are the last
    # thing given up.
    draft.span_tokens = draft.counter(span)
    draft.bound = min(draft.bound, Budget.summary_prose(draft.span_tokens))
    header = summary_header(index=job.index, count=len(plan.span), archive_ref=ref)
    yield from summarize_span(draft, span, header)
    yield from merge_summaries(draft, job.summarizer, job.index)
    yield from fit_next_call(draft)
    return finish(draft, ref)


# --------------------------------------------------------------------------- 8. finish


def _boundary(draft: _Draft, ref: str | None) -> tuple[Boundary, dict[str, Any]]:
    """The boundary before its size is known, and the records of what it replaced and which
    kept reports it made stale (:func:`langchain_compact._refed.boundary_record`)."""
    job = draft.job
    boundary = Boundary(
        index=job.index,
        archive_ref=ref,
        span_ids=tuple(m.id for m in job.plan.span),
        kept_ids=tuple(m.id for m in draft.tail if m.id is not None),
        turns_since_previous=job.turns_since,
        summarizer=draft.used,
        tokens_before=job.tokens_before,
        cause=job.cause,
        calibration=round(draft.scale, 4),
        overhead=draft.overhead,
    )
    staying = {m.id for m in (*draft.head, *draft.tail) if m.id is not None}
    gone = [m for m in job.messages if m.id is not None and m.id not in staying]
    return boundary, boundary_record(gone, draft.tail)


def _precise_calibration(
    draft: _Draft, pending: list[BaseMessage], tokens_after: int, boundary: Boundary
) -> Boundary:
    """Counted precisely (``draft.units``): the scale that makes the caller's own counter give
    the same size for this history, so the counts after the boundary start from it, and
    tiktoken's own scale, for a count with tiktoken before the next usage report
    (tokens.precise_context_tokens)."""
    assert draft.units is not None
    counter, extra = draft.units
    boundary = replace(boundary, precise_calibration=(round(draft.scale, 4), draft.overhead))
    local = counter(pending) + extra
    if local > 0:
        ratio = max(0.0, tokens_after - draft.overhead) / local
        low = least_scale(counter)
        boundary = replace(boundary, calibration=round(min(RATIO_BOUNDS[1], max(low, ratio)), 4))
    return boundary


def _refill_streak(job: Compaction, tokens_after: int) -> int:
    """The thrash guard's count this compaction records (:func:`budget.refill_streak`)."""
    return refill_streak(
        by_trigger=job.cause == "trigger",
        tokens_before=job.tokens_before,
        tokens_after=tokens_after,
        trigger=job.config.trigger_tokens,
        index=job.index,
        turns_since=job.turns_since,
        previous=job.refill_streak,
    )


def finish(draft: _Draft, ref: str | None) -> CompactionResult:
    """The boundary marker, its metadata and the result."""
    job = draft.job
    config, messages, plan, index = job.config, job.messages, job.plan, job.index
    tokens_before = job.tokens_before
    boundary, record = _boundary(draft, ref)
    drafted = summary_message(draft.body, config, plan.span, **boundary.fields(), **record)
    pending = [*draft.head, drafted, *draft.tail]
    tokens_after = round((draft.counter(pending) + draft.extra) * draft.scale) + draft.overhead
    if draft.units is not None:
        boundary = _precise_calibration(draft, pending, tokens_after, boundary)
    streak = _refill_streak(job, tokens_after)
    boundary = replace(boundary, refill_streak=streak, tokens_after=tokens_after)
    summary = summary_message(draft.body, config, plan.span, **boundary.fields(), **record)
    new = [*draft.head, summary, *draft.tail]
    kept = {m.id for m in new}
    # The compactor's log line says what a compaction freed (core.Compactor._report): these
    # two counts differ in kind (the decision's, from the newest usage report, and a
    # recount), so side by side they can read as a compaction that grew the context.
    logger.debug(
        "compaction #%d drafted: %d tokens by the decision's count, %d by a recount of the "
        "new history, %d messages summarised by %s%s",
        index,
        tokens_before,
        tokens_after,
        len(plan.span),
        draft.used,
        f", archived as {ref}" if ref else "",
    )
    return CompactionResult(
        messages=new,
        summary=summary,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        archive_ref=ref,
        compacted=list(plan.span),
        removed_ids=[m.id for m in messages if m.id is not None and m.id not in kept],
        summarizer=draft.used,
        summary_written_by=draft.written_by(),
        extractive_parts=tuple(dict.fromkeys(draft.extractive)),
        merged=draft.merged,
        summarizer_calls=draft.calls,
        errors=tuple(draft.errors),
        reason="compacted",
        prepared=job.prepared_note,
    )
