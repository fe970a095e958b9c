"""When and how much: every room the compaction policy uses, computed from one context
window (:class:`Budget`), and every decision of when to compact, over one turn's numbers
(:class:`TurnNumbers`, :func:`decision` and the functions after it).

A leaf module (it imports nothing else of the package), so every layer can ask it, and its
tests are tables of numbers. Each rule is a named method with its reason in its docstring
and in ``docs/design.md`` ("The budget"); the ratios it reads are the user's settings in
:class:`~langchain_compact.config.CompactionConfig`. The decisions ("When" in
``docs/design.md``) read plain numbers the callers gather once; changing when compaction
runs is an edit here alone.

Example:
    >>> b = Budget(window=128_000)
    >>> b.reserve, b.fit, b.trigger
    (4096, 123904, 96000)
    >>> b.tail(fixed=2_000)  # what the fit limit leaves beside the task and a summary
    121760
    >>> b.unread_share(fixed=2_000)  # an unread result that cannot fit keeps at least this
    30476
    >>> b.task_max, b.large_result, b.summaries, b.summary_bound, b.facts
    (32000, 25600, 32000, 2000, 8000)
    >>> b.raised_trigger(after=110_000)  # a compaction left 110,000: halfway to the fit
    116952
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_FOLD_RATIO",
    "DEFAULT_LARGE_RESULT_RATIO",
    "DEFAULT_MICRO_TARGET_RATIO",
    "DEFAULT_MICRO_TRIGGER_RATIO",
    "DEFAULT_PREPARE_RATIO",
    "DEFAULT_REPLY_RESERVE_CAP",
    "DEFAULT_SUMMARY_BUDGET_RATIO",
    "DEFAULT_SUMMARY_MAX_TOKENS",
    "DEFAULT_TASK_MAX_RATIO",
    "DEFAULT_TRIGGER_RATIO",
    "MIN_SHRINK",
    "MIN_SUMMARY_TOKENS",
    "MIN_SUPPLEMENT_TOKENS",
    "OBSERVATION_CHARS",
    "SUMMARY_HEADER_TOKENS",
    "Budget",
    "TurnNumbers",
    "Verdict",
    "after_compaction",
    "at_cap",
    "chars_for_tokens",
    "compaction_cause",
    "decide_again",
    "decision",
    "on_demand_refusal",
    "prepare_window",
    "quiet_next_turn",
    "recount",
    "refill_streak",
    "settled",
    "worth_applying",
]

# ---------------------------------------------------------------------- the defaults
# Declared here once: :class:`Budget`'s fields and
# :class:`~langchain_compact.config.CompactionConfig`'s both read them (the config
# re-exports them under the same names). docs/design.md ("The budget") gives each reason.

DEFAULT_TRIGGER_RATIO = 0.75
"""``trigger_ratio``: a full compaction runs at three quarters of the window, early enough
that the summarizer call and the next turn's growth still fit."""

DEFAULT_MICRO_TRIGGER_RATIO = 0.75
"""``micro_trigger_ratio``: clearing starts where a compaction would run, so an agent with
room pays nothing, not even a broken prompt cache."""

DEFAULT_MICRO_TARGET_RATIO = 0.3
"""``micro_target_ratio``: one clearing batch brings the context down to 30% of the window,
so one break of the cached prefix buys many turns of growth."""

DEFAULT_FOLD_RATIO = 1.0
"""``fold_ratio``: a window's worth of cleared originals is folded into a summary; until
then each placeholder keeps its facts visible."""

DEFAULT_PREPARE_RATIO = 0.6
"""``prepare_ratio``: no summary is prepared ahead below 60% of the window (80% of the
default trigger): a run that ends first wastes no summarizer call."""

DEFAULT_TASK_MAX_RATIO = 0.25
"""``task_max_ratio``: a pinned task over a quarter of the window is cut under pressure."""

DEFAULT_LARGE_RESULT_RATIO = 0.2
"""``large_result_ratio``: a read result over a fifth of the window is digested."""

DEFAULT_SUMMARY_BUDGET_RATIO = 0.25
"""``summary_budget_ratio``: all summaries together may take a quarter of the window."""

DEFAULT_SUMMARY_MAX_TOKENS = 2_000
"""``summary_max_tokens``: the most one summary may take, whatever the window."""

