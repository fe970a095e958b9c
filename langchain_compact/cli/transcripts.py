"""Read and write transcripts: OpenAI chat JSONL or LangChain message dicts.

Two formats, detected per file:

* ``"openai"``: one OpenAI chat message per line (``role``, ``content``, ``tool_calls``,
  ``tool_call_id``), like ``../shared/data/trajectories/*.jsonl``;
* ``"langchain"``: ``messages_to_dict`` dicts (``{"type": ..., "data": {...}}``), one per
  line or as one JSON list.

Every error names the file and the line (for a JSON list: the item) it comes from.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
    messages_from_dict,
    messages_to_dict,
)

from langchain_compact._placeholders import parse_cleared, parse_cut_notice, parse_summary_header
from langchain_compact.errors import CompactionError
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    with_meta,
)

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "Transcript",
    "TranscriptError",
    "check_output",
    "dump_transcript",
    "encode_transcript",
    "load_transcript",
    "read_input",
    "read_transcript",
    "write_atomic",
]

Format = Literal["openai", "langchain"]
Container = Literal["jsonl", "json"]

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
DEFAULT_MAX_INPUT_BYTES = 256 << 20
"""Largest transcript read by default (256 MiB); ``--max-input-bytes`` raises it."""
_CHUNK = 1 << 20


class TranscriptError(CompactionError, ValueError):
    """A transcript file cannot be read; the message names the file and line.

    Attributes:
        line: 1-based line (JSONL) or item number (JSON list); 0 when not tied to one.
    """

    def __init__(self, message: str, *, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True)
class Transcript:
    """A loaded transcript and where each message came from."""

    messages: list[BaseMessage]
    fmt: Format
    """``"openai"`` or ``"langchain"``."""
    container: Container
    """``"jsonl"`` (one message per line) or ``"json"`` (one JSON list)."""
    lines: list[int]
    """Source line (JSONL) or 1-based item number (JSON list) of each message."""

    def where(self, index: int) -> str:
        """Human name of the source position of ``messages[index]``."""
        if not 0 <= index < len(self.lines):
            return "?"
        noun = "line" if self.container == "jsonl" else "item"
        return f"{noun} {self.lines[index]}"


def _first_line(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):  # pydantic ValidationError: name the first bad field
        try:
            first = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            return f"{loc}: {first.get('msg', '')}".strip(": ")
        except Exception:
            pass
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _openai_to_langchain(raw: dict[str, Any]) -> dict[str, Any]:
    role = raw.get("role")
    if role not in _OPENAI_ROLES:
        raise ValueError(f"unknown role {role!r} (expected one of {', '.join(_OPENAI_ROLES)})")
    content = raw.get("content")
    if content is None:
        content = ""
    if not isinstance(content, (str, list)):
        raise ValueError(f"content must be a string or a list, got {type(content).__name__}")
    out: dict[str, Any] = {"role": role, "content": content}
    for key in ("id", "name"):
        if isinstance(raw.get(key), str):
            out[key] = raw[key]
    if raw.get("tool_calls"):
        if role != "assistant":
            raise ValueError(f"a {role} message cannot carry tool_calls")
        calls = []
        for n, call in enumerate(raw["tool_calls"]):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ValueError(f"tool_calls[{n}] has no function name")
            arguments = function.get("arguments") or "{}"
            try:
                args = json.loads(arguments) if isinstance(arguments, str) else arguments
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"tool_calls[{n}] ({function['name']}) has arguments that are not valid "
                    f"JSON ({exc.msg})"
                ) from None
            calls.append(
                {"id": call.get("id"), "name": function["name"], "args": args, "type": "tool_call"}
            )
        out["tool_calls"] = calls
    if role == "tool":
        if not isinstance(raw.get("tool_call_id"), str) or not raw["tool_call_id"]:
            raise ValueError("a tool message needs a tool_call_id")
        out["tool_call_id"] = raw["tool_call_id"]
    return out


def _parse_items(text: str, name: str) -> tuple[list[tuple[int, Any]], Container]:
    stripped = text.lstrip()
    if not stripped:
        raise TranscriptError(f"{name} is empty: expected one JSON message per line")
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"{name}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})",
                line=exc.lineno,
            ) from None
        if not isinstance(data, list) or not data:
            raise TranscriptError(f"{name} holds an empty JSON list: no messages")
        return list(enumerate(data, 1)), "json"
    items = []
    # Only "\n" ends a line: str.splitlines() would also split on U+2028, U+0085 and other
    # characters that JSON strings may hold raw (and this module writes them raw).
    for number, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            items.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"{name}:{number}: not valid JSON ({exc.msg}, column {exc.colno}); expected "
                "one JSON message per line",
                line=number,
            ) from None
    return items, "jsonl"


def _restore_marker(message: BaseMessage) -> BaseMessage:
    """The marker compaction left on ``message``, read back from its text.

    The OpenAI format has no metadata field, so the markers are lost on export; the texts
    compaction writes (placeholders, cut notices, summary headers) are parsed back on import,
    so compacting an already compacted file keeps its summaries and cleared results. A
    message that still has its marker keeps it.
    """
    if get_meta(message) or not isinstance(message.content, str):
        return message
    text = message.content
    if isinstance(message, ToolMessage):
        if parse_cleared(text) is not None:
            return with_meta(message, kind=KIND_CLEARED)
        cut = parse_cut_notice(text)
        if cut is not None and cut.kind == "result":
            return with_meta(message, kind=KIND_TRUNCATED)
    elif message.type in ("human", "system") and (header := parse_summary_header(text)):
        return with_meta(message, kind=KIND_SUMMARY, index=header.index)
    return message


def _too_big(name: str, size: int | None, max_bytes: int) -> TranscriptError:
    what = f"is {size:,} bytes, over" if size is not None else "holds more than"
    return TranscriptError(
        f"{name} {what} the input limit of {max_bytes:,} bytes; pass --max-input-bytes N "
        "to read a bigger transcript"
    )


def read_input(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of the transcript at ``path`` (``"-"``: standard input), at most
    ``max_bytes`` of them.

    A regular file's size is checked before anything is read; anything else (a pipe, a
    FIFO, a device such as ``/dev/zero``) is read in chunks and refused as soon as it goes
    over the limit, so memory stays bounded.

    Raises:
        TranscriptError: missing, a folder, unreadable, or over ``max_bytes``.
    """
    name = "<stdin>" if os.fspath(path) == "-" else str(path)
    if os.fspath(path) == "-":
        return _read_bounded(sys.stdin.buffer, name, max_bytes)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise TranscriptError(f"{name}: no such file") from None
    except OSError as exc:
        raise TranscriptError(f"{name}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise TranscriptError(f"{name} is a folder, not a transcript file")
    if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
        raise _too_big(name, info.st_size, max_bytes)
    try:
        with open(path, "rb") as handle:
            return _read_bounded(handle, name, max_bytes)
    except OSError as exc:
        raise TranscriptError(f"{name}: {exc.strerror or exc}") from None


def _read_bounded(handle: BinaryIO, name: str, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := handle.read(min(_CHUNK, max_bytes + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise _too_big(name, None, max_bytes)
    return b"".join(chunks)


def check_output(path: str | os.PathLike[str]) -> None:
    """Refuse an output path that is anything but a regular file or a new name.

    Writing replaces the file by renaming a temp file over it: done to a symbolic link, a
    FIFO or a device (``/dev/null`` as root) that would replace the link or the device node
    itself with a regular file.

    Raises:
        TranscriptError: ``path`` is a symbolic link, a folder, a FIFO, a device or socket.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TranscriptError(f"{os.fspath(path)}: {exc.strerror or exc}") from None
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return
    what = (
        "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a folder"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device file"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "not a regular file"
    )
    raise TranscriptError(
        f"{os.fspath(path)} is {what}: the output must be a regular file or a new path "
        "(it is replaced, never written through)"
    )


def read_transcript(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> Transcript:
    """Load a transcript file and report its format and the source line of each message.

    Tool results get their tool's ``name`` from the call they answer, and messages without
    an id get ``line-<N>``, so compaction and the archive can refer to them. ``"-"`` reads
    standard input; at most ``max_bytes`` are read (:func:`read_input`).

    Raises:
        TranscriptError: missing or unreadable file, over ``max_bytes``, bad JSON, or a line
            that is not a message; the text names the line.
    """
    name = "<stdin>" if os.fspath(path) == "-" else str(path)
    data = read_input(path, max_bytes=max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            f"{name} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    del data
    items, container = _parse_items(text, name)
    noun = "line" if container == "jsonl" else "item"
    fmt: Format | None = None
    messages: list[BaseMessage] = []
    lines: list[int] = []
    tool_names: dict[str, str] = {}
    for number, item in items:
        where = f"{name}:{number}" if container == "jsonl" else f"{name}: item {number}"
        if not isinstance(item, dict):
            raise TranscriptError(
                f"{where}: expected a JSON object (a message), got {type(item).__name__}",
                line=number,
            )
        kind: Format | None = (
            "openai"
            if "role" in item
            else "langchain"
            if "type" in item and "data" in item
            else None
        )
        if kind is None:
            raise TranscriptError(
                f"{where}: not a message: expected an OpenAI message ('role', 'content') or a "
                "LangChain message dict ('type', 'data')",
                line=number,
            )
        if fmt is None:
            fmt = kind
        elif kind != fmt:
            raise TranscriptError(
                f"{where}: a {kind} message in a file whose first {noun} is {fmt} format; "
                "use one format per file",
                line=number,
            )
        try:
            if kind == "openai":
                message = convert_to_messages([_openai_to_langchain(item)])[0]
            else:
                message = messages_from_dict([item])[0]
        except Exception as exc:
            raise TranscriptError(
                f"{where}: invalid {kind} message: {_first_line(exc)}", line=number
            ) from None
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    tool_names[str(call["id"])] = call["name"]
        updates: dict[str, Any] = {}
        if message.id is None:
            updates["id"] = f"line-{number}"
        if (
            isinstance(message, ToolMessage)
            and not message.name
            and message.tool_call_id in tool_names
        ):
            updates["name"] = tool_names[message.tool_call_id]
        message = message.model_copy(update=updates) if updates else message
        if kind == "openai":
            message = _restore_marker(message)
        messages.append(message)
        lines.append(number)
    assert fmt is not None  # _parse_items never returns an empty list
    return Transcript(messages=messages, fmt=fmt, container=container, lines=lines)


def load_transcript(path: str | os.PathLike[str]) -> list[BaseMessage]:
    """Load a transcript (OpenAI chat JSONL, or LangChain dicts as JSONL or a JSON list).

    Raises:
        TranscriptError: with the file and line of the first problem.
    """
    return read_transcript(path).messages


def _openai_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    out = []
    for message, data in zip(messages, convert_to_openai_messages(list(messages)), strict=True):
        if isinstance(message, ToolMessage):
            data.pop("name", None)  # the chat format's tool message has no name
        data.setdefault("content", "")
        out.append(data)
    return out


def _json_lines(
    dicts: Sequence[dict[str, Any]], *, indent: int | None
) -> tuple[list[str], list[int]]:
    """One JSON text per item, and the items that held lone surrogates (not UTF-8
    encodable): those are written with ``\\u`` escapes, which read back identically."""
    texts, escaped = [], []
    for n, d in enumerate(dicts):
        text = json.dumps(d, ensure_ascii=False, indent=indent, default=str)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(d, ensure_ascii=True, indent=indent, default=str)
            escaped.append(n)
        texts.append(text)
    return texts, escaped


def encode_transcript(
    messages: Sequence[BaseMessage], fmt: Format, *, container: Container = "jsonl"
) -> tuple[bytes, list[int]]:
    """The bytes :func:`dump_transcript` writes, and the indices of messages whose text
    held lone surrogates (written as JSON ``\\u`` escapes, so nothing is lost).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> lone = HumanMessage("\\ud800")  # a lone surrogate, e.g. from a JSON escape
        >>> data, escaped = encode_transcript([HumanMessage("ok"), lone], "openai")
        >>> escaped, data.splitlines()[1]
        ([1], b'{"role": "user", "content": "\\\\ud800"}')
    """
    if fmt == "openai":
        dicts = _openai_dicts(messages)
    elif fmt == "langchain":
        dicts = messages_to_dict(list(messages))
    else:
        raise ValueError(f"fmt must be 'openai' or 'langchain', got {fmt!r}")
    if container == "json":
        items, escaped = _json_lines(dicts, indent=1)
        body = ",\n".join(" " + item.replace("\n", "\n ") for item in items)
        text = f"[\n{body}\n]\n"
    else:
        items, escaped = _json_lines(dicts, indent=None)
        text = "".join(item + "\n" for item in items)
    return text.encode("utf-8"), escaped


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically: a temp file in the same folder, fsynced,
    then renamed over it. On any failure (a full disk...) ``path`` is left as it was, no temp
    file stays behind, and the ``OSError`` names ``path``. An existing file keeps its
    permission bits; a new one gets the usual ``0o666 & ~umask``. A ``path`` that exists
    and is not a regular file (a symbolic link, FIFO or device) is refused with a
    :class:`TranscriptError` (:func:`check_output`).
    """
    from langchain_compact._archive_files import atomic_write

    p = Path(path)
    check_output(p)  # never replace a link, a FIFO or a device with a regular file
    try:
        mode = p.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, data)
        os.chmod(p, mode)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(p)) from exc
    return p


def dump_transcript(
    messages: Sequence[BaseMessage],
    path: str | os.PathLike[str],
    fmt: Format,
    *,
    container: Container = "jsonl",
) -> Path:
    """Write ``messages`` to ``path`` in ``fmt`` (``"openai"`` or ``"langchain"``).

    ``container="jsonl"`` writes one message per line; ``"json"`` one JSON list. Parent
    folders are created. The write is atomic (:func:`write_atomic`): a failure leaves an
    existing file as it was. Text that is not valid Unicode (lone surrogates) is written as
    JSON ``\\u`` escapes. Returns the path written.
    """
    data, _ = encode_transcript(messages, fmt, container=container)
    return write_atomic(path, data)
