"""Metadata markers written on messages this package creates or changes.

Everything lives under ``message.response_metadata[META_KEY]`` (a plain dict), which
provider integrations never send to the API, which survives LangGraph checkpointing and
``messages_to_dict``, and which UIs can read to render summaries differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

META_KEY = "langchain_compact"

#: ``kind`` values.
KIND_CLEARED = "cleared"  # tool result whose content was replaced by a placeholder (B3)
KIND_TRUNCATED = "truncated"  # oversized tool result cut to head + tail (B4)
KIND_SUMMARY = "summary"  # a compaction summary; also the boundary marker (B5)
KIND_PINNED_TASK = "pinned_task"  # the user's original task, pinned verbatim (B5)
KIND_STOP = "stop"  # the message the stop node writes for the user (B6)


def get_meta(message: BaseMessage) -> dict[str, Any]:
    """Return this package's metadata on ``message`` (empty dict if none)."""
    meta = getattr(message, "response_metadata", None) or {}
    value = meta.get(META_KEY)
    return value if isinstance(value, dict) else {}


def kind_of(message: BaseMessage) -> str | None:
    """Return the marker kind of ``message`` or ``None``."""
    kind = get_meta(message).get("kind")
    return kind if isinstance(kind, str) else None


def with_meta(message: BaseMessage, **fields: Any) -> BaseMessage:
    """Return a copy of ``message`` whose marker dict is updated with ``fields``."""
    response_metadata = dict(getattr(message, "response_metadata", None) or {})
    merged = {**get_meta(message), **fields}
    response_metadata[META_KEY] = merged
    return message.model_copy(update={"response_metadata": response_metadata})


def newest_boundary(messages: Sequence[BaseMessage]) -> tuple[int, set[str]]:
    """Index of the newest compaction summary (the boundary, ``-1`` if none) and the ids of
    the messages that compaction kept verbatim after it."""
    for i in range(len(messages) - 1, -1, -1):
        if kind_of(messages[i]) == KIND_SUMMARY:
            return i, {str(k) for k in get_meta(messages[i]).get("kept_ids") or []}
    return -1, set()
