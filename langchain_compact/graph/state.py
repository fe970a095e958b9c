"""Graph state for compaction: ``MessagesState`` plus what routing reports."""

from __future__ import annotations

from typing import Any

from langgraph.graph import MessagesState
from typing_extensions import NotRequired

from langchain_compact.markers import Transition

__all__ = ["CompactionState", "Transition"]


class CompactionState(MessagesState):
    """``MessagesState`` plus the keys compaction writes (all optional).

    Nothing here is needed for routing decisions, which are derived from the messages
    (the boundary metadata records counts and streaks), so a checkpoint restored from any
    point routes the same way. The keys report what happened, for the user and for UIs.

    Example:
        >>> from langgraph.graph import StateGraph
        >>> builder = StateGraph(CompactionState)
    """

    transition: NotRequired[Transition]
    """The seed's ``transition`` state: what the last compaction node did."""
    compaction_count: NotRequired[int]
    """Full compactions in this thread so far."""
    last_compaction: NotRequired[dict[str, Any]]
    """Numbers of the newest compaction: tokens before/after, archive reference, summarizer."""
    stop_reason: NotRequired[str]
    """Why the run stopped, when it did."""