DEFAULT_REPLY_RESERVE_CAP = 4_096
"""The most the reply reserve takes when ``reply_reserve_tokens`` is not set: the output
most chat models produce in one call by default."""

CHARS_PER_TOKEN = 4
"""Characters per token where a token limit must be applied to text before it is counted
(a digest's size, a cut). The same value as langchain-core's ``count_tokens_approximately``;
the real ratio of a text is measured from the text itself wherever it is known
(:func:`chars_for_tokens`)."""


OBSERVATION_CHARS = 1_500
"""A human message longer than this, after the task, is an observation: agents without
native tool calls (text-command agents) get their tools' output as user messages, and such
messages are cleared, cut and summarised the way tool results are. A person's own message
of this length is rare; a command's output of it is common."""


SUMMARY_HEADER_TOKENS = 80
"""Local tokens of a summary's header and the message framing around it."""

MIN_SUMMARY_TOKENS = 64
"""The shortest summary worth writing (its header aside): below it a summary cannot say
what was done, what is pending and why."""

MIN_SUPPLEMENT_TOKENS = 32
"""The smallest fidelity supplement worth adding (a couple of constraint lines)."""


def chars_for_tokens(tokens: int, *, text: str = "", text_tokens: int = 0) -> int:
    """Characters of ``text`` that make about ``tokens`` tokens: the text's own ratio when
    its token count is known (code, CJK and hex dumps differ by 4x), else
    :data:`CHARS_PER_TOKEN`.

    Example:
        >>> chars_for_tokens(100), chars_for_tokens(100, text="x" * 900, text_tokens=100)
        (400, 900)
    """
    if text and text_tokens > 0:
        return max(1, int(tokens * len(text) / text_tokens))
    return max(1, tokens * CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Budget:
    """The rooms of one context window (tokens).

    Built by :attr:`CompactionConfig.budget <langchain_compact.config.CompactionConfig.budget>`
    from the user's settings; the defaults here are the config's defaults.
    """

    window: int
    trigger_ratio: float = DEFAULT_TRIGGER_RATIO
    micro_trigger_ratio: float = DEFAULT_MICRO_TRIGGER_RATIO
    micro_target_ratio: float = DEFAULT_MICRO_TARGET_RATIO
    fold_ratio: float = DEFAULT_FOLD_RATIO
    prepare_ratio: float = DEFAULT_PREPARE_RATIO
    task_max_ratio: float = DEFAULT_TASK_MAX_RATIO
    large_result_ratio: float = DEFAULT_LARGE_RESULT_RATIO
    summary_budget_ratio: float = DEFAULT_SUMMARY_BUDGET_RATIO
    reply_reserve_tokens: int | None = None
    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS

    # ------------------------------------------------------------------ the fixed lines

    @property
    def reserve(self) -> int:
        """Tokens kept free for the model's reply: the explicit setting, else a twentieth of
        the window, at most :data:`DEFAULT_REPLY_RESERVE_CAP` (4,096). A reply needs room
        however large the window; 4,096 is the output most chat models produce in one call
        by default, and a twentieth keeps a small window usable."""
        if self.reply_reserve_tokens is not None:
            return self.reply_reserve_tokens
        return min(DEFAULT_REPLY_RESERVE_CAP, self.window // 20)

    @property
    def fit(self) -> int:
        """The largest context a call may send: the window minus the reply reserve. A run
        stops only when its smallest context is over this."""
        return self.window - self.reserve

    @property
    def trigger(self) -> int:
        """Where a full compaction runs: ``trigger_ratio`` of the window, never above
        :attr:`fit` (a compaction must start while the next call still fits)."""
        return min(self.fit, int(self.window * self.trigger_ratio))

    def raised_trigger(self, after: int) -> int:
        """The trigger after a compaction that left ``after`` tokens: when that is over
        :attr:`trigger` (the kept messages alone are over it), halfway from ``after`` to
        :attr:`fit`. Compacting again on the next turn would summarise one turn at a time;
        the next compaction waits until the context has grown halfway to the fit limit."""
        if after < self.trigger:
            return self.trigger
        return max(self.trigger, min(self.fit, (after + self.fit) // 2))

    @property
    def facts_roof(self) -> int:
        """The most a compacted history may take when its fidelity supplement needs room:
        halfway between :attr:`trigger` and :attr:`fit`. A compacted history over the
        trigger but fitting goes on, and facts are the last thing a small room gives up."""
        return (self.trigger + self.fit) // 2

    def near_fit(self, tokens: int, margin: float) -> bool:
        """Whether an estimate of ``tokens`` is within ``margin`` (a share) of :attr:`fit`:
        such a count is confirmed by an exact one before the call goes out (an estimate
        errs by its content's mix)."""
        return tokens > (1 - margin) * self.fit

    @property
    def micro_gate(self) -> int:
        """Below this nothing is cleared or cut: no pressure, no removal, no broken prompt
        cache. Never above the trigger (clearing is tried first where a compaction would
        run)."""
        return min(self.trigger, int(self.window * self.micro_trigger_ratio))

    @property
    def micro_target(self) -> int:
        """Where one clearing batch brings the context: ``micro_target_ratio`` of the
        window, at most 0.6 of the gate, so one break of the provider's cached prefix buys
        many turns of growth instead of one clear per turn."""
        return min(int(self.window * self.micro_target_ratio), int(self.micro_gate * 0.6))

    @property
    def prepare(self) -> int:
        """Below this no summary is prepared ahead of the trigger (never above it)."""
        return min(self.trigger, int(self.window * self.prepare_ratio))

    @property
    def prepared_keeps_newer(self) -> int:
        """A prepared summary used at the trigger leaves the messages the span took on since
        it was prepared in the kept tail when the compacted context ends at most here:
        halfway between :attr:`prepare` and :attr:`trigger` (well under the trigger, so the
        next turns do not compact again at once); past it they get a short incremental
        summary."""
        return (self.trigger + self.prepare) // 2

    @property
    def fold(self) -> int:
        """Tokens of originals cleared since the last compaction that make a compaction fold
        them into a summary, even under the trigger: a placeholder keeps a result's facts,
        but cleared results must not pile up unsummarised for ever."""
        return int(self.window * self.fold_ratio)

    @property
    def task_max(self) -> int:
        """A pinned task larger than this is cut to head + tail + key lines under
        pressure (archived whole): a task of half the window leaves no room to work."""
        return int(self.window * self.task_max_ratio)

    @property
    def large_result(self) -> int:
        """A result the model has read that alone is larger than this is digested: judged
        against the window, so a 128k window keeps whole the source files a fixed
        character cut would mangle."""
        return int(self.window * self.large_result_ratio)

    @property
    def summaries(self) -> int:
        """All summaries together may take this much; over it the earlier ones are merged
        (the only time a summary is summarised)."""
        return int(self.window * self.summary_budget_ratio)

    @property
    def summary_bound(self) -> int:
        """One summary's bound: ``summary_max_tokens``, never over :attr:`summaries` (one
        summary may not take the room of all of them) nor under :data:`MIN_SUMMARY_TOKENS`."""
        return max(MIN_SUMMARY_TOKENS, min(self.summary_max_tokens, self.summaries))

    @property
    def facts(self) -> int:
        """The most one compaction's fidelity supplement (the facts its summary dropped)
        may take: half the summary bound, or a quarter of :attr:`summaries` when that is
        larger. A bound fixed in tokens holds the facts of a few dozen turns; in a large
        window a compaction takes hundreds, and their facts fit in the room it frees (a
        128k window: 8,000 tokens, about 600 fact lines)."""
        return max(self.summary_bound // 2, self.summaries // 4)

    @property
    def next_summary(self) -> int:
        """The room kept for the summary the next compaction writes, where a reduction must
        leave it room (digesting unread results): ``summary_max_tokens``, at most a tenth
        of :attr:`fit` (a small window cannot give a summary more)."""
        return min(self.summary_max_tokens, self.fit // 10)

    def merge_bound(self, new: int) -> int:
        """The bound of the earlier summaries merged into one beside a new summary of
        ``new`` tokens: what :attr:`summaries` leaves beside it, but at least half of
        :attr:`summaries` (a large new summary must not squeeze the older facts out) and
        never under :data:`MIN_SUMMARY_TOKENS`."""
        return max(MIN_SUMMARY_TOKENS, self.summaries - new, self.summaries // 2)

    def merge_call_bound(self, new: int) -> int:
        """The bound a summarizer writing the merge is given: :meth:`merge_bound`, at most
        half of :attr:`summaries` (the merged text is made dense within the merge bound
        afterwards)."""
        return min(self.merge_bound(new), max(MIN_SUMMARY_TOKENS, self.summaries // 2))

    @property
    def merge_dense(self) -> int:
        """Beyond this a merged summary keeps only key facts: a quarter of
        :attr:`summaries` (a merge that refilled the budget with calls and log lines would
        be due again at the next compaction)."""
        return self.summaries // 4

    # ------------------------------------------------------------------ rooms beside the history

    def room(self, fixed: int) -> int:
        """What the trigger leaves beside the fixed part (system prompt, tool schemas,
        pinned task, earlier summaries): the room a compacted history has to work in."""
        return max(0, self.trigger - fixed)

    def tail(self, fixed: int) -> int:
        """The most the kept tail may take after a compaction: what the fit limit leaves
        beside the fixed part and the smallest summary worth writing, header included
        (:data:`SUMMARY_HEADER_TOKENS` + :data:`MIN_SUMMARY_TOKENS`). Within it the tail is
        ``keep_last_n`` messages, and the summary is sized to the room the tail leaves; a
        larger tail would leave no summary and no next call. Under pressure the tail
        shrinks down to the newest turn, never further."""
        return max(0, self.fit - fixed - SUMMARY_HEADER_TOKENS - MIN_SUMMARY_TOKENS)

    @property
    def max_overhead(self) -> int:
        """The most a usage report may add as fixed overhead the local count cannot see
        (tool schemas it was not given, chat templates): a quarter of the window. A larger
        gap is an estimate running high, and taking it whole would stop runs whose next
        call fits."""
        return self.window // 4

    @staticmethod
    def summary_bound_in(left: int, bound: int) -> int:
        """The summary's bound in the room ``left`` beside the kept messages: at most 70%
        of that room (the rest absorbs the local count's error on new text no usage report
        has measured yet), never under :data:`MIN_SUMMARY_TOKENS` nor over ``bound``."""
        return max(MIN_SUMMARY_TOKENS, min(bound, left * 7 // 10))

    @property
    def worth_compacting(self) -> int:
        """The least a span must hold for a compaction at the trigger while the next call
        still fits: twice the smallest summary, header included. A smaller span would cost
        a summarizer call and a broken prompt cache to free next to nothing; the compaction
        waits until the span grows or the next call no longer fits."""
        return 2 * (SUMMARY_HEADER_TOKENS + MIN_SUMMARY_TOKENS)

    @staticmethod
    def summary_prose(span_tokens: int) -> int:
        """The most a summary's prose may take: a quarter of the span it replaces (never
        under :data:`MIN_SUMMARY_TOKENS`). A compaction is paid for with a summarizer call
        and a broken prompt cache, and it buys room only by compressing: prose at a quarter
        of its span frees three quarters of it. What the prose leaves out is not lost: the
        fidelity supplement carries the dropped facts verbatim and the archive keeps the
        originals for recall."""
        return max(MIN_SUMMARY_TOKENS, span_tokens // 4)

    @staticmethod
    def crowded(left: int, bound: int) -> bool:
        """The kept messages leave the summary less than half its bound: the tail's read
        results are cleared before the summary is squeezed (a cleared result keeps its key
        lines and its original in the archive; a summary squeezed that far drops facts)."""
        return left < bound / 2

    @staticmethod
    def supplement_floor() -> int:
        """The smallest fidelity supplement worth adding: a couple of constraint lines."""
        return MIN_SUPPLEMENT_TOKENS

    def restore(self, span: int, bound: int) -> int:
        """How much of a span's cleared originals the summarizer may read restored: what
        :attr:`fit` leaves beside the span (``span`` tokens) and the summary it writes
        (``bound``). The summarizer's own call must fit; originals past it are read as their
        placeholders (their facts)."""
        return max(0, self.fit - span - bound)

    def unread_share(self, fixed: int) -> int:
        """The least room an unread result that cannot fit whole keeps as a digest: a
        quarter of what the fit limit leaves beside the fixed part. The model has not read
        it yet: a digest of a few lines would make it act on what it never saw."""
        return max(0, self.fit - fixed) // 4


# ====================================================================== when
# The decisions over one turn's numbers: plain numbers in (:class:`TurnNumbers`, gathered once
# by the caller), a verdict out. Nothing here reads a message, counts a token or emits an
# event; ``compaction.decide`` and ``core.Compactor`` gather the numbers and act.

MIN_SHRINK = 0.01
"""A compaction that frees at most this share of the context it found is not applied while
that context fits the next call (:func:`worth_applying`): the counts are estimates (the
provider's may differ by about as much), and it would break the prompt cache for nothing."""

Action = Literal["continue", "compact", "stop"]
Need = Literal["info", "plan", "span_removed", "span_tokens"]


@dataclass(frozen=True, slots=True)
class TurnNumbers:
    """The numbers one decision reads, gathered once (tokens).

    The last four groups are asked for only when the decision reaches them (a
    :class:`Verdict` with ``need`` set): ``None`` means not gathered yet.
    """

    tokens: int
    """The context's size (the usage-anchored count, or a recount that confirmed it)."""
    trigger: int
    """The trigger in force (:meth:`Budget.raised_trigger` of the newest boundary)."""
    fit: int
    """The largest context a call may send (:attr:`Budget.fit`)."""
    window: int
    """The context window (for the stop reason)."""
    fold: int
    """Cleared originals that make a compaction due under the trigger (:attr:`Budget.fold`)."""
    worth: int
    """The least a span must hold to compact while the call fits
    (:attr:`Budget.worth_compacting`)."""
    removed: int
    """Tokens of tool results cleared or cut since the newest compaction."""
    cooldown_turns: int = 0
    max_compactions: int | None = None
    thrash_limit: int = 3
    count: int | None = None
    """Compactions so far (with ``turns_since`` and ``refill_streak``: ``need="info"``)."""
    turns_since: int | None = None
    refill_streak: int | None = None
    has_span: bool | None = None
    """Whether a compaction has a span to summarise (``need="plan"``)."""
    span_removed: int | None = None
    """Cleared originals inside that span (``need="span_removed"``)."""
    span_tokens: int | None = None
    """That span's size (``need="span_tokens"``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`decision` says: ``action`` and why, or the number it needs first."""

    action: Action
    reason: str
    need: Need | None = None


def _ask(need: Need) -> Verdict:
    return Verdict("continue", f"needs {need}", need)


def decision(n: TurnNumbers) -> Verdict:
    """Continue, compact first, or stop, on one turn's numbers (docs/design.md, B6).

    Compacts at the trigger, or under it when the results cleared since the last compaction
    reach :attr:`Budget.fold` (routine upkeep: it waits out the cooldown and never spends the
    last compaction the user allows). Stops only when a limit the user set fires
    (``max_compactions``, the thrash guard) or the next call cannot fit and nothing is left to
    compact. A verdict with ``need`` set asks for a number first; ask again with it.

    Example:
        >>> n = TurnNumbers(tokens=800, trigger=750, fit=950, window=1000, fold=1000,
        ...                 worth=288, removed=0)
        >>> decision(n).need
        'info'
        >>> from dataclasses import replace
        >>> n = replace(n, count=0, turns_since=3, refill_streak=0, has_span=True, span_tokens=500)
        >>> decision(n)
        Verdict(action='compact', reason='800 tokens >= trigger 750', need=None)
    """
    over = n.tokens >= n.trigger
    fold = n.removed >= n.fold
    if not fold and not over:
        return Verdict("continue", "under the trigger")
    if n.count is None or n.turns_since is None or n.refill_streak is None:
        return _ask("info")
    cooling = bool(n.count) and n.turns_since < n.cooldown_turns
    if fold and (cooling or at_cap(n.count + 1, n.max_compactions)):
        fold = False
    if not over and not fold:
        return Verdict("continue", "under the trigger")
    if n.has_span is None:
        return _ask("plan")
    if not over:
        return _fold_due(n)
    return _over_trigger(n, cooling)


def at_cap(count: int, cap: int | None) -> bool:
    """Whether ``count`` compactions reach ``max_compactions`` (``cap``; ``None``: no cap)."""
    return cap is not None and count >= cap


def refill_streak(
    *,
    by_trigger: bool,
    tokens_before: int,
    tokens_after: int,
    trigger: int | None,
    index: int,
    turns_since: int,
    previous: int,
) -> int:
    """The thrash guard's count after a compaction (``index``: its number): compactions in a
    row, each within one model turn of the last, that left the context over the trigger and
    no smaller than they found it (no progress). One that frees room is progress even when
    the next large result fills a small window again; one that folds cleared results in
    under the trigger (``by_trigger`` false) is routine.

    Example:
        >>> stuck = dict(by_trigger=True, tokens_before=800, tokens_after=800, trigger=750)
        >>> refill_streak(**stuck, index=3, turns_since=1, previous=2)
        3
        >>> refill_streak(**stuck, index=3, turns_since=4, previous=2)  # not in a row
        1
        >>> refill_streak(**{**stuck, "tokens_after": 790}, index=3, turns_since=1, previous=2)
        0
    """
    stuck = (
        by_trigger
        and trigger is not None
        and tokens_after >= trigger
        and tokens_after >= tokens_before
    )
    if not stuck:
        return 0
    chained = index > 1 and turns_since <= 1
    return previous + 1 if chained else 1


def _fold_due(n: TurnNumbers) -> Verdict:
    """Under the trigger with the cleared results due: compact if the span holds them."""
    if not n.has_span:
        return Verdict("continue", "cleared results wait in the tail")
    if n.span_removed is None:
        return _ask("span_removed")
    if n.span_removed < n.fold:
        return Verdict("continue", "cleared results wait in the tail")
    return Verdict("compact", "the results cleared since the last compaction are due")


def _over_trigger(n: TurnNumbers, cooling: bool) -> Verdict:
    """At or over the trigger: the user's limits, then whether there is enough to compact."""
    if at_cap(n.count or 0, n.max_compactions):
        return Verdict(
            "stop", f"the compaction limit max_compactions={n.max_compactions} is reached"
        )
    fits = n.tokens <= n.fit
    if cooling and fits:
        return Verdict("continue", "cooldown: micro-compaction only")
    if n.count and (n.turns_since or 0) <= 1 and (n.refill_streak or 0) >= n.thrash_limit:
        return Verdict(
            "stop",
            f"thrash guard: {n.thrash_limit} compactions in a row, each one model turn "
            "after the last, left the context over the trigger and no smaller",
        )
    if not n.has_span:
        if fits:  # nothing new to summarise yet, but the call still fits
            return Verdict("continue", "over the trigger, nothing to compact yet")
        return Verdict(
            "stop",
            f"the next call cannot fit: {n.tokens} tokens with {n.window - n.fit} reserved for "
            f"the reply exceed the {n.window}-token window, and nothing is left to compact",
        )
    if fits:
        if n.span_tokens is None:
            return _ask("span_tokens")
        if n.span_tokens < n.worth:
            # It would pay a summarizer call and a broken prompt cache to free next to
            # nothing: wait until the span grows, or the next call no longer fits.
            return Verdict("continue", "over the trigger, too little to compact yet")
    return Verdict("compact", f"{n.tokens} tokens >= trigger {n.trigger}")


def compaction_cause(tokens: int, trigger: int | None) -> Literal["trigger", "fold"]:
    """What made a compaction of a ``tokens`` context run: the trigger in force (``None``:
    no window known, so the trigger), or the cleared results it folds in under it. The
    thrash guard counts only the first kind (:func:`refill_streak`).

    Example:
        >>> compaction_cause(800, 750), compaction_cause(700, 750), compaction_cause(10, None)
        ('trigger', 'fold', 'trigger')
    """
    return "trigger" if trigger is None or tokens >= trigger else "fold"


Recount = Literal["exact", "floor"]


def recount(action: Action, tokens: int, fit: int | None, near: bool) -> Recount | None:
    """Which exact count a decision on ``tokens`` (an estimate) must be checked against
    before it stands: over the fit limit, a stop or a compaction is decided on tiktoken's
    count (``"exact"``: the estimate errs high); a call going out near the fit limit
    (``near``: :meth:`Budget.near_fit`) is checked against the exact floor (``"floor"``).

    Example:
        >>> recount("stop", 1_000, 900, False), recount("continue", 890, 900, True)
        ('exact', 'floor')
    """
    if action != "continue":
        return "exact" if fit is not None and tokens > fit else None
    return "floor" if near else None


def decide_again(kind: Recount, tokens: int, recounted: int | None, fit: int | None) -> bool:
    """Whether the exact count ``recounted`` (of ``kind``, :func:`recount`) changes what the
    decision rests on: an exact count under the estimate does; an exact floor does only over
    the fit limit (under it the call fits, and compaction keeps its timing).

    Example:
        >>> decide_again("exact", 1_000, 950, 900), decide_again("floor", 890, 880, 900)
        (True, False)
    """
    if recounted is None:
        return False
    if kind == "exact":
        return recounted < tokens
    return fit is not None and recounted > fit


def settled(confirmed: int, fit: int, tokens_after: object) -> int:
    """The size a compacted history is judged by when its recount is over the fit limit:
    the compaction's own count of that list (``tokens_after``, counted on its draft with
    tiktoken and the same calibration) settles a difference of rounding when it fits.

    Example:
        >>> settled(1_010, 1_000, 990), settled(1_010, 1_000, 1_005), settled(1_010, 1_000, None)
        (990, 1010, 1010)
    """
    if isinstance(tokens_after, int) and tokens_after <= fit:
        return min(confirmed, tokens_after)
    return confirmed


def after_compaction(
    tokens: int, fit: int, trigger: int
) -> Literal["continue", "over_trigger", "stop"]:
    """The check after a compaction on its (confirmed, :func:`settled`) size: go on whenever
    the next call fits; over the trigger but fitting is reported, not a stop (no new
    compaction runs until the context grows: :meth:`Budget.raised_trigger`).

    Example:
        >>> [after_compaction(t, fit=950, trigger=750) for t in (700, 800, 960)]
        ['continue', 'over_trigger', 'stop']
    """
    if tokens > fit:
        return "stop"
    return "over_trigger" if tokens >= trigger else "continue"


def prepare_window(prepares: bool, action: Action, tokens: int, start: int | None) -> bool:
    """Whether a summary may be prepared beside this call at all: preparing is on, the call
    goes ahead, and the context is past :attr:`Budget.prepare` (``start``).

    Example:
        >>> prepare_window(True, "continue", 700, 600), prepare_window(True, "continue", 500, 600)
        (True, False)
    """
    return prepares and action == "continue" and start is not None and tokens >= start


def quiet_next_turn(
    ahead: int, trigger: int, micro_gate: int | None, fold: int | None, removed: int
) -> bool:
    """Whether the next turn, at ``ahead`` tokens (the newest turn repeated), clears and
    compacts nothing: under the micro gate (never above the trigger) with the cleared
    results (``removed``) short of the fold. Then no summary is prepared for it.

    Example:
        >>> quiet_next_turn(600, 750, 700, 1_000, 0), quiet_next_turn(720, 750, 700, 1_000, 0)
        (True, False)
    """
    gate = min(micro_gate or trigger, trigger)
    return ahead < gate and (fold is None or removed < fold)


def worth_applying(before: int, freed: int, fit: int | None) -> bool:
    """Whether a compaction that frees ``freed`` of the ``before`` tokens it found is
    applied: always when the next call does not fit as it is (keeping the history would end
    the run), else only when it frees more than :data:`MIN_SHRINK` of the context.

    Example:
        >>> worth_applying(10_000, 50, 20_000), worth_applying(10_000, 101, 20_000)
        (False, True)
        >>> worth_applying(30_000, 0, 20_000)
        True
    """
    fits = fit is not None and before <= fit
    return not fits or freed > max(1, round(before * MIN_SHRINK))


def on_demand_refusal(
    count: int, turns_since: int, max_compactions: int | None, cooldown_turns: int
) -> str:
    """Why a compaction asked for now does not run (``""``: it runs): ``max_compactions``,
    and the cooldown (at least one model turn since the last compaction, ``cooldown_turns``
    when larger), so an agent calling the compaction tool again and again cannot loop.

    Example:
        >>> on_demand_refusal(1, 0, None, 0)
        'a compaction ran 0 model turn(s) ago; the next one may run after 1'
        >>> on_demand_refusal(1, 1, None, 0)
        ''
    """
    if at_cap(count, max_compactions):
        return f"the compaction limit max_compactions={max_compactions} is reached"
    wait = max(1, cooldown_turns)
    if count and turns_since < wait:
        return (
            f"a compaction ran {turns_since} model turn(s) ago; the next one may run after {wait}"
        )
    return ""
