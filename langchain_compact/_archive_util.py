"""Private helpers for :mod:`langchain_compact.archive`.

Serialisation and content hashing, safe folder names for thread ids, refs, a bounded cache,
and the search engine both archives share (JSONL files are in ``_archive_files``). Search
works on the ``messages_to_dict`` form, so only the hits are turned back into messages.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

from langchain_compact.errors import ArchiveError
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, META_KEY

REF_PREFIX = "transcript_"
_REF_RE = re.compile(r"^transcript_(\d{8}T\d{12}Z)_([0-9a-f]{16})$")
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
#: Marker kinds whose content is a placeholder, not an original: never a search hit.
_PLACEHOLDER_KINDS = frozenset({KIND_CLEARED, KIND_TRUNCATED})
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ENCODING = "utf-8"
_ERRORS = "surrogatepass"  # lone surrogates in model output must not make a write fail


# --- serialisation ---------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    """Store values JSON cannot hold: pydantic models as their JSON form, else ``repr``."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys, no whitespace, unicode kept)."""
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default
    )


@dataclass(frozen=True, slots=True)
class SerialisedBatch:
    """Messages in ``messages_to_dict`` form, one canonical JSON line each, and their hash."""

    lines: list[str]
    digest: str

    @property
    def dicts(self) -> list[dict[str, Any]]:
        """The JSON-normalised message dicts (what a read gives back)."""
        return [json.loads(line) for line in self.lines]


def serialise(messages: Sequence[BaseMessage]) -> SerialisedBatch:
    """Serialise ``messages`` and hash them (sha256 over the canonical lines)."""
    lines = [dumps(d) for d in messages_to_dict(list(messages))]
    digest = hashlib.sha256("\n".join(lines).encode(_ENCODING, _ERRORS)).hexdigest()
    return SerialisedBatch(lines=lines, digest=digest)


def encode(text: str) -> bytes:
    """Encode archive text (the inverse of :func:`decode`)."""
    return text.encode(_ENCODING, _ERRORS)


def decode(data: bytes) -> str:
    """Decode archive bytes written by :func:`encode`."""
    return data.decode(_ENCODING, _ERRORS)


# --- names -----------------------------------------------------------------------------


def thread_key(thread_id: str) -> str:
    """Map any thread id to a safe, unique folder name / namespace label.

    A readable slug (letters, digits, ``-``, ``_``; never ``.``, ``/`` or NUL) plus 12 hex
    digits of sha256 over the raw id, so two different ids never share a key.
    """
    if not isinstance(thread_id, str):
        raise ArchiveError(f"thread_id must be a str, got {type(thread_id).__name__}.")
    slug = _SLUG_UNSAFE.sub("-", thread_id).strip("-_")[:40] or "thread"
    return f"{slug}-{hashlib.sha256(encode(thread_id)).hexdigest()[:12]}"


_clock_lock = threading.Lock()
_last_us = 0


