"""What a compaction records on its boundary so a later list is judged against it.

Two facts about a compacted history stay true only as long as the list they were made for:

* **Which messages the summary replaced.** A parent graph that shares ``messages`` with a
  compacting worker (a subgraph node, ``Send``, a handoff) passes its own list down again,
  with the messages the worker's compaction took out: handed to the model again, they
  would be counted and sent twice, ahead of the summary that already replaced them. The
  boundary records, under :data:`REPLACED_KEY`, each removed message's id with the
  fingerprints it stood under (:func:`~langchain_compact._fingerprint.message_key`, and
  the originals a placeholder stood for). :func:`without_refed` drops, before the newest
  boundary, exactly the messages whose id *and* fingerprint match a record (a message
  edited since, or new, is never dropped; nothing dropped is lost: the compaction archived
  it and its summary stands for it).
* **Which usage reports describe another list.** A reply kept verbatim after the boundary
  keeps the usage report of the longer list it answered; a reply without an id (a history
  built from dicts or a transcript) or with an id another reply shares is not told apart
  by id. The boundary records, under :data:`STALE_REPORTS_KEY`, a key of each such report
  (:func:`report_key`: the reply's id, text, tool-call ids and numbers); a report whose key
  is listed never anchors a count (:func:`is_stale_report`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_compact._fingerprint import FROM_KEYS, OWN_KEY, is_placeholder_of, message_key
from langchain_compact.markers import KIND_SUMMARY, Boundary, get_meta, kind_of

__all__ = [
    "REPLACED_KEY",
    "STALE_REPORTS_KEY",
    "boundary_record",
    "is_stale_report",
    "report_key",
    "without_refed",
]

logger = logging.getLogger("langchain_compact")

#: Boundary marker key: ``{message id: [fingerprints]}`` of the messages the compaction
#: took out of the history.
REPLACED_KEY = "replaced"
#: Boundary marker key: the :func:`report_key` of each usage report on a kept reply.
STALE_REPORTS_KEY = "stale_reports"
#: Removed messages recorded at most on one boundary (the newest ones; an older one
#: handed back in is then only counted, as before this record existed).
MAX_REPLACED = 4_096


def report_key(message: BaseMessage) -> str | None:
    """A key of the usage report on ``message`` (``None`` when it carries none): its id,
    text, tool-call ids and reported numbers. Not its tool-call arguments, which a
    placeholder of long arguments changes."""
    if not isinstance(message, AIMessage) or not message.usage_metadata:
        return None
    usage = message.usage_metadata
    h = hashlib.sha256()
    calls = ",".join(str(c.get("id")) for c in message.tool_calls)
    numbers = f"{usage.get('input_tokens', 0)}/{usage.get('output_tokens', 0)}"
    for part in (str(message.id), message.text, calls, numbers):
        raw = part.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)
    return h.hexdigest()[:16]


def _keys(message: BaseMessage) -> list[str]:
    """The fingerprints a removed message stood under: its own, and when it is an unedited
    placeholder, those of the originals it stands for."""
    own = message_key(message)
    meta = get_meta(message)
    froms = meta.get(FROM_KEYS)
    if meta.get(OWN_KEY) == own and isinstance(froms, list):
        return [own, *(k for k in froms if isinstance(k, str))]
    return [own]


def boundary_record(removed: Sequence[BaseMessage], kept: Sequence[BaseMessage]) -> dict[str, Any]:
    """The marker fields a compaction records on its boundary: the messages it took out
    (``removed``, with an id) and the usage reports on the messages it kept after the
    boundary (``kept``)."""
    replaced: dict[str, Any] = {}
    for message in removed:
        if message.id is not None:
            replaced[str(message.id)] = _keys(message)
            if kind_of(message) == KIND_SUMMARY:  # merged in: it stands for its span no more
                for key, keys in _record(get_meta(message)).items():
                    replaced.setdefault(key, keys)
    if len(replaced) > MAX_REPLACED:  # the newest records
        replaced = dict(list(replaced.items())[-MAX_REPLACED:])
    stale = sorted({k for m in kept if (k := report_key(m)) is not None})
    return {REPLACED_KEY: replaced, STALE_REPORTS_KEY: stale}


def is_stale_report(message: BaseMessage, boundary_meta: Mapping[str, Any], kept_ids: Any) -> bool:
    """Whether the usage report on ``message`` (after the boundary whose marker dict is
    ``boundary_meta``) was made before that compaction: listed among its kept reports, or,
    for a boundary made before they were recorded, on a message whose id it kept."""
    stale = boundary_meta.get(STALE_REPORTS_KEY)
    if isinstance(stale, list):
        return bool(stale) and report_key(message) in stale
    return message.id is not None and message.id in kept_ids


def _matches(message: BaseMessage, keys: Any) -> bool:
    if not isinstance(keys, list):  # an id-only record
        return True
    if message_key(message) in keys:
        return True
    return any(isinstance(k, str) and is_placeholder_of(message, k) for k in keys)


def _record(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A boundary's record of what it replaced (``{}`` when none): the ``replaced`` map, or
    for a boundary made before it was recorded, its span by id only."""
    record = meta.get(REPLACED_KEY)
    if isinstance(record, dict):
        return record
    return {str(i): None for i in Boundary.of(meta).span_ids if i is not None}


def refed_indices(messages: Sequence[BaseMessage], boundary: int) -> list[int]:
    """Indices before ``boundary`` (the newest summary) of the messages that a summary in
    the list up to it (the newest, or an earlier one kept or handed back) already
    replaced."""
    if boundary <= 0:
        return []
    ids = [i for i in range(boundary) if messages[i].id is not None]
    if not ids:  # nothing before the boundary a record could name
        return []
    # every summary up to the boundary stands for its span, the newest first
    records = [
        record
        for i in range(boundary, -1, -1)
        if kind_of(messages[i]) == KIND_SUMMARY and (record := _record(get_meta(messages[i])))
    ]
    if len(records) == 1:  # the usual case: the newest summary's record, read as it is
        replaced = records[0]
    else:
        replaced = {}
        for record in records:
            for key, keys in record.items():
                replaced.setdefault(key, keys)
    if not replaced:
        return []
    return [
        i
        for i in ids
        if (mid := messages[i].id) in replaced and _matches(messages[i], replaced[str(mid)])
    ]


def without_refed(
    messages: Sequence[BaseMessage], boundary: int
) -> tuple[Sequence[BaseMessage], dict[str, Any] | None]:
    """``messages`` without the re-fed ones (:func:`refed_indices`), and the
    ``refed_dropped`` event to report (``None``, and the same list object, when none
    were)."""
    found = refed_indices(messages, boundary)
    if not found:
        return messages, None
    drop = set(found)
    kept = [m for i, m in enumerate(messages) if i not in drop]
    summary = messages[boundary].id
    logger.info(
        "%d message(s) handed back in that compaction summary %s already replaced were "
        "dropped from the model input (archived and summarised before)",
        len(found),
        summary,
    )
    event = {
        "event": "refed_dropped",
        "dropped": len(found),
        "ids": [messages[i].id for i in found[:20]],
        "boundary": summary,
    }
    return kept, event
