"""Graph state for compaction: ``MessagesState`` plus what routing reports.

The keys themselves (:class:`~langchain_compact.core.CompactionKeys`) are the core's: the
middleware's state has them too. They are re-exported here, where they were defined.
"""

from __future__ import annotations

from typing import Annotated, Any, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langchain_compact.core import CompactionKeys
from langchain_compact.markers import Transition

__all__ = ["CompactionKeys", "CompactionState", "Transition", "compaction_state"]


class CompactionState(MessagesState, CompactionKeys):
    """``MessagesState`` plus the keys compaction writes (:class:`CompactionKeys`).

    Example:
        >>> from langgraph.graph import StateGraph
        >>> builder = StateGraph(CompactionState)
        >>> sorted(CompactionState.__annotations__)  # doctest: +NORMALIZE_WHITESPACE
        ['compaction_count', 'compaction_view', 'last_compaction', 'messages',
         'prepared_summary', 'stop_reason', 'transition']
    """


def compaction_state(messages_key: str = "messages") -> type[Any]:
    """The schema the compaction nodes read: :class:`CompactionState`, or the same keys
    with the message list under ``messages_key`` (a node's input schema filters the
    state, so a list under another key would not reach the nodes).

    Example:
        >>> sorted(compaction_state("history").__annotations__)[:3]
        ['compaction_count', 'compaction_view', 'history']
    """
    if messages_key == "messages":
        return CompactionState
    fields: dict[str, Any] = dict(get_type_hints(CompactionKeys, include_extras=True))
    fields[messages_key] = Annotated[list[AnyMessage], add_messages]
    name = f"CompactionState_{messages_key}"
    schema: type[Any] = TypedDict(name, fields)  # type: ignore[misc]
    return schema
