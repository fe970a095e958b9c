"""Micro-compaction (DESIGN.md B3, B4): clear old tool results, cut oversized ones.

Both functions are pure: they return new messages with the same ``id``, ``tool_call_id``,
``name`` and ``status``, so LangGraph's ``add_messages`` replaces them in place, and they
mark what they changed in ``response_metadata["langchain_compact"]`` so a second run
changes nothing. The originals are the caller's to archive first (the graph nodes, the LCEL
transformer and the middleware do, through :mod:`langchain_compact.archive`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact._meta import KIND_CLEARED, KIND_TRUNCATED, get_meta, kind_of, with_meta
from langchain_compact._render import key_lines, tool_result_text
from langchain_compact.config import DEFAULT_MICRO_KEEP, DEFAULT_MICRO_MIN_CHARS, CompactionConfig
from langchain_compact.errors import ConfigError
from langchain_compact.tokens import (
    TiktokenCounter,
    TokenCounter,
    _approx_text,
    _check_message,
    approximate_tokens,
    context_tokens,
)

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_TRUNCATION_NOTICE",
    "UNARCHIVED_NOTICE",
    "UNARCHIVED_PLACEHOLDER",
    "clear_tool_results",
    "micro_compact",
    "tool_result_text",
    "truncate_large_tool_results",
]

DEFAULT_PLACEHOLDER = (
    "[tool result cleared to save context: {name} returned {chars} characters "
    "(~{tokens} tokens). The full text is archived: call "
    'recall_archived(tool_call_id="{tool_call_id}") to read it again.]'
)
"""Placeholder template; fields: ``name``, ``chars``, ``tokens``, ``tool_call_id``."""

UNARCHIVED_PLACEHOLDER = (
    "[tool result cleared to save context: {name} returned {chars} characters "
    "(~{tokens} tokens). It was not archived; call the tool again if you need it.]"
)
"""Placeholder used when no archive keeps the original (``archived=False``)."""

DEFAULT_TRUNCATION_NOTICE = (
    "\n[... {omitted} characters omitted from this {name} result ({chars} in all). The full "
    'text is archived: call recall_archived(tool_call_id="{tool_call_id}") to read it.]\n'
)
"""Inserted between head and tail of an oversized result; same fields plus ``omitted``."""

HUMAN_TRUNCATION_NOTICE = (
    "\n[... {omitted} characters omitted from this {name} ({chars} in all). The full text is "
    "archived: call recall_archived(query=<a few words from it>) to read it.]\n"
)
"""Notice for a long human message (an observation) cut with ``include_human=True``."""

_DONE = (KIND_CLEARED, KIND_TRUNCATED)

UNARCHIVED_NOTICE = (
    "\n[... {omitted} characters omitted from this {name} result ({chars} in all); "
    "they were not archived ({tool_call_id}).]\n"
)
"""Notice used when no archive keeps the original (``archived=False``)."""


def _usage_anchor(messages: Sequence[BaseMessage]) -> str | None:
    for msg in reversed(messages):
        if isinstance(msg, AIMessage) and msg.usage_metadata:
            return msg.id
    return None


def _tokens(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text`` alone under ``counter`` (fast paths for the package's counters)."""
    if counter is approximate_tokens:
        return _approx_text(text)
    if isinstance(counter, TiktokenCounter):
        return counter.count_text(text)
    return max(0, counter([HumanMessage(text)]) - counter([HumanMessage("")]))


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

    The most recent ``keep`` tool results stay intact; older ones of at least
    ``min_chars`` characters whose tool is not in ``exclude_tools`` are cleared, unless the
    placeholder would not be shorter. With ``clear_at_least > 0`` nothing changes until
    clearing would free at least that many tokens (net of the placeholders), and then every
    eligible result is cleared at once: the cleared prefix changes in batches, so a
    provider's prompt cache survives between clears.

    Args:
        messages: The history (not modified).
        keep: Number of most recent tool results never cleared.
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
        [True, True, False, False, False]
    """
    template = placeholder or (DEFAULT_PLACEHOLDER if archived else UNARCHIVED_PLACEHOLDER)
    tool_positions = [
        i for i, m in enumerate(messages) if isinstance(_check_message(m, i), ToolMessage)
    ]
    protected = set(tool_positions[-keep:]) if keep > 0 else set()
    anchor = _usage_anchor(messages)
    plan: list[tuple[int, int, str, int]] = []  # index, original chars, placeholder, freed
    for i in tool_positions:
        msg = messages[i]
        if i in protected or kind_of(msg) == KIND_CLEARED:
            continue
        if (getattr(msg, "name", None) or "") in exclude_tools:
            continue
        text = tool_result_text(msg)
        if len(text) < min_chars and isinstance(msg.content, str):
            continue
        tokens = _tokens(text, counter)
        assert isinstance(msg, ToolMessage)
        # A result cut to head + tail earlier reports its original size.
        chars = int(get_meta(msg).get("original_chars", len(text)))
        new_text = template.format(
            name=msg.name or "tool", chars=chars, tokens=tokens, tool_call_id=msg.tool_call_id
        )
        keys = key_lines(text, limit=3, width=160)
        if keys:  # identifiers (ticket ids, URLs) stay visible in the placeholder
            new_text += "\nkey lines: " + " | ".join(keys)
        saved = tokens - _tokens(new_text, counter)
        if saved > 0:  # a placeholder longer than the result would only grow the context
            plan.append((i, chars, new_text, saved))
    if not plan or sum(saved for *_, saved in plan) < clear_at_least:
        return list(messages)
    out = list(messages)
    for i, chars, new_text, saved in plan:
        msg = messages[i]
        out[i] = with_meta(
            msg.model_copy(update={"content": new_text, "artifact": None}),
            kind=KIND_CLEARED,
            original_chars=chars,
            saved_tokens=saved,
            usage_anchor=anchor,
        )
    return out


def truncate_large_tool_results(
    messages: Sequence[BaseMessage],
    *,
    max_chars: int,
    keep_chars: int = 2_000,
    digest: Callable[[str], str] | None = None,
    notice: str | None = None,
    archived: bool = True,
    include_human: bool = False,
    counter: TokenCounter = approximate_tokens,
) -> list[BaseMessage]:
    """Cut every tool result longer than ``max_chars`` to head + tail (B4).

    The head keeps the first ``keep_chars // 2`` characters, the tail the last ones, with a
    notice between them saying how to read the whole text again. ``digest`` (for example an
    LLM call listing the key fields) is appended when given. Applies to recent results too:
    an oversized result should not enter the context whole. With ``include_human``, long
    human messages are cut too: agents without native tool calls (SWE-agent's text
    commands) receive their observations as user messages. Summaries and the pinned task
    are never cut.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> out = truncate_large_tool_results(
        ...     [ToolMessage("a" * 9000, tool_call_id="c1", name="log")], max_chars=5000)
        >>> len(out[0].content) < 2400
        True
    """
    if keep_chars >= max_chars:
        raise ConfigError(f"keep_chars={keep_chars} must be smaller than max_chars={max_chars}")
    anchor = _usage_anchor(messages)
    out = list(messages)
    for i, raw in enumerate(messages):
        msg = _check_message(raw, i)
        human = include_human and isinstance(msg, HumanMessage) and kind_of(msg) is None
        if not (isinstance(msg, ToolMessage) or human) or kind_of(msg) in _DONE:
            continue
        text = tool_result_text(msg)
        if len(text) <= max_chars:
            continue
        head, tail = text[: keep_chars // 2], text[len(text) - (keep_chars - keep_chars // 2) :]
        if isinstance(msg, ToolMessage):
            template = notice or (DEFAULT_TRUNCATION_NOTICE if archived else UNARCHIVED_NOTICE)
            name, ref = msg.name or "tool", msg.tool_call_id
        else:
            template = HUMAN_TRUNCATION_NOTICE if archived else UNARCHIVED_NOTICE
            name, ref = "user message", f"message id {msg.id}"
        middle = template.format(
            omitted=len(text) - len(head) - len(tail), name=name, chars=len(text), tool_call_id=ref
        )
        keys = key_lines(text[len(head) : len(text) - len(tail)])
        if keys:  # identifiers in the omitted part stay visible
            middle += "[key lines from the omitted part]\n" + "\n".join(keys) + "\n"
        new_text = head + middle + tail
        if digest is not None:
            new_text += "\n[digest of the full result]\n" + digest(text)
        saved = max(0, _tokens(text, counter) - _tokens(new_text, counter))
        out[i] = with_meta(
            msg.model_copy(update={"content": new_text, "artifact": None}),
            kind=KIND_TRUNCATED,
            original_chars=len(text),
            saved_tokens=saved,
            usage_anchor=anchor,
        )
    return out


def micro_compact(
    messages: Sequence[BaseMessage],
    config: CompactionConfig,
    *,
    archived: bool = True,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
) -> list[BaseMessage]:
    """Both micro-compaction layers with ``config``'s settings: cut oversized results (B4),
    then clear old ones (B3). Unchanged messages are the same objects as in the input.

    Pressure relief: when the context is still at or over the full-compaction trigger after
    that (large results: ``micro_keep`` of them can fill the window), older results are
    cleared down to the newest one, so a full compaction is the last resort, not the norm.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> out = micro_compact([ToolMessage("a" * 9000, tool_call_id="c1")], CompactionConfig())
        >>> kind_of(out[0])
        'truncated'
    """
    out = list(messages)
    if config.large_tool_result_chars is not None:
        out = truncate_large_tool_results(
            out,
            max_chars=config.large_tool_result_chars,
            keep_chars=config.large_tool_result_keep_chars,
            archived=archived,
            counter=counter,
        )
    options: dict[str, Any] = {
        "min_chars": config.micro_min_chars,
        "exclude_tools": config.micro_exclude_tools,
        "archived": archived,
        "counter": counter,
    }
    out = clear_tool_results(
        out, keep=config.micro_keep, clear_at_least=config.micro_clear_at_least, **options
    )
    trigger = config.trigger_tokens
    if (
        trigger is not None
        and config.micro_keep > 1
        and context_tokens(out, counter=counter, tools=tools) >= trigger
    ):
        out = clear_tool_results(out, keep=1, **options)
    return out
