"""Private: finding messages in archive records (:mod:`langchain_compact.archive`).

Keyword, tool-call-id and message-id search over :class:`~langchain_compact._archive_records.Record`
objects (ranked, deduplicated, placeholders skipped), hits turned back into messages, and
the paging of rendered text. Search works on the ``messages_to_dict`` form, so only the
hits are turned back into messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

from langchain_compact._archive_records import Record
from langchain_compact.errors import ArchiveError
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, META_KEY

#: Marker kinds whose content is a placeholder, not an original: never a search hit.
_PLACEHOLDER_KINDS = frozenset({KIND_CLEARED, KIND_TRUNCATED})


def _marker(data: Mapping[str, Any]) -> Mapping[str, Any]:
    marker = (data.get("response_metadata") or {}).get(META_KEY)
    return marker if isinstance(marker, dict) else {}


def _is_placeholder(data: Mapping[str, Any]) -> bool:
    return _marker(data).get("kind") in _PLACEHOLDER_KINDS


def is_derived(data: Mapping[str, Any]) -> bool:
    """Whether a serialised message is a version this package derived from an original (a
    pinned task cut to fit the window, a cut result), not the original itself."""
    marker = _marker(data)
    return bool(marker.get("truncated")) or marker.get("kind") in _PLACEHOLDER_KINDS


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
    Placeholders left by micro-compaction are skipped (they are not originals). A matching
    message archived more than once (same type and id) is returned once: originals are
    immutable, so it is its first archived original, and a version derived from it (a
    pinned task cut to fit the window, archived when it was cut again) only when no
    original of it matches.

    Returns:
        ``(ref, index, serialised message)`` tuples, at most ``limit``, after ``offset``.
    """
    words = _search_words(query, tool_call_id, message_id, limit, offset)
    whole = [re.compile(rf"(?<!\w){re.escape(word)}(?!\w)") for word in words]
    hits = _Hits()
    order = 0
    for record in records:
        for index in range(len(record.messages) - 1, -1, -1):
            order += 1
            message = record.messages[index]
            data = message.get("data") or {}
            if not _selected(data, tool_call_id, message_id):
                continue
            score = _score(record.text(index), words, whole) if words else (0, 0, 0)
            if score is not None:
                hits.add((score, order, record.ref, index, message), data)
    # Every record is read: the first archived version of a message may be the oldest.
    found = hits.ranked()
    return [(ref, index, message) for _, _, ref, index, message in found[offset : offset + limit]]


def _search_words(
    query: str | None,
    tool_call_id: str | None,
    message_id: str | None,
    limit: int,
    offset: int,
) -> list[str]:
    """The query's words (none without a query), after checking the criteria."""
    if query is None and tool_call_id is None and message_id is None:
        raise ArchiveError("search needs a query, a tool_call_id or a message_id.")
    _check_int("limit", limit, 1)
    _check_int("offset", offset, 0)
    words = query.lower().split() if query is not None else []
    if query is not None and not words:
        raise ArchiveError("query is empty; pass one or more keywords.")
    return words


def _check_int(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ArchiveError(f"{name} must be an int >= {least}, got {value!r}.")


def _selected(data: Mapping[str, Any], tool_call_id: str | None, message_id: str | None) -> bool:
    """Whether a serialised message meets the id criteria and is an original."""
    if tool_call_id is not None and data.get("tool_call_id") != tool_call_id:
        return False
    if message_id is not None and data.get("id") != message_id:
        return False
    return not _is_placeholder(data)


_Score = tuple[int, int, int]
_Hit = tuple[_Score, int, str, int, Mapping[str, Any]]


def _score(text: str, words: list[str], whole: list[re.Pattern[str]]) -> _Score | None:
    """A keyword hit's rank (lowest first), ``None`` when a word is missing from ``text``."""
    if not all(word in text for word in words):
        return None
    exact = [len(pattern.findall(text)) for pattern in whole]
    return (
        -sum(1 for n in exact if n),  # query words present as whole words
        -sum(exact),
        -sum(text.count(word) for word in words),
    )


class _Hits:
    """Search hits, a message archived more than once (same type and id) held once."""

    def __init__(self) -> None:
        self.chosen: dict[tuple[str, str], int] = {}  # (type, id) -> its entry in hits
        self.hits: list[_Hit | None] = []

    def add(self, hit: _Hit, data: Mapping[str, Any]) -> None:
        if isinstance(data.get("id"), str):
            key = (str(hit[4].get("type")), data["id"])
            if key in self.chosen:  # an older version (records come newest first)
                earlier = self.hits[self.chosen[key]]
                if earlier is not None and is_derived(data) > is_derived(
                    earlier[4].get("data") or {}
                ):
                    return  # a derived version never displaces an original
                self.hits[self.chosen[key]] = None
            self.chosen[key] = len(self.hits)
        self.hits.append(hit)

    def ranked(self) -> list[_Hit]:
        return sorted((hit for hit in self.hits if hit is not None), key=lambda h: (h[0], h[1]))


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
