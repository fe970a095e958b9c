"""History structure (docs/design.md, B2): tool-call pairing, safe cut points, repair, markers.

Providers answer a broken pairing with HTTP 400: every ``ToolMessage`` must answer a tool
call of the ``AIMessage`` right before its batch, and every tool call must be answered
before the next non-tool message. A parallel batch is one unit: never split it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact._scan import FactsMemo, history_facts
from langchain_compact.errors import InvalidHistoryError
from langchain_compact.markers import (
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    kind_of,
    newest_boundary,
)
from langchain_compact.tokens import check_message

__all__ = [
    "CALL_LISTS",
    "CallRef",
    "HistoryRepair",
    "RepairChange",
    "check_pairing",
    "find_safe_cut",
    "is_summary",
    "last_boundary_index",
    "newest_request_index",
    "open_request_index",
    "original_task_index",
    "repair_history",
    "repair_report",
    "tool_calls_of",
    "valid_prefix",
    "validate_history",
]

logger = logging.getLogger(__name__)

INTERRUPTED_RESULT = (
    "[no result: this tool call was interrupted before it returned; "
    "call the tool again if the result is still needed]"
)
MALFORMED_RESULT = (
    "[no result: the arguments of this call to {name} were malformed or truncated{error}, so "
    "it was not run; call the tool again with valid JSON arguments if it is still needed]"
)
"""The error result :func:`repair_report` gives a malformed call (``invalid_tool_calls``)
that has none; ``{error}`` is the parser's message, when the call carries one."""

#: The two lists of an ``AIMessage`` that hold tool calls: ``tool_calls`` (arguments
#: parsed) and ``invalid_tool_calls`` (arguments that did not parse). Both take part in the
#: pairing: langchain-openai sends an invalid call as one of the request's ``tool_calls``,
#: and langchain's ``create_agent`` answers it with a ``status="error"`` ``ToolMessage``.
CALL_LISTS = ("tool_calls", "invalid_tool_calls")


class CallRef(NamedTuple):
    """One tool call of an ``AIMessage``, as the pairing sees it (:func:`tool_calls_of`)."""

    id: str | None
    """The call id (``None`` or ``""`` when the call has none)."""
    name: str
    """The tool name (``""`` when a malformed call has none)."""
    invalid: bool
    """From ``invalid_tool_calls``: a call whose arguments did not parse."""


def tool_calls_of(message: object) -> list[CallRef]:
    """Every tool call of an ``AIMessage``, its ``tool_calls`` then its
    ``invalid_tool_calls`` (:data:`CALL_LISTS`); ``[]`` for any other message. Every
    place that pairs calls with results reads the calls through this.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> bad = {"name": "ls", "args": "{oops", "id": "c2", "error": None}
        >>> ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}],
        ...                invalid_tool_calls=[bad])
        >>> [(c.id, c.invalid) for c in tool_calls_of(ai)]
        [('c1', False), ('c2', True)]
    """
    if not isinstance(message, AIMessage):
        return []
    good, bad = message.tool_calls, message.invalid_tool_calls
    calls = [CallRef(c.get("id"), c.get("name") or "", False) for c in good] if good else []
    if bad:
        calls += [CallRef(c.get("id"), c.get("name") or "", True) for c in bad]
    return calls


def validate_history(messages: Sequence[BaseMessage], *, allow_pending: bool = False) -> None:
    """Raise :class:`InvalidHistoryError` if tool calls and results are not properly paired.

    A malformed call (``invalid_tool_calls``) is a call like the others: it needs its
    result (langchain's ``create_agent`` answers it with an error), and an id is used by one
    call only, within one ``AIMessage`` too.

    Args:
        messages: The history to check.
        allow_pending: Accept tool calls at the very end that have no result yet (the
            state of an agent loop just before its tool node runs).

    Raises:
        InvalidHistoryError: names the index of the first offending message and the fix.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> validate_history([ToolMessage("x", tool_call_id="c1")])
        Traceback (most recent call last):
        ...
        langchain_compact.errors.InvalidHistoryError: messages[0] is a ToolMessage ...
    """
    _scan_pairing(messages, 0, frozenset(), allow_pending)


#: ``HistoryFacts.note`` key of :func:`check_pairing`: ``(start, answered)``, the index of
#: the newest batch's first message (everything before it is valid and closed) and the call
#: ids answered before it.
_PAIRING_NOTE = "pairing"


