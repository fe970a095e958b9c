"""Provider payload rules on the tool-call pairing, judged on what the real converters send.

``openai_problems`` converts each message with langchain-openai's own converter (an
``AIMessage``'s ``tool_calls`` and ``invalid_tool_calls`` both become the request's
``tool_calls``) and checks OpenAI's rules: every assistant ``tool_calls`` id is answered by
exactly one ``tool`` message right after it (before the next other message), and no ``tool``
message answers anything else. ``anthropic_problems`` formats the list with
langchain-anthropic's own converter (tool messages become ``tool_result`` blocks of the next
user turn) and checks Anthropic's: the ``tool_use`` ids of a request are unique, every one is
answered by exactly one ``tool_result`` of the next user turn, and every ``tool_result``
answers a ``tool_use`` of the assistant turn right before it. Nothing here calls the package.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_anthropic.chat_models import _format_messages
from langchain_core.messages import BaseMessage
from langchain_openai.chat_models.base import _convert_message_to_dict


def openai_problems(messages: Sequence[BaseMessage]) -> list[str]:
    problems: list[str] = []
    owed: Counter[str] = Counter()  # call id -> answers still owed by the current batch
    at = -1  # index of the batch's assistant message

    def close(where: str) -> None:
        for cid, n in owed.items():
            if n > 0:
                problems.append(f"openai: tool call {cid!r} of message {at} unanswered {where}")
        owed.clear()

    for k, m in enumerate(messages):
        d = _convert_message_to_dict(m)
        if d["role"] == "tool":
            cid = d.get("tool_call_id")
            if owed[cid] <= 0:
                problems.append(f"openai: tool message {k} ({cid!r}) answers no open call")
            owed[cid] -= 1
            continue
        close(f"before message {k}")
        if d["role"] == "assistant":
            at = k
            for call in d.get("tool_calls") or []:
                cid = call.get("id")
                if not isinstance(cid, str) or not cid:
                    problems.append(f"openai: a tool call of message {k} has no id")
                owed[cid] += 1
    close("at the end")
    return problems


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def anthropic_problems(messages: Sequence[BaseMessage]) -> list[str]:
    try:
        _system, formatted = _format_messages(list(messages), model="claude-sonnet-4-5")
    except Exception as exc:  # the request could not be built at all
        return [f"anthropic: does not format: {type(exc).__name__}: {exc}"[:200]]
    problems: list[str] = []
    used: Counter[str] = Counter()
    for k, d in enumerate(formatted):
        uses = [str(b.get("id") or "") for b in _blocks(d, "tool_use")]
        if d["role"] == "assistant":
            used.update(uses)
            if any(not u for u in uses):
                problems.append(f"anthropic: a tool_use of turn {k} has no id")
            after = formatted[k + 1] if k + 1 < len(formatted) else None
            results = Counter(
                str(b.get("tool_use_id")) for b in (_blocks(after, "tool_result") if after else [])
            )
            for u, n in Counter(uses).items():
                if n > 1:
                    problems.append(f"anthropic: tool_use id {u!r} twice in turn {k}")
                if results[u] != 1:
                    problems.append(
                        f"anthropic: tool_use {u!r} of turn {k} has {results[u]} tool_result(s) "
                        "in the next turn"
                    )
        if d["role"] == "user":
            before = formatted[k - 1] if k else None
            calls = {
                str(b.get("id"))
                for b in (
                    _blocks(before, "tool_use") if before and before["role"] == "assistant" else []
                )
            }
            for b in _blocks(d, "tool_result"):
                if str(b.get("tool_use_id")) not in calls:
                    problems.append(
                        f"anthropic: tool_result {b.get('tool_use_id')!r} in turn {k} answers no "
                        "tool_use of the turn before"
                    )
    problems += [f"anthropic: tool_use id {u!r} used {n} times" for u, n in used.items() if n > 1]
    return problems


def payload_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Every breach of OpenAI's and Anthropic's tool-call rules in ``messages``."""
    return openai_problems(messages) + anthropic_problems(messages)
