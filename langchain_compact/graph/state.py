"""Graph state for compaction: ``MessagesState`` plus what routing reports.

The keys themselves (:class:`~langchain_compact.core.CompactionKeys`) are the core's: the
middleware's state has them too. They are re-exported here, where they were defined.
"""

from __future__ import annotations

from langgraph.graph import MessagesState

from langchain_compact.core import CompactionKeys
from langchain_compact.markers import Transition

__all__ = ["CompactionKeys", "CompactionState", "Transition"]


class CompactionState(MessagesState, CompactionKeys):
    """``MessagesState`` plus the keys compaction writes (:class:`CompactionKeys`).

    Example:
        >>> from langgraph.graph import StateGraph
        >>> builder = StateGraph(CompactionState)
        >>> sorted(CompactionState.__annotations__)  # doctest: +NORMALIZE_WHITESPACE
        ['compaction_count', 'last_compaction', 'messages', 'prepared_summary',
         'stop_reason', 'transition']
    """
