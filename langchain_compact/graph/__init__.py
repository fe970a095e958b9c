"""LangGraph integration: state schema, nodes, routing edges, wiring, prebuilt agent."""

from langchain_compact._defaults import resolve_context_window
from langchain_compact.graph.agent import create_compacting_agent
from langchain_compact.graph.nodes import CompactionNodes
from langchain_compact.graph.ondemand import compact_thread, make_compact_tool
from langchain_compact.graph.state import CompactionState
from langchain_compact.graph.wiring import add_compaction

__all__ = [
    "CompactionNodes",
    "CompactionState",
    "add_compaction",
    "compact_thread",
    "create_compacting_agent",
    "make_compact_tool",
    "resolve_context_window",
]
