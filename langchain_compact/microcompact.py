"""Micro-compaction (docs/design.md, B3, B4): clear old tool results, cut oversized ones.

Both functions are pure: they return new messages with the same ``id``, ``tool_call_id``,
``name`` and ``status``, so LangGraph's ``add_messages`` replaces them in place, and they
mark what they changed in ``response_metadata["langchain_compact"]`` so a second run
changes nothing. The originals are the caller's to archive first (the graph nodes, the LCEL
transformer and the middleware do, through :mod:`langchain_compact.archive`).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from langchain_compact._facts import facts_block
from langchain_compact._images import describe_image, is_image_block
from langchain_compact._placeholders import (
    DEFAULT_PLACEHOLDER,
    DEFAULT_TRUNCATION_NOTICE,
    UNARCHIVED_NOTICE,
    UNARCHIVED_PLACEHOLDER,
    argument_stub,
    assistant_notice,
    cleared_text,
    cut_notice,
    task_notice,
)
from langchain_compact._provider_items import carries_provider_compaction
from langchain_compact._render import block_reference, tool_result_text
from langchain_compact._scan import FactsMemo, history_facts
from langchain_compact.budget import OBSERVATION_CHARS, chars_for_tokens
from langchain_compact.config import (
    DEFAULT_LARGE_TOOL_RESULT_CHARS,
    DEFAULT_LARGE_TOOL_RESULT_KEEP_CHARS,
    DEFAULT_MICRO_KEEP,
    DEFAULT_MICRO_MIN_CHARS,
    CompactionConfig,
)
from langchain_compact.digest import structured_digest
from langchain_compact.errors import ConfigError
from langchain_compact.history import (
    find_safe_cut,
    newest_request_index,
    original_task_index,
    tool_calls_of,
)
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    Saving,
    kind_of,
    with_meta,
)
from langchain_compact.tokens import (
    AnchorCheck,
    TiktokenCounter,
    TokenCounter,
    approx_text,
    approximate_tokens,
    check_message,
    context_tokens,
    is_approximate,
    precise_context_tokens,
    precise_counter,
    pricing_of,
)

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_TRUNCATION_NOTICE",
    "UNARCHIVED_NOTICE",
    "UNARCHIVED_PLACEHOLDER",
    "MicroResult",
    "clear_tool_results",
    "cleared_tokens",
    "cut_task",
    "micro_compact",
    "micro_compact_with_count",
    "reduce_assistant",
    "shrink_unread",
    "tool_result_text",
    "truncate_large_tool_results",
]

_DONE = (KIND_CLEARED, KIND_TRUNCATED)
_MAX_PASSES = 8  # micro_compact's passes to a fixed point (each one only shrinks)


def _usage_anchor(messages: Sequence[BaseMessage]) -> str | None:
    for msg in reversed(messages):
        if isinstance(msg, AIMessage) and msg.usage_metadata:
            return msg.id
    return None


def _tokens(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text`` alone under ``counter`` (fast paths for the package's counters,
    which count a placeholder as its head plus its fact lines: ``tokens.parts_cut``)."""
    if is_approximate(counter):
        return approx_text(text)
    if isinstance(counter, TiktokenCounter):
        return counter.count_text(text)
    return max(0, counter([HumanMessage(text)]) - counter([HumanMessage("")]))


def _media(msg: BaseMessage) -> list[dict[str, Any]]:
    """The blocks of ``msg`` that are not text (images, audio, files): what a replacement by
    text removes besides the text."""
    if isinstance(msg.content, str):
        return []
    return [b for b in msg.content if isinstance(b, dict) and block_reference(b) is not None]


def _media_tokens(msg: BaseMessage, text: str, counter: TokenCounter) -> int:
    """Tokens ``counter`` gives the non-text blocks of ``msg`` (images at the provider's
    price): ``msg`` counted against the same message holding ``text`` alone."""
    if not _media(msg):
        return 0
    return max(0, counter([msg]) - counter([msg.model_copy(update={"content": text})]))


def _media_note(msg: BaseMessage) -> str:
    """One line naming each image or file a replacement removes (``""`` when none), e.g.
    ``[image 1280x800 png cleared; archived with the message]``."""
    names = [
        describe_image(b) if is_image_block(b) else str(block_reference(b)).strip("[]")
        for b in _media(msg)
    ]
    if not names:
        return ""
    return f"[{'; '.join(names)} cleared; archived with the message]\n"


def unread_start(messages: Sequence[BaseMessage]) -> int:
    """Index of the first message no model call has seen: the one after the newest
    ``AIMessage`` (``0`` when the model has not been called yet).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> unread_start([HumanMessage("go"), AIMessage("", tool_calls=[
        ...     {"name": "ls", "args": {}, "id": "c1"}]), ToolMessage("a b", tool_call_id="c1")])
        2
    """
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return i + 1
    return 0