def valid_prefix(
    messages: Sequence[BaseMessage], *, memo: FactsMemo | None = None
) -> tuple[int, frozenset[str]]:
    """How much of ``messages`` an earlier :func:`check_pairing` through the same ``memo``
    found valid: ``(start, ids)``, everything before ``messages[start]`` valid with every
    call answered, and the call ids used there (``(0, frozenset())`` when nothing is known,
    always without a memo)."""
    facts = history_facts(messages, memo)
    if facts is None or facts.length != len(messages):
        return 0, frozenset()
    note = facts.note(_PAIRING_NOTE)
    if note is None or note[0] > len(messages):
        return 0, frozenset()
    start, prior = note
    return int(start), prior


def check_pairing(
    messages: Sequence[BaseMessage],
    *,
    allow_pending: bool = False,
    known: tuple[int, frozenset[str]] | None = None,
    allow_malformed: bool = False,
    memo: FactsMemo | None = None,
) -> None:
    """:func:`validate_history`, reading only what an earlier check of the same history
    (grown since: the same first messages) through the same ``memo`` (the caller's
    :class:`~langchain_compact._scan.FactsMemo`) did not cover. It runs before every model
    call, so a turn costs O(new messages), not O(history). ``known``: what the caller knows of a
    new list, as :func:`valid_prefix` says it (a repaired history whose start is unchanged).
    ``allow_malformed``: accept malformed calls (``invalid_tool_calls``) that have no
    result yet, langchain's ``create_agent`` state before its model node answers them
    (:func:`repair_report` gives them their error result); such a check is not remembered.

    Raises:
        InvalidHistoryError: as :func:`validate_history`.
    """
    facts = history_facts(messages, memo)
    usable = facts is not None and facts.length == len(messages)
    note = facts.note(_PAIRING_NOTE) if usable and facts is not None else None
    if note is None:
        note = known
    start, prior = note if note is not None else (0, frozenset())
    if start > len(messages):
        start, prior = 0, frozenset()
    done = _scan_pairing(messages, start, prior, allow_pending, allow_malformed)
    if usable and facts is not None and not allow_malformed:
        facts.set_note(_PAIRING_NOTE, done)


def _scan_pairing(
    messages: Sequence[BaseMessage],
    start: int,
    prior: frozenset[str],
    allow_pending: bool,
    allow_malformed: bool = False,
) -> tuple[int, frozenset[str]]:
    """Check ``messages[start:]``, where ``messages[start]`` opens a batch and ``prior``
    holds the call ids answered before it; return the same pair for the newest batch.
    ``allow_malformed``: a batch whose only unanswered calls are malformed ones passes."""
    open_ids: dict[str, int] = {}  # unanswered call id -> index of its AIMessage
    malformed: set[str] = set()  # the ids of the current batch's malformed calls
    batch: set[str] = set()  # ids of the current batch (answered or not)
    answered: list[str] = []  # answered since ``start``, in order
    answered_set: set[str] = set()
    safe, safe_count = start, 0  # newest batch start, and len(answered) there
    for i in range(start, len(messages)):
        msg = check_message(messages[i], i)
        if isinstance(msg, ToolMessage):
            tcid = msg.tool_call_id
            _check_result(i, tcid, batch, answered_set, prior)
            open_ids.pop(tcid, None)
            answered.append(tcid)
            answered_set.add(tcid)
            continue
        if open_ids and not (allow_malformed and open_ids.keys() <= malformed):
            raise _unanswered(open_ids, malformed, f"before messages[{i}]")
        safe, safe_count = i, len(answered)
        open_ids, malformed, batch = _open_batch(msg, i, allow_malformed)
    if open_ids and not allow_pending and not (allow_malformed and open_ids.keys() <= malformed):
        raise _unanswered(open_ids, malformed, "at the end of the history")
    if safe_count:
        prior = prior | frozenset(answered[:safe_count])
    return safe, prior


