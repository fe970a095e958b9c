"""Private: :class:`MemoryRecord`, what a thread leaves in the store (see ``memory``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)

from langchain_compact.errors import ConfigError
from langchain_compact.history import original_task_index
from langchain_compact.markers import (
    KIND_PINNED_TASK,
    KIND_SUMMARY,
    Boundary,
    kind_of,
    with_meta,
)

__all__ = ["MemoryRecord"]

_MEMORY_HEADER = (
    "[Memory from an earlier thread ({thread_id}), which compacted its context {count} time(s)"
    " and then ended. The original task is pinned above; what that thread did is summarised"
    " below (its archived originals stay in that thread). Continue the task from here.]\n\n"
)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """What a thread leaves behind: its pinned task and its summaries, as JSON-ready dicts."""

    task: dict[str, Any]
    """The pinned original task (``message_to_dict`` form)."""
    summaries: list[dict[str, Any]]
    """The summaries of the compacted history, oldest first (``message_to_dict`` form)."""
    thread_id: str
    """The thread that wrote it."""
    compaction_count: int
    """Index of the newest summary in that thread."""
    updated_at: str
    """UTC time of the write (ISO 8601)."""

    def to_value(self) -> dict[str, Any]:
        """The store item's value."""
        return {
            "task": self.task,
            "summaries": self.summaries,
            "thread_id": self.thread_id,
            "compaction_count": self.compaction_count,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> MemoryRecord:
        """Read a store item's value (e.g. from ``langgraph_sdk``'s ``client.store.get_item``).

        Raises:
            ConfigError: when ``value`` is not a memory record.
        """
        try:
            return cls(
                task=dict(value["task"]),
                summaries=[dict(s) for s in value["summaries"]],
                thread_id=str(value["thread_id"]),
                compaction_count=int(value["compaction_count"]),
                updated_at=str(value["updated_at"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"not a compaction memory record ({exc!r}); read the item a CompactionMemory "
                "wrote (keys task, summaries, thread_id, compaction_count, updated_at)."
            ) from None

    @classmethod
    def from_messages(cls, messages: Sequence[BaseMessage], *, thread_id: str) -> MemoryRecord:
        """Build the record from a compacted history.

        Raises:
            ConfigError: when the history has no task or no summary.
        """
        summaries = [m for m in messages if kind_of(m) == KIND_SUMMARY]
        pinned = [m for m in messages if kind_of(m) == KIND_PINNED_TASK]
        task_i = original_task_index(messages)
        task = pinned[0] if pinned else (messages[task_i] if task_i >= 0 else None)
        if task is None or not summaries:
            raise ConfigError(
                "memory is written from a compacted history (a pinned task and a summary); "
                "this one has " + ("no summary" if task is not None else "no task") + "."
            )
        if kind_of(task) != KIND_PINNED_TASK:
            task = with_meta(task, kind=KIND_PINNED_TASK)
        return cls(
            task=message_to_dict(task),
            summaries=[message_to_dict(m) for m in summaries],
            thread_id=thread_id,
            compaction_count=_index(summaries),
            updated_at=datetime.now(timezone.utc).isoformat(),
        )

    def seed_messages(self) -> list[BaseMessage]:
        """The first messages of a new thread: the pinned task, then one memory summary.

        The summary is a boundary marker numbered 0, so the new thread starts with its own
        compaction count at 0 and never summarises the memory away (it stays in the head).

        Example:
            >>> from langchain_core.messages import AIMessage
            >>> from langchain_compact import CompactionConfig
            >>> from langchain_compact.compaction import compact_history
            >>> history = [HumanMessage("Task: count to 9", id="t")]
            >>> history += [AIMessage(f"{i}", id=f"a{i}") for i in range(1, 9)]
            >>> done = compact_history(history, config=CompactionConfig(keep_last_n=2))
            >>> seed = MemoryRecord.from_messages(done.messages, thread_id="t1").seed_messages()
            >>> [m.text[:16] for m in seed]
            ['Task: count to 9', '[Memory from an ']
        """
        task, *summaries = messages_from_dict([self.task, *self.summaries])
        header = _MEMORY_HEADER.format(thread_id=self.thread_id, count=self.compaction_count)
        body = header + "\n\n".join(str(s.text) for s in summaries)
        cls = (
            SystemMessage if all(isinstance(s, SystemMessage) for s in summaries) else HumanMessage
        )
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        memory = with_meta(
            cls(body, id=f"lc-compact-memory-{digest}"),
            kind=KIND_SUMMARY,
            index=0,
            kept_ids=[],
            refill_streak=0,
            memory_from=self.thread_id,
            memory_compactions=self.compaction_count,
        )
        return [task, memory]


def _index(summaries: Sequence[BaseMessage]) -> int:
    """The compaction count the newest of ``summaries`` records (their number if none)."""
    index = Boundary.of(summaries[-1]).index
    return len(summaries) if index is None else index
