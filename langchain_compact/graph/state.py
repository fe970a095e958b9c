"""Graph state for compaction: ``MessagesState`` plus what routing reports."""

from __future__ import annotations

from typing import Any

from langgraph.graph import MessagesState
from typing_extensions import NotRequired, TypedDict

from langchain_compact.markers import Transition

__all__ = ["CompactionKeys", "CompactionState", "Transition"]


class CompactionKeys(TypedDict):
    """The state keys compaction writes (all optional), for any state schema to include:
    :class:`CompactionState` (LangGraph) and the middleware's state (``create_agent``).

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


class CompactionState(MessagesState, CompactionKeys):
    """``MessagesState`` plus the keys compaction writes (:class:`CompactionKeys`).

    Example:
        >>> from langgraph.graph import StateGraph
        >>> builder = StateGraph(CompactionState)
        >>> sorted(CompactionState.__annotations__)  # doctest: +NORMALIZE_WHITESPACE
        ['compaction_count', 'last_compaction', 'messages', 'prepared_summary',
         'stop_reason', 'transition']
    """