def _check_result(
    i: int, tcid: str, batch: set[str], answered: set[str], prior: frozenset[str]
) -> None:
    """Raise unless the result ``messages[i]`` answers a call of its ``batch`` a first time."""
    if tcid in answered or tcid in prior:
        raise InvalidHistoryError(
            f"messages[{i}] is a ToolMessage answering tool call {tcid!r} a second "
            "time; remove the duplicate (repair_history drops it).",
            index=i,
        )
    if tcid not in batch:
        raise InvalidHistoryError(
            f"messages[{i}] is a ToolMessage for tool call {tcid!r}, but the AIMessage "
            "right before this batch made no such call (an orphan result); keep it "
            "with its AIMessage or drop it (repair_history drops it).",
            index=i,
        )


def _open_batch(
    msg: BaseMessage, i: int, allow_malformed: bool
) -> tuple[dict[str, int], set[str], set[str]]:
    """The batch ``messages[i]`` opens: its unanswered call ids (to ``i``), its malformed
    ones and all of them; raise on a call without an id or an id used twice."""
    open_ids: dict[str, int] = {}
    malformed: set[str] = set()
    batch: set[str] = set()
    for n, call in enumerate(tool_calls_of(msg)):
        cid = call.id
        if not cid and allow_malformed and call.invalid:
            cid = f"<call {n} without an id>"  # repair_report gives it one, and a result
        if not cid:
            raise InvalidHistoryError(
                f"messages[{i}] has a tool call without an id ({call.name!r}); "
                "give every tool call an id so its result can be paired.",
                index=i,
            )
        if cid in batch:
            raise InvalidHistoryError(
                f"messages[{i}] has two tool calls with the id {cid!r} (Anthropic refuses "
                "duplicate tool_use ids, and a result cannot say which it answers); give "
                "each call its own id (repair_history renames the second).",
                index=i,
            )
        batch.add(cid)
        open_ids[cid] = i
        if call.invalid:
            malformed.add(cid)
    return open_ids, malformed, batch


def _unanswered(open_ids: dict[str, int], malformed: set[str], where: str) -> InvalidHistoryError:
    """The error for calls of ``messages[open_ids[...]]`` without a result ``where``."""
    first = min(open_ids.values())
    missing = sorted(k for k, v in open_ids.items() if v == first)
    bad = sorted(malformed & set(missing))
    note = f" ({bad} malformed: invalid_tool_calls)" if bad else ""
    return InvalidHistoryError(
        f"messages[{first}] is an AIMessage whose tool call(s) {missing}{note} have no "
        f"ToolMessage {where}; add the results right after it, or close them with "
        "repair_history (it adds an error result).",
        index=first,
    )


@dataclass(frozen=True, slots=True)
class RepairChange:
    """One thing :func:`repair_report` changed."""

    index: int
    """Position in the input of the message concerned."""
    action: Literal["dropped", "renamed", "re-paired", "closed", "answered"]
    """``dropped``: a result removed; ``renamed``: a call id changed in an AIMessage;
    ``re-paired``: a result's ``tool_call_id`` changed to match its call; ``closed``: an
    "interrupted" result added for an unanswered call; ``answered``: an error result added
    for a malformed call (``invalid_tool_calls``) that had none, as langchain's
    ``create_agent`` adds one."""
    detail: str
    """One line saying what changed and why."""


@dataclass(frozen=True, slots=True)
class HistoryRepair:
    """What :func:`repair_report` returns: the repaired history and what changed."""

    messages: list[BaseMessage]
    """The repaired history (passes :func:`validate_history`)."""
    changes: list[RepairChange]
    """Every change, in input order."""
    removed: list[BaseMessage]
    """Input messages that are absent from ``messages`` as they were (dropped, or replaced
    by a copy with a changed id): archive these so nothing is lost."""


class _Ids:
    """Fresh tool-call ids that collide with no id of the input."""

    def __init__(self, messages: Sequence[object]) -> None:
        self.taken: set[str] = set()
        for m in messages:
            if isinstance(m, ToolMessage):
                self.taken.add(m.tool_call_id)
            else:
                self.taken.update(str(c.id) for c in tool_calls_of(m) if c.id)

    def fresh(self, base: str) -> str:
        candidate, k = base, 2
        while candidate in self.taken:
            candidate, k = f"{base}_{k}", k + 1
        self.taken.add(candidate)
        return candidate