def tool_names(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """``tool_call_id -> tool name``, from the tool calls of the ``AIMessage`` objects."""
    names: dict[str, str] = {}
    for msg in messages:
        for call in tool_calls_of(msg):
            if call.id:
                names[call.id] = call.name
    return names


def result_name(message: BaseMessage, names: dict[str, str]) -> str:
    """The tool name of a result: its own ``name``, else the name of the call it answers."""
    own = getattr(message, "name", None)
    if own:
        return str(own)
    return names.get(str(getattr(message, "tool_call_id", "")), "")


def _placeholder_text(
    msg: ToolMessage,
    text: str,
    template: str,
    chars: int,
    tokens: int,
    name: str,
    media_note: str = "",
) -> str:
    """The placeholder of ``msg``: its head, then the fact lines of ``text`` (whose counts
    were made ahead with the result's, :func:`~langchain_compact._facts.remember_facts`;
    the placeholder is counted as the two parts, ``tokens.parts_cut``)."""
    head = cleared_text(
        template, name=name or "tool", chars=chars, tokens=tokens, tool_call_id=msg.tool_call_id
    )
    # The facts (key = value, ids, paths, URLs) stay visible in the placeholder.
    return head + ("\n" + media_note.rstrip("\n") if media_note else "") + facts_block(text)


def _precise_saved(text: str, new_text: str, media: int = 0) -> int | None:
    """What replacing ``text`` by ``new_text`` saved as tiktoken (o200k) counts it, plus
    ``media`` (the images and files it dropped, in tiktoken's pricing), so a calibration
    that counts with tiktoken credits the report in its own units (``saved_tokens`` is in
    the configured counter's); ``None`` where tiktoken cannot be loaded."""
    precise = precise_counter()
    if precise is None:
        return None
    return max(0, precise.count_text(text) - precise.count_text(new_text)) + media


def _clear_one(
    msg: ToolMessage, template: str, name: str, counter: TokenCounter, anchor: str | None
) -> BaseMessage | None:
    """The cleared form of ``msg``, or ``None`` when the placeholder would not be shorter.

    Images and files in the result are cleared with its text; the placeholder names each
    (``image 1280x800 png``)."""
    text = tool_result_text(msg)
    media = _media_tokens(msg, text, counter)
    tokens = _tokens(text, counter) + media
    before = Saving.of(msg)
    # The placeholder describes the original, never the digest an earlier cut left: its
    # characters, and (for a custom template) its tokens, what the cut removed included.
    chars = len(text) if before.original_chars is None else before.original_chars
    original = tokens + (before.removed_tokens or 0)
    new_text = _placeholder_text(msg, text, template, chars, original, name, _media_note(msg))
    saved = tokens - _tokens(new_text, counter)
    if saved <= 0:  # a placeholder longer than the result would only grow the context
        return None
    # ``saved_tokens`` credits the newest usage report: what was removed since it was made
    # (a cut made after the same report counts too; one made before it was already seen).
    precise = _precise_saved(text, new_text, _precise_media(msg, text, media, counter))
    saving = before.then(saved=saved, anchor=anchor, chars=chars, precise=precise)
    return with_meta(
        msg.model_copy(update={"content": new_text, "artifact": None}),
        kind=KIND_CLEARED,
        **saving.fields(),
    )


def _precise_media(msg: BaseMessage, text: str, media: int, counter: TokenCounter) -> int:
    """:func:`_media_tokens` under the precise counter, images priced as ``counter`` prices
    them (``0`` without media or tiktoken)."""
    precise = precise_counter(pricing_of(counter)) if media else None
    return _media_tokens(msg, text, precise) if precise is not None else 0


def _long_value(value: Any, min_chars: int) -> int:
    """Characters of an argument value when it is worth a stub (0 otherwise)."""
    if isinstance(value, str):
        return len(value) if len(value) >= min_chars else 0
    if isinstance(value, (dict, list)):
        size = len(json.dumps(value, ensure_ascii=False, default=str))
        return size if size >= min_chars else 0
    return 0


def _stub_calls(
    msg: AIMessage, min_chars: int, archived: bool
) -> tuple[list[ToolCall], dict[str, dict[str, Any]]]:
    """``msg``'s tool calls with every long argument value replaced by a stub (the call's
    id, name and short arguments kept), and the new args of the calls that changed."""
    calls: list[ToolCall] = []
    changed: dict[str, dict[str, Any]] = {}
    for call in msg.tool_calls:
        args = call.get("args") or {}
        new_args = dict(args)
        for key, value in args.items():
            size = _long_value(value, min_chars)
            if size:
                new_args[key] = argument_stub(
                    chars=size,
                    message_id=msg.id,
                    tool_call_id=str(call.get("id") or ""),
                    archived=archived,
                )
        if new_args != args:
            changed[str(call.get("id") or "")] = new_args
            calls.append({**call, "args": new_args})
        else:
            calls.append(call)
    return calls, changed


def _ai_text(msg: AIMessage) -> str:
    """What an ``AIMessage`` says and calls, as one text (for sizes and fact lines)."""
    parts: list[str] = [str(msg.text)]
    parts += [
        json.dumps(c.get("args") or {}, ensure_ascii=False, default=str) for c in msg.tool_calls
    ]
    return "\n".join(p for p in parts if p)


def reduce_assistant(
    msg: AIMessage,
    *,
    args: bool = True,
    text: bool = False,
    min_chars: int = DEFAULT_MICRO_MIN_CHARS,
    keep_chars: int = 1_000,
    archived: bool = True,
    counter: TokenCounter = approximate_tokens,
    anchor: str | None = None,
) -> AIMessage | None:
    """An older assistant turn made smaller, or ``None`` when nothing would shrink.

    ``args``: every tool-call argument value of at least ``min_chars`` characters becomes a
    stub naming its size and the ``recall_archived`` call that reads the original; the
    call keeps its id, its name and its short arguments (a path, a flag), so the history
    stays valid for every provider and the model still sees what it did. ``text``: text
    longer than ``keep_chars`` is cut to its head, tail and key lines with a notice. The
    id is kept (``add_messages`` replaces the message in place) and the message is
    marked cleared; the caller archives the original first.

    Example:
        >>> call = {"name": "write_file", "id": "c1",
        ...         "args": {"path": "app.py", "content": "x = 1; " * 2_000}}
        >>> new = reduce_assistant(AIMessage("", tool_calls=[call], id="a1"))
        >>> new.tool_calls[0]["args"]["path"], new.tool_calls[0]["args"]["content"][:18]
        ('app.py', '[argument archived')
    """
    if not isinstance(msg, AIMessage):
        return None
    update: dict[str, Any] = {}
    if args and msg.tool_calls:
        update.update(_stubbed_arguments(msg, min_chars, archived))
    if text and isinstance(msg.content, str) and len(msg.content) > keep_chars:
        update["content"] = _cut_assistant_text(msg.content, msg.id, keep_chars, archived)
    if not update:
        return None
    return _marked_cleared(msg, msg.model_copy(update=update), counter, anchor)


def _stubbed_arguments(msg: AIMessage, min_chars: int, archived: bool) -> dict[str, Any]:
    """The update that stubs ``msg``'s long argument values (none when it has none)."""
    calls, changed = _stub_calls(msg, min_chars, archived)
    if not changed:
        return {}
    kwargs = dict(msg.additional_kwargs)
    # The provider's raw copy of the calls would carry the old arguments on.
    kwargs.pop("tool_calls", None)
    kwargs.pop("function_call", None)
    update: dict[str, Any] = {"tool_calls": calls, "additional_kwargs": kwargs}
    if isinstance(msg.content, list):
        update["content"] = [
            {**b, "input": changed[b["id"]]}
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") in changed
            else b
            for b in msg.content
        ]
    return update


def _cut_assistant_text(
    content: str, message_id: str | None, keep_chars: int, archived: bool
) -> str:
    """An assistant text cut to its head, tail and key lines, with a notice."""
    body = structured_digest(content, max_chars=keep_chars)
    words = " ".join(re.findall(r"\w+", content)[:6])
    notice = assistant_notice(
        chars=len(content),
        omitted=max(0, len(content) - len(body)),
        message_id=message_id,
        query=words,
        archived=archived,
    )
    return f"{notice}\n{body}"


def _marked_cleared(
    msg: AIMessage, new: AIMessage, counter: TokenCounter, anchor: str | None
) -> AIMessage | None:
    """``new`` (``msg`` reduced) marked cleared with its savings, ``None`` if it saves none."""
    old_text, new_text = _ai_text(msg), _ai_text(new)
    saved = counter([msg]) - counter([new])
    if saved <= 0:
        return None
    precise = _precise_saved(old_text, new_text)
    saving = Saving.of(msg).then(saved=saved, anchor=anchor, chars=len(old_text), precise=precise)
    result = with_meta(new, kind=KIND_CLEARED, **saving.fields())
    assert isinstance(result, AIMessage)
    return result


def _assistant_candidates(
    messages: Sequence[BaseMessage], before: int, *, min_chars: int, text: bool, keep_chars: int
) -> list[int]:
    """Indices of assistant turns before ``before`` with an argument worth a stub (or, with
    ``text``, text longer than ``keep_chars``), oldest first."""
    out = []
    for i in range(min(before, len(messages))):
        m = messages[i]
        if not isinstance(m, AIMessage) or kind_of(m) == KIND_STOP:
            continue
        if carries_provider_compaction(m):  # sent back to the provider as it came
            continue
        if any(
            _long_value(v, min_chars) for c in m.tool_calls for v in (c.get("args") or {}).values()
        ) or (text and isinstance(m.content, str) and len(m.content) > keep_chars):
            out.append(i)
    return out


def cleared_tokens(msg: ToolMessage, counter: TokenCounter = approximate_tokens) -> int:
    """Tokens ``msg`` takes once cleared to the default placeholder (its facts kept), or as
    it is when the placeholder would not be shorter: what clearing would leave of it, sized
    without the archive metadata a real clearing records (no tiktoken pass)."""
    text = tool_result_text(msg)
    recorded = Saving.of(msg).original_chars
    chars = len(text) if recorded is None else recorded
    tokens = _tokens(text, counter)
    new_text = _placeholder_text(msg, text, DEFAULT_PLACEHOLDER, chars, tokens, msg.name or "tool")
    own = counter([msg])
    return min(own, counter([msg.model_copy(update={"content": new_text, "artifact": None})]))


def clear_tool_results(
    messages: Sequence[BaseMessage],
    *,
    keep: int = DEFAULT_MICRO_KEEP,
    min_chars: int = DEFAULT_MICRO_MIN_CHARS,
    clear_at_least: int = 0,
    exclude_tools: Collection[str] = (),
    placeholder: str | None = None,
    archived: bool = True,
    counter: TokenCounter = approximate_tokens,
) -> list[BaseMessage]:
    """Replace the content of older tool results with a short placeholder.

    Results the model has not read yet (after the newest ``AIMessage``) are never cleared,
    and neither are the newest ``keep`` of those it has read (a parallel batch is kept
    whole). Older ones of at least ``min_chars`` characters whose tool is not in
    ``exclude_tools`` (by the result's name or the name of the call it answers) are
    cleared, unless the placeholder would not be shorter. The placeholder keeps the lines
    that carry facts (``key = value``, ids, paths, URLs); images and files in a result go
    with its text, the placeholder naming each (``image 1280x800 png``). With ``clear_at_least > 0``
    nothing changes until clearing would free at least that many tokens.

    Args:
        messages: The history (not modified).
        keep: Number of most recent read tool results never cleared.
        min_chars: Results shorter than this are left alone.
        clear_at_least: Minimum tokens a clearing must free (0: any).
        exclude_tools: Tool names whose results are never cleared.
        placeholder: Template with ``{name}``, ``{chars}``, ``{tokens}``, ``{tool_call_id}``;
            defaults to :data:`DEFAULT_PLACEHOLDER` (or :data:`UNARCHIVED_PLACEHOLDER`).
        archived: Whether the caller archives the originals (the default placeholder then
            points to the recall tool; otherwise it says the text was not kept).
        counter: Token counter used to size what is cleared.

    Returns:
        A new list; changed results keep ``id``, ``tool_call_id``, ``name`` and ``status``
        and carry ``{"kind": "cleared", "original_chars", "saved_tokens"}`` metadata.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> msgs = []
        >>> for i in range(5):
        ...     msgs.append(AIMessage("", tool_calls=[{"name": "cat", "args": {}, "id": f"c{i}"}]))
        ...     msgs.append(ToolMessage("x" * 500, tool_call_id=f"c{i}", name="cat", id=f"t{i}"))
        >>> out = clear_tool_results(msgs, keep=3)
        >>> [m.content.startswith("[tool result cleared") for m in out[1::2]]
        [True, False, False, False, False]
    """
    template = placeholder or (DEFAULT_PLACEHOLDER if archived else UNARCHIVED_PLACEHOLDER)
    for i, m in enumerate(messages):
        check_message(m, i)
    plan = _clear_candidates(messages, keep=keep, min_chars=min_chars, exclude=exclude_tools)
    names = tool_names(messages)
    anchor = _usage_anchor(messages)
    out = list(messages)
    freed = 0
    for i in plan:
        msg = messages[i]
        assert isinstance(msg, ToolMessage)
        new = _clear_one(msg, template, result_name(msg, names), counter, anchor)
        if new is not None:
            out[i] = new
            freed += Saving.of(new).saved_tokens
    if freed < clear_at_least:
        return list(messages)
    return out


def _clear_candidates(
    messages: Sequence[BaseMessage], *, keep: int, min_chars: int, exclude: Collection[str]
) -> list[int]:
    """Indices of read tool results that may be cleared, oldest first."""
    names = tool_names(messages)
    limit = unread_start(messages)
    read = [i for i in range(limit) if isinstance(check_message(messages[i], i), ToolMessage)]
    protected: set[int] = set()
    if keep > 0 and read:
        protected = set(read[-keep:])
        # Keep a parallel batch whole: extend to the start of the oldest kept result's batch.
        first = min(protected)
        j = first - 1
        while j >= 0 and isinstance(messages[j], ToolMessage):
            protected.add(j)
            j -= 1
    out = []
    for i in read:
        msg = messages[i]
        if i in protected or kind_of(msg) == KIND_CLEARED:
            continue
        if result_name(msg, names) in exclude:
            continue
        if len(tool_result_text(msg)) < min_chars and isinstance(msg.content, str):
            continue
        out.append(i)
    return out


def _truncate_one(
    msg: BaseMessage,
    *,
    keep_chars: int,
    digest: Callable[[str], str] | None,
    archived: bool,
    counter: TokenCounter,
    anchor: str | None,
    notice: str | None = None,
) -> BaseMessage | None:
    text = tool_result_text(msg)
    kind: Literal["result", "message"] = "result"
    if isinstance(msg, ToolMessage):
        name, ref = msg.name or "tool", msg.tool_call_id
    else:  # a long observation sent as a user message: its own notice
        notice, kind = None, "message"
        name, ref = "user message", f"message id {msg.id}"
    # The configured digest (e.g. an LLM's), else a structured one within ``keep_chars``.
    body = digest(text) if digest is not None else structured_digest(text, max_chars=keep_chars)
    if not isinstance(body, str):
        raise ConfigError(
            f"the digest returned {type(body).__name__}, not a str: CompactionConfig.digest "
            "must be a callable str -> str (e.g. llm_digest(model))."
        )
    note = cut_notice(
        notice,
        kind=kind,
        name=name,
        chars=len(text),
        omitted=max(0, len(text) - len(body)),
        ref=ref,
        archived=archived,
    )
    # The notice goes first: the end of a result (where commands report their outcome)
    # stays the end of its digest.
    new_text = note.lstrip("\n") + _media_note(msg) + body
    media = _media_tokens(msg, text, counter)
    tokens = _tokens(text, counter) + media
    saved = tokens - _tokens(new_text, counter)
    if saved <= 0:
        return None
    # A digest digested again keeps its original's size and savings.
    precise = _precise_saved(text, new_text, _precise_media(msg, text, media, counter))
    saving = Saving.of(msg).then(saved=saved, anchor=anchor, chars=len(text), precise=precise)
    return with_meta(
        msg.model_copy(update={"content": new_text, "artifact": None}),
        kind=KIND_TRUNCATED,
        **saving.fields(),
    )


def truncate_large_tool_results(
    messages: Sequence[BaseMessage],
    *,
    max_chars: int,
    keep_chars: int = DEFAULT_LARGE_TOOL_RESULT_KEEP_CHARS,
    digest: Callable[[str], str] | None = None,
    notice: str | None = None,
    archived: bool = True,
    include_human: bool = False,
    counter: TokenCounter = approximate_tokens,
    request: int | None = None,
) -> list[BaseMessage]:
    """Replace every tool result longer than ``max_chars`` by a digest of it.

    The digest is structured where the content has structure (JSON records with counts,
    fields and extremes; tables; log levels and error lines) and head + tail + key lines
    otherwise, in about ``keep_chars`` characters; ``digest`` (for example an LLM call)
    replaces it. A notice says how to read the whole text again. This low-level function
    cuts every result it is given, read or not: :func:`micro_compact` decides which ones
    may be cut. With ``include_human``, long human messages are cut too (agents without
    native tool calls receive observations as user messages), but not the newest one (the
    user's current request; :func:`shrink_unread` digests it last; ``request``: its index
    when ``messages`` is a part of the history, ``-1`` when it is not in this part).
    Summaries and the pinned task are never cut.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> out = truncate_large_tool_results(
        ...     [ToolMessage("a" * 9000, tool_call_id="c1", name="log")], max_chars=5000)
        >>> len(out[0].content) < 2600
        True
    """
    if keep_chars >= max_chars:
        raise ConfigError(f"keep_chars={keep_chars} must be smaller than max_chars={max_chars}")
    anchor = _usage_anchor(messages)
    out = list(messages)
    if request is None:
        request = newest_request_index(messages) if include_human else -1
    for i, raw in enumerate(messages):
        msg = check_message(raw, i)
        human = (
            include_human
            and i != request
            and isinstance(msg, HumanMessage)
            and kind_of(msg) is None
        )
        if not (isinstance(msg, ToolMessage) or human) or kind_of(msg) in _DONE:
            continue
        if len(tool_result_text(msg)) <= max_chars:
            continue
        new = _truncate_one(
            msg,
            keep_chars=keep_chars,
            digest=digest,
            archived=archived,
            counter=counter,
            anchor=anchor,
            notice=notice,
        )
        if new is not None:
            out[i] = new
    return out


class _Budget:
    """The context size as micro-compaction changes it, kept current without recounting."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    @staticmethod
    def delta(old: BaseMessage, new: BaseMessage) -> int:
        """Tokens freed by replacing ``old`` with ``new`` (``saved_tokens`` accumulates the
        savings made since one usage report)."""
        before, after = Saving.of(old), Saving.of(new)
        credited = before.credited if before.usage_anchor == after.usage_anchor else 0
        return after.credited - credited

    def apply(self, old: BaseMessage, new: BaseMessage) -> None:
        """Account for ``old`` replaced by ``new`` (both carry their savings metadata)."""
        self.tokens -= self.delta(old, new)


def large_result_limit(config: CompactionConfig, counter: TokenCounter) -> tuple[int, str]:
    """The size above which one read result is digested: ``(limit, unit)`` with unit
    ``"chars"`` (explicit ``large_tool_result_chars``, or no known window) or ``"tokens"``."""
    if config.large_tool_result_chars is not None:
        return config.large_tool_result_chars, "chars"
    budget = config.budget
    if budget is None:
        return DEFAULT_LARGE_TOOL_RESULT_CHARS, "chars"
    return budget.large_result, "tokens"


@dataclass(frozen=True, slots=True)
class MicroResult:
    """What :func:`micro_compact_with_count` returns."""

    messages: list[BaseMessage]
    """The history after micro-compaction (unchanged messages are the input's objects; the
    input list itself when nothing changed and it is a list)."""
    tokens: int
    """Context size of ``messages``: what ``context_tokens(messages, counter=..., tools=...,
    verify_anchor=...)`` returns, to hand to ``decide(..., tokens=...)``."""
    changed: tuple[int, ...]
    """Indices of the replaced messages (their originals are the caller's to archive)."""


def micro_compact(
    messages: Sequence[BaseMessage],
    config: CompactionConfig,
    *,
    archived: bool = True,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    verify_anchor: AnchorCheck = False,
    tokens: int | None = None,
) -> list[BaseMessage]:
    """:func:`micro_compact_with_count`'s messages (see there), run until a pass changes
    nothing, so that a second ``micro_compact`` of its result changes nothing either (under
    pressure one pass can end over ``fit_tokens`` with more left to clear or cut)."""
    out: Sequence[BaseMessage] = messages
    for _ in range(_MAX_PASSES):
        result = micro_compact_with_count(
            out,
            config,
            archived=archived,
            counter=counter,
            tools=tools,
            verify_anchor=verify_anchor,
            tokens=tokens,
        )
        if not result.changed:
            break
        out, tokens = result.messages, result.tokens
    return out if out is not messages and isinstance(out, list) else list(out)


def micro_compact_with_count(
    messages: Sequence[BaseMessage],
    config: CompactionConfig,
    *,
    archived: bool = True,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    verify_anchor: AnchorCheck = False,
    tokens: int | None = None,
    compactable: Callable[[Sequence[BaseMessage]], bool] | None = None,
    memo: FactsMemo | None = None,
) -> MicroResult:
    """Micro-compaction with ``config``'s settings; costs nothing until there is pressure.

    The reductions are :data:`_LADDER`, applied in its order to one :class:`_Pass` (the
    history as it changes and one running tally of its size), after the large-result digest
    and the gate:

    1. A result the model has already read that alone is larger than ``large_result_ratio``
       of the window (or ``large_tool_result_chars``) is replaced by a digest.
    2. Below ``micro_trigger_ratio`` of the window nothing else changes. At or above it,
       the oldest read results are cleared in one batch until the context is at
       ``micro_target_ratio`` (the newest ``micro_keep`` read results stay), so the cached
       prefix breaks once for many turns.
    3. Only when the next call cannot fit (``fit_tokens``): every read result may be
       cleared, an oversized pinned task (over ``task_max_ratio``) is cut to head + tail +
       key lines, and when the unread batch alone (with the system prompt and task) still
       cannot fit, its largest results are digested, largest first.

    Results the model has not read yet are never touched otherwise. Unchanged messages are
    the same objects as in the input; the caller archives the originals of changed ones.
    ``verify_anchor`` counts locally when the newest usage report cannot describe this list
    (see :func:`~langchain_compact.tokens.context_tokens`).

    ``compactable`` says whether a full compaction can still make room for the history as
    it stands: then unread results are left whole here (the compaction digests them only as
    its last resort, after summarising what the model has read).

    One count per turn: ``tokens`` is the context size of ``messages`` if the caller has it
    (the same ``counter``, ``tools`` and ``verify_anchor``); the result's ``tokens`` is the
    size after the changes, for ``decide(..., tokens=...)``. Below the gate the work is
    proportional to the messages since the previous call on the same history through the
    same ``memo`` (the caller's :class:`~langchain_compact._scan.FactsMemo`, see
    :mod:`langchain_compact._scan`), not to the history's length.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> cfg = CompactionConfig(context_window=128_000)
        >>> text = "lorem ipsum " * 1_100
        >>> result = micro_compact_with_count([ToolMessage(text, tool_call_id="c1")], cfg)
        >>> result.messages[0].content == text  # unread, and the window has room
        True
        >>> result.changed, result.tokens > 2_000
        ((), True)
    """
    run = _Pass(messages, config, archived, counter, tools, verify_anchor, compactable, memo)
    _digest_large(run)
    run.start(tokens)
    if run.below_gate():
        if not run.cut_any:  # nothing changed: no pass over the history, no copy
            return MicroResult(_as_list(messages), run.start_tokens, ())
        return run.result()
    run.open()
    for step in _LADDER:
        if not step.applies(run):
            continue
        if step.reduce is not None:
            step.reduce(run)
        else:  # a batch: the candidates reduced in order down to the step's target
            keep = run.config.micro_keep if step.keep is None else step.keep
            found = run.candidates(keep, text=step.text, newest=step.newest)
            run.clear(found, run.fit if step.to_fit else run.target, text=step.text)
    return run.result()


class _Pass:
    """One pass of :func:`micro_compact_with_count`: its settings, the history as it changes
    (``out``, copied before the first change), and the running tally of its size
    (``budget``, from :meth:`open` on). Each step of :data:`_LADDER` reads and changes it."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        config: CompactionConfig,
        archived: bool,
        counter: TokenCounter,
        tools: Sequence[Any] | None,
        verify_anchor: AnchorCheck,
        compactable: Callable[[Sequence[BaseMessage]], bool] | None,
        memo: FactsMemo | None = None,
    ) -> None:
        facts = history_facts(messages, memo)
        if facts is None:  # a message is not a BaseMessage: name it
            for i, m in enumerate(messages):
                check_message(m, i)
        assert facts is not None
        self.messages, self.facts, self.config = messages, facts, config
        self.archived, self.counter, self.tools = archived, counter, tools
        self.verify_anchor, self.compactable, self.memo = verify_anchor, compactable, memo
        self.out = _as_list(messages)  # copied before the first change (copy on write)
        self.anchor = facts.newest_usage_id
        self.limit = facts.newest_ai + 1  # results before it are read
        self.excluded = set(config.micro_exclude_tools)
        self.lazy_names: dict[str, str] | None = None
        self.cut_any = False  # the large-result digest changed a message
        self.start_tokens = 0
        self.confirmed = False  # the estimate said "cannot fit": counted with tiktoken since
        self.not_compactable: bool | None = None  # ``compactable``'s answer, asked once
        self.gate, self.target, self.fit = (
            config.micro_trigger_tokens,
            config.micro_target_tokens,
            config.fit_tokens,
        )
        self.budget = _Budget(0)
        self.names: dict[str, str] = {}
        self.template = DEFAULT_PLACEHOLDER if archived else UNARCHIVED_PLACEHOLDER
        self.text_keep = config.large_tool_result_keep_chars

    def name_of(self, msg: BaseMessage) -> str:
        if getattr(msg, "name", None):
            return result_name(msg, {})
        if self.lazy_names is None:  # a result without a name: look its call up (once)
            self.lazy_names = tool_names(self.out)
        return result_name(msg, self.lazy_names)

    def allowed(self, i: int) -> bool:
        msg = self.out[i]
        return (
            isinstance(msg, ToolMessage)
            and kind_of(msg) not in _DONE
            and self.name_of(msg) not in self.excluded
        )

    def put(self, i: int, new: BaseMessage) -> None:
        """``new`` in place of message ``i`` (the history copied before the first change)."""
        if self.out is self.messages:
            self.out = list(self.messages)
        self.out[i] = new

    def count(self) -> int:
        return context_tokens(
            self.out,
            counter=self.counter,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            memo=self.memo,
        )

    def precise(self) -> int | None:
        return precise_context_tokens(
            self.out,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            pricing=pricing_of(self.counter),
        )

    def start(self, tokens: int | None) -> None:
        """The size before the ladder: the caller's count when nothing changed yet."""
        if tokens is not None and not self.cut_any:
            self.start_tokens = tokens
        elif self.out is self.messages:  # unchanged: the facts just read describe it
            self.start_tokens = context_tokens(
                self.out,
                counter=self.counter,
                tools=self.tools,
                verify_anchor=self.verify_anchor,
                facts=self.facts,
            )
        else:
            self.start_tokens = self.count()

    def below_gate(self) -> bool:
        return (
            self.gate is None
            or self.target is None
            or self.fit is None
            or self.start_tokens < self.gate
        )

    def open(self) -> None:
        """Past the gate: a copy to change, the running tally, the calls' names."""
        if self.out is self.messages:
            self.out = list(self.messages)
        self.budget = _Budget(self.start_tokens)
        self.names = tool_names(self.out)

    def over_fit(self) -> bool:
        assert self.fit is not None
        return self.budget.tokens > self.fit

    def cannot_compact(self) -> bool:
        """No compaction can make the room (``compactable``, asked once, says so)."""
        if self.not_compactable is None:
            self.not_compactable = not (self.compactable is not None and self.compactable(self.out))
        return self.not_compactable

    def result(self) -> MicroResult:
        out, messages = self.out, self.messages
        changed = tuple(i for i, (a, b) in enumerate(zip(messages, out, strict=True)) if a is not b)
        if self.confirmed:
            return MicroResult(out, self.precise() or self.count(), changed)
        return MicroResult(out, self.count() if changed else self.start_tokens, changed)

    def candidates(self, keep: int, *, text: bool = False, newest: bool = False) -> list[int]:
        """Read results and older assistant turns that may be reduced, oldest first: the
        assistant turns before the calls of the kept results (before the newest turn when
        nothing is kept; the newest turn too with ``newest``)."""
        out, limit, min_chars = self.out, self.limit, self.config.micro_min_chars
        results = _clear_candidates(out, keep=keep, min_chars=min_chars, exclude=self.excluded)
        read = [i for i in range(limit) if isinstance(out[i], ToolMessage)]
        before = limit if newest else max(0, limit - 1)
        if keep > 0 and read:
            before = min(before, find_safe_cut(out, read[-min(keep, len(read))]))
        turns = _assistant_candidates(
            out, before, min_chars=min_chars, text=text, keep_chars=self.text_keep
        )
        return sorted({*results, *turns})

    def clear(self, indices: list[int], stop_at: int | None, *, text: bool = False) -> None:
        """Reduce ``indices`` in order until the tally is at ``stop_at``, in one batch: none
        of it when the batch frees less than ``micro_clear_at_least``. A tool result is
        cleared, an assistant turn reduced (its long arguments stubbed; its text cut too
        with ``text``)."""
        assert stop_at is not None
        changes: list[tuple[int, BaseMessage]] = []
        freed = 0
        for i in indices:
            if self.budget.tokens - freed <= stop_at:
                break
            msg = self.out[i]
            new: BaseMessage | None
            if isinstance(msg, AIMessage):
                new = reduce_assistant(
                    msg,
                    text=text,
                    min_chars=self.config.micro_min_chars,
                    keep_chars=self.text_keep,
                    archived=self.archived,
                    counter=self.counter,
                    anchor=self.anchor,
                )
            else:
                assert isinstance(msg, ToolMessage)
                name = result_name(msg, self.names)
                new = _clear_one(msg, self.template, name, self.counter, self.anchor)
            if new is not None:
                changes.append((i, new))
                freed += self.budget.delta(msg, new)
        if freed < self.config.micro_clear_at_least:
            return
        for i, changed in changes:
            self.budget.apply(self.out[i], changed)
            self.out[i] = changed


def _digest_large(run: _Pass) -> None:
    """Oversized results the model has read become digests. A mark on the remembered facts
    says up to where an earlier call on this very history (same settings) found none."""
    config, counter, limit = run.config, run.counter, run.limit
    size, unit = large_result_limit(config, counter)
    keep_chars = min(config.large_tool_result_keep_chars, max(200, size - 1))
    mark = _mark_key(size, unit, counter, run.excluded)
    start = min(run.facts.checked_to(mark), limit) if mark is not None else 0
    found = False
    for i in range(start, limit):
        if not run.allowed(i):
            continue
        text = tool_result_text(run.out[i])
        big = len(text) > size if unit == "chars" else _tokens(text, counter) > size
        if big:
            found = True
            new = _truncate_one(
                run.out[i],
                keep_chars=keep_chars,
                digest=config.digest,
                archived=run.archived,
                counter=counter,
                anchor=run.anchor,
            )
            if new is not None:
                run.put(i, new)
    if mark is not None and not found:
        run.facts.mark_checked(mark, limit)  # the remembered facts describe ``messages`` exactly
    run.cut_any = run.out is not run.messages and any(map(operator.is_not, run.messages, run.out))


@dataclass(frozen=True, slots=True)
class _Step:
    """One rung of the reduction ladder: when it applies to a pass, and what it reduces:
    ``reduce``'s own work, or (without one) a batch of :meth:`_Pass.candidates` (the newest
    ``keep`` read results kept, ``micro_keep`` when ``None``; assistant text too with
    ``text``; the newest turn's arguments too with ``newest``) reduced by :meth:`_Pass.clear`
    down to ``micro_target_tokens``, or to ``fit_tokens`` with ``to_fit``."""

    name: str
    applies: Callable[[_Pass], bool]
    reduce: Callable[[_Pass], None] | None = None
    keep: int | None = None
    text: bool = False
    newest: bool = False
    to_fit: bool = False


def _over_trigger(run: _Pass) -> bool:
    """Still over the full trigger after the batch (a few large results)."""
    trigger = run.config.trigger_tokens or run.fit
    assert trigger is not None
    return run.budget.tokens >= trigger and run.config.micro_keep > 1


def _estimated(run: _Pass) -> bool:
    """Over the fit by the estimate, which errs high: tiktoken confirms it first."""
    return run.over_fit() and not isinstance(run.counter, TiktokenCounter)


def _confirm_fit(run: _Pass) -> None:
    exact = run.precise()
    if exact is not None:
        run.confirmed = True
        run.budget.tokens = exact


def _cut_task(run: _Pass) -> None:
    task = cut_task(run.out, run.config, run.counter, run.archived, run.anchor)
    if task is not None:
        run.budget.apply(run.out[task[0]], task[1])
        run.out[task[0]] = task[1]


def _last_resort(run: _Pass) -> bool:
    """Over the fit, and no compaction can make the room."""
    return run.over_fit() and run.cannot_compact()


def _digest_unread(run: _Pass) -> None:
    assert run.fit is not None
    _fit_unread(
        run.out,
        run.limit,
        run.fit,
        run.allowed,
        run.counter,
        run.budget,
        run.config,
        run.archived,
    )


def _always(run: _Pass) -> bool:
    return True


#: The reduction ladder past the gate, in order. Each rung applies when its test holds on the
#: pass as the rungs before it left it. Under pressure (the gate): one batch clears the oldest
#: read results down to ``micro_target_tokens`` (the newest ``micro_keep`` stay), and only the
#: newest one stays while the context is still over the full trigger. Only when the next call
#: cannot fit (``fit_tokens``, confirmed by tiktoken where the estimate said so): every read
#: result and older calls' arguments, then the pinned task; and when no compaction can make
#: the room, older assistant text, the newest call's arguments, and last the unread results
#: (digested to the room there is).
_LADDER: tuple[_Step, ...] = (
    _Step("clear read results, newest micro_keep kept", _always),
    _Step("clear read results, newest one kept", _over_trigger, keep=1),
    _Step("confirm the fit with tiktoken", _estimated, _confirm_fit),
    _Step("clear every read result and older arguments", _Pass.over_fit, keep=0),
    _Step("cut the pinned task", _Pass.over_fit, _cut_task),
    _Step("cut older assistant text", _last_resort, keep=0, text=True, to_fit=True),
    _Step("stub the newest call's arguments", _last_resort, keep=0, newest=True, to_fit=True),
    _Step("digest unread results", _last_resort, _digest_unread),
)


def _as_list(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    return messages if isinstance(messages, list) else list(messages)


def _mark_key(size: int, unit: str, counter: TokenCounter, excluded: set[str]) -> Any:
    """Key of the large-result mark for these settings, ``None`` if the counter is not
    hashable (no mark: every read result is checked)."""
    key = ("large_results", size, unit, counter, frozenset(excluded))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _fit_unread(
    out: list[BaseMessage],
    limit: int,
    fit: int,
    allowed: Callable[[int], bool],
    counter: TokenCounter,
    budget: _Budget,
    config: CompactionConfig,
    archived: bool,
) -> None:
    """Digest unread results only while the unread batch with what cannot be removed
    (system prompt, pinned task, summaries) cannot fit: otherwise a compaction makes room.
    The digests share the room that is left, never less than the budget's
    :meth:`~langchain_compact.budget.Budget.unread_share`."""
    unread = [i for i in range(limit, len(out)) if allowed(i)]
    if not unread:
        return
    batch = sum(_tokens(tool_result_text(out[i]), counter) for i in unread)
    fixed = sum(
        _tokens(tool_result_text(m), counter)
        for m in out[:limit]
        if isinstance(m, SystemMessage) or kind_of(m) in (KIND_PINNED_TASK, KIND_SUMMARY)
    )
    task_i = original_task_index(out)
    if 0 <= task_i < limit and kind_of(out[task_i]) != KIND_PINNED_TASK:
        fixed += _tokens(tool_result_text(out[task_i]), counter)
    # What else the next call carries beside the unread batch and the fixed part, and the
    # summary a compaction of that rest will write (so the digest leaves it room).
    rest = max(0, budget.tokens - batch - fixed)
    rooms = config.budget  # known: ``fit`` is its fit
    room = fit - fixed - rest - (0 if rooms is None else rooms.next_summary)
    if batch <= room:
        return
    new = shrink_unread(
        out, need=batch - room, config=config, counter=counter, archived=archived, fixed=fixed
    )
    for i, (before, after) in enumerate(zip(out, new, strict=True)):
        if after is not before:
            budget.apply(before, after)
            out[i] = after


def shrink_unread(
    messages: Sequence[BaseMessage],
    *,
    need: int,
    config: CompactionConfig,
    counter: TokenCounter = approximate_tokens,
    archived: bool = True,
    fixed: int | None = None,
    has_task: bool = True,
) -> list[BaseMessage]:
    """Digest the results the model has not read yet (tool results, and long observations
    that agents without native tool calls send as user messages), largest first, until
    ``need`` tokens are freed: the last resort when they cannot fit the window at all. The
    user's current request (the newest human message,
    :func:`~langchain_compact.history.newest_request_index`; read or not) comes after all
    of them: it is digested only when the others cannot free ``need``.

    Each digest keeps what the need leaves of its result (the room there is, not a fixed
    few lines), and with ``fixed`` (tokens of the system prompt, task and summaries) at
    least its share of the budget's
    :meth:`~langchain_compact.budget.Budget.unread_share`. The caller archives the
    originals of the changed messages."""
    out = list(messages)
    # ``has_task=False``: a compaction's kept tail, whose first user message is not the task
    task_i = original_task_index(out) if has_task else -1
    request = newest_request_index(out)
    unread = _shrinkable(out, config, task_i, request)
    sizes = {i: _tokens(tool_result_text(out[i]), counter) for i in unread}
    # Largest first; the current request last, read or not.
    order = sorted(unread, key=lambda j: (j == request, -sizes[j]))
    b = config.budget
    floor = b.unread_share(fixed) if b is not None and fixed is not None else 0
    aims = _UnreadAims.of(out, sizes, floor, counter)
    anchor = _usage_anchor(out)
    freed = 0
    for i in order:
        if freed >= need:
            break
        want, size, measure = aims.aim(i, need - freed)
        if want >= size:
            continue
        new = _aim_digest(
            out[i],
            want,
            size,
            config=config,
            counter=counter,
            measure=measure,
            archived=archived,
            anchor=anchor,
        )
        if new is not None:
            out[i] = new
            # in the units ``need`` is in (a digest's recorded saving also credits what an
            # earlier cut of it saved)
            freed += sizes[i] - _tokens(tool_result_text(new), counter)
    return out


def _shrinkable(
    out: list[BaseMessage], config: CompactionConfig, task_i: int, request: int
) -> list[int]:
    """The unread messages :func:`shrink_unread` may digest, the current request last."""
    names = tool_names(out)
    excluded = set(config.micro_exclude_tools)

    def eligible(i: int) -> bool:
        # a digest made earlier (sized to a room a compaction has since changed) may be
        # digested again; its original is archived already
        return (
            kind_of(out[i]) in (None, KIND_TRUNCATED)
            and i != task_i
            and (
                (isinstance(out[i], ToolMessage) and result_name(out[i], names) not in excluded)
                # Agents without native tool calls get their observations as user messages.
                or (
                    isinstance(out[i], HumanMessage)
                    and len(tool_result_text(out[i])) > OBSERVATION_CHARS
                )
            )
        )

    unread = [i for i in range(unread_start(out), len(out)) if i != request and eligible(i)]
    if request >= 0 and eligible(request):
        unread.append(request)
    return unread


@dataclass(frozen=True, slots=True)
class _UnreadAims:
    """What each unread result's digest aims at: what the need leaves of it, or its share of
    the floor when that is more."""

    sizes: dict[int, int]
    """Each result's size by the caller's counter."""
    floor: int
    real: dict[int, int]
    """Each result's size in the floor's units (``precise``'s, else ``sizes``)."""
    real_total: int
    counter: TokenCounter
    precise: TokenCounter | None

    @classmethod
    def of(
        cls, out: list[BaseMessage], sizes: dict[int, int], floor: int, counter: TokenCounter
    ) -> _UnreadAims:
        # The floor is a share of the window, in the provider's tokens; the estimate errs
        # high, so a digest held to the floor is sized and measured by tiktoken where it can be.
        precise = precise_counter() if floor and not isinstance(counter, TiktokenCounter) else None
        real = (
            {i: precise.count_text(tool_result_text(out[i])) for i in sizes}
            if precise is not None
            else sizes
        )
        return cls(sizes, floor, real, max(1, sum(real.values())), counter, precise)

    def aim(self, i: int, left: int) -> tuple[int, int, TokenCounter]:
        """``(want, size, measure)`` for result ``i`` with ``left`` tokens still to free."""
        sizes, real = self.sizes, self.real
        share = self.floor * real[i] // self.real_total
        want = sizes[i] - left
        if share * sizes[i] > want * real[i]:  # the floor, not the need, sizes it
            return share, real[i], (self.precise or self.counter)
        return want, sizes[i], self.counter


#: Attempts at a digest's size: its notice and framing, and lines denser or sparser in
#: tokens than the text as a whole, make the first cut miss its aim.
_AIM_ATTEMPTS = 8
#: A digest within this share of its aim is close enough (each attempt is a digest pass).
_AIM_CLOSE = 0.99


def _aim_digest(
    message: BaseMessage,
    want: int,
    size: int,
    *,
    config: CompactionConfig,
    counter: TokenCounter,
    archived: bool,
    anchor: str | None,
    measure: TokenCounter | None = None,
) -> BaseMessage | None:
    """A digest of ``message`` (``size`` tokens) of at most ``want`` tokens when one can be
    made: each miss scales the kept characters by what the last digest measured, so a
    digest that must fill a large room lands under it, not a few hundred tokens over.
    ``measure`` counts ``size``, ``want`` and the digests (default ``counter``, which the
    digest's own savings are recorded in)."""
    measure = measure or counter
    text = tool_result_text(message)
    keep_chars = max(200, chars_for_tokens(want, text=text, text_tokens=size))
    aim = _Aim(want, size, text)
    for _ in range(_AIM_ATTEMPTS):
        new = _truncate_one(
            message,
            keep_chars=keep_chars,
            digest=config.digest,
            archived=archived,
            counter=counter,
            anchor=anchor,
        )
        shown = _tokens(tool_result_text(new), measure) if new is not None else size
        aim.record(new, shown)
        if aim.best_shown >= want * _AIM_CLOSE or (shown > want and keep_chars <= 200):
            break
        guess = aim.next_guess(keep_chars, new is None, shown)
        if max(200, guess) == keep_chars:
            break
        keep_chars = max(200, guess)
    return aim.best or aim.smallest


@dataclass(slots=True)
class _Aim:
    """:func:`_aim_digest`'s search: the digests made so far and the kept characters known
    to land under and over the aim."""

    want: int
    size: int
    text: str
    best: BaseMessage | None = None  # the largest digest within ``want``
    best_shown: int = -1
    smallest: BaseMessage | None = None  # else the last (smallest) one made
    under: int = 0
    over: int | None = None

    def record(self, new: BaseMessage | None, shown: int) -> None:
        if new is not None:
            self.smallest = new
            if self.best_shown < shown <= self.want:
                self.best, self.best_shown = new, shown

    def next_guess(self, keep_chars: int, none: bool, shown: int) -> int:
        """The kept characters to try next: scaled by the miss, within the sizes known to
        land under and over the aim (their midpoint when the scaled guess falls outside).
        ``none``: no digest shorter than the result was made."""
        want, size = self.want, self.size
        if shown > want:
            self.over = keep_chars if self.over is None else min(self.over, keep_chars)
        else:
            self.under = max(self.under, keep_chars)
        guess = int(keep_chars * want / max(1, shown))
        if none:  # no digest shorter than the result yet: its framing must be paid
            step = chars_for_tokens(2 * (size - want), text=self.text, text_tokens=size)
            guess = keep_chars - max(keep_chars // 50, step)
        elif shown > want:  # a digest keeps whole lines: a step under 2% may change nothing
            guess = min(guess, keep_chars - max(1, keep_chars // 50))
        over = self.over
        low, high = max(200, self.under), over if over is not None else guess + 1
        if not low < guess < high:
            guess = (low + high) // 2 if over is not None else max(guess, keep_chars + 1)
        return guess


def cut_task(
    out: list[BaseMessage],
    config: CompactionConfig,
    counter: TokenCounter,
    archived: bool,
    anchor: str | None,
) -> tuple[int, BaseMessage] | None:
    """``(index, replacement)`` of the original task cut to head + tail + key lines when it
    is over ``task_max_ratio`` of the window; ``None`` otherwise. The caller archives it."""
    i = original_task_index(out) if config.pin_original_task else -1
    limit = None if config.budget is None else config.budget.task_max
    if i < 0 or limit is None or kind_of(out[i]) in _DONE:
        return None
    msg = out[i]
    text = tool_result_text(msg)
    if not isinstance(msg.content, str) or _tokens(text, counter) <= limit:
        return None
    keep_chars = max(400, chars_for_tokens(limit, text=text, text_tokens=_tokens(text, counter)))
    body = structured_digest(text, max_chars=keep_chars)
    new_text = body + task_notice(
        chars=len(text), omitted=max(0, len(text) - len(body)), archived=archived
    )
    saved = _tokens(text, counter) - _tokens(new_text, counter)
    if saved <= 0:
        return None
    new = with_meta(
        msg.model_copy(update={"content": new_text}),
        kind=KIND_PINNED_TASK,
        truncated=True,
        **Saving()
        .then(saved=saved, anchor=anchor, chars=len(text), precise=_precise_saved(text, new_text))
        .fields(),
    )
    return i, new
