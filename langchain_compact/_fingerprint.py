"""The fingerprint of a message as the model reads it, and the lineage of a placeholder.

A summary prepared ahead of the trigger (:mod:`langchain_compact._prepare`) is used only
when every message of its span is still what it summarised. :func:`message_key` hashes
everything of a message that reaches the model or the summarizer: its type, content and
``name``, ``additional_kwargs`` (function calls, reasoning, provider fields), an
``AIMessage``'s tool calls (id, name, args) and invalid tool calls, a ``ToolMessage``'s
``tool_call_id``, ``status`` and ``artifact``. Not hashed: ``id`` (checked on its own),
``response_metadata`` and ``usage_metadata`` (the provider's report on a reply, never sent
back; this package's markers live there and change when a placeholder is tagged).

A cleared or cut message (a placeholder) differs from the original the summary read, so
it is accepted only as a placeholder *of that original*: every micro-compaction step
(:func:`~langchain_compact._ops.archive_and_tag`) records on the placeholder the keys of
the originals it descends from (``from_keys``) and its own key (``key``). A placeholder
edited afterwards (its marker still there) no longer matches its own ``key``; one made
from another message does not list the original's key.

Hashing streams the text of each part (no JSON escaping of a long string), once per span
message per check: linear in the span, as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_compact.markers import get_meta

__all__ = ["is_placeholder_of", "lineage", "message_key"]

#: Marker keys of a placeholder's lineage.
FROM_KEYS, OWN_KEY = "from_keys", "key"
#: Originals remembered per placeholder (a result cut, then cleared: two).
MAX_LINEAGE = 4


def _plain(value: Any) -> Any:
    """A JSON-able stand-in for an object json cannot write (a pydantic model or dataclass
    by its fields, anything else by its type: stable across processes, unlike a repr)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(bytes(value)).hexdigest()
    if isinstance(value, (set, frozenset)):
        return sorted(map(str, value))
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def message_key(message: BaseMessage) -> str:
    """The fingerprint of ``message`` as the model reads it (see the module docstring).

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> a = ToolMessage("ok", tool_call_id="c1")
        >>> message_key(a) == message_key(a.model_copy(update={"status": "error"}))
        False
    """
    h = hashlib.sha256()

    def part(value: Any) -> None:
        if isinstance(value, str):
            raw = value.encode("utf-8", "surrogatepass")
        else:
            raw = json.dumps(value, sort_keys=True, default=_plain).encode()
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)

    part(message.type)
    part(message.content)
    part(message.name or "")
    part(message.additional_kwargs or {})
    if isinstance(message, AIMessage):
        part([[c.get("id"), c.get("name"), c.get("args")] for c in message.tool_calls])
        part(message.invalid_tool_calls or [])
    elif isinstance(message, ToolMessage):
        part(message.tool_call_id)
        part(message.status)
        part(message.artifact)
    return h.hexdigest()[:16]


def lineage(before: BaseMessage, after: BaseMessage) -> dict[str, Any]:
    """The marker fields that make ``after`` a recognised placeholder of ``before``: the
    keys of ``before`` and of the originals it descends from, and ``after``'s own key."""
    meta = get_meta(before)
    current = message_key(before)
    known = [k for k in meta.get(FROM_KEYS) or [] if isinstance(k, str)]
    # A placeholder still as it was made stands for its originals too; an edited one (or
    # an original) only for what it is now.
    keys = [*known, current] if meta.get(OWN_KEY) == current else [current]
    return {FROM_KEYS: keys[-MAX_LINEAGE:], OWN_KEY: message_key(after)}


def is_placeholder_of(message: BaseMessage, key: str) -> bool:
    """Whether ``message`` is an unedited placeholder made (directly or through another
    placeholder) from a message whose :func:`message_key` was ``key``."""
    meta = get_meta(message)
    froms = meta.get(FROM_KEYS)
    if not isinstance(froms, list) or key not in froms:
        return False
    return meta.get(OWN_KEY) == message_key(message)
