"""History structure (DESIGN.md B2): tool-call pairing, safe cut points, repair, markers.

Providers answer a broken pairing with HTTP 400: every ``ToolMessage`` must answer a tool
call of the ``AIMessage`` right before its batch, and every tool call must be answered
before the next non-tool message. A parallel batch is one unit: never split it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact._meta import (
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    kind_of,
    newest_boundary,
)
from langchain_compact.errors import InvalidHistoryError
from langchain_compact.tokens import _check_message

__all__ = [
    "find_safe_cut",
    "is_summary",
    "last_boundary_index",
    "original_task_index",
    "repair_history",
    "validate_history",
]

logger = logging.getLogger(__name__)

INTERRUPTED_RESULT = (
    "[no result: this tool call was interrupted before it returned; "
    "call the tool again if the result is still needed]"
)


def validate_history(messages: Sequence[BaseMessage], *, allow_pending: bool = False) -> None:
    """Raise :class:`InvalidHistoryError` if tool calls and results are not properly paired.

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
    open_ids: dict[str, int] = {}  # unanswered call id -> index of its AIMessage
    batch: set[str] = set()  # ids of the current batch (answered or not)
    answered: set[str] = set()
    for i, raw in enumerate(messages):
        msg = _check_message(raw, i)
        if isinstance(msg, ToolMessage):
            tcid = msg.tool_call_id
            if tcid in answered:
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
            open_ids.pop(tcid, None)
            answered.add(tcid)
            continue
        if open_ids:
            first = min(open_ids.values())
            missing = sorted(k for k, v in open_ids.items() if v == first)
            raise InvalidHistoryError(
                f"messages[{first}] is an AIMessage whose tool call(s) {missing} have no "
                f"ToolMessage before messages[{i}]; add the results right after it, or close "
                "them with repair_history (it adds an 'interrupted' result).",
                index=first,
            )
        batch = set()
        if isinstance(msg, AIMessage) and msg.tool_calls:
            for call in msg.tool_calls:
                cid = call.get("id")
                if not cid:
                    raise InvalidHistoryError(
                        f"messages[{i}] has a tool call without an id ({call.get('name')!r}); "
                        "give every tool call an id so its result can be paired.",
                        index=i,
                    )
                batch.add(cid)
                open_ids[cid] = i
    if open_ids and not allow_pending:
        first = min(open_ids.values())
        raise InvalidHistoryError(
            f"messages[{first}] is an AIMessage whose tool call(s) {sorted(open_ids)} have no "
            "result at the end of the history; run the tools first, or close the calls with "
            "repair_history.",
            index=first,
        )


def repair_history(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return a copy of ``messages`` that passes :func:`validate_history`.

    Dangling tool calls get an ``status="error"`` ToolMessage saying the call was
    interrupted; a tool-call id used a second time is renamed; orphan and duplicate results
    are dropped (logged at WARNING with their
    index). The input is not modified, so callers that must lose nothing archive it first.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}])
        >>> [m.type for m in repair_history([HumanMessage("go"), ai, HumanMessage("?")])]
        ['human', 'ai', 'tool', 'human']
    """
    out: list[BaseMessage] = []
    pending: list[tuple[str, str]] = []  # (id, tool name) still unanswered in this batch
    batch: set[str] = set()
    answered: set[str] = set()
    seen_calls: set[str] = set()

    def close_pending() -> None:
        for cid, name in pending:
            out.append(ToolMessage(INTERRUPTED_RESULT, tool_call_id=cid, name=name, status="error"))
            answered.add(cid)
        pending.clear()

    for i, raw in enumerate(messages):
        msg = _check_message(raw, i)
        if isinstance(msg, ToolMessage):
            tcid = msg.tool_call_id
            if tcid in batch and tcid not in answered:
                out.append(msg)
                answered.add(tcid)
                pending[:] = [p for p in pending if p[0] != tcid]
            else:
                logger.warning("repair_history: dropped orphan ToolMessage at index %d", i)
            continue
        close_pending()
        batch = set()
        if isinstance(msg, AIMessage) and msg.tool_calls:
            calls = []
            for n, call in enumerate(msg.tool_calls):
                cid = call.get("id")
                if not cid:
                    call = {**call, "id": f"repaired_{i}_{n}"}
                elif cid in seen_calls:  # a re-used id would pair with the wrong result
                    call = {**call, "id": f"{cid}__dup{i}_{n}"}
                seen_calls.add(str(call["id"]))
                calls.append(call)
            if calls != msg.tool_calls:
                msg = msg.model_copy(update={"tool_calls": calls})
            for call in calls:
                cid = str(call["id"])
                batch.add(cid)
                pending.append((cid, call["name"]))
        out.append(msg)
    close_pending()
    return out


def find_safe_cut(messages: Sequence[BaseMessage], index: int) -> int:
    """Largest cut ``c <= index`` that keeps every tool-call batch whole.

    ``messages[:c]`` and ``messages[c:]`` are both valid when the input is: ``c`` never
    falls between an ``AIMessage`` with tool calls and its results, so a cut inside a batch
    moves back to that batch's ``AIMessage``.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}])
        >>> find_safe_cut([HumanMessage("go"), ai, ToolMessage("x", tool_call_id="c1")], 2)
        1
    """
    if index < 0 or index > len(messages):
        raise IndexError(f"cut index {index} is outside 0..{len(messages)}")
    cut = index
    while 0 < cut < len(messages) and isinstance(messages[cut], ToolMessage):
        cut -= 1
    return cut


def is_summary(message: BaseMessage) -> bool:
    """``True`` for a compaction summary (which is also the boundary marker)."""
    return kind_of(message) == KIND_SUMMARY


def last_boundary_index(messages: Sequence[BaseMessage]) -> int:
    """Index of the newest compaction summary, or ``-1`` if the history was never compacted."""
    return newest_boundary(messages)[0]


def original_task_index(messages: Sequence[BaseMessage]) -> int:
    """Index of the user's original task: the pinned copy, else the first human message.

    Returns ``-1`` when there is no human message.
    """
    first = -1
    for i, msg in enumerate(messages):
        kind = kind_of(msg)
        if kind == KIND_PINNED_TASK:
            return i
        if first < 0 and isinstance(msg, HumanMessage) and kind not in (KIND_SUMMARY, KIND_STOP):
            first = i
    return first
