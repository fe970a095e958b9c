"""Offline demo workload: a dependent multi-step task and a scripted context-reading model.

:class:`DependentTask` is the seed articles' N-step dependent computation with large tool outputs;
:class:`ContextReadingPolicy` is a chat model that continues it only from what its context
still shows, so a fact lost to truncation or bad compaction becomes a failed run.

Example:
    >>> from langchain_compact.demo import ContextReadingPolicy, DependentTask
    >>> task = DependentTask(steps=3, payload_chars=200)
    >>> model = ContextReadingPolicy().bind_tools(task.tools())
    >>> model.invoke(task.prompt()).tool_calls[0]["name"]
    'run_step'
"""

from langchain_compact.demo.policy import ContextReadingPolicy, ContextView, read_context
from langchain_compact.demo.task import DependentTask, TaskVerdict
from langchain_compact.demo.tool_only import ToolOnlyPolicy, tool_only_tools

__all__ = [
    "ContextReadingPolicy",
    "ContextView",
    "DependentTask",
    "TaskVerdict",
    "ToolOnlyPolicy",
    "read_context",
    "tool_only_tools",
]
