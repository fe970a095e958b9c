"""Private: the recall tool (:func:`langchain_compact.archive.make_recall_tool`).

Its argument schema, its thread lookup, and the rendering of hits into bounded pages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from langchain_compact._archive_search import paginate
from langchain_compact.errors import ConfigError
from langchain_compact.markers import get_meta

if TYPE_CHECKING:  # langchain_core.tools (and langsmith
    # with it) is imported when a tool is built
    from langchain_core.tools import BaseTool

TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
RECALL_MAX_HITS = 10  # hits one recall renders (then pages through)
_FOOTER_ROOM = 200  # characters kept free on each page for the paging line
_LABELS = {"human": "user message", "ai": "assistant message", "system": "system message"}


class RecallArgs(BaseModel):
    """Arguments the model passes to the recall tool."""

    query: str | None = Field(
        default=None,
        description="Keywords that must all appear in the archived message (case-insensitive), "
        "e.g. a file name, an error text or an identifier: 'config.py KeyError'.",
    )
    tool_call_id: str | None = Field(
        default=None,
        description="Exact id of the tool call whose original result you want, as named in a "
        "cleared tool result or a summary.",
    )
    message_id: str | None = Field(
        default=None,
        description="Exact id of an earlier message whose text or tool-call arguments were "
        "archived, as named in its notice or stub.",
    )
    page: int | None = Field(
        default=None,
        ge=1,
        description="Page of the output, starting at 1. Leave it out to get the page that "
        "holds the first match of `query` (page 1 without a query).",
    )


class Hit(Protocol):
    """One search hit, as the recall tool reads it
    (:class:`~langchain_compact.archive.ArchivedMessage` is one)."""

    @property
    def ref(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def message(self) -> BaseMessage: ...


class Searchable(Protocol):
    """What the recall tool needs of an archive: its two searches
    (:class:`~langchain_compact.archive.TranscriptArchive` has them; typed here so that this
    module does not import the archive module, which imports it)."""

    def search(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> Sequence[Hit]: ...

    async def asearch(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> Sequence[Hit]: ...


def _describe(message: BaseMessage) -> str:
    if message.type == "tool":
        name = getattr(message, "name", None) or "?"
        what = f"tool result (tool={name}, tool_call_id={getattr(message, 'tool_call_id', '?')})"
    else:
        what = _LABELS.get(message.type, f"{message.type} message")
    if get_meta(message).get("truncated"):  # only when no original of it matched
        what += " (a version shortened to fit the window, not the original text)"
    return what


def _body(message: BaseMessage) -> str:
    lines = [str(message.text)]
    if isinstance(message, AIMessage):
        lines += [
            f"-> called {c['name']}({json.dumps(c['args'], ensure_ascii=False)}) "
            f"[tool_call_id={c.get('id')}]"
            for c in message.tool_calls
        ]
    return "\n".join(line for line in lines if line)


@dataclass(frozen=True, slots=True)
class RecallRenderer:
    """Validates recall arguments and renders hits into bounded pages."""

    name: str
    max_chars: int

    @property
    def description(self) -> str:
        """What the model reads about the tool."""
        return (
            "Get back the original text of earlier messages of this conversation that were "
            "removed from your context to save space (old tool results replaced by a short "
            "placeholder, or history folded into a summary). Pass `tool_call_id` to get that "
            "exact tool result, or `query` with a few keywords that must all appear "
            "(case-insensitive), e.g. a file name, an error message or an identifier. Output "
            f"comes in pages of at most {self.max_chars} characters; when it says there is a "
            "next page, call again with the same arguments and that `page`."
        )

    @staticmethod
    def problem(
        query: str | None, tool_call_id: str | None, message_id: str | None = None
    ) -> str | None:
        """Text for the model when no criterion is usable, else ``None``."""
        if (query or "").strip() or (tool_call_id or "").strip() or (message_id or "").strip():
            return None
        return "Pass `query` (keywords), `tool_call_id` or `message_id` to say what to recall."

    @staticmethod
    def criteria(
        query: str | None, tool_call_id: str | None, message_id: str | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for ``archive.search``."""
        return {
            "query": (query or "").strip() or None,
            "tool_call_id": (tool_call_id or "").strip() or None,
            "message_id": (message_id or "").strip() or None,
            "limit": RECALL_MAX_HITS,
        }

    def render(
        self,
        hits: Sequence[tuple[str, int, BaseMessage]],
        criteria: Mapping[str, Any],
        *,
        page: int | None,
    ) -> str:
        """Page ``page`` of the rendered hits, at most ``max_chars`` long; ``None``: the
        page holding the first match of the query in the best hit (page 1 without one)."""
        what = " and ".join(
            f"{key}={value!r}"[:200]
            for key in ("query", "tool_call_id", "message_id")
            if (value := criteria.get(key)) is not None
        )
        if not hits:
            return (
                f"No archived message in this conversation matches {what}. Try fewer or other "
                "keywords, or the exact tool_call_id named in a cleared tool result."
            )
        blocks = [f"{len(hits)} archived message(s) match {what}, best first:"]
        for n, (ref, index, message) in enumerate(hits, 1):
            blocks.append(f"[{n}] {_describe(message)} from {ref} #{index}:\n{_body(message)}")
        whole, size = "\n\n".join(blocks), self.max_chars - _FOOTER_ROOM
        found = None
        if page is None:
            first = len(blocks[0]) + 2  # where the best hit's block starts
            at = match_offset(whole, criteria.get("query"), first, first + len(blocks[1]))
            found = None if at is None else at // size + 1
        shown = page or found or 1
        text, pages = paginate(whole, page=shown, size=size)
        if shown > pages:
            return f"There are only {pages} page(s) for these arguments; pass page=1 to {pages}."
        if pages == 1:
            return text
        where = f"page {shown} of {pages}"
        if found is not None and found > 1:
            where += " (the page of the first match; page=1 is the start of the message)"
        if shown < pages:
            return (
                f"{text}\n\n[{where}: call {self.name} again with the same "
                f"arguments and page={shown + 1} for more]"
            )
        return f"{text}\n\n[{where}, the last]"


