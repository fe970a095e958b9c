"""Private: the archive's record format (:mod:`langchain_compact.archive`).

Canonical JSON and content hashes of serialised messages, safe folder names for thread ids,
refs (``transcript_<UTC stamp>_<hash>``), record headers, and :class:`Record`, a record in
the ``messages_to_dict`` form that search works on, with bounded caches of them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from langchain_core.messages import BaseMessage, messages_to_dict

from langchain_compact.errors import ArchiveError

REF_PREFIX = "transcript_"
_REF_RE = re.compile(r"^transcript_(\d{8}T\d{12}Z)_([0-9a-f]{16})$")
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
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


#: Characters of a long line encoded at a time when it is hashed or written (the memory a
#: huge tool result costs in an archive write stays a bounded slice beyond its JSON line).
_PIECE_CHARS = 1 << 20


def _pieces(line: str) -> Iterator[bytes]:
    """``encode(line)`` in order, a bounded slice at a time (the same bytes: UTF-8 with
    ``surrogatepass`` encodes each character on its own)."""
    for i in range(0, len(line), _PIECE_CHARS):
        yield line[i : i + _PIECE_CHARS].encode(_ENCODING, _ERRORS)


def digest_lines(lines: Sequence[str]) -> str:
    """The content hash of serialised messages (sha256 over their canonical lines joined by
    line breaks, fed a slice at a time: never one joined copy of them)."""
    h = hashlib.sha256()
    for i, line in enumerate(lines):
        if i:
            h.update(b"\n")
        for piece in _pieces(line):
            h.update(piece)
    return h.hexdigest()


def record_pieces(header_line: str, lines: Sequence[str]) -> Iterator[bytes]:
    """The bytes of a record file (the header line, then one line per message, each ending
    in a line break), in bounded pieces: ``encode("\n".join([header, *lines]) + "\n")``
    without building it."""
    for line in (header_line, *lines):
        yield from _pieces(line)
        yield b"\n"


def serialise(messages: Sequence[BaseMessage]) -> SerialisedBatch:
    """Serialise ``messages`` and hash them (sha256 over the canonical lines)."""
    lines = [dumps(d) for d in messages_to_dict(list(messages))]
    return SerialisedBatch(lines=lines, digest=digest_lines(lines))


def encode(text: str) -> bytes:
    """Encode archive text (the inverse of :func:`decode`)."""
    return text.encode(_ENCODING, _ERRORS)


def decode(data: bytes) -> str:
    """Decode archive bytes written by :func:`encode`."""
    return data.decode(_ENCODING, _ERRORS)


# --- names and refs --------------------------------------------------------------------


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


# --- records in search form --------------------------------------------------------------


def message_text(data: Mapping[str, Any]) -> str:
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
            text = self._texts[index] = message_text(self.messages[index].get("data", {})).lower()
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

    @property
    def cached_bytes(self) -> int:
        """The estimated bytes held now (at most ``max_bytes``)."""
        return self._bytes

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
