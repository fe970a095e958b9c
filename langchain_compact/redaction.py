"""Redact secrets from text and messages before they are archived or summarised.

A :data:`Redactor` is any ``str -> str`` function. :func:`redact_secrets` is the built-in one:
it replaces API keys, tokens, private keys and ``password=...``-style values by
``[REDACTED:<kind>]``. It is pattern based, so it catches well-known formats, not every
secret; pass your own redactor (or chain one after it) for anything else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["Redactor", "maybe_redact", "redact_messages", "redact_secrets"]

Redactor = Callable[[str], str]
"""A function that returns its text with secrets replaced."""

_NOT_AFTER = r"(?<![A-Za-z0-9_-])"  # a token must not continue a longer word
_NOT_BEFORE = r"(?![A-Za-z0-9_-])"

#: ``(kind, pattern)`` in the order they run; the whole match becomes ``[REDACTED:kind]``.
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        (
            "private_key",
            r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK|)-----"
            r"[\s\S]*?-----END \1PRIVATE KEY\2-----",
        ),
        ("anthropic_key", _NOT_AFTER + r"sk-ant-[\w-]{20,}" + _NOT_BEFORE),
        ("openai_key", _NOT_AFTER + r"sk-(?:proj-|svcacct-|admin-)?[\w-]{20,}" + _NOT_BEFORE),
        ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("github_token", _NOT_AFTER + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})"),
        ("slack_token", _NOT_AFTER + r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    )
)
_BEARER = re.compile(r"(?i)\b(Bearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/=-]{8,}")
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![A-Za-z0-9])
    (?P<key>passw(?:or)?d|pwd|secret|client[_-]?secret|secret[_-]?key|api[_-]?key
        |access[_-]?token|auth[_-]?token|private[_-]?key)
    (?P<sep>["']?[ \t]*[:=][ \t]*)
    (?:"(?P<dq>[^"\n]+)"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s"',;})\]]+))
    """
)
#: Assignment values that are not secrets: references, types, masks, earlier redactions.
_NOT_A_SECRET = re.compile(
    r"^(?:\$|%|<|\{|\*{3,}|\[REDACTED|os\.|getenv|environ|None$|null$|true$|false$"
    r"|(?:str|bytes|int|Any|SecretStr|Optional|Union)\b)",
    re.IGNORECASE,
)


def _assignment(match: re.Match[str]) -> str:
    value = match.group("dq") or match.group("sq") or match.group("bare") or ""
    if _NOT_A_SECRET.match(value):
        return match.group(0)
    key = match.group("key").lower().replace("-", "_")
    kind = "password" if key.startswith(("pass", "pwd")) else key
    quote = '"' if match.group("dq") else "'" if match.group("sq") else ""
    return f"{match.group('key')}{match.group('sep')}{quote}[REDACTED:{kind}]{quote}"


def redact_secrets(text: str) -> str:
    """Replace API keys, tokens, private keys and password-like values in ``text``.

    Covers OpenAI (``sk-``, ``sk-proj-``), Anthropic (``sk-ant-``), AWS access key ids
    (``AKIA``/``ASIA``), GitHub (``ghp_`` etc., ``github_pat_``), Slack (``xox?-``),
    ``Bearer`` tokens, PEM private key blocks, and ``password=...`` / ``api_key: ...``
    assignments (the value only; ``$VAR``, type names and masks are left alone). Running it
    twice changes nothing more.

    Args:
        text: Any text.

    Returns:
        The text with each secret replaced by ``[REDACTED:<kind>]``.

    Example:
        >>> redact_secrets("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz")
        'export OPENAI_API_KEY=[REDACTED:openai_key]'
        >>> redact_secrets('db password: "hunter22"')
        'db password: "[REDACTED:password]"'
    """
    for kind, pattern in _TOKEN_PATTERNS:
        text = pattern.sub(f"[REDACTED:{kind}]", text)
    text = _BEARER.sub(r"\1[REDACTED:bearer_token]", text)
    return _ASSIGNMENT.sub(_assignment, text)


def _redact_value(value: Any, redactor: Redactor) -> Any:
    """Redact every string inside nested dicts / lists (tool-call arguments)."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        return {key: _redact_value(item, redactor) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(item, redactor) for item in value]
    return value


def _redact_content(content: str | list[Any], redactor: Redactor) -> str | list[Any]:
    if isinstance(content, str):
        return redactor(content)
    blocks: list[Any] = []
    for block in content:
        if isinstance(block, str):
            block = redactor(block)
        elif isinstance(block, dict):
            block = dict(block)
            for key in ("text", "thinking", "reasoning"):
                if isinstance(block.get(key), str):
                    block[key] = redactor(block[key])
        blocks.append(block)
    return blocks


def maybe_redact(messages: Sequence[BaseMessage], redactor: Redactor | None) -> list[BaseMessage]:
    """``messages`` redacted with ``redactor``, or unchanged when there is none (or nothing).

    The one place every archive write and every summarised span goes through, so the
    ``CompactionConfig.redactor`` setting applies everywhere alike.
    """
    if redactor is None or not messages:
        return list(messages)
    return redact_messages(messages, redactor)


def redact_messages(
    messages: Sequence[BaseMessage], redactor: Redactor = redact_secrets
) -> list[BaseMessage]:
    """Return copies of ``messages`` with ``redactor`` applied to their text.

    Text content, text/reasoning content blocks, tool-call arguments (parsed and the raw
    OpenAI ``additional_kwargs["tool_calls"]``) are redacted. Ids, ``tool_call_id``,
    ``name`` and metadata are kept; the input messages are not changed.

    Args:
        messages: The messages to redact.
        redactor: ``str -> str`` applied to every text; defaults to :func:`redact_secrets`.

    Returns:
        New messages, in the same order.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> msg = ToolMessage("token=ghp_" + "a" * 36, tool_call_id="c1")
        >>> redact_messages([msg])[0].content
        'token=[REDACTED:github_token]'
    """
    out: list[BaseMessage] = []
    for message in messages:
        update: dict[str, Any] = {"content": _redact_content(message.content, redactor)}
        if isinstance(message, AIMessage):
            update["tool_calls"] = [
                {**call, "args": _redact_value(call["args"], redactor)}
                for call in message.tool_calls
            ]
            update["invalid_tool_calls"] = [
                {**call, "args": _redact_value(call.get("args"), redactor)}
                for call in message.invalid_tool_calls
            ]
        raw_calls = message.additional_kwargs.get("tool_calls")
        if isinstance(raw_calls, list):
            kwargs = dict(message.additional_kwargs)
            kwargs["tool_calls"] = _redact_value(raw_calls, redactor)
            update["additional_kwargs"] = kwargs
        out.append(message.model_copy(update=update))
    return out
