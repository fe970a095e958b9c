"""Exceptions raised by langchain-compact.

Every error derives from :class:`CompactionError`; each message says what happened and
what to do about it.
"""

from __future__ import annotations

import re

from langchain_core.exceptions import ContextOverflowError as _CoreContextOverflowError
from langchain_core.exceptions import ModelError

__all__ = [
    "ArchiveError",
    "ArchiveWarning",
    "CompactionError",
    "CompactionWarning",
    "ConfigError",
    "ContextOverflowError",
    "CorruptRecordError",
    "InvalidHistoryError",
    "SummarizerError",
    "is_provider_overflow",
]


class CompactionError(Exception):
    """Base class for every error this package raises."""


class ConfigError(CompactionError, ValueError):
    """A configuration value is out of range or of the wrong type."""


class InvalidHistoryError(CompactionError, ValueError):
    """A message history breaks the tool-call pairing rules providers enforce.

    Attributes:
        index: Position of the offending message in the history (``-1`` if not tied to one).
    """

    def __init__(self, message: str, *, index: int = -1) -> None:
        super().__init__(message)
        self.index = index


class SummarizerError(CompactionError):
    """A summarizer failed (error, timeout, empty or over-long text, a tool call)."""


class ContextOverflowError(CompactionError, _CoreContextOverflowError):
    """The next model call cannot go ahead: it would not fit the context window even after
    compacting, or a limit the user set was reached (``max_compactions``, thrash guard).

    It is also a ``langchain_core.exceptions.ContextOverflowError`` (the error ``ChatOpenAI``
    and ``ChatAnthropic`` raise when the provider refuses a call for its length), so one
    ``except langchain_core.exceptions.ContextOverflowError`` catches both, and
    ``except CompactionError`` still catches this one.

    Raised by the LCEL transformer (``compact_messages`` / ``MessageCompactor``), which
    cannot stop a chain the way the graph's stop node does; catch it around
    ``chain.invoke(...)``, or pass ``on_overflow="pass"`` to hand the history on instead.

    Attributes:
        reason: Why the call cannot go ahead.
        messages: The history as compacted so far (nothing is lost: what was removed is
            archived).
    """

    def __init__(self, reason: str, *, messages: list[object] | None = None) -> None:
        super().__init__(
            f"the next model call cannot go ahead: {reason}. Start a new conversation from "
            "the latest summary, raise context_window or max_compactions, or pass "
            "on_overflow='pass' to send the history anyway."
        )
        self.reason = reason
        self.messages = list(messages or [])


class CompactionWarning(UserWarning):
    """A setting works, but probably not as intended with this model (the message says why
    and what to change)."""


class ArchiveError(CompactionError):
    """The transcript archive cannot be written or read, or a ref/argument is invalid."""


class CorruptRecordError(ArchiveError):
    """An archive file is empty, not JSON, truncated or not of this thread."""


class ArchiveWarning(UserWarning):
    """An unreadable archive record was skipped while searching (the others are used)."""


#: What providers and OpenAI-compatible servers say when they refuse a call for its length.
#: llama-cpp-python's server answers HTTP 400 "This model's maximum context length is N
#: tokens. However, you requested M tokens ..." without OpenAI's ``context_length_exceeded``
#: code in the text langchain-openai checks, so ``ChatOpenAI`` raises a plain invalid-request
#: error for it, not langchain-core's ``ContextOverflowError``.
_LENGTH_REFUSAL = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? (?:the )?context (?:window|length)"
    r"|prompt is too long|input tokens exceed|ContextWindowExceeded|reduce the length of the "
    r"messages",
    re.IGNORECASE,
)


def is_provider_overflow(exc: BaseException) -> bool:
    """Whether a model call's error is the provider refusing the call for its length.

    True for langchain-core's ``ContextOverflowError`` (``ChatOpenAI``, ``ChatAnthropic``),
    and for an invalid-request error (a langchain-core ``ModelError`` or an HTTP 400 / 413
    error) whose message says so the way OpenAI-compatible servers do: llama-cpp-python's
    server answers "This model's maximum context length is N tokens", which ``ChatOpenAI``
    raises as a plain invalid-request error. False for this package's own
    :class:`ContextOverflowError` (compaction deciding a call cannot fit, not a refusal).
    """
    if isinstance(exc, ContextOverflowError):
        return False
    if isinstance(exc, _CoreContextOverflowError):
        return True
    status = getattr(exc, "status_code", None)
    if not isinstance(exc, ModelError) and status not in (400, 413):
        return False
    return _LENGTH_REFUSAL.search(str(exc)) is not None
