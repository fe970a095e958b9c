"""`CompactionConfig`: every knob of the package, validated at construction.

Defaults and where they came from: docs/design.md ("Defaults"), docs/origins.md. An invalid value
raises :class:`~langchain_compact.errors.ConfigError` naming the field and its allowed range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from langchain_compact._defaults import DEFAULT_ARCHIVE_DIR, default_archive_dir
from langchain_compact.budget import (
    DEFAULT_FOLD_RATIO,
    DEFAULT_LARGE_RESULT_RATIO,
    DEFAULT_MICRO_TARGET_RATIO,
    DEFAULT_MICRO_TRIGGER_RATIO,
    DEFAULT_PREPARE_RATIO,
    DEFAULT_REPLY_RESERVE_CAP,
    DEFAULT_SUMMARY_BUDGET_RATIO,
    DEFAULT_SUMMARY_MAX_TOKENS,
    DEFAULT_TASK_MAX_RATIO,
    DEFAULT_TRIGGER_RATIO,
    Budget,
)
from langchain_compact.errors import ConfigError

__all__ = [
    "DEFAULT_ARCHIVE_DIR",
    "DEFAULT_FOLD_RATIO",
    "DEFAULT_KEEP_LAST_N",
    "DEFAULT_LARGE_RESULT_RATIO",
    "DEFAULT_LARGE_TOOL_RESULT_CHARS",
    "DEFAULT_LARGE_TOOL_RESULT_KEEP_CHARS",
    "DEFAULT_MICRO_KEEP",
    "DEFAULT_MICRO_MIN_CHARS",
    "DEFAULT_MICRO_TARGET_RATIO",
    "DEFAULT_MICRO_TRIGGER_RATIO",
    "DEFAULT_PREPARE_RATIO",
    "DEFAULT_REPLY_RESERVE_CAP",
    "DEFAULT_SUMMARY_BUDGET_RATIO",
    "DEFAULT_SUMMARY_MAX_TOKENS",
    "DEFAULT_TASK_MAX_RATIO",
    "DEFAULT_THRASH_LIMIT",
    "DEFAULT_TRIGGER_RATIO",
    "CompactionConfig",
]

# The defaults of the sizes derived from the window (the ratios, the summary's bound, the
# reply reserve's cap) are declared once, in :mod:`langchain_compact.budget`, and
# re-exported here; the others are declared here.
DEFAULT_KEEP_LAST_N = 4
DEFAULT_MICRO_KEEP = 3
DEFAULT_MICRO_MIN_CHARS = 100
DEFAULT_THRASH_LIMIT = 3
DEFAULT_LARGE_TOOL_RESULT_CHARS = 5_000
"""The seed's fixed cut (characters); now used only where no context window is known."""
DEFAULT_LARGE_TOOL_RESULT_KEEP_CHARS = 2_000
"""Size of the digest that replaces an oversized result (characters)."""


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """All settings of a compaction run.

    Every field has a default; docs/configuration.md gives each one's default and use.

    Attributes:
        context_window: Model context window in tokens, an int (e.g. ``8000`` or ``8_192``);
            ``None``: read the chat model's ``profile["max_input_tokens"]``.
        trigger_ratio: Full compaction runs when context tokens >= ``trigger_ratio *
            context_window`` (0 < ratio <= 1; default 0.75).
        keep_last_n: Messages kept verbatim after a full compaction (moved back to a safe
            cut, so a tool-call batch is never split).
        micro_trigger_ratio: Micro-compaction's pressure gate: below ``micro_trigger_ratio *
            context_window`` no tool result is cleared or cut (default 0.75, the
            full-compaction trigger: clearing is tried first where a compaction would run,
            and an agent with room pays nothing, not even a broken prompt cache; never above
            ``trigger_ratio``).
        micro_target_ratio: Once the gate is passed, the oldest read results are cleared in
            one batch until the context is at most ``micro_target_ratio * context_window``
            (default 0.3; capped at 0.6 of the gate): one break of the provider's cached
            prefix buys many turns instead of one clear per turn.
        micro_keep: The newest ``micro_keep`` tool results the model has already read stay
            intact under normal pressure (default 3; a parallel batch is kept whole).
        micro_min_chars: Tool results shorter than this are never cleared (default 100).
        micro_clear_at_least: Clear only when at least this many tokens would be freed.
        micro_exclude_tools: Tool names whose results are never cleared or cut (e.g.
            ``("recall_archived",)``).
        large_result_ratio: A tool result the model has read that alone takes more than
            ``large_result_ratio * context_window`` tokens is archived whole and replaced by
            a digest (default 0.2: about 92,000 characters in a 128k window, 5,800 in an 8k
            one).
        large_tool_result_chars: An explicit size (characters) above which a read result is
            digested, instead of ``large_result_ratio``.
        large_tool_result_keep_chars: Size of the digest that replaces an oversized result
            (characters).
        digest: How an oversized result is digested.
        fold_ratio: When the originals of the results cleared since the last compaction pass
            ``fold_ratio * context_window`` tokens, a compaction folds them into a summary
            (the summarizer reads the archived originals, not the placeholders).
        prepare: Prepare the summary before the trigger, so that compacting at the trigger
            is a state swap and not an LLM call the agent waits for.
        prepare_ratio: No summary is prepared below this share of the window (default 0.6,
            80% of the default trigger).
        reply_reserve_tokens: Tokens kept free for the model's reply.
        task_max_ratio: Under pressure, a pinned original task larger than ``task_max_ratio
            * context_window`` is pinned as head + tail + key lines with a recall pointer
            (archived whole).
        summary_max_tokens: Upper bound on one summary, in tokens (default 2,000).
        summary_budget_ratio: When all summaries together pass ``summary_budget_ratio *
            context_window``, the oldest are merged into one (the only time a summary is
            summarised).
        max_compactions: Stop the run after this many full compactions.
        thrash_limit: Stop after this many compactions in a row, each one model turn after
            the last, that left the context over the trigger and no smaller than they found
            it: no progress (always on; default 3).
        cooldown_turns: After a full compaction, this many model turns run with
            micro-compaction only (docs/design.md, B6).
        pin_original_task: Keep the first human message (the user's task) verbatim in every
            compacted history.
        summary_role: Message type that carries a summary.
        summarizer_retries: Extra attempts of the primary summarizer before falling back to
            the extractive one.
        summarizer_timeout: Seconds one summarizer call may take (``None``: no limit).
        archive_dir: Folder of the default archive's JSONL files (used when the graph or
            agent has no store): ``.memory`` in the working directory, or
            ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``.
        redactor: Applied to text before it is archived or summarised (e.g.
            ``redact_secrets``); ``None``: no redaction.
        on_invalid_history: A broken tool-call pairing before a model call: ``"repair"``
            (default: the pieces removed or changed archived first, an event naming each
            change) or ``"raise"`` (:class:`~langchain_compact.errors.InvalidHistoryError`
            naming the index).
        share_compaction: Inside another graph (a sub-agent), let placeholders and
            summaries reach the message list shared with the parent (default ``False``:
            they stay in the sub-agent; docs/subagents.md).

    Example:
        >>> cfg = CompactionConfig(context_window=8_000)
        >>> cfg.trigger_tokens
        6000
        >>> CompactionConfig(context_window=8_000, trigger_ratio=1.5)
        Traceback (most recent call last):
        ...
        langchain_compact.errors.ConfigError: trigger_ratio=1.5 is out of range: ...
    """

    context_window: int | None = None
    """Model context window in tokens. ``None``: read the chat model's
    ``profile["max_input_tokens"]``; if that is missing too, compaction raises a
    ConfigError asking for this value."""

    trigger_ratio: float = DEFAULT_TRIGGER_RATIO
    """Full compaction runs when context tokens >= ``trigger_ratio * context_window``
    (0 < ratio <= 1; default 0.75)."""

    keep_last_n: int = DEFAULT_KEEP_LAST_N
    """Messages kept verbatim after a full compaction (moved back to a safe cut, so a
    tool-call batch is never split). Default 4."""

    micro_trigger_ratio: float = DEFAULT_MICRO_TRIGGER_RATIO
    """Micro-compaction's pressure gate: below ``micro_trigger_ratio * context_window`` no
    tool result is cleared or cut (default 0.75, the full-compaction trigger: clearing is
    tried first where a compaction would run, and an agent with room pays nothing, not even
    a broken prompt cache; never above ``trigger_ratio``)."""

    micro_target_ratio: float = DEFAULT_MICRO_TARGET_RATIO
    """Once the gate is passed, the oldest read results are cleared in one batch until the
    context is at most ``micro_target_ratio * context_window`` (default 0.3; capped at 0.6 of
    the gate): one break of the provider's cached prefix buys many turns instead of one
    clear per turn."""

    micro_keep: int = DEFAULT_MICRO_KEEP
    """The newest ``micro_keep`` tool results the model has already read stay intact under
    normal pressure (default 3; a parallel batch is kept whole). Results the model has not
    read yet are never counted here: they are never cleared (see ``reply_reserve_tokens``)."""

    micro_min_chars: int = DEFAULT_MICRO_MIN_CHARS
    """Tool results shorter than this are never cleared (default 100)."""

    micro_clear_at_least: int = 0
    """Clear only when at least this many tokens would be freed. 0 (default): the batch
    target above already sizes batches."""

    micro_exclude_tools: tuple[str, ...] = ()
    """Tool names whose results are never cleared or cut (e.g. ``("recall_archived",)``).
    The name is read from the result, or from the tool call it answers."""

    large_result_ratio: float = DEFAULT_LARGE_RESULT_RATIO
    """A tool result the model has read that alone takes more than
    ``large_result_ratio * context_window`` tokens is archived whole and replaced by a
    digest (default 0.2: about 92,000 characters in a 128k window, 5,800 in an 8k one). The
    seed's fixed 5,000 characters cut normal source files in large windows."""

    large_tool_result_chars: int | None = None
    """An explicit size (characters) above which a read result is digested, instead of
    ``large_result_ratio``. ``None`` (default): use the ratio; with no known window, the
    seed's 5,000 characters."""

    large_tool_result_keep_chars: int = DEFAULT_LARGE_TOOL_RESULT_KEEP_CHARS
    """Size of the digest that replaces an oversized result (characters)."""

    digest: Callable[[str], str] | None = field(default=None, compare=False)
    """How an oversized result is digested. ``None`` (default): a structured digest (JSON
    records with counts, fields and extremes; tables; log levels and error lines; head + tail
    + key lines for plain text). Pass ``llm_digest(model)`` for an LLM digest."""

    fold_ratio: float = DEFAULT_FOLD_RATIO
    """When the originals of the results cleared since the last compaction pass
    ``fold_ratio * context_window`` tokens, a compaction folds them into a summary (the
    summarizer reads the archived originals, not the placeholders). Default 1.0: a window's
    worth of cleared originals; until then each placeholder keeps its facts visible."""

    prepare: bool | None = None
    """Prepare the summary before the trigger, so that compacting at the trigger is a state
    swap and not an LLM call the agent waits for. Past ``prepare_ratio`` of the window the
    summary of the span a compaction would take is written concurrently with the model call
    (a parallel graph node, a background job in the middleware and the LCEL transformer).
    ``None`` (default): on whenever the summarizer is an
    :class:`~langchain_compact.summarizers.LLMSummarizer`, off for the local extractive one
    and for custom summarizers (pass ``True``); ``True`` / ``False`` force it."""

    prepare_ratio: float = DEFAULT_PREPARE_RATIO
    """No summary is prepared below this share of the window (default 0.6, 80% of the default
    trigger). Past it, one is prepared when the next turn, growing as the newest one did,
    will likely end in a full compaction: just in time, so a run that ends first or that
    clearing keeps under the trigger wastes no summarizer call."""

    reply_reserve_tokens: int | None = None
    """Tokens kept free for the model's reply. A call "fits" when the context is at most
    ``context_window - reply_reserve_tokens``; a run stops only when it does not fit.
    ``None`` (default): a twentieth of the window, at most 4,096."""

    task_max_ratio: float = DEFAULT_TASK_MAX_RATIO
    """Under pressure, a pinned original task larger than ``task_max_ratio * context_window``
    is pinned as head + tail + key lines with a recall pointer (archived whole). Default
    0.25."""

    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    """Upper bound on one summary, in tokens (default 2,000)."""

    summary_budget_ratio: float = DEFAULT_SUMMARY_BUDGET_RATIO
    """When all summaries together pass ``summary_budget_ratio * context_window``, the oldest
    are merged into one (the only time a summary is summarised). Default 0.25."""

    max_compactions: int | None = None
    """Stop the run after this many full compactions. ``None`` (default):
    no cap, so a long task can outlive many windows; the thrash guard still applies."""

    thrash_limit: int = DEFAULT_THRASH_LIMIT
    """Stop after this many compactions in a row, each one model turn after the last, that
    left the context over the trigger and no smaller than they found it: no progress (always
    on; default 3). A compaction that frees room is progress, even when the next large
    result fills a small window again."""

    cooldown_turns: int = 0
    """After a full compaction, this many model turns run with micro-compaction only
    (docs/design.md, B6). Default 0."""

    pin_original_task: bool = True
    """Keep the first human message (the user's task) verbatim in every compacted history."""

    summary_role: Literal["human", "system"] = "human"
    """Message type that carries a summary. ``"human"`` (default) is legal mid-list for
    OpenAI, Anthropic and Gemini; ``"system"`` matches Claude Code's boundary marker but some
    providers reject a system message that is not first."""

    summarizer_retries: int = 1
    """Extra attempts of the primary summarizer before falling back to the extractive one."""

    summarizer_timeout: float | None = 120.0
    """Seconds one summarizer call may take (``None``: no limit)."""

    archive_dir: str = field(default_factory=default_archive_dir)
    """Folder of the default archive's JSONL files (used when the graph or agent has no
    store): ``.memory`` in the working directory, or ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``."""

    redactor: Callable[[str], str] | None = field(default=None, compare=False)
    """Applied to text before it is archived or summarised (e.g.
    :func:`langchain_compact.redaction.redact_secrets`). ``None``: no redaction."""

    on_invalid_history: Literal["repair", "raise"] = "repair"
    """What the turn before a model call does with a broken tool-call pairing (an orphan or
    duplicate ``ToolMessage``, an unanswered or id-less tool call; docs/design.md, B2), at
    every entry point (graph nodes, middleware, LCEL, server). ``"repair"`` (default): the
    history is repaired (:func:`~langchain_compact.history.repair_report`: an unanswered
    call gets a ``status="error"`` "interrupted" result, an orphan or duplicate result is
    dropped, a reused id renamed), the pieces removed or changed are archived first, and a
    ``history_repaired`` event names each change. ``"raise"``:
    :class:`~langchain_compact.errors.InvalidHistoryError` naming the index and the fix."""

    share_compaction: bool = False
    """Inside another graph (a node of a supervisor, a ``Send`` target, an agent invoked
    from a node or a tool), whether this agent's compaction reaches the message list it
    shares with the parent. ``False`` (default): the compacted view is kept under the
    agent's private ``compaction_view`` state key and only the agent's own new messages
    reach the shared list, so the parent's history keeps what it had (docs/subagents.md).
    ``True``: placeholders replace the parent's originals by id and the summary is added
    to the parent's history, as a top-level agent's state is rewritten. At the top level
    this setting changes nothing."""

    def __post_init__(self) -> None:
        # In the order of the fields, so the first bad one named is the first in the docs.
        self._check_modes_and_ratios()
        self._check_counts()
        self._check_values()
        self._check_pairs()

    def _check_modes_and_ratios(self) -> None:
        if self.on_invalid_history not in ("repair", "raise"):
            raise ConfigError(
                f"on_invalid_history={self.on_invalid_history!r} is not allowed: use 'repair' "
                "or 'raise'."
            )
        if not isinstance(self.share_compaction, bool):
            raise ConfigError(f"share_compaction={self.share_compaction!r} must be True or False.")
        _check_int(self, "context_window", low=1, optional=True)
        _check_ratio(self, "trigger_ratio")
        _check_int(self, "keep_last_n", low=0)
        _check_ratio(self, "micro_trigger_ratio")
        _check_ratio(self, "micro_target_ratio")
        _check_ratio(self, "large_result_ratio")
        _check_ratio(self, "fold_ratio")
        _check_ratio(self, "task_max_ratio")
        _check_ratio(self, "prepare_ratio")
        if self.prepare is not None and not isinstance(self.prepare, bool):
            raise ConfigError(f"prepare={self.prepare!r} must be True, False or None (auto).")

    def _check_counts(self) -> None:
        _check_int(self, "reply_reserve_tokens", low=0, optional=True)
        _check_int(self, "micro_keep", low=0)
        _check_int(self, "micro_min_chars", low=0)
        _check_int(self, "micro_clear_at_least", low=0)
        _check_int(self, "large_tool_result_chars", low=1, optional=True)
        _check_int(self, "large_tool_result_keep_chars", low=0)
        _check_int(self, "summary_max_tokens", low=1)
        _check_ratio(self, "summary_budget_ratio")
        _check_int(self, "max_compactions", low=1, optional=True)
        _check_int(self, "thrash_limit", low=1)
        _check_int(self, "cooldown_turns", low=0)
        _check_int(self, "summarizer_retries", low=0)
        if self.summary_role not in ("human", "system"):
            raise ConfigError(
                f"summary_role={self.summary_role!r} is not allowed: use 'human' or 'system'."
            )
        timeout = self.summarizer_timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ConfigError(
                f"summarizer_timeout={self.summarizer_timeout!r} is out of range: "
                "use a number of seconds > 0, or None for no limit."
            )

    def _check_values(self) -> None:
        if not isinstance(self.micro_exclude_tools, tuple) or not all(
            isinstance(t, str) for t in self.micro_exclude_tools
        ):
            raise ConfigError(
                f"micro_exclude_tools={self.micro_exclude_tools!r} must be a tuple of tool names."
            )
        if not isinstance(self.pin_original_task, bool):
            raise ConfigError(
                f"pin_original_task={self.pin_original_task!r} must be True or False."
            )
        if not isinstance(self.archive_dir, str) or not self.archive_dir:
            raise ConfigError("archive_dir must be a non-empty directory path string.")
        if self.digest is not None and not callable(self.digest):
            raise ConfigError("digest must be a callable str -> str (e.g. llm_digest(model)).")
        if self.redactor is not None and not callable(self.redactor):
            raise ConfigError("redactor must be a callable str -> str, or None.")

    def _check_pairs(self) -> None:
        if (
            self.context_window is not None
            and self.reply_reserve_tokens is not None
            and self.reply_reserve_tokens >= self.context_window
        ):
            raise ConfigError(
                f"reply_reserve_tokens={self.reply_reserve_tokens} must be smaller than "
                f"context_window={self.context_window}."
            )
        if (
            self.large_tool_result_chars is not None
            and self.large_tool_result_keep_chars >= self.large_tool_result_chars
        ):
            raise ConfigError(
                f"large_tool_result_keep_chars={self.large_tool_result_keep_chars} must be "
                f"smaller than large_tool_result_chars={self.large_tool_result_chars}."
            )

    @property
    def budget(self) -> Budget | None:
        """Every room of the policy for this window (:class:`~langchain_compact.budget.Budget`),
        or ``None`` while the window is unknown."""
        if self.context_window is None:
            return None
        return Budget(
            window=self.context_window,
            trigger_ratio=self.trigger_ratio,
            micro_trigger_ratio=self.micro_trigger_ratio,
            micro_target_ratio=self.micro_target_ratio,
            fold_ratio=self.fold_ratio,
            prepare_ratio=self.prepare_ratio,
            task_max_ratio=self.task_max_ratio,
            large_result_ratio=self.large_result_ratio,
            summary_budget_ratio=self.summary_budget_ratio,
            reply_reserve_tokens=self.reply_reserve_tokens,
            summary_max_tokens=self.summary_max_tokens,
        )

    @property
    def trigger_tokens(self) -> int | None:
        """Token count that triggers a full compaction (:attr:`Budget.trigger`), or ``None``
        if the window is unknown."""
        b = self.budget
        return None if b is None else b.trigger

    @property
    def fit_tokens(self) -> int | None:
        """The largest context a call may send: the window minus the reply reserve."""
        b = self.budget
        return None if b is None else b.fit

    @property
    def micro_trigger_tokens(self) -> int | None:
        """Context size at which micro-compaction starts clearing (never above the trigger)."""
        b = self.budget
        return None if b is None else b.micro_gate

    @property
    def micro_target_tokens(self) -> int | None:
        """Context size a clearing batch aims for (at most 0.6 of the micro trigger)."""
        b = self.budget
        return None if b is None else b.micro_target

    @property
    def fold_tokens(self) -> int | None:
        """Cleared originals (tokens) since the last compaction that force one to fold them."""
        b = self.budget
        return None if b is None else b.fold

    @property
    def prepare_tokens(self) -> int | None:
        """Context size below which no summary is prepared (never above the trigger)."""
        b = self.budget
        return None if b is None else b.prepare

    def with_window(self, context_window: int) -> CompactionConfig:
        """Return a copy with ``context_window`` set (validated)."""
        return self.replace(context_window=context_window)

    def replace(self, **changes: Any) -> CompactionConfig:
        """Return a validated copy with ``changes`` applied.

        Example:
            >>> CompactionConfig().replace(keep_last_n=6).keep_last_n
            6
        """
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(
                f"unknown CompactionConfig field(s) {unknown}; valid fields: {sorted(known)}."
            )
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return CompactionConfig(**values)


def _check_int(cfg: CompactionConfig, name: str, *, low: int, optional: bool = False) -> None:
    value = getattr(cfg, name)
    if value is None and optional:
        return
    allowed = f"an integer >= {low}" + (", or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, int):
        example = " of tokens, e.g. 8000 or 8_192" if name == "context_window" else ""
        raise ConfigError(
            f"{name}={value!r} must be an int{example} ({type(value).__name__} given): use "
            f"{allowed}."
        )
    if value < low:
        raise ConfigError(f"{name}={value!r} is out of range: use {allowed}.")


def _check_ratio(cfg: CompactionConfig, name: str) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"{name}={value!r} is out of range: use a number with 0 < {name} <= 1.")