def repair_report(messages: Sequence[BaseMessage], *, seen: Iterable[str] = ()) -> HistoryRepair:
    """Repair the tool-call pairing of ``messages`` and say what changed.

    Calls are read from ``tool_calls`` and ``invalid_tool_calls`` (:func:`tool_calls_of`);
    a renamed call is renamed in the list that holds it.

    * A call id used a second time (in another AIMessage or in the same batch) gets a fresh
      id, and the result that answers it in its batch follows (re-paired, not dropped); a
      second call of one ``AIMessage`` whose id has one answer gets the ``interrupted``
      result below.
    * A call without an id gets a fresh id; a result in its batch that answers no call of the
      batch is paired with it, in order.
    * A call still unanswered at the next non-tool message (or at the end) gets a
      ``status="error"`` result saying it was interrupted; a malformed call
      (``invalid_tool_calls``) gets one saying its arguments did not parse
      (:data:`MALFORMED_RESULT`), as langchain's ``create_agent`` answers it.
    * A result that answers no call of its batch (an orphan), or answers one a second time, is
      dropped.

    The input is not modified. ``removed`` lists the input messages that did not survive as
    they were, so a caller can archive them before replacing the history. ``seen``: the call
    ids of a valid history ``messages`` follows (a prefix not passed); they count as used.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> def ai(cid):
        ...     return AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": cid}])
        >>> def res(text):
        ...     return ToolMessage(text, tool_call_id="c1")
        >>> fixed = repair_report([HumanMessage("go"), ai("c1"), res("a"), ai("c1"), res("b")])
        >>> [c.action for c in fixed.changes], fixed.messages[4].tool_call_id
        (['renamed', 're-paired'], 'c1_dup3')
    """
    repair = _Repair(messages, seen)
    for i, raw in enumerate(messages):
        msg = check_message(raw, i)
        if isinstance(msg, ToolMessage):
            repair.result(i, msg)
            continue
        repair.close_pending()
        repair.open_batch(i, msg)
    repair.close_pending()
    return HistoryRepair(messages=repair.out, changes=repair.changes, removed=repair.removed)


class _Repair:
    """:func:`repair_report`'s state: the output so far, what changed, and the current batch:
    its AIMessage's input index, its call ids as written (written id -> new ids still
    unanswered, in call order), its id-less calls still unanswered, and every unanswered new
    id -> (tool name, the parser's error of a malformed call, else None)."""

    def __init__(self, messages: Sequence[BaseMessage], seen: Iterable[str]) -> None:
        self.ids = _Ids(messages)
        self.seen_calls: set[str] = set(seen)
        self.ids.taken.update(self.seen_calls)
        self.out: list[BaseMessage] = []
        self.changes: list[RepairChange] = []
        self.removed: list[BaseMessage] = []
        self.ai_at = -1
        self.by_id: dict[str, list[str]] = {}
        self.idless: list[str] = []
        self.pending: dict[str, tuple[str, str | None]] = {}

    def close_pending(self) -> None:
        """An error result for each call of the batch still unanswered."""
        for cid, (name, error) in self.pending.items():
            action: Literal["closed", "answered"] = "closed"
            text, why = INTERRUPTED_RESULT, "an 'interrupted'"
            if error is not None:
                text = MALFORMED_RESULT.format(
                    name=name or "a tool", error=f" ({error})" if error else ""
                )
                action, why = "answered", "a 'malformed arguments'"
            self.out.append(ToolMessage(text, tool_call_id=cid, name=name or None, status="error"))
            self.changes.append(
                RepairChange(
                    self.ai_at,
                    action,
                    f"tool call {cid!r} ({name}) had no result: added {why} error result "
                    "after its batch",
                )
            )
        self.pending.clear()

    def result(self, i: int, msg: ToolMessage) -> None:
        """The result ``messages[i]``: kept, re-paired to its call's new id, or dropped."""
        tcid = msg.tool_call_id
        queue = self.by_id.get(tcid)
        if queue:
            new_id = queue.pop(0)
        elif self.idless and tcid not in self.by_id:
            new_id = self.idless.pop(0)
        else:
            why = "a second time" if tcid in self.by_id else "but no call of its batch has that id"
            logger.warning("repair_history: dropped orphan ToolMessage at index %d", i)
            self.changes.append(
                RepairChange(i, "dropped", f"result answering tool call {tcid!r} {why}: removed")
            )
            self.removed.append(msg)
            return
        self.pending.pop(new_id, None)
        if new_id != tcid:
            self.removed.append(msg)
            msg = msg.model_copy(update={"tool_call_id": new_id})
            self.changes.append(
                RepairChange(
                    i,
                    "re-paired",
                    f"result's tool_call_id {tcid!r} -> {new_id!r}, to answer its call "
                    f"in messages[{self.ai_at}]",
                )
            )
        self.out.append(msg)

    def open_batch(self, i: int, msg: BaseMessage) -> None:
        """``messages[i]``, a message other than a result: it opens a batch (of its calls,
        renamed where an id is missing or used before)."""
        self.by_id, self.idless, self.ai_at = {}, [], i
        if isinstance(msg, AIMessage) and (msg.tool_calls or msg.invalid_tool_calls):
            update: dict[str, Any] = {}
            n = 0  # the call's position over both lists
            for key in CALL_LISTS:
                written: list[Any] = getattr(msg, key)
                calls = []
                for call in written:
                    calls.append(self.call(i, n, key, call))
                    n += 1
                if calls != written:
                    update[key] = calls
            if update:
                self.removed.append(msg)
                msg = msg.model_copy(update=update)
        self.out.append(msg)

    def call(self, i: int, n: int, key: str, call: Any) -> Any:
        """Call ``n`` of ``messages[i]`` (in its list ``key``), with a fresh id when it has
        none or one used before; it joins the batch's pending calls."""
        cid, name = call.get("id"), call.get("name") or ""
        detail = ""
        if not cid:
            new_id = self.ids.fresh(f"repaired_{i}_{n}")
            self.idless.append(new_id)
            detail = f"tool call {n} ({name}) had no id: gave it {new_id!r}"
        elif cid in self.seen_calls:  # a re-used id would pair with the wrong result
            new_id = self.ids.fresh(f"{cid}_dup{i}")
            self.by_id.setdefault(cid, []).append(new_id)
            detail = f"tool call id {cid!r} ({name}) was used before: renamed to {new_id!r}"
        else:
            new_id = cid
            self.by_id.setdefault(cid, []).append(cid)
        self.seen_calls.add(new_id)
        error = None if key == "tool_calls" else str(call.get("error") or "")
        self.pending[new_id] = (name, error)
        if new_id != cid:
            call = {**call, "id": new_id}
            self.changes.append(RepairChange(i, "renamed", detail))
        return call


