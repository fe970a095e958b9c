"""`CompactionConfig`: every knob of the package, validated at construction.

Defaults come from the three seed articles (see DESIGN.md, "Defaults"). An invalid value
raises :class:`~langchain_compact.errors.ConfigError` naming the field and its allowed range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from langchain_compact.errors import ConfigError

__all__ = [
    "DEFAULT_ARCHIVE_DIR",
    "DEFAULT_KEEP_LAST_N",
    "DEFAULT_LARGE_TOOL_RESULT_CHARS",
    "DEFAULT_MICRO_KEEP",
    "DEFAULT_MICRO_MIN_CHARS",
    "DEFAULT_SUMMARY_BUDGET_RATIO",
    "DEFAULT_SUMMARY_MAX_TOKENS",
    "DEFAULT_THRASH_LIMIT",
    "DEFAULT_TRIGGER_RATIO",
    "CompactionConfig",
]

DEFAULT_TRIGGER_RATIO = 0.75
DEFAULT_KEEP_LAST_N = 4
DEFAULT_MICRO_KEEP = 3
DEFAULT_MICRO_MIN_CHARS = 100
DEFAULT_SUMMARY_MAX_TOKENS = 2_000
DEFAULT_SUMMARY_BUDGET_RATIO = 0.25
DEFAULT_THRASH_LIMIT = 3
DEFAULT_LARGE_TOOL_RESULT_CHARS = 5_000
DEFAULT_ARCHIVE_DIR = ".memory"


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """All settings of a compaction run.

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
    (0 < ratio <= 1; default 0.75, seed 004)."""

    keep_last_n: int = DEFAULT_KEEP_LAST_N
    """Messages kept verbatim after a full compaction (moved back to a safe cut, so a
    tool-call batch is never split). Default 4 (seeds 002/004)."""

    micro_keep: int = DEFAULT_MICRO_KEEP
    """Micro-compaction keeps the most recent ``micro_keep`` tool results intact (default 3)."""

    micro_min_chars: int = DEFAULT_MICRO_MIN_CHARS
    """Tool results shorter than this are never cleared (default 100, seed 000)."""

    micro_clear_at_least: int = 0
    """Clear only when at least this many tokens would be freed, then clear every eligible
    result at once, so the provider's prompt-cache prefix changes in batches, not every turn.
    0 (default) clears as soon as anything is eligible."""

    micro_exclude_tools: tuple[str, ...] = ()
    """Tool names whose results are never cleared (e.g. ``("recall_archived",)``)."""

    large_tool_result_chars: int | None = DEFAULT_LARGE_TOOL_RESULT_CHARS
    """A tool result longer than this is archived whole and replaced by head + tail (B4).
    ``None`` disables it. Default 5,000 characters (seed 004)."""

    large_tool_result_keep_chars: int = 2_000
    """Characters kept from an oversized tool result (split between head and tail)."""

    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    """Upper bound on one summary, in tokens (default 2,000)."""

    summary_budget_ratio: float = DEFAULT_SUMMARY_BUDGET_RATIO
    """When all summaries together pass ``summary_budget_ratio * context_window``, the oldest
    are merged into one (the only time a summary is summarised). Default 0.25 (seed 004)."""

    max_compactions: int | None = None
    """Stop the run after this many full compactions (seed 002 uses 2-3). ``None`` (default):
    no cap, so a long task can outlive many windows; the thrash guard still applies."""

    thrash_limit: int = DEFAULT_THRASH_LIMIT
    """Stop after this many compactions in a row that leave the context over the trigger or
    see it refill within one model turn (always on; default 3)."""

    cooldown_turns: int = 0
    """After a full compaction, this many model turns run with micro-compaction only
    (seed 004 section 6.2). Default 0."""

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

    archive_dir: str = DEFAULT_ARCHIVE_DIR
    """Directory of the default JSONL archive (seed 000's ``.memory/``)."""

    redactor: Callable[[str], str] | None = field(default=None, compare=False)
    """Applied to text before it is archived or summarised (e.g.
    :func:`langchain_compact.redaction.redact_secrets`). ``None``: no redaction."""

    def __post_init__(self) -> None:
        _check_int(self, "context_window", low=1, optional=True)
        _check_ratio(self, "trigger_ratio")
        _check_int(self, "keep_last_n", low=0)
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
        if not isinstance(self.micro_exclude_tools, tuple) or not all(
            isinstance(t, str) for t in self.micro_exclude_tools
        ):
            raise ConfigError(
                f"micro_exclude_tools={self.micro_exclude_tools!r} must be a tuple of tool names."
            )
        if not isinstance(self.archive_dir, str) or not self.archive_dir:
            raise ConfigError("archive_dir must be a non-empty directory path string.")
        if self.redactor is not None and not callable(self.redactor):
            raise ConfigError("redactor must be a callable str -> str, or None.")
        if (
            self.large_tool_result_chars is not None
            and self.large_tool_result_keep_chars >= self.large_tool_result_chars
        ):
            raise ConfigError(
                f"large_tool_result_keep_chars={self.large_tool_result_keep_chars} must be "
                f"smaller than large_tool_result_chars={self.large_tool_result_chars}."
            )

    @property
    def trigger_tokens(self) -> int | None:
        """Token count that triggers a full compaction, or ``None`` if the window is unknown."""
        if self.context_window is None:
            return None
        return int(self.context_window * self.trigger_ratio)

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
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        allowed = f"an integer >= {low}" + (", or None" if optional else "")
        raise ConfigError(f"{name}={value!r} is out of range: use {allowed}.")


def _check_ratio(cfg: CompactionConfig, name: str) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"{name}={value!r} is out of range: use a number with 0 < {name} <= 1.")
