"""The markers this package leaves, for UIs and your own code to recognise.

Every message this package creates or changes carries a plain dict under
``message.response_metadata[META_KEY]``: provider integrations never send it to the API, it
survives LangGraph checkpointing and ``messages_to_dict``, and a UI can read it to render
summaries, placeholders and stop messages differently. :func:`kind_of` says which of the
``KIND_*`` a message is; :func:`get_meta` returns the whole dict (``archive_ref``,
``saved_tokens``, ``count`` on a boundary, ...).

Graph runs also report what they did: custom stream events under :data:`EVENT_KEY`
(``stream_mode="custom"``) and the ``transition`` state key (:data:`Transition`).

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> kind_of(HumanMessage("hi")) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import BaseMessage

META_KEY = "langchain_compact"
"""Key under ``response_metadata`` of this package's marker dict."""

EVENT_KEY = "langchain_compact"
"""Key of the custom stream events (``stream_mode="custom"``): ``micro_compaction``,
``compaction``, ``over_trigger``, ``stop``."""

PROVIDER_WINDOW_KEY = "provider_window"
"""Marker key: the window (in the compactor's count) a provider's refusal for length taught
the thread, on the boundary (every later compaction carries it on) or, when the recovery
reduced the history without compacting it, on the messages it reduced
(:meth:`~langchain_compact.core.Compactor.overflow`)."""

#: ``kind`` values.
KIND_CLEARED = "cleared"  # tool result whose content was replaced by a placeholder (B3)
KIND_TRUNCATED = "truncated"  # oversized tool result cut to head + tail (B4)
KIND_SUMMARY = "summary"  # a compaction summary; also the boundary marker (B5)
KIND_PINNED_TASK = "pinned_task"  # the user's original task, pinned verbatim (B5)
KIND_STOP = "stop"  # the message the stop node writes for the user (B6)

Action = Literal["continue", "compact", "stop"]
"""What to do before the next model call: call the model, compact first, or stop. The one
vocabulary of :func:`~langchain_compact.compaction.decide`, the graph's routing edge and the
middleware."""

Transition = Literal[
    "continue",
    "micro_compacted",
    "compacted",
    "nothing_to_compact",
    "summarizer_failed",
    "stopped",
]
"""What the last compaction step did (the ``transition`` state key): nothing
(``"continue"``), old tool results cleared (``"micro_compacted"``), a summary replaced the
history (``"compacted"``), a compaction found nothing to take (``"nothing_to_compact"``) or
every summarizer failed (``"summarizer_failed"``), the run ended with a message to the user
(``"stopped"``)."""


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


def credited_savings(meta: dict[str, Any]) -> int:
    """What a reduced message credits the usage report it was reduced after: the tokens it
    saved (``saved_tokens``, the configured counter's units), never more than tiktoken's
    count of them (``saved_precise``) when one was recorded. A report is in the provider's
    tokens; a credit in an estimate that errs high would count the context low, and the
    next call would go over the window."""
    saved = int(meta.get("saved_tokens", 0))
    precise = meta.get("saved_precise")
    return min(saved, int(precise)) if isinstance(precise, int) else saved
