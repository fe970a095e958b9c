"""The one compaction core that every integration wraps.

:class:`Compactor` holds what a compaction needs (config, summarizer, archive, counter,
tool schemas, optional memory) and does each step once, sync and async over the same
sans-IO body: the micro-compaction step (plan, redact, archive, tag), the decision, a full
compaction, the check after it and the stop message. :meth:`Compactor.turn` runs them all
before one model call and returns one value, :class:`Turn`: what to replace, or the new
history after a compaction; ``continue`` / ``compacted`` / ``stopped`` with the stop
message; the report and events; whether to prepare a summary beside the model call. The
LangGraph nodes (:class:`~langchain_compact.graph.nodes.CompactionNodes`, which run the
turn's stages as nodes), the ``create_agent`` middleware
(:class:`~langchain_compact.middleware.CompactionMiddleware`) and the LCEL transformer
(:class:`~langchain_compact.lcel.MessageCompactor`) only translate it into their own shape
(a state update, a hook's return value, a message list). Its steps report what they did as
custom stream events (:data:`~langchain_compact.markers.EVENT_KEY`) when they run inside a
graph, and as log lines on the ``langchain_compact`` logger.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> core = Compactor(config=CompactionConfig(context_window=400, keep_last_n=2))
    >>> history = [HumanMessage("Task: say hi ten times", id="t")]
    >>> history += [AIMessage("hi " * 40, id=f"a{i}") for i in range(10)]
    >>> core.decide(history).action
    'compact'
    >>> result = core.compact(history, thread_id="t1")
    >>> result.messages[0].id, core.after_compaction(result.messages)
    ('t', 'continue')
    >>> turn = core.turn(history, "t2")
    >>> turn.outcome, turn.history == turn.messages, turn.keys()["compaction_count"]
    ('compacted', True, 1)
    >>> [e["event"] for e in turn.events]
    ['compaction']
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import operator
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage
from typing_extensions import NotRequired, TypedDict

from langchain_compact import budget as when
from langchain_compact._compaction_plan import plan_compaction
from langchain_compact._defaults import DEFAULT_ARCHIVE, DefaultArchiveFlag
from langchain_compact._ops import (
    CallOp,
    Op,
    Outcome,
    adrive,
    archive_and_tag,
    archive_originals,
    called,
    drive,
)
from langchain_compact._prepare import (
    TURN_MESSAGES,
    Prepared,
    boundary_key,
    prepare_steps,
    prepares,
    repeat_turn,
    rolls,
    usable_prefix,
)
from langchain_compact._refed import without_refed
from langchain_compact._scan import FactsMemo, HistoryFacts, boundary_meta, history_facts
from langchain_compact.budget import MIN_SUMMARY_TOKENS, Budget
from langchain_compact.compaction import (
    CompactionResult,
    Decision,
    compaction_info,
    decide,
    effective_trigger,
    history_steps,
    removed_since_boundary,
    stop_message,
)
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import CompactionError, ConfigError, InvalidHistoryError
from langchain_compact.history import (
    HistoryRepair,
    check_pairing,
    repair_report,
    valid_prefix,
)
from langchain_compact.markers import (
    EVENT_KEY,
    KIND_SUMMARY,
    PROVIDER_WINDOW_KEY,
    Boundary,
    Saving,
    Transition,
    kind_of,
    with_meta,
)
from langchain_compact.microcompact import (
    MicroResult,
    micro_compact_with_count,
    unread_start,
)
from langchain_compact.summarizers import (
    FOCUS_HEADING,
    ExtractiveSummarizer,
    Summarizer,
    focused,
)
from langchain_compact.tokens import (
    CONFIRM_MARGIN,
    AnchorCheck,
    TiktokenCounter,
    TokenCounter,
    aload_tokenizers,
    approximate_tokens,
    context_tokens,
    load_tokenizers,
    precise_context_tokens,
    precise_counter,
    precount_unread,
    preload_precise_counter,
    pricing_of,
)

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

__all__ = [
    "OVERFLOW_MARGIN",
    "PROVIDER_WINDOW_KEY",
    "CompactionKeys",
    "Compactor",
    "MicroStep",
    "Pending",
    "Turn",
    "TurnContext",
    "TurnOutcome",
    "compaction_report",
    "emit",
    "thread_id_of",
    "with_focus",
]

logger = logging.getLogger("langchain_compact")

DEFAULT_THREAD_ID = "default"
"""Archive thread of a run whose config has no ``configurable.thread_id``."""
#: Threads whose facts memo a compactor keeps (:meth:`Compactor.memo`); the least recently
#: used beyond them is forgotten.
MEMO_THREADS = 256


OVERFLOW_MARGIN = 0.05
"""How far below a refused call's size the learned window is, as a share of that size: the
provider counted the refused input at its window or more, but its count of the same
messages can exceed the local one (another tokenizer, the framing of messages and tools). A
window learned too large earns a second refusal, which propagates; one learned a little
small only reduces a little early."""


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What one call into the compactor (a turn, one of its stages, a compaction on demand,
    a recovery from a refusal) runs under, made by that entry point and passed down to
    every step explicitly: the events its steps report (one list, shared by the stages a
    turn runs), the window in force and the focus of a compaction asked for on demand."""

    memo: FactsMemo = field(default_factory=FactsMemo)
    """The facts of the histories the steps read (:class:`~langchain_compact._scan.FactsMemo`):
    the thread's, kept by the compactor across turns (:meth:`Compactor.context`), or a new one
    for a call without a thread. Every reader of a history in the steps reads through it."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """What the steps reported so far, in order (a stage's :attr:`Turn.events` are those
    reported since it started, :meth:`since`)."""
    focus: str | None = None
    """What the summary keeps first (``Compactor.compact_now``); ``None``: no focus."""
    window: int | None = None
    """The window a provider's refusal taught, when the step runs under one
    (:meth:`Compactor.learned_window`, :meth:`Compactor.overflow`; LCEL keeps it per
    thread); ``None``: the configured window. :meth:`Compactor.settings` is the config
    narrowed to it."""

    def since(self, start: int) -> tuple[dict[str, Any], ...]:
        """The events reported after the first ``start``."""
        return tuple(self.events[start:])

    def narrowed(self, window: int | None) -> TurnContext:
        """This context with the window narrowed to ``window`` (never widened; ``None``
        changes nothing), the same events list."""
        if window is None or (self.window is not None and self.window <= window):
            return self
        return replace(self, window=max(1, int(window)))

    def focusing(self, focus: str | None) -> TurnContext:
        """This context with ``focus`` (stripped; blank is none), the same events list."""
        return replace(self, focus=focus.strip() if focus and focus.strip() else None)


def emit(event: dict[str, Any], events: list[dict[str, Any]] | None = None) -> None:
    """Send ``event`` as a custom stream event under :data:`EVENT_KEY`, when inside a graph
    run that streams ``"custom"``, and as a callback custom event named :data:`EVENT_KEY`
    (``on_custom_event`` in ``astream_events(version="v2")``) inside any run with callbacks
    (a no-op anywhere else), and append it to ``events`` (a :attr:`TurnContext.events`,
    for the :attr:`Turn.events` of the turn being run) when given."""
    if events is not None:
        events.append(event)
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()({EVENT_KEY: event})
    except Exception:  # outside a graph run, or custom streaming not requested
        pass
    try:
        from langchain_core.callbacks.manager import dispatch_custom_event

        dispatch_custom_event(EVENT_KEY, event)
    except Exception:  # outside a run: no parent run to attach the event to
        pass


def thread_id_of(run_config: Any, default: str = DEFAULT_THREAD_ID) -> str:
    """The run's ``configurable.thread_id`` (the archive namespace), else ``default``."""
    configurable = (run_config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or default)


class CompactionKeys(TypedDict):
    """The state keys compaction writes (all optional), for any state schema to include:
    the graph's ``CompactionState`` and the middleware's state (``create_agent``); a
    :class:`Turn` gives them (:meth:`Turn.keys`).

    Nothing here is needed for routing decisions, which are derived from the messages
    (the boundary metadata records counts and streaks), so a checkpoint restored from any
    point routes the same way. The keys report what happened, for the user and for UIs.
    """

    transition: NotRequired[Transition]
    """The seed's ``transition`` state: what the last compaction step did."""
    compaction_count: NotRequired[int]
    """Full compactions in this thread so far."""
    last_compaction: NotRequired[dict[str, Any]]
    """Numbers of the newest compaction: tokens before/after, archive reference, summarizer."""
    stop_reason: NotRequired[str]
    """Why the run stopped, when it did."""
    prepared_summary: NotRequired[dict[str, Any] | None]
    """A summary prepared before the trigger (the span it covers, its digest per message,
    the boundary and settings it was written under), used by the next compaction when it
    still matches and cleared by it; never part of the messages."""
    compaction_view: NotRequired[dict[str, Any] | None]
    """Inside another graph (a sub-agent): the compacted list the model reads and the id of
    the last shared message it covers, so that compaction never rewrites the message list
    the parent merges back (``CompactionConfig.share_compaction``; docs/subagents.md)."""


