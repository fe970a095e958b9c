"""What the per-turn decision reads from a history's metadata, in one pass, memoised.

Micro-compaction's pressure check, the usage-anchored count and the routing decision each
need the same few facts: the newest compaction boundary (and its metadata), the newest
usage report made after it (and the tokens cleared since), the newest ``AIMessage``, the
original task's position, the tokens cleared since the boundary. :func:`history_facts`
computes them in one forward pass; given a :class:`FactsMemo` (the one its owner keeps, a
compactor one per thread, passed down to every reader in a turn) it remembers the result
for the list it described, so the next call on the same history grown by a few messages
only reads the new messages. Nothing is remembered at module level.

A remembered result is used only after checking that the new list starts with exactly the
messages it described (the same objects, or equal ones: ``list.__eq__`` compares by
identity first, so the check runs at memory speed); an edit, a fork from a checkpoint or a
replaced message makes the check fail and the facts are computed again from scratch.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_compact._refed import is_stale_report
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    PROVIDER_WINDOW_KEY,
    Boundary,
    Saving,
    get_meta,
    newest_boundary,
)

__all__ = ["FactsMemo", "HistoryFacts", "history_facts"]

#: Histories a :class:`FactsMemo` remembers (a turn reads its input, the list with results
#: cleared, the compacted list and the next turn's input; the oldest is forgotten).
MEMO_ENTRIES = 8


@dataclass(frozen=True, slots=True)
class HistoryFacts:
    """The metadata facts of a message list (see the module docstring). Frozen: no field
    changes once made, and no other module writes into one. It owns three caches of the
    checks that go on from where they stopped on a growing history (a mark, a running sum,
    a note per caller's key), read and written through its methods only
    (:meth:`checked_to`, :meth:`mark_checked`, :meth:`counted_to`, :meth:`record_count`,
    :meth:`note`, :meth:`set_note`) and copied, never shared, into the facts of a longer
    list."""

    length: int = 0
    """Number of messages described."""
    boundary: int = -1
    """Index of the newest compaction summary, ``-1`` if none."""
    boundary_meta: dict[str, Any] = field(default_factory=dict)
    """The boundary's marker dict (empty when there is none)."""
    kept_ids: frozenset[str] = frozenset()
    """Ids of the messages the newest compaction kept verbatim."""
    ai_total: int = 0
    """``AIMessage`` objects in the whole list."""
    turns_since: int = 0
    """``AIMessage`` objects after the boundary that the compaction did not keep."""
    removed_since: int = 0
    """Tokens of results cleared or cut after the boundary."""
    newest_ai: int = -1
    """Index of the newest ``AIMessage``."""
    newest_usage_id: str | None = None
    """Id of the newest ``AIMessage`` with ``usage_metadata`` (fresh or not)."""
    anchor: tuple[int, int, int] | None = None
    """``(index, input + output tokens, tokens cleared before it since)`` of the newest usage
    report made after the boundary, or ``None``."""
    pinned_task: int = -1
    """Index of the first pinned task."""
    first_human: int = -1
    """Index of the first human message that is not a summary or a stop message."""
    credit: dict[str, int] = field(default_factory=dict)
    """``usage_anchor -> saved_tokens`` summed over the messages described."""
    provider_window: int | None = None
    """The window a provider's refusal for length taught the history: the smallest
    ``provider_window`` a message's marker records (a boundary, or a message the recovery
    reduced without compacting, which may stand before the boundary, as a cut task does;
    :meth:`~langchain_compact.core.Compactor.overflow`). A window learned is never above the
    one in force, so the smallest is the newest."""
    _checked: dict[Any, int] = field(default_factory=dict, repr=False, compare=False)
    """Marks: ``key -> index`` below which a caller's check found nothing."""
    _counted: dict[Any, tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)
    """Running sums: ``key -> (n, total)``, a per-message count summed over the first ``n``
    messages (a longer list with the same start goes on from there)."""
    _notes: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """State of a check that goes on from where it stopped (immutable values: a longer list
    with the same start copies them, never shares a mutable one)."""

    @property
    def task_index(self) -> int:
        """:func:`~langchain_compact.history.original_task_index` of the list."""
        return self.pinned_task if self.pinned_task >= 0 else self.first_human

    def checked_to(self, key: Hashable) -> int:
        """The index below which the check named ``key`` found nothing (0: unknown)."""
        return self._checked.get(key, 0)

    def mark_checked(self, key: Hashable, index: int) -> None:
        """The check named ``key`` found nothing below ``index``."""
        self._checked[key] = index

    def counted_to(self, key: Hashable) -> tuple[int, int]:
        """``(n, total)``: the count named ``key`` summed over the first ``n`` messages
        (``(0, 0)``: nothing summed)."""
        return self._counted.get(key, (0, 0))

    def record_count(self, key: Hashable, n: int, total: int) -> None:
        """The count named ``key`` is ``total`` over the first ``n`` messages."""
        self._counted[key] = (n, total)

    def note(self, key: Hashable) -> Any:
        """The note the check named ``key`` left (``None``: none)."""
        return self._notes.get(key)

    def set_note(self, key: Hashable, value: Any) -> None:
        """Leave ``value`` (immutable) for the check named ``key``."""
        self._notes[key] = value


def _extend(facts: HistoryFacts, messages: Sequence[object]) -> HistoryFacts | None:
    """The facts of ``messages``, whose first ``facts.length`` are the ones ``facts``
    describes; ``None`` when a message is not a ``BaseMessage`` (the caller's own checks
    then name it)."""
    reading = _Reading.after(facts)
    for i in range(facts.length, len(messages)):
        msg = messages[i]
        if not isinstance(msg, BaseMessage):
            return None
        reading.read(i, msg)
    return reading.facts(len(messages), facts)


@dataclass(slots=True)
class _Reading:
    """The facts of a list as :func:`_extend` reads on from where a remembered result
    stopped, one message at a time."""

    boundary: int
    bmeta: dict[str, Any]
    kept: frozenset[str]
    ai_total: int
    turns: int
    removed: int
    newest_ai: int
    usage_id: str | None
    anchor: tuple[int, int, int] | None
    pinned: int
    first_human: int
    credit: dict[str, int]
    window: int | None
    # Usage reports since the newest boundary seen, oldest first: ``(index, message,
    # credit owed to it so far)``. Only the newest one that is not stale anchors, so the
    # staleness check (a hash of the reply) runs from the newest back, at the end, once per
    # list rather than once per reply.
    reports: list[tuple[int, AIMessage, int]]

    @classmethod
    def after(cls, facts: HistoryFacts) -> _Reading:
        return cls(
            facts.boundary,
            facts.boundary_meta,
            facts.kept_ids,
            facts.ai_total,
            facts.turns_since,
            facts.removed_since,
            facts.newest_ai,
            facts.newest_usage_id,
            facts.anchor,
            facts.pinned_task,
            facts.first_human,
            dict(facts.credit),
            facts.provider_window,
            [],
        )

    def read(self, i: int, msg: BaseMessage) -> None:
        meta = get_meta(msg)
        kind = meta.get("kind")
        kind = kind if isinstance(kind, str) else None
        if PROVIDER_WINDOW_KEY in meta:
            self.window = _narrower(self.window, meta[PROVIDER_WINDOW_KEY])
        if kind == KIND_SUMMARY:
            self.boundary, self.bmeta = i, meta
            self.kept = Boundary.kept_in(meta)
            self.turns, self.removed, self.anchor = 0, 0, None
            self.reports.clear()
        elif kind in (KIND_CLEARED, KIND_TRUNCATED) and self.boundary < i:
            self.removed += Saving.removed_in(meta)
        self._task(i, msg, kind)
        owner = Saving.anchor_in(meta)
        if owner is not None:  # before the anchor below: a reply may credit itself
            self.credit[owner] = self.credit.get(owner, 0) + Saving.credited_in(meta)
        if isinstance(msg, AIMessage):
            self._reply(i, msg)

    def _task(self, i: int, msg: BaseMessage, kind: str | None) -> None:
        """The first pinned task and the first human message (not a summary or a stop)."""
        if kind == KIND_PINNED_TASK and self.pinned < 0:
            self.pinned = i
        human = isinstance(msg, HumanMessage) and kind not in (KIND_SUMMARY, KIND_STOP)
        if self.first_human < 0 and human:
            self.first_human = i

    def _reply(self, i: int, msg: AIMessage) -> None:
        self.ai_total += 1
        self.newest_ai = i
        if msg.id not in self.kept:
            self.turns += 1
        if msg.usage_metadata:
            self.usage_id = msg.id
            owed = self.credit.get(msg.id, 0) if msg.id is not None else 0
            self.reports.append((i, msg, owed))

    def facts(self, length: int, prior: HistoryFacts) -> HistoryFacts:
        anchor = _fresh_anchor(self.reports, self.bmeta, self.kept) or self.anchor
        return HistoryFacts(
            length=length,
            boundary=self.boundary,
            boundary_meta=self.bmeta,
            kept_ids=self.kept,
            ai_total=self.ai_total,
            turns_since=self.turns if self.boundary >= 0 else self.ai_total,
            removed_since=self.removed,
            newest_ai=self.newest_ai,
            newest_usage_id=self.usage_id,
            anchor=anchor,
            pinned_task=self.pinned,
            first_human=self.first_human,
            credit=self.credit,
            provider_window=self.window,
            _checked=dict(prior._checked),
            _counted=dict(prior._counted),
            _notes=dict(prior._notes),
        )


def _narrower(window: int | None, learned: object) -> int | None:
    """``window`` narrowed to ``learned`` when that is a window (a positive int)."""
    if isinstance(learned, int) and learned > 0:
        return learned if window is None else min(window, learned)
    return window


def _fresh_anchor(
    reports: list[tuple[int, AIMessage, int]], bmeta: Mapping[str, Any], kept: frozenset[str]
) -> tuple[int, int, int] | None:
    """``(index, tokens, credit owed)`` of the newest of ``reports`` that is not stale
    (:func:`is_stale_report`); ``None`` when all are."""
    for i, msg, owed in reversed(reports):
        if not is_stale_report(msg, bmeta, kept):
            report: Mapping[str, Any] = msg.usage_metadata or {}
            tokens = int(report.get("input_tokens", 0)) + int(report.get("output_tokens", 0))
            return (i, tokens, owed)
    return None


_EMPTY = HistoryFacts()


class FactsMemo:
    """The facts of the histories one owner read (a compactor keeps one per thread,
    :meth:`~langchain_compact.core.Compactor.memo`), newest first, at most ``size`` of them.

    A history that starts with a remembered one (the same objects, or equal ones) is read
    only from where that one ends, so a turn's many readers of a history grown by a few
    messages cost one pass over the new messages between them. Without a memo
    (:func:`history_facts` with ``memo=None``) every read is a full pass: correct, and
    proportional to the history.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> memo = FactsMemo()
        >>> history = [HumanMessage("task"), AIMessage("ok")]
        >>> memo.facts(history) is memo.facts(list(history))
        True
    """

    __slots__ = ("_entries", "_lock", "size")

    def __init__(self, size: int = MEMO_ENTRIES) -> None:
        if size < 1:
            raise ValueError(f"FactsMemo(size={size!r}): size must be at least 1.")
        self.size = size
        self._entries: list[tuple[list[object], HistoryFacts]] = []
        self._lock = threading.Lock()

    def facts(self, messages: Sequence[object]) -> HistoryFacts | None:
        """:func:`history_facts` of ``messages``, reading only what a remembered history
        does not cover."""
        if not messages:
            return HistoryFacts()
        items = messages if isinstance(messages, list) else list(messages)
        found, remembered = self._remembered(items)
        if found:
            return remembered
        fresh = _extend(_EMPTY, items)  # outside the lock: a first read of a long history
        if fresh is not None:
            self._remember(items, fresh)
        return fresh

    def clear(self) -> None:
        """Forget every remembered history."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _remembered(self, items: list[object]) -> tuple[bool, HistoryFacts | None]:
        """``(True, facts)`` when a remembered history is a prefix of ``items`` (its facts
        extended to the rest; ``None``: a message is not a ``BaseMessage``), else ``(False,
        None)``."""
        with self._lock:  # one history at a time: a remembered list is extended in place
            entries = self._entries
            for k, (seen, facts) in enumerate(entries):
                n = len(seen)
                # Cheap rejections first (a reloaded, forked or edited history).
                if n > len(items) or seen[0] is not items[0] or seen[-1] is not items[n - 1]:
                    continue
                seen.extend(items[n:])
                try:
                    # Identity first, then equality: a memory-speed pass over the pointers.
                    same = seen == items
                    longer = facts if not same or n == len(items) else _extend(facts, items)
                except BaseException:
                    del seen[n:]  # the remembered list describes ``facts`` again
                    raise
                if same and longer is not None:
                    entries.pop(k)
                    entries.insert(0, (seen, longer))
                    return True, longer
                del seen[n:]
                if longer is None:
                    return True, None  # a message is not a BaseMessage: the caller names it
        return False, None

    def _remember(self, items: list[object], fresh: HistoryFacts) -> None:
        """Remember ``fresh``, the facts of ``items``, newest first (an edited history's
        earlier version is pushed out in turn)."""
        with self._lock:
            self._entries.insert(0, (list(items), fresh))
            del self._entries[self.size :]


def history_facts(messages: Sequence[object], memo: FactsMemo | None = None) -> HistoryFacts | None:
    """The facts of ``messages`` (read through ``memo`` when given: only what a history it
    remembers does not cover); ``None`` when a message is not a ``BaseMessage``.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history_facts([HumanMessage("task"), AIMessage("ok")]).newest_ai
        1
    """
    if memo is not None:
        return memo.facts(messages)
    if not messages:
        return HistoryFacts()
    return _extend(_EMPTY, messages)


def boundary_meta(messages: Sequence[BaseMessage], memo: FactsMemo | None = None) -> dict[str, Any]:
    """The metadata on the newest boundary of ``messages`` (``{}`` when there is none), read
    through ``memo`` when given."""
    facts = history_facts(messages, memo)
    if facts is not None:
        return facts.boundary_meta
    b, _kept = newest_boundary(messages)
    return get_meta(messages[b]) if b >= 0 else {}
