"""Exceptions raised by langchain-compact.

Every error derives from :class:`CompactionError`; each message says what happened and
what to do about it.
"""

from __future__ import annotations

__all__ = ["CompactionError", "ConfigError", "InvalidHistoryError", "SummarizerError"]


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