def compaction_report(result: CompactionResult) -> dict[str, Any]:
    """The numbers of a compaction, as the ``last_compaction`` state key holds them."""
    boundary = Boundary.of(result.summary) if result.summary is not None else Boundary()
    return {
        "index": boundary.index or 0,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "archive_ref": result.archive_ref,
        "summarizer": result.summarizer,
        "summary_written_by": result.summary_written_by,
        "extractive_parts": list(result.extractive_parts),
        "compacted_messages": len(result.compacted),
        "merged_summaries": result.merged,
        "summarizer_calls": result.summarizer_calls,
        "errors": list(result.errors),
        "prepared": result.prepared,
        "cause": boundary.cause or "",
    }


TurnOutcome = Literal["continue", "compacted", "stopped"]
"""How a turn ends: call the model (``"continue"``), call it on a compacted history
(``"compacted"``), or do not call it (``"stopped"``)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """What compaction did before one model call: the one value the integrations translate
    into their own shape (the graph: state updates; the middleware: a ``Command`` beside
    the reply; LCEL: the message list).

    Made by :meth:`Compactor.turn` (the whole turn), or stage by stage by
    :meth:`Compactor.clear`, :meth:`Compactor.compaction` and :meth:`Compactor.stopping`
    for a host that runs the stages as steps of its own (the graph's nodes).
    """

    outcome: TurnOutcome
    """``"continue"``, ``"compacted"`` or ``"stopped"`` (see :data:`TurnOutcome`)."""
    transition: Transition
    """What the turn's last step did, as the ``transition`` state key says it."""
    messages: list[BaseMessage]
    """The context after the turn: what the model is called with (on a stop, what the stop
    message follows)."""
    replaced: Mapping[int, BaseMessage] = field(default_factory=dict)
    """Micro-compaction's placeholders: index in the turn's input -> the message that
    replaces it there (same id, so a reducer replaces it in place). Moot when
    :attr:`history` is set (that history already holds them)."""
    history: list[BaseMessage] | None = None
    """After a compaction or a repair of the tool-call pairing: the whole new history,
    replacing the old one (``None``: the history was not replaced)."""
    stop: AIMessage | None = None
    """The message the run ends with (outcome ``"stopped"``, when one was asked for)."""
    reason: str = ""
    """Why the run stops, or why a compaction took nothing (``""`` otherwise)."""
    result: CompactionResult | None = None
    """The full compaction the turn ran, if it ran one (whether or not it took anything)."""
    error: CompactionError | None = None
    """The error a full compaction failed with (the outcome is then ``"stopped"``)."""
    prepare: bool = False
    """Prepare a summary beside the model call (:meth:`Compactor.prepare` on
    :attr:`messages`): preparing is on, the call goes ahead past the prepare point, and no
    usable summary is prepared yet."""
    events: tuple[dict[str, Any], ...] = ()
    """What the turn reported, in order (also sent as custom stream events)."""
    repair: HistoryRepair | None = None
    """The repair of a broken tool-call pairing the turn made first
    (``on_invalid_history="repair"``; :attr:`history` then holds the repaired history and
    :attr:`replaced` is empty), ``None`` when the pairing was valid."""

    @property
    def report(self) -> dict[str, Any] | None:
        """The numbers of the compaction that replaced the history (``None``: none did)."""
        if self.result is None or self.result.summary is None:
            return None
        return compaction_report(self.result)

    def keys(self) -> CompactionKeys:
        """The state keys the turn sets (all but the messages): ``transition``; after a
        compaction ``compaction_count``, ``last_compaction`` and ``prepared_summary``
        (cleared: it was used or is stale); ``stop_reason`` when there is a reason."""
        keys: CompactionKeys = {"transition": self.transition}
        report = self.report
        if report is not None:
            keys["compaction_count"] = report["index"]
            keys["last_compaction"] = report
            keys["prepared_summary"] = None
        if self.reason:
            keys["stop_reason"] = self.reason
        return keys


@dataclass(frozen=True, slots=True)
class Pending:
    """A summary a host prepares in the background (LCEL keeps a job per boundary), passed
    to :meth:`Compactor.turn` as ``prepared`` instead of the record itself."""

    take: Callable[[], Any]
    """The record (or ``None``), waiting for the job if it is still running; called only
    when the turn compacts. May return an awaitable (for :meth:`Compactor.aturn`)."""
    ready: Any = None
    """The record when the job is done (``None`` otherwise), for deciding whether to
    prepare another."""
    running: bool = False
    """The job is still running: prepare no other meanwhile."""


#: Transitions after which the stop reason is the one the step gave (state ``stop_reason``).
_OWN_REASON = ("summarizer_failed", "nothing_to_compact")


@dataclass(frozen=True, slots=True)
class MicroStep:
    """What one micro-compaction step did."""

    messages: list[BaseMessage]
    """The whole list after the step (changed messages keep their ids)."""
    changed: list[BaseMessage]
    """Only the messages that changed, in order, tagged with their ``archive_ref``."""
    ref: str | None
    """Archive record holding the originals (``None``: nothing archived)."""
    saved_tokens: int
    """Tokens the changed messages freed."""
    tokens: int
    """The context size after the step (the count the decision uses: one per turn)."""
    changed_at: tuple[int, ...] = ()
    """Where the changed messages are in the list, in order."""


def _unless_larger(
    messages: Sequence[BaseMessage],
    result: CompactionResult,
    counter: TokenCounter,
    fit: int | None,
    events: list[dict[str, Any]] | None = None,
) -> tuple[CompactionResult, int]:
    """``result`` and the tokens it frees, unless it would not shrink a context that fits
    the next call: then nothing is applied, the history stays as it was (the originals
    stay archived), and the result and a ``compaction_skipped`` event say why, with both
    sizes. Over the fit limit it is applied whatever it frees (keeping the history would
    end the run), and its event says what it freed.

    The tokens freed are those of the messages it removes less those of the ones it adds
    (the summary, slimmed tail messages), counted by one counter (tiktoken when it loads,
    else ``counter``) on those messages only: the engine's ``tokens_before`` (the count
    the decision used: the newest usage report plus an estimate of what came after it) and
    ``tokens_after`` (a recount of the new history) can disagree by more than a small span
    weighs."""
    if result.summary is None:
        return result, 0
    before = result.tokens_before
    old, new = {id(m) for m in messages}, {id(m) for m in result.messages}
    count = precise_counter(pricing_of(counter)) or counter
    freed = count([m for m in messages if id(m) not in new]) - count(
        [m for m in result.messages if id(m) not in old]
    )
    if when.worth_applying(before, freed, fit):
        # Applied. When the next call does not fit as it is, whatever it frees: keeping the
        # history would end the run, and the check after the compaction (tiktoken-confirmed)
        # judges what it left. The event says what it freed (a note when nothing).
        return result, freed
    reason = (
        f"a compaction would have left the context at {before - freed} tokens of the "
        f"{before} it found (its summary outweighs the {len(result.compacted)} message(s) "
        "it replaces, or frees under 1% while the context fits); the history is kept as it "
        "was"
    )
    logger.info("%s", reason)  # routine: the run goes on with the history as it was
    event = {"tokens_before": before, "tokens_after": before - freed, "reason": reason}
    emit({"event": "compaction_skipped", **event}, events)
    kept = CompactionResult(
        list(messages), None, before, before, errors=result.errors, reason=reason
    )
    return kept, 0


class Compactor:
    """Config, summarizer, archive, counter and tools, and every compaction step over them.

    Args:
        config: Settings; ``context_window`` must be known (see
            :func:`~langchain_compact.graph.resolve_context_window`).
        summarizer: Defaults to :class:`ExtractiveSummarizer` (offline, deterministic).
        archive: Where cleared and compacted originals go before they are replaced; by
            default a :class:`~langchain_compact.archive.DefaultArchive` (the run's store,
            else JSONL files under ``config.archive_dir``); ``None``: nothing is archived.
        counter: Local token counter for messages after the usage anchor.
        tools: Tool schemas the model is called with (counted when there is no anchor).
        memory: Also keep the pinned task and summaries in a store after each compaction.
        verify_anchor: Let a usage report anchor the count only when it can describe the
            list at hand (on by default: a parent graph may hand back what a compaction
            replaced); ``"strict"`` for a host whose replies may describe a compacted copy
            of the list (LCEL), see :data:`~langchain_compact.tokens.AnchorCheck`.
        calibrate: Learn the provider's ratio from the newest usage report at a compaction
            (off for LCEL: its replies describe the copy the chain sent).

    Raises:
        ConfigError: when ``config.context_window`` is unknown.
    """

    def __init__(
        self,
        *,
        config: CompactionConfig,
        summarizer: Summarizer | None = None,
        archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
        counter: TokenCounter = approximate_tokens,
        tools: Sequence[Any] | None = None,
        memory: CompactionMemory | None = None,
        verify_anchor: AnchorCheck = True,
        calibrate: bool = True,
    ) -> None:
        if config.context_window is None:
            raise ConfigError(
                "compaction needs CompactionConfig(context_window=...); or pass the chat model "
                "(model=...) to read it from its profile, or use "
                "resolve_context_window(config, model)."
            )
        self._config = config
        # learned windows -> the config narrowed to them (a provider refused for length)
        self._narrowed: dict[int, CompactionConfig] = {}
        # thread id -> the facts of the histories its turns read (newest thread last)
        self._memos: OrderedDict[str, FactsMemo] = OrderedDict()
        self._memos_lock = threading.Lock()
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.archive: TranscriptArchive | None
        if isinstance(archive, str):  # "default": the run's store, else JSONL files
            from langchain_compact.archive import resolve_archive

            self.archive = resolve_archive(archive, config.archive_dir)
        else:
            self.archive = archive
        self.counter = counter
        self.tools = list(tools) if tools else None
        self.memory = memory
        self.verify_anchor = verify_anchor
        self.calibrate = calibrate
        # (length, first and last message objects, tokens) of the list the micro step left;
        # the objects themselves, so a hit is checked by identity (an id could be reused)
        self._count: tuple[int, BaseMessage, BaseMessage, int] | None = None
        self.prepares = prepares(config, self.summarizer)
        """Whether summaries are prepared before the trigger (``config.prepare``, else on
        for an LLM summarizer)."""
        preload_precise_counter()  # off the hot path: ready before the first clearing

    # ------------------------------------------------------------------ the learned window

    @property
    def config(self) -> CompactionConfig:
        """The configured settings. A step runs on :meth:`settings`: these, with
        ``context_window`` narrowed to the window a provider's refusal taught the history
        (:attr:`TurnContext.window`)."""
        return self._config

    def settings(self, ctx: TurnContext | None) -> CompactionConfig:
        """The settings a step runs with: the configured ones, with ``context_window``
        narrowed to ``ctx.window``, the window learned from a provider's refusal
        (:meth:`learned_window`, :meth:`overflow`), when it is smaller."""
        window = None if ctx is None else ctx.window
        base = self._config
        if window is None or base.context_window is None or window >= base.context_window:
            return base
        narrowed = self._narrowed.get(window)
        if narrowed is None:
            narrowed = replace(base, context_window=window)
            self._narrowed[window] = narrowed
        return narrowed

    def memo(self, thread_id: str | None) -> FactsMemo:
        """The facts memo of thread ``thread_id`` (:class:`~langchain_compact._scan.FactsMemo`),
        made on its first turn; the least recently used of more than :data:`MEMO_THREADS`
        threads is forgotten (its next turn reads its history once). ``None``: a new memo,
        remembered nowhere."""
        if thread_id is None:
            return FactsMemo()
        with self._memos_lock:
            memo = self._memos.get(thread_id)
            if memo is None:
                memo = self._memos[thread_id] = FactsMemo()
                while len(self._memos) > MEMO_THREADS:
                    self._memos.popitem(last=False)
            else:
                self._memos.move_to_end(thread_id)
            return memo

    def context(self, thread_id: str | None = None) -> TurnContext:
        """A new context for a call on thread ``thread_id``, reading through the thread's
        :meth:`memo` (an entry point given no context makes its own with this)."""
        return TurnContext(memo=self.memo(thread_id))

    @staticmethod
    def learned_window(
        messages: Sequence[BaseMessage], memo: FactsMemo | None = None
    ) -> int | None:
        """The window a provider's refusal taught this history (the smallest
        ``provider_window`` its messages record: on its boundary, carried from compaction to
        compaction, or on a message the recovery reduced without compacting), in the units
        of the compactor's count; ``None`` when no refusal was learned."""
        facts = history_facts(messages, memo)
        if facts is not None:
            return facts.provider_window
        return Boundary.of(boundary_meta(messages)).provider_window  # a stray non-message

    def _learning(
        self, ctx: TurnContext | None, messages: Sequence[BaseMessage], thread_id: str | None = None
    ) -> TurnContext:
        """``ctx`` (when ``None``, a new one for ``thread_id``, :meth:`context`) narrowed to
        the window ``messages`` learned, if any (:meth:`TurnContext.narrowed`)."""
        ctx = self.context(thread_id) if ctx is None else ctx
        return ctx.narrowed(self.learned_window(messages, ctx.memo))

    # ------------------------------------------------------------------ counting, deciding

    def count(self, messages: Sequence[BaseMessage], memo: FactsMemo | None = None) -> int:
        """The usage-anchored context size of ``messages`` (provider tokens where known),
        read through ``memo`` when given."""
        return context_tokens(
            messages,
            counter=self.counter,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            memo=memo,
        )

    def confirmed(self, messages: Sequence[BaseMessage], tokens: int) -> int:
        """``tokens`` (the estimate said the next call cannot fit) as tiktoken counts the
        context (:func:`~langchain_compact.tokens.precise_context_tokens`) when it can: the
        estimate errs high by design, and a run never stops on the estimate alone."""
        if isinstance(self.counter, TiktokenCounter):
            return tokens
        exact = precise_context_tokens(
            messages,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            pricing=pricing_of(self.counter),
        )
        return tokens if exact is None else exact

    def _remember_count(self, messages: Sequence[BaseMessage], tokens: int) -> None:
        """Keep the count the micro step made, for the decision on the same list (the graph
        runs them as a node and an edge; the middleware and LCEL in one call)."""
        if messages:
            self._count = (len(messages), messages[0], messages[-1], tokens)

    def _counted(self, messages: Sequence[BaseMessage]) -> int | None:
        """The micro step's count when ``messages`` is the list it left (same length, same
        first and last message objects); ``None`` otherwise."""
        kept = self._count
        if kept is None or not messages:
            return None
        n, first, last, tokens = kept
        if n == len(messages) and first is messages[0] and last is messages[-1]:
            return tokens
        return None

    def decide(
        self,
        messages: Sequence[BaseMessage],
        *,
        tokens: int | None = None,
        ctx: TurnContext | None = None,
    ) -> Decision:
        """Continue, compact first, or stop (:func:`~langchain_compact.compaction.decide`),
        on the count the micro step left for this list when there is one."""
        ctx = self._learning(ctx, messages)
        memo = ctx.memo
        if tokens is None:
            tokens = self._counted(messages)
        if tokens is None and self.verify_anchor:
            tokens = self.count(messages, memo)
        config = self.settings(ctx)
        decided = functools.partial(
            decide, messages, config=config, counter=self.counter, tools=self.tools, memo=memo
        )
        decision = decided(tokens=tokens)
        fit = config.fit_tokens
        near = decision.action == "continue" and self._near(decision.tokens, config.budget)
        kind = when.recount(decision.action, decision.tokens, fit, near)
        if kind is None:
            return decision
        # Over the fit limit by the estimate, a stop or a compaction is decided on tiktoken's
        # count (the estimate errs high); near it, a call going out is checked against the
        # exact floor (tokens.CONFIRM_MARGIN).
        if kind == "exact":
            exact: int | None = self.confirmed(messages, decision.tokens)
        else:
            exact = self.exact_floor(messages, memo)
        if exact is not None and when.decide_again(kind, decision.tokens, exact, fit):
            decision = decided(tokens=exact)
        return decision

    def exact_floor(
        self, messages: Sequence[BaseMessage], memo: FactsMemo | None = None
    ) -> int | None:
        """The least the context can be by the exact count: the newest usage report that
        describes it, and tiktoken's count, unscaled, of everything after the report (of
        everything without one); ``None`` when tiktoken's files cannot be loaded. A scaled
        estimate under it is never trusted (the one rule, docs/design.md); a ratio the report
        showed is not applied here, so a report that counted more than o200k (a system
        prompt the count does not see) cannot inflate a new result's count into a stop.
        ``memo``: the turn's (:attr:`TurnContext.memo`)."""
        precise = precise_counter(pricing_of(self.counter))
        if precise is None:
            return None
        return context_tokens(
            messages,
            counter=precise,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            calibrated=(1.0, 0),
            memo=memo,
        )

    def _near(self, tokens: int, budget: Budget | None) -> bool:
        """Whether ``tokens`` (counted by the configured counter, not tiktoken) is within
        :data:`~langchain_compact.tokens.CONFIRM_MARGIN` of the budget's fit limit."""
        return (
            budget is not None
            and not isinstance(self.counter, TiktokenCounter)
            and budget.near_fit(tokens, CONFIRM_MARGIN)
        )

    def after_compaction(
        self, messages: Sequence[BaseMessage], ctx: TurnContext | None = None
    ) -> Literal["continue", "stop"]:
        """The check after a compaction (dirty-value protection): the last usage numbers
        describe the old history, so judge the new one by a calibrated local estimate. Go on
        whenever the next call fits the window minus the reply reserve; still over the
        trigger but fitting is reported (event ``over_trigger``), not a stop, and no new
        compaction runs until the context grows (``compaction.effective_trigger``)."""
        cfg = self.settings(ctx)
        memo = None if ctx is None else ctx.memo
        tokens = self.count(messages, memo)
        fit = cfg.fit_tokens or 0
        if tokens > fit:  # confirmed, then settled by the compaction's own count
            after = Boundary.of(boundary_meta(messages, memo)).tokens_after
            tokens = when.settled(self.confirmed(messages, tokens), fit, after)
        trigger = cfg.trigger_tokens or 0
        verdict = when.after_compaction(tokens, fit, trigger)
        if verdict == "stop":
            return "stop"
        if verdict == "over_trigger":
            event = {"event": "over_trigger", "tokens": tokens, "trigger": trigger, "fit": fit}
            emit(event, ctx.events if ctx is not None else None)
            logger.info(
                "after compacting the context is %d tokens, over the trigger of %d but within "
                "the %d that fit: going on",
                tokens,
                trigger,
                fit,
            )
        return "continue"

    def overflow_reason(
        self, messages: Sequence[BaseMessage], ctx: TurnContext | None = None
    ) -> str:
        """Why a compacted history cannot go on (for the stop message or the error)."""
        tokens = self.count(messages)
        fit = self.settings(ctx).fit_tokens
        return (
            f"the context is still {tokens} tokens after compacting, more than the "
            f"{fit} that fit the window with room for the reply: the kept "
            "messages alone are too large"
        )

    def stop(
        self, messages: Sequence[BaseMessage], reason: str, ctx: TurnContext | None = None
    ) -> AIMessage:
        """The message a run ends with: what is done, pending, blocked, and how to go on."""
        message = stop_message(messages, reason, advice=self.memory.advice if self.memory else "")
        emit({"event": "stop", "reason": reason}, ctx.events if ctx is not None else None)
        logger.warning("compaction stopped the run: %s", reason)
        return message

    # ------------------------------------------------------------------ micro-compaction

    def micro_steps(
        self, messages: Sequence[BaseMessage], thread_id: str, ctx: TurnContext | None = None
    ) -> Generator[Op, Outcome, MicroStep]:
        """The micro-compaction step as a sans-IO generator: plan (clear old read results,
        digest oversized ones, under pressure only), redact, archive the originals, tag."""
        before = messages if isinstance(messages, list) else list(messages)
        ctx = self.context(thread_id) if ctx is None else ctx
        try:
            reduced = micro_compact_with_count(before, **self._micro_args(ctx))
            return (yield from self._micro_applied(before, reduced, thread_id, ctx))
        finally:
            # The unread results' precise sizes and fact lines, worked out off this thread
            # for the turn that clears them; asked for once this step is done, so the
            # worker (which holds the interpreter while it scores lines) runs beside the
            # model call rather than beside this step.
            precount_unread(before)

    def _micro_args(self, ctx: TurnContext) -> dict[str, Any]:
        """The arguments of :func:`micro_compact_with_count` after the history: the
        settings in force, this compactor's counter, tools and archive."""
        return {
            "config": self.settings(ctx),
            "archived": self.archive is not None,
            "counter": self.counter,
            "tools": self.tools,
            "verify_anchor": self.verify_anchor,
            "compactable": lambda m: self._can_compact(m, ctx),
            "memo": ctx.memo,
        }

    def _micro_applied(
        self, before: list[BaseMessage], result: MicroResult, thread_id: str, ctx: TurnContext
    ) -> Generator[Op, Outcome, MicroStep]:
        """The micro-compaction ``result`` of ``before`` applied: the originals of what it
        changed redacted and archived, the changed messages tagged, the event emitted."""
        if not result.changed:
            self._remember_count(before, result.tokens)
            return MicroStep(before, [], None, 0, result.tokens)
        out, ref = yield from archive_and_tag(
            before,
            result.messages,
            archive=self.archive,
            thread_id=thread_id,
            reason="micro-compaction",
            redactor=self.settings(ctx).redactor,
            changed=result.changed,
        )
        changed = [out[i] for i in result.changed]
        saved = sum(Saving.of(m).saved_tokens for m in changed)
        emit(
            {
                "event": "micro_compaction",
                "cleared": len(changed),
                "saved_tokens": saved,
                "archive_ref": ref,
            },
            ctx.events,
        )
        logger.info(
            "micro-compaction: %d tool results cleared, ~%d tokens saved", len(changed), saved
        )
        self._remember_count(out, result.tokens)
        return MicroStep(out, changed, ref, saved, result.tokens, tuple(result.changed))

    def _can_compact(self, messages: Sequence[BaseMessage], ctx: TurnContext | None) -> bool:
        """Whether a full compaction can make room for ``messages`` without cutting what the
        model has not read: there is a span to summarise, ``max_compactions`` is not
        reached, and the unread results fit beside the system prompt, the task and a
        minimal summary."""
        cfg = self.settings(ctx)
        memo = None if ctx is None else ctx.memo
        plan = plan_compaction(messages, cfg, self.counter, self.tools, memo=memo)
        cap, fit = cfg.max_compactions, cfg.fit_tokens
        if plan is None or fit is None:
            return False
        if cap is not None and when.at_cap(compaction_info(messages, memo=memo).count, cap):
            return False
        fixed = [m for m in plan.head if kind_of(m) != KIND_SUMMARY]
        unread = messages[unread_start(messages) :]
        return self.counter([*fixed, *unread]) + MIN_SUMMARY_TOKENS <= fit

    # ------------------------------------------------------------------ the pairing

    def repair_steps(
        self, messages: Sequence[BaseMessage], thread_id: str, ctx: TurnContext | None = None
    ) -> Generator[Op, Outcome, tuple[list[BaseMessage], HistoryRepair | None]]:
        """The check of the tool-call pairing before a model call (docs/design.md, B2), as a
        sans-IO generator: a valid history comes back as it is; a broken one raises
        :class:`InvalidHistoryError` (``on_invalid_history="raise"``) or is repaired
        (:func:`~langchain_compact.history.repair_report`), the messages it removed or
        replaced archived first (reason ``"repair"``) and a ``history_repaired`` event
        naming each change. A provider answers a broken pairing with HTTP 400, so the model
        never receives one. The check reads only what is new since the last turn.

        A malformed call (``invalid_tool_calls``) without a result gets its error result in
        both modes: that is langchain's ``create_agent`` state before its model node answers
        it (a node before the model node sees it so), not a broken history."""
        before = messages if isinstance(messages, list) else list(messages)
        memo = self.memo(thread_id) if ctx is None else ctx.memo
        try:
            check_pairing(before, memo=memo)
            return before, None
        except InvalidHistoryError as exc:
            problem = exc
        # Only what follows the prefix an earlier turn found valid is repaired (O(new
        # messages)), the call ids used there counting as taken.
        start, used = valid_prefix(before, memo=memo)
        if self.config.on_invalid_history == "raise":
            # raises on the first defect that is not a malformed call awaiting its result
            check_pairing(before, known=(start, used), allow_malformed=True, memo=memo)
        tail = repair_report(before[start:], seen=used)
        fixed = HistoryRepair(
            messages=[*before[:start], *tail.messages],
            changes=[replace(c, index=c.index + start) for c in tail.changes],
            removed=tail.removed,
        )
        check_pairing(fixed.messages, known=(start, used), memo=memo)  # for the next turn
        if not fixed.messages:
            raise InvalidHistoryError(
                f"{problem} Nothing is left after repairing it: pass a history with at least "
                "one message besides orphan tool results.",
                index=problem.index,
            )
        ref = yield from archive_originals(
            self.archive,
            fixed.removed,
            thread_id=thread_id,
            reason="repair",
            redactor=self.config.redactor,
        )
        changes = [
            {"index": c.index, "action": c.action, "detail": c.detail} for c in fixed.changes
        ]
        event = {"event": "history_repaired", "changes": changes, "archive_ref": ref}
        emit(event, ctx.events if ctx is not None else None)
        shown = "; ".join(f"messages[{c.index}] {c.action}" for c in fixed.changes[:5])
        more = f"; and {len(changes) - 5} more" if len(changes) > 5 else ""
        routine = all(c.action == "answered" for c in fixed.changes)  # as create_agent does
        logger.log(
            logging.INFO if routine else logging.WARNING,
            "invalid tool-call pairing repaired before the model call (%s); %d change(s): %s%s",
            problem,
            len(changes),
            shown,
            more,
        )
        return fixed.messages, fixed

    def micro(self, messages: Sequence[BaseMessage], thread_id: str) -> MicroStep:
        """Run the micro-compaction step (archive writes done synchronously).

        The first one in a process waits for the tokenizers counting needs (the load
        started when the compactor was built), so they are in memory once the first turn
        returns, not loaded in the middle of a later one."""
        return drive(self._micro(messages, thread_id))

    async def amicro(self, messages: Sequence[BaseMessage], thread_id: str) -> MicroStep:
        """:meth:`micro` with its I/O awaited (the same steps)."""
        return await adrive(self._micro(messages, thread_id))

    def _micro(
        self, messages: Sequence[BaseMessage], thread_id: str
    ) -> Generator[Op, Outcome, MicroStep]:
        yield from self.ready()
        return (yield from self.micro_steps(messages, thread_id))

    def ready(self) -> Generator[Op, Outcome, None]:
        """Load the tokenizers counting needs, as an operation (once per process; a no-op
        after that): synchronously where the steps are driven so, in a worker thread where
        they are awaited, so no async step reads tiktoken's files on the event loop."""
        counter = self.counter
        yield from called(
            CallOp(lambda: load_tokenizers(counter), lambda: aload_tokenizers(counter))
        )

    async def aready(self) -> None:
        """:meth:`ready` awaited on its own (a host's async path, before its first step)."""
        await adrive(self.ready())

    # ------------------------------------------------------------------ preparing

    def prepare_due(
        self,
        messages: Sequence[BaseMessage],
        decision: Decision,
        prepared: Any = None,
        ctx: TurnContext | None = None,
    ) -> bool:
        """Whether to prepare a summary now, concurrently with the model call: preparing is
        on, the call goes ahead (``decision``) with the context past ``prepare_tokens``, and
        either no usable (or failed) summary is prepared for this boundary yet and the next
        turn will likely compact, or (a model summarizer:
        :func:`~langchain_compact._prepare.rolls`) the one prepared covers less than a
        compaction on the next turn would take, so its newer turns are summarised beside
        this call (:attr:`~langchain_compact._prepare.Prepared.newer`)."""
        cfg = self.settings(ctx)
        start = cfg.prepare_tokens
        if not when.prepare_window(self.prepares, decision.action, decision.tokens, start):
            return False
        memo = None if ctx is None else ctx.memo
        plan = plan_compaction(messages, cfg, self.counter, self.tools, memo=memo)
        if plan is None:
            return False
        record = Prepared.from_dict(prepared)
        if record is not None and record.boundary == boundary_key(messages):
            if record.failed:
                return False  # retried at the trigger, the usual way
            covers, _reason = usable_prefix(
                record,
                messages,
                plan,
                config=cfg,
                summarizer=self.summarizer,
            )
            if covers:
                # Kept up to date on every turn until the trigger, whenever it comes (the
                # turn after the prepare point may grow less than predicted): a call over
                # the newest turn alone, beside the model call.
                return rolls(self.summarizer) and self._newer(messages, record, cfg)
        return self._compaction_ahead(messages, decision.tokens, ctx)

    def _newer(
        self, messages: Sequence[BaseMessage], record: Prepared, cfg: CompactionConfig
    ) -> bool:
        """Whether a compaction on the next turn takes messages after those ``record``
        covers (the span :func:`~langchain_compact._prepare.prepare_steps` plans)."""
        ahead = cfg.replace(keep_last_n=max(0, cfg.keep_last_n - TURN_MESSAGES))
        nxt = plan_compaction(messages, ahead, self.counter, self.tools)
        return nxt is not None and len(nxt.span) > len(record.span_ids)

    def _compaction_ahead(
        self, messages: Sequence[BaseMessage], tokens: int, ctx: TurnContext | None
    ) -> bool:
        """Whether the next turn, growing as the newest one did, will likely end in a full
        compaction. The next turn is simulated: the newest turn repeated (its results are
        read by then, so clearing may take them), run through micro-compaction and the
        routing decision exactly as the real one will be. Preparing only then (just in
        time) wastes no summary on a run that clearing keeps under the trigger."""
        cfg = self.settings(ctx)
        start = unread_start(messages)  # the newest turn: its AIMessage and what followed
        newest = start - 1 if start else len(messages)
        turn = list(messages[newest:])
        ahead = tokens + self.counter(turn)
        memo = None if ctx is None else ctx.memo
        trigger = effective_trigger(messages, cfg, memo=memo)
        removed = removed_since_boundary(messages, memo=memo)
        if when.quiet_next_turn(ahead, trigger, cfg.micro_trigger_tokens, cfg.fold_tokens, removed):
            return False  # nothing is cleared or compacted on the next turn
        nxt = [*messages, *repeat_turn(turn)]
        cleared = micro_compact_with_count(
            nxt,
            cfg,
            archived=self.archive is not None,
            counter=self.counter,
            tools=self.tools,
            tokens=ahead,
            compactable=lambda m: self._can_compact(m, ctx),
            memo=memo,
        )
        after = decide(
            cleared.messages,
            config=cfg,
            counter=self.counter,
            tools=self.tools,
            tokens=cleared.tokens,
            memo=memo,
        )
        return after.action == "compact"

    def prepare_steps(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        before: Any = None,
        *,
        ctx: TurnContext | None = None,
    ) -> Generator[Op, Outcome, Prepared | None]:
        """Summarise the span a compaction would take now, without changing anything
        (``before``: the record prepared earlier, brought up to date when it still covers
        a prefix of that span: :func:`~langchain_compact._prepare.prepare_steps`)."""
        return prepare_steps(
            messages,
            config=self.settings(ctx),
            summarizer=self.summarizer,
            archive=self.archive,
            thread_id=thread_id,
            counter=self.counter,
            tools=self.tools,
            before=before,
            memo=self.memo(thread_id) if ctx is None else ctx.memo,
        )

    def _prepared(
        self, record: Prepared | None, started: float, ctx: TurnContext | None
    ) -> Prepared | None:
        events = ctx.events if ctx is not None else None
        seconds = round(time.perf_counter() - started, 3)
        if record is None:
            return None
        if record.failed:
            emit({"event": "prepare_failed", "reason": record.failed, "seconds": seconds}, events)
            logger.warning("preparing a summary failed (%s); the trigger will retry", record.failed)
        else:
            emit(
                {
                    "event": "summary_prepared",
                    "messages": len(record.span_ids),
                    "summarizer_calls": record.calls,
                    # of them, summarised on later turns (the newer turns' update)
                    "newer_messages": record.newer_messages,
                    "seconds": seconds,
                },
                events,
            )
            logger.info(
                "summary prepared ahead of the trigger: %d messages in %.2f s",
                len(record.span_ids),
                seconds,
            )
        return record

    def prepare(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        before: Any = None,
        *,
        ctx: TurnContext | None = None,
    ) -> Prepared | None:
        """Run :meth:`prepare_steps` (I/O done synchronously), with its event."""
        return drive(self._prepare(messages, thread_id, before, ctx))

    async def aprepare(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        before: Any = None,
        *,
        ctx: TurnContext | None = None,
    ) -> Prepared | None:
        """:meth:`prepare` with its I/O awaited (the same steps)."""
        return await adrive(self._prepare(messages, thread_id, before, ctx))

    def _prepare(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        before: Any,
        ctx: TurnContext | None,
    ) -> Generator[Op, Outcome, Prepared | None]:
        yield from self.ready()
        started = time.perf_counter()
        ctx = self._learning(ctx, messages, thread_id)
        record = yield from self.prepare_steps(messages, thread_id, before, ctx=ctx)
        return self._prepared(record, started, ctx)

    # ------------------------------------------------------------------ full compaction

    def _kwargs(self, thread_id: str, prepared: Any, ctx: TurnContext) -> dict[str, Any]:
        return {
            "summarizer": focused(self.summarizer, ctx.focus),
            "config": self.settings(ctx),
            "archive": self.archive,
            "thread_id": thread_id,
            "counter": self.counter,
            "tools": self.tools,
            "prepared": Prepared.from_dict(prepared),
            # A stateless chain compacts a copy: its model's usage describes the copy.
            "calibrate": self.calibrate,
        }

    def compact(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        prepared: Any = None,
        ctx: TurnContext | None = None,
    ) -> CompactionResult:
        """One full compaction (:func:`~langchain_compact.compaction.compact_history`),
        using ``prepared`` (a summary prepared before the trigger) when it still matches."""
        return drive(self.compact_steps(messages, thread_id, prepared, ctx))

    async def acompact(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        prepared: Any = None,
        ctx: TurnContext | None = None,
    ) -> CompactionResult:
        """:meth:`compact` with its I/O awaited (the same steps)."""
        return await adrive(self.compact_steps(messages, thread_id, prepared, ctx))

    def compact_steps(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        prepared: Any = None,
        ctx: TurnContext | None = None,
    ) -> Generator[Op, Outcome, CompactionResult]:
        """:meth:`compact` as its sans-IO steps."""
        ctx = self._learning(ctx, messages, thread_id)
        yield from self.ready()
        started = time.perf_counter()
        kwargs = self._kwargs(thread_id, prepared, ctx)
        result = yield from history_steps(messages, **kwargs)
        result, freed = self._applied(messages, result, ctx)
        self._report(result, time.perf_counter() - started, freed, ctx)
        return result

    def _applied(
        self, messages: Sequence[BaseMessage], result: CompactionResult, ctx: TurnContext
    ) -> tuple[CompactionResult, int]:
        """A compaction's result as the turn applies it (the learned window carried, the
        focus first, kept only if it frees tokens: :func:`_unless_larger`) and what it
        frees; shared by :meth:`compact` and :meth:`acompact`."""
        return _unless_larger(
            messages,
            with_focus(self._carried(result, ctx), ctx.focus),
            self.counter,
            self.settings(ctx).fit_tokens,
            ctx.events,
        )

    def _carried(self, result: CompactionResult, ctx: TurnContext) -> CompactionResult:
        """The result with the learned window (the one in force) on its boundary, so the
        thread keeps it after this compaction."""
        window = ctx.window
        if window is None or result.summary is None:
            return result
        summary = with_meta(result.summary, **{PROVIDER_WINDOW_KEY: window})
        old = result.summary
        messages = [
            summary if m is old or (m.id and m.id == old.id) else m for m in result.messages
        ]
        return replace(result, summary=summary, messages=messages)

    def remember(self, result: CompactionResult, run_config: Any) -> None:
        """Keep the pinned task and summaries in the memory store, when one is configured."""
        drive(self.remember_steps(result, run_config))

    async def aremember(self, result: CompactionResult, run_config: Any) -> None:
        """:meth:`remember` with the store's write awaited (the same step)."""
        await adrive(self.remember_steps(result, run_config))

    def remember_steps(
        self, result: CompactionResult, run_config: Any
    ) -> Generator[Op, Outcome, None]:
        """The memory store's write as an operation (nothing without a store or a summary)."""
        memory = self.memory
        if memory is None or result.summary is None:
            return
        kept = result.messages
        yield from called(
            CallOp(
                lambda: memory.remember(kept, config=run_config),
                lambda: memory.aremember(kept, config=run_config),
            )
        )

    @staticmethod
    def report(result: CompactionResult) -> dict[str, Any]:
        """The numbers of a compaction, as the ``last_compaction`` state key holds them."""
        return compaction_report(result)

    def _report(
        self, result: CompactionResult, seconds: float, freed: int, ctx: TurnContext
    ) -> None:
        if result.prepared.startswith("discarded"):
            reason = result.prepared[len("discarded: ") :]
            emit({"event": "prepared_discarded", "reason": reason}, ctx.events)
            logger.info("prepared summary %s", result.prepared)
        elif result.prepared:
            emit({"event": "prepared_used", "how": result.prepared}, ctx.events)
        if result.summary is not None:
            pause = round(seconds, 3)
            event = {**self.report(result), "freed_tokens": freed, "pause_seconds": pause}
            if freed <= 0:
                event["note"] = (
                    f"counted alike on the messages that changed, the compaction freed {freed} "
                    "tokens; it was applied because the next call did not fit as it was, and "
                    "the check after it decided whether the run goes on"
                )
            elif result.tokens_after >= result.tokens_before:
                event["note"] = (
                    "tokens_before is the count the decision used (the newest usage report "
                    "plus an estimate of what came after it), tokens_after a recount of the "
                    f"new history; counted alike on the messages that changed, the "
                    f"compaction freed {freed} tokens"
                )
            emit({"event": "compaction", **event}, ctx.events)
            logger.info(
                "compaction #%s: %d messages summarised by %s, %s (counted alike on what it "
                "removed and what it added); the context is now about %d tokens by "
                "estimate%s; took %.3f s (%s)",
                event.get("index"),
                len(result.compacted),
                result.summarizer,
                f"freed {freed} tokens" if freed > 0 else f"freed nothing ({freed} tokens)",
                result.tokens_after,
                f", archived as {result.archive_ref}" if result.archive_ref else "",
                pause,
                result.prepared or "on the spot",
            )

    # ------------------------------------------------------------------ the turn

    def turn(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        prepared: Any = None,
        run_config: Any = None,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """Everything compaction does before one model call, as one :class:`Turn`: clear
        old tool results (archiving them first), decide, run a full compaction when one is
        due, check that the next call fits after it, and say why when the run must stop.

        Args:
            messages: The history the model would be called with.
            thread_id: The archive's thread.
            prepared: The summary prepared for this history (the record graph state
                keeps, as a dict), or a :class:`Pending` job.
            run_config: The run's config, for the memory store (``memory=``).
            write_stop: Write the stop message (:attr:`Turn.stop`); ``False`` for a host
                that cannot end the run (LCEL raises instead).
            ctx: What the turn runs under (:class:`TurnContext`; a new one by default),
                its events included.
        """
        return drive(self.turn_steps(messages, thread_id, prepared, run_config, write_stop, ctx))

    async def aturn(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        prepared: Any = None,
        run_config: Any = None,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """:meth:`turn` with its I/O awaited (archive, summarizer, memory; the same steps)."""
        steps = self.turn_steps(messages, thread_id, prepared, run_config, write_stop, ctx)
        return await adrive(steps)

    def turn_steps(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        prepared: Any = None,
        run_config: Any = None,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
        clear_only: bool = False,
    ) -> Generator[Op, Outcome, Turn]:
        """:meth:`turn` as its sans-IO steps: the one body :meth:`turn` and :meth:`aturn`
        drive, and, with ``clear_only``, :meth:`clear` and :meth:`aclear` (its first stage).

        The first stage: the tokenizers loaded on the first turn (see :meth:`micro`), the
        window a refusal taught narrowed in, the messages a summary already replaced
        dropped when a parent graph hands them back, the tool-call pairing checked (and
        repaired, :meth:`repair_steps`), then the reduction ladder
        (:func:`~langchain_compact.microcompact.micro_compact_with_count`) applied."""
        yield from self.ready()
        ctx = self.context(thread_id) if ctx is None else ctx
        start = len(ctx.events)
        facts = history_facts(messages, ctx.memo)  # once for the window and the re-fed check
        ctx = self._learned(ctx, messages, facts)
        kept, refed = self._without_refed(messages, facts, ctx)
        valid, repair = yield from self.repair_steps(kept, thread_id, ctx)
        try:
            reduced = micro_compact_with_count(valid, **self._micro_args(ctx))
            step = yield from self._micro_applied(valid, reduced, thread_id, ctx)
        finally:
            precount_unread(valid)  # see micro_steps
        cleared = self._cleared(step, ctx.since(start), repair, refed)
        if clear_only:
            return cleared
        decision, prepare = self.route(cleared.messages, prepared, ctx)
        turn = self._decided(cleared, decision, prepare, write_stop, ctx)
        if turn is None:  # a full compaction is due
            record = yield from self._taken(prepared)
            done = yield from self.compaction_steps(
                cleared.messages, thread_id, record, run_config, ctx
            )
            turn = self._settled(cleared, done, write_stop, ctx)
        return replace(turn, events=ctx.since(start))

    @staticmethod
    def _taken(prepared: Any) -> Generator[Op, Outcome, Any]:
        """The prepared record a compaction uses: a :class:`Pending` job's result, waited
        for (awaited where the steps are awaited), or ``prepared`` itself."""
        if not isinstance(prepared, Pending):
            return prepared
        record = prepared.take()
        if not inspect.isawaitable(record):
            return record

        async def waited() -> Any:
            return await record

        return (yield from called(CallOp(lambda: record, waited)))

    def _decided(
        self, cleared: Turn, decision: Decision, prepare: bool, write_stop: bool, ctx: TurnContext
    ) -> Turn | None:
        """The turn when the decision ends it (continue or stop); ``None``: compact."""
        if decision.action == "continue":
            return replace(cleared, prepare=prepare)
        if decision.action == "stop":
            stopped = self._stopping(cleared.messages, decision.reason, write_stop, ctx)
            return replace(
                stopped,
                replaced=cleared.replaced,
                history=cleared.history,
                repair=cleared.repair,
            )
        return None

    def _settled(self, cleared: Turn, done: Turn, write_stop: bool, ctx: TurnContext) -> Turn:
        """A compaction's turn after the check that the next call fits."""
        history = done.history if done.history is not None else cleared.history
        done = replace(done, replaced=cleared.replaced, history=history, repair=cleared.repair)
        if self.after_step(done.messages, done.transition, ctx) == "continue":
            return done
        reason = self.stop_reason(done.messages, done.transition, done.reason, ctx)
        stopped = self._stopping(done.messages, reason, write_stop, ctx)
        return replace(
            done, outcome="stopped", transition="stopped", stop=stopped.stop, reason=reason
        )

    # ------------------------------------------------------------------ on demand

    def on_demand_refusal(
        self, messages: Sequence[BaseMessage], ctx: TurnContext | None = None
    ) -> str:
        """Why a compaction asked for now does not run (``""``: it runs). The rules of a
        triggered one: ``max_compactions``, and the cooldown (at least one model turn since
        the last compaction, ``cooldown_turns`` when larger), so an agent calling the
        compaction tool again and again cannot loop."""
        info = compaction_info(messages, memo=None if ctx is None else ctx.memo)
        cfg = self.settings(ctx)
        return when.on_demand_refusal(
            info.count, info.turns_since, cfg.max_compactions, cfg.cooldown_turns
        )

    def compact_now(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        focus: str | None = None,
        run_config: Any = None,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """A full compaction asked for now (by the application, a human or the agent's
        ``compact_conversation`` tool), whatever the trigger says, with ``focus``: what the
        summary must keep first (the summarizer is told, and the summary starts with a
        ``## 0. Focus`` section listing the facts about it from the compacted span). The
        same compaction a trigger runs (archive, fidelity, boundary, the check after it),
        refused by the same limits (:meth:`on_demand_refusal`): then the outcome is
        ``"continue"`` with the reason, and nothing changed."""
        steps = self.compact_now_steps(messages, thread_id, focus, run_config, write_stop, ctx)
        return drive(steps)

    async def acompact_now(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        focus: str | None = None,
        run_config: Any = None,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """:meth:`compact_now` with its I/O awaited (the same steps)."""
        steps = self.compact_now_steps(messages, thread_id, focus, run_config, write_stop, ctx)
        return await adrive(steps)

    def compact_now_steps(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        focus: str | None = None,
        run_config: Any = None,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
    ) -> Generator[Op, Outcome, Turn]:
        """:meth:`compact_now` as its sans-IO steps."""
        yield from self.ready()
        ctx, start, refused = self._on_demand_start(messages, thread_id, focus, ctx)
        if refused is not None:
            return refused
        done = yield from self.compaction_steps(
            messages, thread_id, None, run_config, ctx.focusing(focus)
        )
        return replace(self._on_demand(messages, done, write_stop, ctx), events=ctx.since(start))

    def _on_demand_start(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        focus: str | None,
        ctx: TurnContext | None,
    ) -> tuple[TurnContext, int, Turn | None]:
        """What :meth:`compact_now` and :meth:`acompact_now` do before the compaction: the
        turn's context narrowed to the learned window, where its events start, and the
        finished refusal when :meth:`on_demand_refusal` refuses (``None`` to go on)."""
        ctx = self.context(thread_id) if ctx is None else ctx
        start = len(ctx.events)
        ctx = self._learning(ctx, messages)
        refusal = self.on_demand_refusal(messages, ctx)
        if refusal:
            emit({"event": "compaction_refused", "reason": refusal}, ctx.events)
            turn = Turn("continue", "nothing_to_compact", list(messages), reason=refusal)
            return ctx, start, replace(turn, events=ctx.since(start))
        emit({"event": "compaction_on_demand", "focus": focus}, ctx.events)
        return ctx, start, None

    def _on_demand(
        self, messages: Sequence[BaseMessage], done: Turn, write_stop: bool, ctx: TurnContext
    ) -> Turn:
        if done.outcome != "compacted":
            return done
        return self._settled(Turn("continue", "continue", list(messages)), done, write_stop, ctx)

    # ------------------------------------------------------------------ the provider's refusal

    def overflow_window(
        self, messages: Sequence[BaseMessage], ctx: TurnContext | None = None
    ) -> int:
        """The window a provider's refusal of ``messages`` teaches: the provider counted
        that input at its window or more, so its window is below the size of ``messages``.
        That size is the smaller of the compactor's count and tiktoken's exact count (the
        estimate errs high), and the window learned is :data:`OVERFLOW_MARGIN` of it lower
        (the provider's count can exceed the local one), never above the window in force."""
        window = self.settings(self._learning(ctx, messages)).context_window or 0
        tokens = self.count(messages)
        exact = precise_context_tokens(
            messages,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            pricing=pricing_of(self.counter),
        )
        refused = tokens if exact is None else min(tokens, exact)
        learned = max(1, refused - math.ceil(refused * OVERFLOW_MARGIN))
        return min(window, learned) if window else learned

    def overflow(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        run_config: Any = None,
        write_stop: bool = True,
        window: int | None = None,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """The provider refused the call on ``messages`` for its length: learn the window
        (:meth:`overflow_window`, or ``window``) and run the whole turn under it
        (:meth:`turn`: clearing read results, digests, argument stubs, the summary and the
        last resorts, in that order, each archiving first), so the recovery uses every
        reduction a turn has. The learned window is recorded on the new boundary when the
        turn compacted, else on the messages it reduced (``provider_window``), and every
        later step of the thread runs under it.

        Returns the :class:`Turn` to retry with: ``"compacted"`` (retry the call with
        :attr:`Turn.messages`, which :attr:`Turn.history` also holds), or ``"stopped"``
        when every reduction is spent and the call still cannot fit the learned window, or
        a limit the user set stops the run (raise the refusal then)."""
        return drive(self.overflow_steps(messages, thread_id, run_config, write_stop, window, ctx))

    async def aoverflow(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        run_config: Any = None,
        write_stop: bool = True,
        window: int | None = None,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """:meth:`overflow` with its I/O awaited (the same steps)."""
        steps = self.overflow_steps(messages, thread_id, run_config, write_stop, window, ctx)
        return await adrive(steps)

    def overflow_steps(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        run_config: Any = None,
        write_stop: bool = True,
        window: int | None = None,
        ctx: TurnContext | None = None,
    ) -> Generator[Op, Outcome, Turn]:
        """:meth:`overflow` as its sans-IO steps: the turn's own (:meth:`turn_steps`) under
        the learned window."""
        yield from self.ready()
        ctx = self.context(thread_id) if ctx is None else ctx
        learned = window or self.overflow_window(messages, ctx)
        start = len(ctx.events)
        ctx = ctx.narrowed(learned)
        self._refused(messages, learned, ctx)
        turn = yield from self.turn_steps(messages, thread_id, None, run_config, False, ctx)
        turn = self._recovered(messages, turn, learned, write_stop, ctx)
        return replace(turn, events=ctx.since(start))

    @staticmethod
    def spent(window: int, why: str = "") -> str:
        """Why a refused call cannot be retried: every reduction a turn has is spent under
        the learned ``window`` (``why``: the turn's own reason, when it stopped)."""
        why = why or (
            "clearing, digests, argument stubs, the summary and the last resorts took nothing"
        )
        return (
            "the provider refused the call for its length and nothing is left to compact: "
            f"every reduction a turn has is spent under the learned window of {window} "
            f"tokens ({why})"
        )

    def _refused(self, messages: Sequence[BaseMessage], window: int, ctx: TurnContext) -> None:
        configured = self._config.context_window
        event = {"event": "provider_overflow", "window": window, "configured": configured}
        emit(event, ctx.events)
        logger.warning(
            "the provider refused a call of ~%d tokens for its length (configured window %s): "
            "reducing to a window of %d and retrying",
            self.count(messages),
            configured,
            window,
        )

    def _recovered(
        self,
        messages: Sequence[BaseMessage],
        turn: Turn,
        learned: int,
        write_stop: bool,
        ctx: TurnContext,
    ) -> Turn:
        """The recovery's turn (run under the learned window) as the turn to retry with:
        the whole reduced history, the learned window recorded on it; a stop when the turn
        stopped or reduced nothing (the refusal stands)."""
        before = list(messages)
        if turn.error is not None:  # the summarizer failed: its own error, as a turn's
            return self._stopping(before, turn.reason, write_stop, ctx)
        out = list(turn.messages)
        same = len(out) == len(before) and all(map(operator.is_, out, before))
        if turn.outcome == "stopped" or same:
            return self._stopping(before, self.spent(learned, turn.reason), write_stop, ctx)
        window = ctx.window or learned
        if self.learned_window(out, ctx.memo) != window:  # no boundary carries it: the reduced do
            known = {id(m) for m in before}
            out = [
                m if id(m) in known else with_meta(m, **{PROVIDER_WINDOW_KEY: window}) for m in out
            ]
        return replace(
            turn, outcome="compacted", messages=out, history=out, replaced={}, prepare=False
        )

    # ------------------------------------------------------------------ stages of the turn

    def clear(
        self, messages: Sequence[BaseMessage], thread_id: str, *, ctx: TurnContext | None = None
    ) -> Turn:
        """The turn's first stage: the tool-call pairing checked (and repaired or refused,
        ``on_invalid_history``; :meth:`repair_steps`), then micro-compaction (:meth:`micro`),
        as a :class:`Turn` (``"continue"``; transition ``"micro_compacted"`` when it
        replaced anything; after a repair :attr:`Turn.history` holds the whole new list).

        Raises:
            InvalidHistoryError: a broken pairing with ``on_invalid_history="raise"``.
        """
        return drive(self.turn_steps(messages, thread_id, ctx=ctx, clear_only=True))

    async def aclear(
        self, messages: Sequence[BaseMessage], thread_id: str, *, ctx: TurnContext | None = None
    ) -> Turn:
        """:meth:`clear` with its I/O awaited (the same steps)."""
        return await adrive(self.turn_steps(messages, thread_id, ctx=ctx, clear_only=True))

    def _learned(
        self, ctx: TurnContext, messages: Sequence[BaseMessage], facts: HistoryFacts | None
    ) -> TurnContext:
        """:meth:`_learning` with the facts of ``messages`` already read."""
        if facts is None:
            return self._learning(ctx, messages)
        return ctx.narrowed(facts.provider_window)

    @staticmethod
    def _without_refed(
        messages: Sequence[BaseMessage], facts: HistoryFacts | None, ctx: TurnContext
    ) -> tuple[Sequence[BaseMessage], bool]:
        """``messages`` (whose :func:`history_facts` are ``facts``) without those a summary
        already replaced, handed back in (a parent graph re-feeding its own list;
        :func:`~langchain_compact._refed.without_refed`)."""
        if facts is None:  # a message is not a BaseMessage: the pairing check names it
            return messages, False
        kept, event = without_refed(messages, facts.boundary)
        if event is not None:
            emit(event, ctx.events)
        return kept, event is not None

    @staticmethod
    def _cleared(
        step: MicroStep,
        events: tuple[dict[str, Any], ...],
        repair: HistoryRepair | None = None,
        refed: bool = False,
    ) -> Turn:
        transition: Transition = "micro_compacted" if step.changed else "continue"
        if repair is not None or refed:  # indices moved: the whole new list replaces the old
            return Turn(
                "continue",
                transition,
                step.messages,
                history=step.messages,
                events=events,
                repair=repair,
            )
        changed = dict(zip(step.changed_at, step.changed, strict=True))
        return Turn(
            "continue",
            transition,
            step.messages,
            replaced=changed,
            events=events,
        )

    def route(
        self,
        messages: Sequence[BaseMessage],
        prepared: Any = None,
        ctx: TurnContext | None = None,
        thread_id: str | None = None,
    ) -> tuple[Decision, bool]:
        """The decision before the model call (:meth:`decide`) and whether to prepare a
        summary beside it (:meth:`prepare_due`; never while a :class:`Pending` job runs).
        ``thread_id``: the run's thread, whose facts memo a context made here reads through
        (a graph's edge)."""
        ctx = self._learning(ctx, messages, thread_id)
        decision = self.decide(messages, ctx=ctx)
        if isinstance(prepared, Pending):
            if prepared.running:
                return decision, False
            prepared = prepared.ready
        return decision, self.prepare_due(messages, decision, prepared, ctx)

    def compaction(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        prepared: Any = None,
        run_config: Any = None,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """The turn's compaction stage: one full compaction (:meth:`compact`), kept in the
        memory store (:meth:`remember`), as a :class:`Turn` before the check after it
        (:meth:`after_step`): ``"compacted"``, ``"continue"`` with transition
        ``"nothing_to_compact"``, or ``"stopped"`` with transition ``"summarizer_failed"``
        when it failed (:attr:`Turn.error`)."""
        return drive(self.compaction_steps(messages, thread_id, prepared, run_config, ctx))

    async def acompaction(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        *,
        prepared: Any = None,
        run_config: Any = None,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """:meth:`compaction` with its I/O awaited (the same steps)."""
        steps = self.compaction_steps(messages, thread_id, prepared, run_config, ctx)
        return await adrive(steps)

    def compaction_steps(
        self,
        messages: Sequence[BaseMessage],
        thread_id: str,
        prepared: Any = None,
        run_config: Any = None,
        ctx: TurnContext | None = None,
    ) -> Generator[Op, Outcome, Turn]:
        """:meth:`compaction` as its sans-IO steps."""
        ctx = self.context(thread_id) if ctx is None else ctx
        start = len(ctx.events)
        ctx = self._learning(ctx, messages)
        try:
            result = yield from self.compact_steps(messages, thread_id, prepared, ctx)
        except CompactionError as exc:
            return self._compacted(messages, exc, ctx.since(start))
        yield from self.remember_steps(result, run_config)
        return self._compacted(messages, result, ctx.since(start))

    @staticmethod
    def _compacted(
        messages: Sequence[BaseMessage],
        result: CompactionResult | CompactionError,
        events: tuple[dict[str, Any], ...],
    ) -> Turn:
        before = messages if isinstance(messages, list) else list(messages)
        if isinstance(result, CompactionError):
            logger.error("compaction failed: %s", result)
            return Turn(
                "stopped",
                "summarizer_failed",
                before,
                reason=str(result),
                error=result,
                events=events,
            )
        if result.summary is None:
            return Turn(
                "continue",
                "nothing_to_compact",
                before,
                reason=result.reason,
                result=result,
                events=events,
            )
        return Turn(
            "compacted",
            "compacted",
            result.messages,
            history=result.messages,
            result=result,
            events=events,
        )

    def after_step(
        self,
        messages: Sequence[BaseMessage],
        transition: Any,
        ctx: TurnContext | None = None,
        thread_id: str | None = None,
    ) -> Literal["continue", "stop"]:
        """The check after the compaction stage (``transition``: what it did): go on
        whenever the next call fits (:meth:`after_compaction`); a compaction that took
        nothing goes on when the call fits as it is; a failed one stops."""
        if transition not in ("compacted", "nothing_to_compact"):
            return "stop"
        ctx = self._learning(ctx, messages, thread_id)
        if transition == "nothing_to_compact":  # nothing to gain, but the call may fit
            fit = self.settings(ctx).fit_tokens or 0
            tokens = self.count(messages, ctx.memo)
            if tokens > fit:
                tokens = self.confirmed(messages, tokens)
            return "continue" if tokens <= fit else "stop"
        return self.after_compaction(messages, ctx)

    def stop_reason(
        self,
        messages: Sequence[BaseMessage],
        transition: Any,
        reason: Any = None,
        ctx: TurnContext | None = None,
    ) -> str:
        """Why the run stops after the step that ``transition`` names: the step's own
        ``reason`` after a failed or empty compaction; after a compaction, that the kept
        messages alone do not fit; else the decision's reason."""
        if transition in _OWN_REASON and reason:
            return str(reason)
        if transition == "compacted":
            return self.overflow_reason(messages, ctx)
        return self.decide(messages, ctx=ctx).reason

    def stopping(
        self,
        messages: Sequence[BaseMessage],
        transition: Any = None,
        reason: Any = None,
        *,
        write_stop: bool = True,
        ctx: TurnContext | None = None,
    ) -> Turn:
        """The turn's stop stage, after the step that ``transition`` names (with its
        ``reason``, the state's ``stop_reason``): the stop message as a :class:`Turn`."""
        ctx = self._learning(ctx, messages)
        why = self.stop_reason(messages, transition, reason, ctx)
        return self._stopping(messages, why, write_stop, ctx)

    def _stopping(
        self, messages: Sequence[BaseMessage], reason: str, write_stop: bool, ctx: TurnContext
    ) -> Turn:
        before = messages if isinstance(messages, list) else list(messages)
        start = len(ctx.events)
        message = self.stop(before, reason, ctx) if write_stop else None
        return Turn(
            "stopped", "stopped", before, stop=message, reason=reason, events=ctx.since(start)
        )


#: Words a focus is matched on: at least three letters or digits.
_FOCUS_WORD = re.compile(r"[\w./:-]{3,}")
_FOCUS_STOP = frozenset({"the", "and", "for", "with", "about", "focus", "keep", "that", "this"})
#: Lines the focus section lists at most, and characters of each.
FOCUS_LINES, FOCUS_LINE_CHARS = 15, 200


def focus_facts(messages: Sequence[BaseMessage], focus: str) -> list[str]:
    """The lines of ``messages`` about ``focus`` (holding one of its words), in order, each
    once, bounded: what a focused summary lists first."""
    words = {w.lower() for w in _FOCUS_WORD.findall(focus)} - _FOCUS_STOP
    if not words:
        return []
    found: list[str] = []
    for message in messages:
        text = message.text if isinstance(message.content, list) else str(message.content)
        for line in text.splitlines():
            line = line.strip()
            low = line.lower()
            if line and line not in found and any(w in low for w in words):
                found.append(line[:FOCUS_LINE_CHARS])
                if len(found) >= FOCUS_LINES:
                    return found
    return found


def with_focus(result: CompactionResult, focus: str | None) -> CompactionResult:
    """The result with its summary starting with the focus section (unless the summarizer
    wrote one: it is told to, :func:`~langchain_compact.summarizers.focused`), and the
    focus on the boundary's marker. For a caller of ``compact_history`` (the CLI)."""
    if not focus or result.summary is None:
        return result
    old = result.summary
    text = str(old.content)
    if FOCUS_HEADING not in text:
        facts = focus_facts(result.compacted, focus) or ["unknown: nothing in this span"]
        section = f"{FOCUS_HEADING}: {focus}\n" + "\n".join(f"- {f}" for f in facts) + "\n\n"
        at = text.find("## ")
        text = text[:at] + section + text[at:] if at >= 0 else f"{section}{text}"
    summary = with_meta(old.model_copy(update={"content": text}), focus=focus)
    messages = [summary if m is old or (m.id and m.id == old.id) else m for m in result.messages]
    return replace(result, summary=summary, messages=messages)