def new_timestamp() -> tuple[str, str]:
    """Return ``(compact UTC stamp for refs, ISO 8601 created_at)`` for now.

    Strictly increasing within the process (by at least a microsecond), so refs written one
    after another always sort in write order.
    """
    global _last_us
    with _clock_lock:
        _last_us = max(time.time_ns() // 1000, _last_us + 1)
        now = _EPOCH + timedelta(microseconds=_last_us)
    return now.strftime("%Y%m%dT%H%M%S%fZ"), now.isoformat()


def make_ref(stamp: str, digest: str) -> str:
    """Build a ref: ``transcript_<UTC stamp>_<16 hex of the content hash>`` (sorts by time)."""
    return f"{REF_PREFIX}{stamp}_{digest[:16]}"


def parse_ref(ref: str) -> str:
    """Return the short hash inside ``ref``; raise :class:`ArchiveError` if malformed."""
    match = _REF_RE.match(ref) if isinstance(ref, str) else None
    if match is None:
        raise ArchiveError(
            f"{ref!r} is not an archive ref; refs look like "
            "'transcript_20250101T120000000000Z_0123456789abcdef' (see archive.refs())."
        )
    return match.group(2)


def is_ref(name: str) -> bool:
    """Whether ``name`` is a well-formed ref."""
    return _REF_RE.match(name) is not None


# --- search ----------------------------------------------------------------------------


def _message_text(data: Mapping[str, Any]) -> str:
    """Searchable text of one serialised message: content, name, tool-call names and args."""
    parts: list[str] = []
    content = data.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
    if isinstance(data.get("name"), str):
        parts.append(data["name"])
    for call in data.get("tool_calls") or ():
        if isinstance(call, dict):
            parts.append(f"{call.get('name', '')} {dumps(call.get('args', {}))}")
    return "\n".join(parts)


class Record:
    """One archive record in search form: its ref and its messages as dicts.

    The lower-cased search text of a message is computed on first use and kept, so cached
    records (files and store items never change under a ref) answer keyword queries fast.
    """

    __slots__ = ("_texts", "messages", "ref")

    def __init__(self, ref: str, messages: Sequence[Mapping[str, Any]]) -> None:
        self.ref = ref
        self.messages = messages
        self._texts: list[str | None] = [None] * len(messages)

    def text(self, index: int) -> str:
        """Lower-cased searchable text of message ``index``."""
        text = self._texts[index]
        if text is None:
            text = self._texts[index] = _message_text(self.messages[index].get("data", {})).lower()
        return text


class BoundedCache:
    """A thread-safe LRU cache bounded by entries and by an estimate of the bytes it holds."""

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        """The cached value for ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        """Cache ``value`` (about ``size`` bytes), evicting the least recently used."""
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            while self._items and (
                len(self._items) >= self.max_entries or self._bytes + size > self.max_bytes
            ):
                self._bytes -= self._items.popitem(last=False)[1][1]
            self._items[key] = (value, size)
            self._bytes += size

    def cache_clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()
            self._bytes = 0


def _record_bytes(messages: Sequence[Mapping[str, Any]]) -> int:
    """Rough size of a record in memory: its contents twice (originals and search text)."""
    size = 0
    for message in messages:
        content = (message.get("data") or {}).get("content")
        size += 200 + 2 * len(content if isinstance(content, str) else str(content))
    return size


class RecordCache:
    """Records by (namespace, ref), bounded by entries and bytes; valid forever since a ref
    names its content."""

    def __init__(self, maxsize: int = 1024, max_bytes: int = 64 << 20) -> None:
        self._cache = BoundedCache(max_entries=maxsize, max_bytes=max_bytes)

    def get(
        self, namespace: tuple[str, ...], ref: str, messages: Sequence[Mapping[str, Any]]
    ) -> Record:
        """The cached record for ``ref``, built from ``messages`` the first time."""
        key = (namespace, ref)
        record = self._cache.get(key)
        if record is None:
            record = Record(ref, messages)
            self._cache.put(key, record, _record_bytes(messages))
        return record


def _is_placeholder(data: Mapping[str, Any]) -> bool:
    marker = (data.get("response_metadata") or {}).get(META_KEY)
    return isinstance(marker, dict) and marker.get("kind") in _PLACEHOLDER_KINDS


def search_records(
    records: Iterable[Record],
    *,
    query: str | None,
    tool_call_id: str | None,
    message_id: str | None,
    limit: int,
    offset: int,
) -> list[tuple[str, int, Mapping[str, Any]]]:
    """Find messages in ``records`` (newest record first); criteria combine with AND.

    Keyword hits rank first by whole-word matches (``step1`` matches the word ``step1`` but
    only part of ``step11``), then by how often the words occur at all, then newest first.
    Placeholders left by
    micro-compaction are skipped (they are not originals), and a matching message archived
    more than once (same type and id) is returned once, from its newest record.

    Returns:
        ``(ref, index, serialised message)`` tuples, at most ``limit``, after ``offset``.
    """
    if query is None and tool_call_id is None and message_id is None:
        raise ArchiveError("search needs a query, a tool_call_id or a message_id.")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ArchiveError(f"limit must be an int >= 1, got {limit!r}.")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ArchiveError(f"offset must be an int >= 0, got {offset!r}.")
    words = query.lower().split() if query is not None else []
    if query is not None and not words:
        raise ArchiveError("query is empty; pass one or more keywords.")
    whole = [re.compile(rf"(?<!\w){re.escape(word)}(?!\w)") for word in words]
    seen: set[tuple[str, str]] = set()
    hits: list[tuple[tuple[int, int, int], int, str, int, Mapping[str, Any]]] = []
    order = 0
    for record in records:
        for index in range(len(record.messages) - 1, -1, -1):
            order += 1
            message = record.messages[index]
            data = message.get("data") or {}
            if tool_call_id is not None and data.get("tool_call_id") != tool_call_id:
                continue
            if message_id is not None and data.get("id") != message_id:
                continue
            if _is_placeholder(data):
                continue
            score = (0, 0, 0)
            if words:
                text = record.text(index)
                if not all(word in text for word in words):
                    continue
                exact = [len(pattern.findall(text)) for pattern in whole]
                score = (
                    -sum(1 for n in exact if n),  # query words present as whole words
                    -sum(exact),
                    -sum(text.count(word) for word in words),
                )
            if isinstance(data.get("id"), str):
                key = (str(message.get("type")), data["id"])
                if key in seen:
                    continue
                seen.add(key)
            hits.append((score, order, record.ref, index, message))
        if not words and len(hits) >= offset + limit:
            break  # no ranking by hits: the first found are the newest
    hits.sort(key=lambda hit: (hit[0], hit[1]))
    return [(ref, index, message) for _, _, ref, index, message in hits[offset : offset + limit]]


def paginate(text: str, *, page: int, size: int) -> tuple[str, int]:
    """Return page ``page`` (1-based) of ``text`` cut in ``size``-char slices, and the count."""
    pages = max(1, -(-len(text) // size))
    if page > pages:
        return "", pages
    return text[(page - 1) * size : page * size], pages


def hits_to_messages(
    found: list[tuple[str, int, Mapping[str, Any]]],
) -> list[tuple[str, int, BaseMessage]]:
    """Turn search hits back into message objects (one ``messages_from_dict`` call)."""
    messages = messages_from_dict([dict(m) for _, _, m in found])
    return [(ref, index, m) for (ref, index, _), m in zip(found, messages, strict=True)]


# --- the archive base class -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    """A message found in the archive.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_compact import StoreArchive
        >>> archive = StoreArchive(InMemoryStore())
        >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
        ...                     thread_id="t", reason="compaction")
        >>> hit = archive.search(thread_id="t", tool_call_id="call_1")[0]
        >>> hit.ref == ref, hit.index, hit.message.content
        (True, 0, '42')
    """

    ref: str
    """The archive record it came from."""
    index: int
    """Its position inside that record."""
    message: BaseMessage
    """The original message, as it was written."""


def header(
    ref: str, thread_id: str, reason: str, metadata: Mapping[str, Any] | None, count: int
) -> dict[str, Any]:
    """The record header: what was archived, when, why, and how many messages."""
    return {
        "ref": ref,
        "thread_id": thread_id,
        "reason": str(reason),
        "created_at": new_timestamp()[1],
        "metadata": json.loads(dumps(dict(metadata or {}))),
        "count": count,
    }


class ArchiveBase:
    """Shared read/search logic; subclasses provide ``write``, ``_get`` and ``_load``."""

    def _get(self, ref: str, thread_id: str) -> Record:
        raise NotImplementedError

    def _load(self, thread_id: str) -> Iterable[Record]:
        """The thread's records, newest first."""
        raise NotImplementedError

    async def _aget(self, ref: str, thread_id: str) -> Record:
        return await asyncio.to_thread(self._get, ref, thread_id)

    async def _aload(self, thread_id: str) -> Iterable[Record]:
        return await asyncio.to_thread(lambda: list(self._load(thread_id)))

    def read(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        """Return the messages archived under ``ref`` for ``thread_id``.

        Example:
            >>> from langchain_core.messages import ToolMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_compact import StoreArchive
            >>> archive = StoreArchive(InMemoryStore())
            >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
            ...                     thread_id="t", reason="compaction")
            >>> [m.content for m in archive.read(ref, thread_id="t")]
            ['42']
        """
        return messages_from_dict([dict(m) for m in self._get(ref, thread_id).messages])

    async def aread(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        """Async :meth:`read`."""
        return messages_from_dict([dict(m) for m in (await self._aget(ref, thread_id)).messages])

    def refs(self, *, thread_id: str) -> list[str]:
        """Every ref archived for ``thread_id``, oldest first.

        Example:
            >>> from langchain_core.messages import ToolMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_compact import StoreArchive
            >>> archive = StoreArchive(InMemoryStore())
            >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
            ...                     thread_id="t", reason="compaction")
            >>> archive.refs(thread_id="t") == [ref], archive.refs(thread_id="other")
            (True, [])
        """
        return [record.ref for record in reversed(list(self._load(thread_id)))]

    def search(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]:
        """Find archived messages of ``thread_id``; the criteria given combine with AND.

        ``query`` keywords must all appear (case-insensitive, in content, tool name or tool
        arguments); whole-word hits rank first, then by occurrences, then newest first.
        ``tool_call_id`` finds the tool result of that call; ``message_id`` the message with
        that id. Placeholders left by micro-compaction are skipped, and a message archived
        twice is returned once.

        Example:
            >>> from langchain_core.messages import ToolMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_compact import StoreArchive
            >>> archive = StoreArchive(InMemoryStore())
            >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
            ...                     thread_id="t", reason="compaction")
            >>> [h.message.content for h in archive.search(thread_id="t", query="42")]
            ['42']
        """
        found = search_records(
            self._load(thread_id),
            query=query,
            tool_call_id=tool_call_id,
            message_id=message_id,
            limit=limit,
            offset=offset,
        )
        return [ArchivedMessage(*hit) for hit in hits_to_messages(found)]

    async def asearch(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]:
        """Async :meth:`search`."""
        found = search_records(
            await self._aload(thread_id),
            query=query,
            tool_call_id=tool_call_id,
            message_id=message_id,
            limit=limit,
            offset=offset,
        )
        return [ArchivedMessage(*hit) for hit in hits_to_messages(found)]
