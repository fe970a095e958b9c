"""The texts compaction writes into a history, and the parsers that read them back.

Every placeholder, cut notice, summary header and digest line the package writes into a
message is a template here, written and parsed back by functions here; each parser is built
from its template. Code that has the messages reads their markers
(:func:`langchain_compact.markers.get_meta`) instead; the parsers are for texts that lost
them, such as a history exported to the OpenAI chat format.

Example:
    >>> text = cleared_text(name="ls", chars=900, tool_call_id="c1")
    >>> parse_cleared(text)
    Cleared(name='ls', chars=900, tool_call_id='c1', archived=True, facts=())
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ARGUMENT_STUB",
    "ASSISTANT_TEXT_NOTICE",
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_TRUNCATION_NOTICE",
    "FACTS_MARK",
    "HUMAN_TRUNCATION_NOTICE",
    "MERGED_SUMMARY_HEADER",
    "OMITTED_LINES",
    "OMITTED_LINES_END",
    "OMITTED_LINES_KEY",
    "SUMMARY_ARCHIVED",
    "SUMMARY_HEADER",
    "TASK_TRUNCATION_NOTICE",
    "UNARCHIVED_NOTICE",
    "UNARCHIVED_PLACEHOLDER",
    "UNARCHIVED_TASK_NOTICE",
    "Cleared",
    "CutNotice",
    "DigestHeader",
    "SummaryHeader",
    "append_facts",
    "argument_stub",
    "assistant_notice",
    "cleared_text",
    "cut_notice",
    "digest_header",
    "is_summary_text",
    "kept_facts",
    "merged_summary_header",
    "omitted_lines",
    "parse_cleared",
    "parse_cut_notice",
    "parse_digest_header",
    "parse_omitted_lines",
    "parse_summary_header",
    "summary_header",
    "task_notice",
]

# --------------------------------------------------------------------------- templates

DEFAULT_PLACEHOLDER = (
    "[tool result cleared to save context: {name} returned {chars} characters. The full "
    'text is archived: call recall_archived(tool_call_id="{tool_call_id}") to read it again.]'
)
"""Placeholder template; fields: ``name``, ``chars`` (the original's size, in one unit),
``tool_call_id``; a custom template may also use ``tokens`` (the original's, counted)."""

UNARCHIVED_PLACEHOLDER = (
    "[tool result cleared to save context: {name} returned {chars} characters. It was "
    "not archived; call the tool again if you need it.]"
)
"""Placeholder used when no archive keeps the original (``archived=False``)."""

FACTS_MARK = "\nfacts kept: "
"""Where a placeholder's fact lines start (they are joined by `` | ``)."""

_FACTS_SEP = " | "

DEFAULT_TRUNCATION_NOTICE = (
    "\n[... {omitted} characters omitted from this {name} result ({chars} in all). The full "
    'text is archived: call recall_archived(tool_call_id="{tool_call_id}") to read it.]\n'
)
"""Notice on an oversized tool result cut to a digest; fields: ``omitted``, ``name``,
``chars``, ``tool_call_id``."""

UNARCHIVED_NOTICE = (
    "\n[... {omitted} characters omitted from this {name} result ({chars} in all); "
    "they were not archived ({tool_call_id}).]\n"
)
"""Notice used when no archive keeps the original (``archived=False``)."""

HUMAN_TRUNCATION_NOTICE = (
    "\n[... {omitted} characters omitted from this {name} ({chars} in all). The full text is "
    "archived: call recall_archived(query=<a few words from it>) to read it.]\n"
)
"""Notice for a long human message (an observation) cut with ``include_human=True``."""

ARGUMENT_STUB = (
    "[argument archived to save context: {chars:,} characters. Call "
    "recall_archived({where}) to read the call as it was made.]"
)
"""Stands in for a long argument of an older tool call; the call keeps its id and name and
its short arguments (a path, a flag), so it stays valid for every provider."""

UNARCHIVED_ARGUMENT_STUB = (
    "[argument removed to save context: {chars:,} characters. It was not archived.]"
)
"""The stub when no archive keeps the original call."""

ASSISTANT_TEXT_NOTICE = (
    "[... {omitted:,} of {chars:,} characters of this earlier assistant turn omitted to save "
    "context. The full text is archived: call recall_archived({where}) to read it.]"
)
"""Notice on an older assistant turn's text cut to its head, tail and key lines."""

UNARCHIVED_ASSISTANT_NOTICE = (
    "[... {omitted:,} of {chars:,} characters of this earlier assistant turn omitted to save "
    "context. It was not archived.]"
)
"""The notice when no archive keeps the original turn."""


def _where(message_id: str | None, query: str) -> str:
    """The recall arguments that find an archived message: its id, else keywords."""
    if message_id:
        return f'message_id="{message_id}"'
    return 'query="{}"'.format(query.replace('"', "'"))


def argument_stub(
    *, chars: int, message_id: str | None, tool_call_id: str, archived: bool = True
) -> str:
    """The text that replaces a long argument value of an older tool call.

    Example:
        >>> print(argument_stub(chars=10_240, message_id="a7", tool_call_id="c7"))
        [argument archived to save context: 10,240 characters. Call
        recall_archived(message_id="a7") to read the call as it was made.]
    """
    if not archived:
        return UNARCHIVED_ARGUMENT_STUB.format(chars=chars)
    return ARGUMENT_STUB.format(chars=chars, where=_where(message_id, tool_call_id))


def assistant_notice(
    *, chars: int, omitted: int, message_id: str | None, query: str, archived: bool = True
) -> str:
    """The notice on an older assistant turn whose text was cut."""
    if not archived:
        return UNARCHIVED_ASSISTANT_NOTICE.format(chars=chars, omitted=omitted)
    return ASSISTANT_TEXT_NOTICE.format(
        chars=chars, omitted=omitted, where=_where(message_id, query)
    )


TASK_TRUNCATION_NOTICE = (
    "\n[The original task is {chars} characters; {omitted} were left out here to fit the "
    "context window. The full text is archived: call recall_archived(query=<a few words "
    "from it>) to read it.]\n"
)
"""Notice on an original task too large for the window (``task_max_ratio``)."""

UNARCHIVED_TASK_NOTICE = (
    "\n[The original task is {chars} characters; {omitted} were left out here to fit the "
    "context window (not archived).]\n"
)
"""The same, when no archive keeps the original."""

SUMMARY_HEADER = (
    "[Summary #{index} of the earlier conversation: {count} messages were compacted{archived}. "
    "It replaces them; the original task is pinned above. Continue the task from here.]\n\n"
)
"""First lines of a compaction summary; ``archived`` is :data:`SUMMARY_ARCHIVED` or empty."""

SUMMARY_ARCHIVED = ", archived as {archive_ref} (recall_archived returns the originals)"
"""The header's note when the compacted originals were archived."""

MERGED_SUMMARY_HEADER = "[Merged summary of compactions 1-{last}.]\n\n"
"""First lines of the summary that merges the earlier ones."""

_DIGEST_OPEN = "[digest of "

OMITTED_LINES = "[... {lines} lines omitted ...]"
"""A digest's line where the middle of a text was left out (``lines`` with thousands
separators)."""

OMITTED_LINES_KEY = "[... {lines} lines omitted; {key_lines} key lines of them:"
"""The same, when the digest shows some of those lines (then :data:`OMITTED_LINES_END`)."""

OMITTED_LINES_END = "[... end of the omitted lines]"
"""The line after the key lines of an omitted stretch."""

# --------------------------------------------------------------------------- parsers from templates

#: What each template field may hold when read back.
_FIELDS = {
    "name": r"(?P<name>[^\n]+?)",
    "chars": r"(?P<chars>\d+)",
    "tokens": r"(?P<tokens>\d+)",
    "omitted": r"(?P<omitted>\d+)",
    "tool_call_id": r"(?P<tool_call_id>[^\n]*?)",
    "index": r"(?P<index>\d+)",
    "count": r"(?P<count>\d+)",
    "last": r"(?P<last>\d+)",
    "lines": r"(?P<lines>\d{1,3}(?:,\d{3})*)",
    "key_lines": r"(?P<key_lines>\d+)",
    "archive_ref": r"(?P<archive_ref>[^\n]+?)",
}


def _pattern(template: str) -> str:
    """A regex that matches what ``template.format(...)`` writes, with a named group per
    field (``{archived}`` is the optional :data:`SUMMARY_ARCHIVED`)."""
    out = []
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(re.escape(literal))
        if field is None:
            continue
        if field == "archived":
            out.append("(?:" + _pattern(SUMMARY_ARCHIVED) + ")?")
        else:
            out.append(_FIELDS[field])
    return "".join(out)


def _int(match: re.Match[str], group: str) -> int:
    return int(match.group(group).replace(",", ""))


# --------------------------------------------------------------------------- cleared results


@dataclass(frozen=True, slots=True)
class Cleared:
    """What a cleared tool result's placeholder says: the tool's ``name``, the original's
    size in ``chars``, the ``tool_call_id`` the archive keeps it under (``None`` when
    not ``archived``) and the ``facts`` it kept."""

    name: str
    chars: int
    tool_call_id: str | None
    archived: bool
    facts: tuple[str, ...]


def cleared_text(
    template: str | None = None,
    *,
    name: str,
    chars: int,
    tokens: int | None = None,
    tool_call_id: str,
    archived: bool = True,
) -> str:
    """The placeholder of a cleared tool result (``template`` defaults to
    :data:`DEFAULT_PLACEHOLDER`, or :data:`UNARCHIVED_PLACEHOLDER` when not ``archived``).
    ``chars`` and ``tokens`` both describe the original; the default templates state its
    characters only, one unit (``tokens`` is for a custom template)."""
    template = template or (DEFAULT_PLACEHOLDER if archived else UNARCHIVED_PLACEHOLDER)
    return template.format(name=name, chars=chars, tokens=tokens, tool_call_id=tool_call_id)


def append_facts(placeholder: str, facts: Sequence[str]) -> str:
    """``placeholder`` followed by the fact lines (none: the placeholder alone)."""
    return placeholder + FACTS_MARK + _FACTS_SEP.join(facts) if facts else placeholder


def kept_facts(placeholder: str) -> list[str]:
    """The fact lines :func:`append_facts` added to ``placeholder`` (a fact that itself
    holds ``" | "`` comes back in pieces)."""
    kept = placeholder.partition(FACTS_MARK)[2]
    return kept.split(_FACTS_SEP) if kept else []


#: The placeholders before issue 20, which also stated the tokens of the text they replaced
#: (an earlier digest's, for a cut result): still parsed, for histories exported then.
_OLD_PLACEHOLDERS = (
    (
        "[tool result cleared to save context: {name} returned {chars} characters "
        "(~{tokens} tokens). The full text is archived: call "
        'recall_archived(tool_call_id="{tool_call_id}") to read it again.]',
        True,
    ),
    (
        "[tool result cleared to save context: {name} returned {chars} characters "
        "(~{tokens} tokens). It was not archived; call the tool again if you need it.]",
        False,
    ),
)

_CLEARED_RES = (
    (re.compile(r"\A" + _pattern(DEFAULT_PLACEHOLDER)), True),
    (re.compile(r"\A" + _pattern(UNARCHIVED_PLACEHOLDER)), False),
    *((re.compile(r"\A" + _pattern(t)), archived) for t, archived in _OLD_PLACEHOLDERS),
)


def parse_cleared(text: str) -> Cleared | None:
    """The fields of a default placeholder (with its facts), or ``None`` for other texts."""
    for regex, archived in _CLEARED_RES:
        match = regex.match(text)
        if match is None:
            continue
        rest = text[match.end() :]
        if rest and not rest.startswith(FACTS_MARK):
            continue
        call_id = match.group("tool_call_id") if archived else None
        name, chars = match.group("name"), _int(match, "chars")
        return Cleared(name, chars, call_id, archived, tuple(kept_facts(rest)))
    return None


# --------------------------------------------------------------------------- cut notices

CutKind = Literal["result", "message", "task"]


@dataclass(frozen=True, slots=True)
class CutNotice:
    """What the notice on a cut message says."""

    kind: CutKind
    """``"result"`` (a tool result), ``"message"`` (a long human message) or ``"task"``."""
    name: str
    """The tool's name, ``"user message"``, or ``""`` for the task."""
    chars: int
    """Characters of the original."""
    omitted: int
    """Characters left out."""
    ref: str | None
    """The ``tool_call_id`` (or ``message id ...``) the notice names; ``None`` if none."""
    archived: bool


def cut_notice(
    template: str | None = None,
    *,
    kind: Literal["result", "message"] = "result",
    name: str,
    chars: int,
    omitted: int,
    ref: str,
    archived: bool = True,
) -> str:
    """The notice on a tool result (``kind="result"``) or long human message (``"message"``)
    cut to a digest: ``template``, else the default for the kind (:data:`UNARCHIVED_NOTICE`
    for both when not ``archived``)."""
    if not template:
        if not archived:
            template = UNARCHIVED_NOTICE
        else:
            template = DEFAULT_TRUNCATION_NOTICE if kind == "result" else HUMAN_TRUNCATION_NOTICE
    return template.format(omitted=omitted, name=name, chars=chars, tool_call_id=ref)


def task_notice(*, chars: int, omitted: int, archived: bool = True) -> str:
    """The notice appended to an original task cut to fit the window."""
    template = TASK_TRUNCATION_NOTICE if archived else UNARCHIVED_TASK_NOTICE
    return template.format(chars=chars, omitted=omitted)


_CUT_TEMPLATES: tuple[tuple[str, CutKind, bool], ...] = (
    (DEFAULT_TRUNCATION_NOTICE, "result", True),
    (UNARCHIVED_NOTICE, "result", False),
    (HUMAN_TRUNCATION_NOTICE, "message", True),
    (TASK_TRUNCATION_NOTICE, "task", True),
    (UNARCHIVED_TASK_NOTICE, "task", False),
)

#: A notice at the start of the text (where cuts put it, without its first newline) or after
#: a newline (the task's, at the end; older versions put it between head and tail).
_CUT_RES = [
    (re.compile(r"(?:\A|\n)" + _pattern(t.strip("\n"))), kind, archived)
    for t, kind, archived in _CUT_TEMPLATES
]


def parse_cut_notice(text: str) -> CutNotice | None:
    """The fields of the first cut notice in ``text`` (at its start or after a newline),
    or ``None`` when it has none."""
    best: tuple[int, CutNotice] | None = None
    for regex, kind, archived in _CUT_RES:
        match = regex.search(text)
        if match is None or (best is not None and match.start() >= best[0]):
            continue
        got = match.groupdict()
        chars, omitted = _int(match, "chars"), _int(match, "omitted")
        name, ref = got.get("name") or "", got.get("tool_call_id")
        best = (match.start(), CutNotice(kind, name, chars, omitted, ref, archived))
    return best[1] if best else None


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True, slots=True)
class SummaryHeader:
    """What a summary's header says: the compaction ``index`` (of a ``merged`` summary: the
    last it merges), the ``count`` of messages compacted (``None`` when merged) and the
    ``archive_ref`` of the originals (``None`` if not archived)."""

    index: int
    count: int | None
    archive_ref: str | None
    merged: bool


def summary_header(*, index: int, count: int, archive_ref: str | None = None) -> str:
    """The header that opens the text of compaction ``index``."""
    archived = SUMMARY_ARCHIVED.format(archive_ref=archive_ref) if archive_ref else ""
    return SUMMARY_HEADER.format(index=index, count=count, archived=archived)


def merged_summary_header(*, last: int) -> str:
    """The header of the summary that merges summaries 1 to ``last``."""
    return MERGED_SUMMARY_HEADER.format(last=last)


_SUMMARY_RE = re.compile(r"\A" + _pattern(SUMMARY_HEADER))
_MERGED_RE = re.compile(r"\A" + _pattern(MERGED_SUMMARY_HEADER))


def split_summary_header(text: str) -> tuple[str, str]:
    """``(header, body)`` of a summary's text: the header that opens it (a compaction's or
    a merge's, as written), and the rest; ``("", text)`` when it opens with neither."""
    match = _SUMMARY_RE.match(text) or _MERGED_RE.match(text)
    if match is None:
        return "", text
    return text[: match.end()], text[match.end() :]


def parse_summary_header(text: str) -> SummaryHeader | None:
    """The fields of the header a summary's text starts with, or ``None``."""
    if match := _SUMMARY_RE.match(text):
        count, ref = _int(match, "count"), match.group("archive_ref")
        return SummaryHeader(_int(match, "index"), count, ref, merged=False)
    if match := _MERGED_RE.match(text):
        return SummaryHeader(index=_int(match, "last"), count=None, archive_ref=None, merged=True)
    return None


def is_summary_text(text: str) -> bool:
    """Whether ``text`` starts with a summary header (plain or merged)."""
    return parse_summary_header(text) is not None


# --------------------------------------------------------------------------- digests


@dataclass(frozen=True, slots=True)
class DigestHeader:
    """What a structured digest's first line says: ``what`` the text is (``a log: 4,009
    lines``), its ``chars`` and a ``note`` (``""`` if none)."""

    what: str
    chars: int
    note: str


def digest_header(what: str, chars: int, note: str = "") -> str:
    """The first line of a structured digest of a text of ``chars`` characters.

    Example:
        >>> digest_header("a log: 12 lines", 1_200)
        '[digest of a log: 12 lines; 1,200 chars]'
    """
    parts = [what, f"{chars:,} chars"] + ([note] if note else [])
    return f"{_DIGEST_OPEN}{'; '.join(parts)}]"


_DIGEST_RE = re.compile(
    r"\A" + re.escape(_DIGEST_OPEN) + r"(?P<what>[^\n]+?); (?P<chars>\d{1,3}(?:,\d{3})*) chars"
    r"(?:; (?P<note>[^\n]*))?\](?:\n|\Z)"
)


def parse_digest_header(text: str) -> DigestHeader | None:
    """The fields of the digest header ``text`` starts with, or ``None``."""
    match = _DIGEST_RE.match(text)
    if match is None:
        return None
    return DigestHeader(
        what=match.group("what"), chars=_int(match, "chars"), note=match.group("note") or ""
    )


def omitted_lines(lines: int, key_lines: int = 0) -> str:
    """The digest line that stands for ``lines`` left-out lines, of which ``key_lines``
    follow it (then :data:`OMITTED_LINES_END` closes them).

    Example:
        >>> omitted_lines(1_200), omitted_lines(40, 3)
        ('[... 1,200 lines omitted ...]', '[... 40 lines omitted; 3 key lines of them:')
    """
    if key_lines:
        return OMITTED_LINES_KEY.format(lines=f"{lines:,}", key_lines=key_lines)
    return OMITTED_LINES.format(lines=f"{lines:,}")


_OMITTED_RES = (
    re.compile(r"\A" + _pattern(OMITTED_LINES) + r"\Z"),
    re.compile(r"\A" + _pattern(OMITTED_LINES_KEY) + r"\Z"),
)


def parse_omitted_lines(line: str) -> tuple[int, int] | None:
    """``(lines, key_lines)`` of an :func:`omitted_lines` line, or ``None``."""
    for regex in _OMITTED_RES:
        if match := regex.match(line):
            keys = match.groupdict().get("key_lines")
            return _int(match, "lines"), int(keys) if keys else 0
    return None