def repair_history(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return a copy of ``messages`` that passes :func:`validate_history`.

    Dangling tool calls get an ``status="error"`` ToolMessage saying the call was
    interrupted (a malformed call, one saying its arguments did not parse); a tool-call id
    used a second time is renamed, and so is the result that answers it; orphan and
    duplicate results are dropped (logged at WARNING with their index). The input is not
    modified; :func:`repair_report` returns the same history plus what changed and which
    originals to archive.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}])
        >>> [m.type for m in repair_history([HumanMessage("go"), ai, HumanMessage("?")])]
        ['human', 'ai', 'tool', 'human']
    """
    return repair_report(messages).messages


def _broken_until(messages: Sequence[BaseMessage], start: int) -> int:
    """Smallest ``c >= start`` such that ``messages[c:]`` is valid with pending calls allowed
    (``start`` itself when it already is); ``c`` is never inside a tool-call batch."""
    clean = start
    calls: set[str] = set()  # ids of the current batch
    answered: set[str] = set()
    since_clean: set[str] = set()  # every id answered from ``clean`` on (ids are not reused)
    i, n = start, len(messages)
    while i < n:
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            tcid = msg.tool_call_id
            if tcid not in calls or tcid in answered or tcid in since_clean:
                i = _results_end(messages, i)  # orphan: skip its run
                clean, calls, answered, since_clean = i, set(), set(), set()
                continue
            answered.add(tcid)
            since_clean.add(tcid)
            i += 1
            continue
        if calls - answered:  # the previous batch was never fully answered
            clean, since_clean = i, set()
        calls, answered = set(), set()
        ids = [c.id for c in tool_calls_of(msg)]
        if ids:
            # a call without an id, or two calls with one id, cannot be paired: keep it out
            if not all(ids) or len(set(ids)) < len(ids):
                i = _results_end(messages, i + 1)
                clean, since_clean = i, set()
                continue
            calls = {str(c) for c in ids}
        i += 1
    return clean


def _results_end(messages: Sequence[BaseMessage], i: int) -> int:
    """The end of the run of tool results from ``messages[i]`` on (``i`` when there is none)."""
    while i < len(messages) and isinstance(messages[i], ToolMessage):
        i += 1
    return i


def find_safe_cut(messages: Sequence[BaseMessage], index: int) -> int:
    """Largest cut ``c <= index`` that keeps every tool-call batch whole.

    ``messages[:c]`` and ``messages[c:]`` are both valid when the input is: ``c`` never
    falls between an ``AIMessage`` with tool calls and its results, so a cut inside a batch
    moves back to that batch's ``AIMessage``.

    When the input is broken after that point (an orphan or duplicate tool result, a call
    not answered before the next message, a call without an id or sharing one with another
    call of its message), the cut moves forward, past the last such message, so that
    ``messages[c:]`` is valid (pending calls at the end allowed) and the broken part falls
    into what is summarised and archived: a compaction leaves no orphan behind.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}])
        >>> find_safe_cut([HumanMessage("go"), ai, ToolMessage("x", tool_call_id="c1")], 2)
        1
        >>> orphan = ToolMessage("y", tool_call_id="zz")
        >>> find_safe_cut([HumanMessage("go"), orphan, HumanMessage("next")], 1)
        2
    """
    if index < 0 or index > len(messages):
        raise IndexError(f"cut index {index} is outside 0..{len(messages)}")
    cut = index
    while 0 < cut < len(messages) and isinstance(messages[cut], ToolMessage):
        cut -= 1
    return _broken_until(messages, cut)


def is_summary(message: BaseMessage) -> bool:
    """``True`` for a compaction summary (which is also the boundary marker)."""
    return kind_of(message) == KIND_SUMMARY


def last_boundary_index(messages: Sequence[BaseMessage], *, memo: FactsMemo | None = None) -> int:
    """Index of the newest compaction summary, or ``-1`` if the history was never compacted."""
    facts = history_facts(messages, memo)
    return newest_boundary(messages)[0] if facts is None else facts.boundary


def original_task_index(messages: Sequence[BaseMessage], *, memo: FactsMemo | None = None) -> int:
    """Index of the user's original task: the pinned copy, else the first human message.

    Returns ``-1`` when there is no human message.
    """
    facts = history_facts(messages, memo)
    if facts is not None:  # remembered for a history that grew by a few messages
        return facts.task_index
    first = -1
    for i, msg in enumerate(messages):
        kind = kind_of(msg)
        if kind == KIND_PINNED_TASK:
            return i
        if first < 0 and isinstance(msg, HumanMessage) and kind not in (KIND_SUMMARY, KIND_STOP):
            first = i
    return first


def newest_request_index(messages: Sequence[BaseMessage]) -> int:
    """Index of the user's current request: the newest human message that is neither a
    summary nor a stop message (``-1`` when there is none). It is kept verbatim while the
    context fits with it whole: a compaction keeps it after the new summary (never in the
    span), and it is the last thing digested
    (:func:`~langchain_compact.microcompact.shrink_unread`).
    When it is the original task, the task's own rules apply (pinned; cut over
    ``task_max_ratio``).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> newest_request_index([HumanMessage("go"), AIMessage("ok"), HumanMessage("more")])
        2
    """
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, HumanMessage) and kind_of(msg) not in (KIND_SUMMARY, KIND_STOP):
            return i
    return -1


def open_request_index(messages: Sequence[BaseMessage]) -> int:
    """Index of the user's current request while the model is still working on it: the
    :func:`newest_request_index` when no final answer (an ``AIMessage`` without tool calls)
    follows it, ``-1`` otherwise. A sub-agent handed its subtask reads it on its first call
    and works on it with tool calls for many more: the subtask is its current request all
    that time, and a compaction keeps it verbatim after the summary like an unread request
    (the task a supervisor was given stays pinned ahead of it). Once answered it is
    summarisable like any other message.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}])
        >>> open_request_index([HumanMessage("go"), call, ToolMessage("x", tool_call_id="c1")])
        0
        >>> open_request_index([HumanMessage("go"), AIMessage("done")])
        -1
    """
    request = newest_request_index(messages)
    if request < 0:
        return -1
    for msg in messages[request + 1 :]:
        if isinstance(msg, AIMessage) and not tool_calls_of(msg):
            return -1
    return request
