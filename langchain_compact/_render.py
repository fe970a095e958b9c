"""Rendering messages as plain text for summarizers, and salient-detail extraction."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

_ROLE = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}

#: Numbers (3+ digits or decimals), ids like QX-4821 / a1b2c3d4, paths and URLs.
_SALIENT_RE = re.compile(
    r"https?://[^\s\"'<>)\]]+"  # URLs
    r"|(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+"  # absolute / relative paths with a slash
    r"|\b[\w\-]+\.(?:py|js|ts|rs|go|c|h|cc|cpp|java|json|yaml|yml|toml|md|txt|csv|sql|sh)\b"
    r"|\b[A-Z][A-Z0-9]*-\d+[A-Z0-9\-]*\b"  # ticket-like ids
    r"|[\u4e00-\u9fff]{1,8}-\d+"  # ids with a CJK prefix
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"  # hashes
    r"|\b\d+(?:[.,]\d+)+\b|\b\d{3,}\b"  # numbers
)


def tool_result_text(message: BaseMessage) -> str:
    """The text of a message's content (text blocks joined; other blocks skipped)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


#: Identifiers worth keeping from the middle of a long output: ticket-like ids and URLs.
_KEY_RE = re.compile(r"\b[A-Z][A-Z0-9]*-\d+|[\u4e00-\u9fff]{1,8}-\d+|https?://")


#: The line boundaries of ``str.splitlines``.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def key_lines(text: str, *, limit: int = 5, width: int = 200) -> list[str]:
    r"""Lines of ``text`` that carry ticket-like identifiers or URLs (at most ``limit``).

    One pass that stops after ``limit`` lines (a long output is not split into lines).

    Example:
        >>> key_lines("build ok\nsee QX-12 and QX-13\nfetched https://x.org/a\ndone")
        ['see QX-12 and QX-13', 'fetched https://x.org/a']
    """
    found: list[str] = []
    pos = 0
    while len(found) < limit and (match := _KEY_RE.search(text, pos)):
        start = max(text.rfind(c, 0, match.start()) for c in _LINE_BREAKS) + 1
        ends = [e for c in _LINE_BREAKS if (e := text.find(c, match.end())) >= 0]
        end = min(ends) if ends else len(text)
        found.append(text[start:end].strip()[:width])
        pos = end
    return found


def render_call(name: str, args: object) -> str:
    """``name({"a": 1})``: the JSON form summaries and the demo policy both read."""
    return f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=False)})"


def render_message(message: BaseMessage, *, max_chars: int | None = None) -> str:
    """One message as ``[role] text`` plus its tool calls, optionally clipped."""
    role = _ROLE.get(message.type, message.type)
    if isinstance(message, ToolMessage):
        role = f"tool result {message.name or ''} ({message.tool_call_id})".replace("  ", " ")
    text = tool_result_text(message)
    if max_chars is not None and len(text) > max_chars:
        half = max_chars // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} chars ...]\n{text[-half:]}"
    lines = [f"[{role}] {text}".rstrip()]
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            lines.append(
                f"  -> called {render_call(call['name'], call['args'])} [{call.get('id')}]"
            )
    return "\n".join(lines)


def render_transcript(
    messages: Sequence[BaseMessage], *, max_chars_per_message: int | None = None
) -> str:
    """The messages as a plain transcript, one block per message."""
    return "\n\n".join(render_message(m, max_chars=max_chars_per_message) for m in messages)


def salient_items(text: str) -> list[str]:
    """Numbers, identifiers, paths and URLs in ``text``, in order, without repeats."""
    seen: dict[str, None] = {}
    for match in _SALIENT_RE.finditer(text):
        seen.setdefault(match.group(0).rstrip(".,;:"), None)
    return list(seen)


_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")


def salient_rank(item: str) -> int:
    """0 for identifiers and URLs, 1 for paths and file names, 2 for hashes, 3 for numbers."""
    if _KEY_RE.search(item):
        return 0
    if "/" in item or ("." in item and not _NUMBER_RE.fullmatch(item)):
        return 1
    return 3 if _NUMBER_RE.fullmatch(item) else 2


def context_of(item: str, text: str, *, width: int = 60) -> str:
    """The line around the first occurrence of ``item`` in ``text``, clipped to ``width``."""
    pos = text.find(item)
    if pos < 0:
        return item
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    start = max(start, pos - width)
    end = min(end, pos + len(item) + width)
    return text[start:end].strip()
