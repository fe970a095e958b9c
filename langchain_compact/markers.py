"""The markers this package leaves, for UIs and your own code to recognise.

Every message this package creates or changes carries a plain dict under
``message.response_metadata[META_KEY]``: provider integrations never send it to the API, it
survives LangGraph checkpointing and ``messages_to_dict``, and a UI can read it to render
summaries, placeholders and stop messages differently. :func:`kind_of` says which of the
``KIND_*`` a message is; :func:`get_meta` returns the whole dict (``archive_ref``,
``saved_tokens``, ``count`` on a boundary, ...); :class:`Saving` reads (and writes) a
reduced message's accounting as one typed value.

Graph runs also report what they did: custom stream events under :data:`EVENT_KEY`
(``stream_mode="custom"``) and the ``transition`` state key (:data:`Transition`).

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> kind_of(HumanMessage("hi")) is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
            return i, set(Boundary.kept_in(get_meta(messages[i])))
    return -1, set()


def credited_savings(meta: Mapping[str, Any]) -> int:
    """What a reduced message credits the usage report it was reduced after
    (:attr:`Saving.credited` of the marker dict ``meta``; kept for code that called it)."""
    return Saving.credited_in(meta)


@dataclass(frozen=True, slots=True)
class Saving:
    """The accounting a reduced message carries in its marker dict (a cleared result, a
    digest, stubbed arguments, a cut task or assistant text): stored as these flat keys,
    which is what every checkpoint written so far holds, so :meth:`of` reads old and new
    markers alike and :meth:`fields` writes them back.

    - ``original_chars``: the characters of the original (``None``: not reduced yet);
    - ``saved_tokens``: the tokens saved since the usage report ``usage_anchor`` (the id of
      the reply whose report counted the message whole), in the configured counter's units;
    - ``removed_tokens``: the tokens removed by every reduction of it, in all (``None`` on
      markers older than the key);
    - ``saved_precise``: ``saved_tokens`` as tiktoken (o200k) counts it (``None`` where
      tiktoken could not be loaded).

    Example:
        >>> first = Saving().then(saved=120, anchor="r1", chars=2_000, precise=110)
        >>> first.fields()["saved_tokens"], first.credited
        (120, 110)
        >>> again = first.then(saved=30, anchor="r1", chars=0, precise=28)  # same report
        >>> again.saved_tokens, again.removed_tokens, again.original_chars
        (150, 150, 2000)
        >>> first.then(saved=30, anchor="r2", chars=0, precise=None).saved_tokens  # a newer one
        30
    """

    original_chars: int | None = None
    saved_tokens: int = 0
    removed_tokens: int | None = None
    usage_anchor: str | None = None
    saved_precise: int | None = None

    @classmethod
    def of(cls, meta: Mapping[str, Any] | BaseMessage) -> Saving:
        """The saving recorded in a marker dict (or a message's), zeros where there is none."""
        if isinstance(meta, BaseMessage):
            meta = get_meta(meta)
        chars, precise = meta.get("original_chars"), meta.get("saved_precise")
        removed = meta.get("removed_tokens")
        return cls(
            original_chars=None if chars is None else int(chars),
            saved_tokens=int(meta.get("saved_tokens", 0)),
            removed_tokens=None if removed is None else int(removed),
            usage_anchor=cls.anchor_in(meta),
            saved_precise=precise if isinstance(precise, int) else None,
        )

    @staticmethod
    def anchor_in(meta: Mapping[str, Any]) -> str | None:
        """Only the ``usage_anchor`` of a marker dict (the one key a scan for one report's
        savings reads of every message)."""
        anchor = meta.get("usage_anchor")
        return anchor if isinstance(anchor, str) else None

    @staticmethod
    def credited_in(meta: Mapping[str, Any]) -> int:
        """Only :attr:`credited` of a marker dict (a history's scan reads it of every
        reduced message: two keys, no value built)."""
        precise = meta.get("saved_precise")
        saved = int(meta.get("saved_tokens", 0))
        return _credit(saved, precise if isinstance(precise, int) else None)

    @staticmethod
    def removed_in(meta: Mapping[str, Any]) -> int:
        """Only :attr:`removed` of a marker dict (as :meth:`credited_in`)."""
        return int(meta.get("removed_tokens", meta.get("saved_tokens", 0)))

    @property
    def reduced(self) -> bool:
        """Whether the message was reduced at all (it saved or removed something)."""
        return bool(self.saved_tokens or self.removed_tokens)

    @property
    def credited(self) -> int:
        """What it credits the usage report it was reduced after: ``saved_tokens``, never
        more than tiktoken's count of them when one was recorded. A report is in the
        provider's tokens; a credit in an estimate that errs high would count the context
        low, and the next call would go over the window."""
        return _credit(self.saved_tokens, self.saved_precise)

    @property
    def removed(self) -> int:
        """The tokens removed in all (``saved_tokens`` on markers older than the key)."""
        return self.saved_tokens if self.removed_tokens is None else self.removed_tokens

    def then(self, *, saved: int, anchor: str | None, chars: int, precise: int | None) -> Saving:
        """This message reduced again, saving ``saved`` more tokens (``precise`` of them by
        tiktoken's count, ``None`` without tiktoken) after the usage report ``anchor``: the
        savings since one report add up, a newer report starts them again, the removed
        tokens always add up, and the original's size stays (``chars`` when not recorded).
        """
        same = self.usage_anchor == anchor
        earlier = self.saved_tokens if self.saved_precise is None else self.saved_precise
        return Saving(
            original_chars=chars if self.original_chars is None else self.original_chars,
            saved_tokens=saved + (self.saved_tokens if same else 0),
            removed_tokens=(self.removed_tokens or 0) + saved,
            usage_anchor=anchor,
            saved_precise=None if precise is None else precise + (earlier if same else 0),
        )

    def fields(self) -> dict[str, Any]:
        """The marker keys (for :func:`with_meta`); ``saved_precise`` only when counted."""
        out: dict[str, Any] = {
            "original_chars": self.original_chars,
            "saved_tokens": self.saved_tokens,
            "removed_tokens": self.removed_tokens,
            "usage_anchor": self.usage_anchor,
        }
        if self.saved_precise is not None:
            out["saved_precise"] = self.saved_precise
        return out


@dataclass(frozen=True, slots=True)
class Boundary:
    """The boundary marker's metadata (on the summary a compaction leaves, the newest of
    which is where the history's compacted part ends) as one typed value; stored as these
    flat keys, which is what every checkpoint written so far holds, so :meth:`of` reads old
    and new boundaries alike. ``None`` is a key the boundary does not record (one written
    before the key, or a memory's boundary).

    - ``index``: which compaction of the thread it is (1 for the first; 0 on a memory's);
    - ``archive_ref``: where the messages it replaced are archived;
    - ``span_ids`` / ``kept_ids``: the ids it replaced, and those kept after it whole;
    - ``turns_since_previous``: model turns between the previous compaction and this one;
    - ``summarizer``: what wrote the summary; ``cause``: ``"trigger"``, ``"overflow"``, ...;
    - ``tokens_before`` / ``tokens_after``: the context's size before and after;
    - ``calibration`` / ``overhead``: the provider's ratio to the compactor's count and its
      fixed part when the boundary was made; ``precise_calibration`` the same for tiktoken;
    - ``refill_streak``: the thrash guard's count (:func:`budget.refill_streak`);
    - ``provider_window``: the window a provider's refusal taught the thread.

    The records of what it replaced and which reports it made stale are
    :mod:`langchain_compact._refed`'s (``replaced``, ``stale_reports``).

    Example:
        >>> b = Boundary.of({"index": 2, "kept_ids": ["a"], "tokens_after": 900})
        >>> b.index, b.kept, b.tokens_after, b.refill_streak
        (2, frozenset({'a'}), 900, 0)
        >>> Boundary.of({}).index is None
        True
    """

    index: int | None = None
    archive_ref: str | None = None
    span_ids: tuple[str | None, ...] = ()
    kept_ids: tuple[str, ...] = ()
    turns_since_previous: int | None = None
    summarizer: str | None = None
    tokens_before: int | None = None
    cause: str | None = None
    calibration: float | None = None
    overhead: int = 0
    precise_calibration: tuple[Any, Any] | None = None
    refill_streak: int = 0
    tokens_after: int | None = None
    provider_window: int | None = None

    @classmethod
    def of(cls, meta: Mapping[str, Any] | BaseMessage) -> Boundary:
        """The boundary recorded in a marker dict (or a message's)."""
        if isinstance(meta, BaseMessage):
            meta = get_meta(meta)
        index, cause, ratio = meta.get("index"), meta.get("cause"), meta.get("calibration")
        precise = meta.get("precise_calibration")
        window = _int_or_none(meta.get(PROVIDER_WINDOW_KEY))
        return cls(
            index=None if index is None else int(index),
            archive_ref=_str_or_none(meta.get("archive_ref")),
            span_ids=tuple(meta.get("span_ids") or ()),
            kept_ids=tuple(str(k) for k in meta.get("kept_ids") or []),
            turns_since_previous=_int_or_none(meta.get("turns_since_previous")),
            summarizer=_str_or_none(meta.get("summarizer")),
            tokens_before=_int_or_none(meta.get("tokens_before")),
            cause=None if cause is None else str(cause),
            calibration=float(ratio) if isinstance(ratio, (int, float)) else None,
            overhead=_int_or_none(meta.get("overhead")) or 0,
            precise_calibration=(
                (precise[0], precise[1])
                if isinstance(precise, (list, tuple)) and len(precise) == 2
                else None
            ),
            refill_streak=int(meta.get("refill_streak", 0)),
            tokens_after=_int_or_none(meta.get("tokens_after")),
            provider_window=window if window is not None and window > 0 else None,
        )

    @property
    def kept(self) -> frozenset[str]:
        """``kept_ids`` as a set."""
        return frozenset(self.kept_ids)

    @staticmethod
    def kept_in(meta: Mapping[str, Any]) -> frozenset[str]:
        """Only :attr:`kept` of a marker dict (read on every scan that finds a boundary:
        one key, no value built)."""
        return frozenset(str(k) for k in meta.get("kept_ids") or [])

    def fields(self) -> dict[str, Any]:
        """The marker keys of what it records (for :func:`with_meta`; ``None`` left out)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if value is None:
                continue
            key = PROVIDER_WINDOW_KEY if name == "provider_window" else name
            out[key] = list(value) if isinstance(value, tuple) else value
        return out


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _credit(saved: int, precise: int | None) -> int:
    """A saving's credit to its report: ``saved``, never more than tiktoken's ``precise``."""
    return saved if precise is None else min(saved, precise)