def match_offset(text: str, query: str | None, start: int, end: int) -> int | None:
    """Where in ``text[start:end]`` the query matches first: the first occurrence of its
    rarest word there (as a whole word when it occurs so), so a long record opens where it
    mentions what was asked for; ``None`` without a query word in that range.

    Example:
        >>> match_offset("intro. alpha beta ... beta alpha gamma", "gamma alpha", 0, 38)
        33
    """
    words = (query or "").lower().split()
    if not words:
        return None
    low = text[start:end].lower()
    best: tuple[int, int] | None = None  # (occurrences, offset)
    for word in words:
        pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
        first = pattern.search(low)
        if first is not None:
            found = (sum(1 for _ in pattern.finditer(low, first.start())), first.start())
        elif (at := low.find(word)) >= 0:
            found = (low.count(word, at), at)
        else:
            continue
        if best is None or found[0] < best[0]:
            best = found
    return None if best is None else start + best[1]


def build_recall_tool(archive: Searchable, *, name: str, max_chars: int) -> BaseTool:
    """The recall tool over ``archive`` (options already validated by ``make_recall_tool``)."""
    from langchain_core.tools import StructuredTool

    recall = RecallRenderer(name=name, max_chars=max_chars)

    def _thread(config: RunnableConfig) -> str:
        configurable = config.get("configurable") or {}
        if thread_id := configurable.get("thread_id"):
            return str(thread_id)
        if any(key.startswith("__pregel_") for key in configurable):
            return "default"  # in a graph run without a thread: where its nodes archived
        raise ConfigError(
            f"{name} needs the conversation's thread id to know which archive to read; "
            f'call it with config={{"configurable": {{"thread_id": "<thread>"}}}} (the id '
            "compaction archived under; a graph run passes its own config to its tools)."
        )

    def run(
        query: str | None = None,
        tool_call_id: str | None = None,
        page: int | None = None,
        message_id: str | None = None,
        *,
        config: RunnableConfig,
    ) -> str:
        if problem := recall.problem(query, tool_call_id, message_id):
            return problem
        criteria = recall.criteria(query, tool_call_id, message_id)
        hits = archive.search(thread_id=_thread(config), **criteria)
        return recall.render([(h.ref, h.index, h.message) for h in hits], criteria, page=page)

    async def arun(
        query: str | None = None,
        tool_call_id: str | None = None,
        page: int | None = None,
        message_id: str | None = None,
        *,
        config: RunnableConfig,
    ) -> str:
        if problem := recall.problem(query, tool_call_id, message_id):
            return problem
        criteria = recall.criteria(query, tool_call_id, message_id)
        hits = await archive.asearch(thread_id=_thread(config), **criteria)
        return recall.render([(h.ref, h.index, h.message) for h in hits], criteria, page=page)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=recall.description,
        args_schema=RecallArgs,
        handle_validation_error=partial(bad_arguments, name),
    )


def bad_arguments(name: str, error: Exception) -> str:
    """What the model reads when its arguments do not validate: which ones, and why."""
    problems = []
    for item in getattr(error, "errors", lambda: [])():
        where = ".".join(str(part) for part in item.get("loc", ())) or "arguments"
        problems.append(f"{where}: {item.get('msg', 'invalid')} (got {item.get('input')!r:.60})")
    details = "; ".join(problems) or str(error).splitlines()[0]
    return (
        f"Error: {name} was called with invalid arguments: {details}. Pass `query` (keywords) or "
        "`tool_call_id` (strings), and `page` as a whole number from 1 (the first page)."
    )
