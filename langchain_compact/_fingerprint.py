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


#: A message whose text content is longer than this has its key remembered, per (length,
#: hash) of the text and the key of everything else: a huge result is checked on every
#: turn while it stays in a span, and would be encoded and hashed whole each time.
_MEMO_ABOVE = 1 << 16
_KEY_MEMO: dict[tuple[int, int, str], str] = {}
_KEY_MEMO_LIMIT = 256
#: Characters of a long text encoded at a time (the memory a key costs stays bounded).
_CHUNK_CHARS = 1 << 20


def _update(h: Any, value: str) -> None:
    """Feed ``value`` to ``h`` as its UTF-8 length (8 bytes) then its UTF-8 bytes, exactly
    as one ``encode`` would, a bounded slice at a time."""
    if len(value) <= _CHUNK_CHARS:
        raw = value.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)
        return
    size = 0
    for i in range(0, len(value), _CHUNK_CHARS):
        size += len(value[i : i + _CHUNK_CHARS].encode("utf-8", "surrogatepass"))
    h.update(size.to_bytes(8, "little"))
    for i in range(0, len(value), _CHUNK_CHARS):
        h.update(value[i : i + _CHUNK_CHARS].encode("utf-8", "surrogatepass"))


def _key(message: BaseMessage, content: bool = True) -> str:
    h = hashlib.sha256()

    def part(value: Any) -> None:
        if isinstance(value, str):
            _update(h, value)
        else:
            raw = json.dumps(value, sort_keys=True, default=_plain).encode()
            h.update(len(raw).to_bytes(8, "little"))
            h.update(raw)

    part(message.type)
    if content:
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


def message_key(message: BaseMessage) -> str:
    """The fingerprint of ``message`` as the model reads it (see the module docstring).

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> a = ToolMessage("ok", tool_call_id="c1")
        >>> message_key(a) == message_key(a.model_copy(update={"status": "error"}))
        False
    """
    text = message.content
    if not isinstance(text, str) or len(text) <= _MEMO_ABOVE:
        return _key(message)
    memo = (len(text), hash(text), _key(message, content=False))
    found = _KEY_MEMO.get(memo)
    if found is None:
        found = _key(message)
        if len(_KEY_MEMO) >= _KEY_MEMO_LIMIT:
            _KEY_MEMO.clear()
        _KEY_MEMO[memo] = found
    return found


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
