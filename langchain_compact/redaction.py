"""Redact secrets from text and messages before they are archived or summarised.

A :data:`Redactor` is any ``str -> str`` function. :func:`redact_secrets` is the built-in one:
it replaces API keys, tokens, private keys and ``password=...``-style values by
``[REDACTED:<kind>]``. It is pattern based, so it catches well-known formats, not every
secret; pass your own redactor (or chain one after it) for anything else.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_compact import _secret_patterns as P
from langchain_compact.errors import ConfigError

__all__ = ["Redactor", "maybe_redact", "redact_messages", "redact_secrets"]

Redactor = Callable[[str], str]
"""A function that returns its text with secrets replaced."""

_MARK = "[REDACTED:"
_COMMANDS = ("export", "set", "$env:")


def _mixed(token: str) -> bool:
    return (
        any(c.isdigit() for c in token)
        and any(c.isupper() for c in token)
        and any(c.islower() for c in token)
    )


def _key_like(token: str) -> bool:
    """A ``sk-`` token that is a key, not a kebab-case name (``sk-build-dependencies``):
    mixed case with a digit, or one run of at least 20 letters and digits with both."""
    if _mixed(token):
        return True
    body = P.KEY_PREFIX.sub("", token)
    return (
        len(body) >= 20
        and body.isascii()
        and body.isalnum()
        and any(c.isdigit() for c in body)
        and any(c.isalpha() for c in body)
    )


def _token_sub(kind: str, pattern: re.Pattern[str], text: str) -> str:
    if kind not in P.NEEDS_MIXED_CASE:
        return pattern.sub(f"[REDACTED:{kind}]", text)
    return pattern.sub(lambda m: f"[REDACTED:{kind}]" if _key_like(m[0]) else m[0], text)


def _keep_head(
    kind: str, keep: Callable[[str], bool] | None = None
) -> Callable[[re.Match[str]], str]:
    """Replace group ``pw`` (unless already redacted or ``keep(value)``), keep ``head``."""
    keep = keep or _not_a_secret

    def sub(match: re.Match[str]) -> str:
        value = match["pw"].strip("'\"")
        if not value or keep(value):
            return match[0]
        return f"{match['head']}[REDACTED:{kind}]"

    return sub


def _template(value: str) -> bool:
    """A template, mask or earlier redaction (``$PW``, ``{pw}``, ``***``): in a URL even a
    word like ``password`` is the credential itself."""
    return P.NOT_A_SECRET.match(value) is not None and not value[:1].isalpha()


def _token_value(value: str) -> bool:
    """Keep a ``token=`` value unless it looks like one: letters and digits, 16 or more."""
    return not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value))


_COOKIE_ATTRIBUTES = ("path=", "domain=", "expires=", "max-age=", "samesite=", "priority=")


def _cookie(match: re.Match[str]) -> str:
    value = _keep_head("cookie")

    def pair(m: re.Match[str]) -> str:
        name = m["head"].lstrip(";: \t").lower()
        return m[0] if name.startswith(_COOKIE_ATTRIBUTES) else value(m)

    return P.COOKIE_PAIR.sub(pair, match[0])


def _not_a_secret(value: str) -> bool:
    """A reference, template, type name, mask, earlier redaction or a variable that *names*
    a secret (``user_password``) rather than holding one."""
    if P.NOT_A_SECRET.match(value) or P.REFERENCE.match(value):
        return True
    if P.IDENTIFIER.match(value) and not any(c.isdigit() for c in value):
        return any(part.lower() in P.SECRET_WORDS for part in P.NAME_PARTS.split(value))
    return False


def _at_line_start(text: str, start: int) -> bool:
    """Whether only indentation, a bullet, a quote or a command (``export``...) stands
    before ``start`` on its line (a short look back: a long line's start is never
    searched for)."""
    before = text[max(0, start - 80) : start]
    line = before.rpartition("\n")[2] if "\n" in before or start <= 80 else "x"
    return not line.strip(" \t-\"'`[{(") or line.strip().lower() in _COMMANDS


def _prose(word: str, after: str, at_line_start: bool) -> bool:
    """Whether ``word`` after a colon starts prose, not a value ("Set the password: it
    must...", "The secret: nobody reads...": a colon mid-line followed by lower-case words);
    ``after``: the two characters after the word."""
    first = word.lower()
    if first in P.PROSE_START:
        return True
    return (
        not at_line_start
        and first.isalpha()
        and word.islower()
        and (len(first) < 4 or (after[:1] == " " and after[1:].islower()))
    )


def _keywords(text: str) -> str:
    """``password = ...`` and friends; one left-to-right pass that never rescans a value."""
    out: list[str] = []
    pos = 0
    while match := P.KEYWORD.search(text, pos):
        start, end = match.span()
        marker = text.rfind(_MARK, max(0, start - 40), start)
        if marker >= 0 and "]" not in text[marker:start]:
            out.append(text[pos:end])  # the kind inside an earlier [REDACTED:...] marker
            pos = end
            continue
        out.append(text[pos:end])
        pos = end
        at_line_start = _at_line_start(text, start)
        colon = ":" in match["sep"] and "=" not in match["sep"]
        quoted = P.QUOTED.match(text, end)
        if quoted:
            value = next(g for g in quoted.groups() if g is not None)
            if _not_a_secret(value):
                out.append(quoted[0])
            else:
                out.append(f"{quoted[0][0]}[REDACTED:{_kind(match['key'])}]{quoted[0][0]}")
            pos = quoted.end()
            continue
        word = P.WORD.match(text, end)
        if not word:
            continue
        value_end = word.end()
        spaced = match["sep"].endswith((" ", "\t"))
        if spaced and (not colon or at_line_start):  # "x = a b c", YAML "x: a b c"
            more = P.MORE_WORDS.match(text, value_end)
            if more:
                value_end = more.end()
        value = text[end:value_end].rstrip()
        prose = colon and _prose(word[0], text[word.end() : word.end() + 2], at_line_start)
        # "secret_key: 512 bits": a size, not a value
        size = word[0].isdigit() and P.SIZE_UNIT.match(text, word.end()) is not None
        if prose or size or _not_a_secret(word[0]):
            out.append(text[end:value_end])
        else:
            out.append(f"[REDACTED:{_kind(match['key'])}]" + text[end + len(value) : value_end])
        pos = value_end
    out.append(text[pos:])
    return "".join(out)


def _kind(key: str) -> str:
    key = key.lower().replace("-", "_")
    return "password" if key.startswith(("pass", "pwd")) else key


def redact_secrets(text: str) -> str:
    """Replace API keys, tokens, private keys and password-like values in ``text``.

    Covers provider tokens (OpenAI, Anthropic, AWS key ids, GitHub, GitLab, Slack tokens and
    webhooks, Google ``AIza``, Stripe, Hugging Face, npm, PyPI, SendGrid, Square, Twilio,
    Mailchimp, Telegram, Discord, Azure storage), JWTs, ``Bearer`` / ``Basic`` credentials,
    PEM private keys (with or without their END line), passwords in URLs
    (``postgres://user:pw@host``), credentials in query strings (signed URLs), ``mysql -pX``,
    cookie values, and ``password=...`` / ``api_key: ...`` / ``aws_secret_access_key = ...``
    assignments (the value only; references like ``settings.api_key`` or ``$VAR``, type
    names, masks, comparisons and prose are left alone). Linear in the text's length.
    Running it twice changes nothing more.

    Args:
        text: Any text.

    Returns:
        The text with each secret replaced by ``[REDACTED:<kind>]``.

    Example:
        >>> redact_secrets("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyZ1")
        'export OPENAI_API_KEY=[REDACTED:openai_key]'
        >>> redact_secrets('db password: "hunter22"')
        'db password: "[REDACTED:password]"'
        >>> redact_secrets("psql postgres://app:s3cret@db:5432/main")
        'psql postgres://app:[REDACTED:url_password]@db:5432/main'
    """
    lowered = text.lower()

    def has(kind: str) -> bool:
        hints = P.HINTS.get(kind)
        if hints is not None:
            return any(h in text for h in hints)
        return any(h in lowered for h in P.LOWER_HINTS.get(kind, ("",)))

    if has("private_key"):
        text = P.PRIVATE_KEY.sub("[REDACTED:private_key]", text)
    for kind, pattern in P.TOKENS:
        if has(kind):
            text = _token_sub(kind, pattern, text)
    if has("bearer"):
        text = P.BEARER.sub(r"\1[REDACTED:bearer_token]", text)
    if has("basic_auth"):
        text = P.BASIC_AUTH.sub(r"\1[REDACTED:basic_auth]", text)
    if has("url_password"):
        text = P.URL_PASSWORD.sub(_keep_head("url_password", _template), text)
    if has("url_credential"):
        text = P.URL_QUERY.sub(_keep_head("url_credential"), text)
    if has("token_value"):
        text = P.TOKEN_VALUE.sub(_keep_head("token", _token_value), text)
    if has("cli_password"):
        text = P.CLI_PASSWORD.sub(_keep_head("password"), text)
    if has("cookie"):
        text = P.COOKIE_HEADER.sub(_cookie, text)
    return _keywords(text) if has("keyword") else text


#: Block fields that are binary payloads, signatures or structure, never redacted (changing
#: a signature or a base64 image would break it).
_BLOCK_KEEP = frozenset(
    {"data", "base64", "file_data", "signature", "id", "type", "mime_type", "media_type",
     "source_type", "format", "file_id", "index", "detail"}
)  # fmt: skip
_URL_FIELDS = frozenset({"url", "image_url", "file_url", "audio_url", "video_url"})
_TEXT_MIME = ("text/", "application/json", "application/xml", "application/x-yaml")


def _redact_url(url: str, redactor: Redactor) -> str:
    """A URL: signed-URL credentials and passwords go; a ``data:`` URL's text payload is
    redacted (decoded first when it is base64 text); binary payloads are kept as they are."""
    if not url.startswith("data:"):
        return redactor(url)
    header, sep, payload = url.partition(",")
    if ";base64" not in header:
        return header + sep + redactor(payload)
    if not header[5:].startswith(_TEXT_MIME):
        return url
    try:
        decoded = base64.b64decode(payload, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return url
    redacted = redactor(decoded)
    if redacted == decoded:
        return url
    return header + sep + base64.b64encode(redacted.encode("utf-8")).decode("ascii")


def _redact_value(value: Any, redactor: Redactor, *, block: bool = False) -> Any:
    """Redact every string inside nested dicts / lists (tool-call arguments, metadata,
    artifacts). In content blocks (``block=True``) payloads and signatures are kept and
    URLs go through :func:`_redact_url`."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if block and key in _BLOCK_KEEP:
                out[key] = item
            elif block and key in _URL_FIELDS and isinstance(item, str):
                out[key] = _redact_url(item, redactor)
            else:
                out[key] = _redact_value(item, redactor, block=block)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact_value(item, redactor, block=block) for item in value]
    return value


def _redact_content(content: str | list[Any], redactor: Redactor) -> str | list[Any]:
    if isinstance(content, str):
        return redactor(content)
    return [_redact_value(block, redactor, block=True) for block in content]


def _returning_str(redactor: Redactor) -> Redactor:
    """``redactor``, checked: a result that is not a str is a :class:`ConfigError` naming
    the setting, not a ``TypeError`` deep inside the redaction."""

    def checked(text: str) -> str:
        result = redactor(text)
        if not isinstance(result, str):
            raise ConfigError(
                f"the redactor returned {type(result).__name__}, not a str: "
                "CompactionConfig.redactor (or redact_messages' redactor) must be a callable "
                "str -> str that returns the text with secrets replaced."
            )
        return result

    return checked


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

    Redacted: text content and every string field of content blocks (image and file URLs
    included: signed-URL credentials go, binary payloads and signatures stay intact),
    tool-call arguments, every string in ``additional_kwargs`` (raw tool calls,
    ``reasoning_content``...) and ``response_metadata``, and ``ToolMessage.artifact`` when it
    is made of strings, dicts and lists (other objects are kept as they are). Ids,
    ``tool_call_id`` and ``name`` are kept; the input messages are not changed.

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
    if not callable(redactor):
        raise ConfigError(f"redactor must be a callable str -> str, got {redactor!r}.")
    redactor = _returning_str(redactor)
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
        if message.additional_kwargs:
            update["additional_kwargs"] = _redact_value(message.additional_kwargs, redactor)
        if message.response_metadata:
            update["response_metadata"] = _redact_value(message.response_metadata, redactor)
        if isinstance(message, ToolMessage) and message.artifact is not None:
            update["artifact"] = _redact_value(message.artifact, redactor)
        out.append(message.model_copy(update=update))
    return out
