"""The budget: every room the compaction policy uses, computed from one context window.

A leaf module (it imports nothing else of the package), so every layer can ask it. Each
rule is a named method with its reason in its docstring and in ``docs/design.md``
("The budget"); the ratios it reads are the user's settings in
:class:`~langchain_compact.config.CompactionConfig`.

Example:
    >>> b = Budget(window=128_000)
    >>> b.reserve, b.fit, b.trigger
    (4096, 123904, 96000)
    >>> b.tail(fixed=2_000)  # what the fit limit leaves beside the task and a summary
    121760
    >>> b.unread_share(fixed=2_000)  # an unread result that cannot fit keeps at least this
    30476
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CHARS_PER_TOKEN",
    "MIN_SUMMARY_TOKENS",
    "OBSERVATION_CHARS",
    "SUMMARY_HEADER_TOKENS",
    "Budget",
    "chars_for_tokens",
]

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
#: The smallest fidelity supplement worth adding (a couple of constraint lines).
MIN_SUPPLEMENT_TOKENS = 32
"""The shortest summary worth writing (its header aside): below it a summary cannot say
what was done, what is pending and why."""


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
    trigger_ratio: float = 0.75
    micro_trigger_ratio: float = 0.75
    micro_target_ratio: float = 0.3
    fold_ratio: float = 1.0
    prepare_ratio: float = 0.6
    task_max_ratio: float = 0.25
    large_result_ratio: float = 0.2
    summary_budget_ratio: float = 0.25
    reply_reserve_tokens: int | None = None
    summary_max_tokens: int = 2_000

    # ------------------------------------------------------------------ the fixed lines

    @property
    def reserve(self) -> int:
        """Tokens kept free for the model's reply: the explicit setting, else a twentieth of
        the window, at most 4,096. A reply needs room however large the window; 4,096 is
        the output most chat models produce in one call by default, and a twentieth keeps a
        small window usable."""
        if self.reply_reserve_tokens is not None:
            return self.reply_reserve_tokens
        return min(4_096, self.window // 20)

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

    def unread_share(self, fixed: int) -> int:
        """The least room an unread result that cannot fit whole keeps as a digest: a
        quarter of what the fit limit leaves beside the fixed part. The model has not read
        it yet: a digest of a few lines would make it act on what it never saw."""
        return max(0, self.fit - fixed) // 4
