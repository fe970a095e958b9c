"""A sub-agent's compaction kept to itself (docs/design.md, B15).

A compacting agent run inside another graph (a node of a supervisor sharing ``messages``, a
``Send`` target, an agent invoked from a node or a tool) returns its state to the parent,
which merges the message list by id (``add_messages``): a placeholder written under an
original's id would replace the parent's original, and a summary would be added to the
parent's history. So, inside another graph, compaction never writes the shared message
list: the compacted list the model is called with (the *view*) is kept under the private
state key :data:`VIEW_KEY`, with the id of the last shared message it covers, and each
turn reads the view followed by the shared messages added since. The shared list gets only
what the agent itself adds (its replies, tool calls and results, a stop message), so the
parent's history keeps what the parent had.

A graph knows it runs inside another from its run config: LangGraph's ``checkpoint_ns``
of a node is ``parent_node:task|...|node:task``, one ``|`` per level, so a node of a top
level graph has none. The record names the namespace that wrote it (:func:`private_owner`)
and is read only there: a parent whose schema has the same key never takes a worker's view
for its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = [
    "NS_SEP",
    "VIEW_KEY",
    "current_owner",
    "in_nested_run",
    "private_owner",
    "view_of",
    "view_record",
]

#: The private state key of a sub-agent's compacted view.
VIEW_KEY = "compaction_view"
#: LangGraph's separator of levels in ``checkpoint_ns``.
NS_SEP = "|"


def private_owner(run_config: Mapping[str, Any] | None, share: bool = False) -> str | None:
    """The namespace of the graph this step runs in, when that graph runs inside another
    and its compaction stays private; ``None`` at the top level, outside a run, or with
    ``share`` (``CompactionConfig.share_compaction``)."""
    if share or not run_config:
        return None
    configurable = run_config.get("configurable") or {}
    ns = configurable.get("checkpoint_ns") if isinstance(configurable, Mapping) else None
    if not isinstance(ns, str) or NS_SEP not in ns:
        return None
    return ns.rsplit(NS_SEP, 1)[0]


def current_owner(share: bool = False) -> str | None:
    """:func:`private_owner` of the run this is called in (an edge has no config
    argument); ``None`` outside a run."""
    if share:
        return None
    try:
        from langgraph.config import get_config

        return private_owner(get_config())
    except RuntimeError:
        return None


def in_nested_run() -> bool:
    """Whether this is called in a graph run inside another graph (``checkpoint_ns`` holds
    :data:`NS_SEP`), whether or not its compaction stays private; ``False`` outside a run
    or without LangGraph."""
    try:
        return current_owner() is not None
    except ImportError:
        return False


def view_of(shared: Sequence[BaseMessage], record: Any, owner: str | None) -> Sequence[BaseMessage]:
    """What the model reads: the view ``record`` keeps followed by the shared messages
    added after the one it covers; ``shared`` itself (the same object) when there is no
    record for ``owner`` or the shared list no longer holds the message it covers."""
    if owner is None or not isinstance(record, Mapping) or record.get("owner") != owner:
        return shared
    view = record.get("messages")
    covers = record.get("covers")
    if not isinstance(view, list) or not view or covers is None:
        return shared
    for j in range(len(shared) - 1, -1, -1):
        if shared[j].id == covers:
            return [*view, *shared[j + 1 :]]
    return shared


def view_record(
    view: Sequence[BaseMessage], owner: str, shared: Sequence[BaseMessage]
) -> dict[str, Any]:
    """The :data:`VIEW_KEY` value: the compacted ``view`` of ``shared`` (it covers its
    last message), written by the graph in ``owner``."""
    covers = shared[-1].id if shared else None
    return {"owner": owner, "covers": covers, "messages": list(view)}
