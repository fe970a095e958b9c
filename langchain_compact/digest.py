"""Digests of large tool results: what a head + tail cut would lose, kept in a bounded text.

Cutting an oversized result to its first and last characters loses what lies between, and a
JSON array cut by characters loses its last records too (often the newest or the largest).
A digest reads the whole text once, in linear time, and says what it holds within a hard
character bound; a text over ``DIGEST_READ_CHARS`` (8 Mi characters) is read from a bounded
view (its start, its end and windows between, whole lines), and the header says so. The
structure is detected in this order, each detector falling through to the next on malformed
input:

- JSON (an array, an object around its largest array, or JSON Lines): record count; every
  field with its types and how many records have it (nested objects one level down as
  ``key.sub``); numeric min / max (with the record holding them) / sum / mean; the top values
  of low-cardinality strings; the first and last records.
- Tables (CSV, TSV, markdown or pipe tables): row count, header, the same per-column
  statistics, first and last rows.
- Logs (lines with levels or timestamps): line count, lines per level, the error and warning
  lines deduplicated with counts (most frequent, then newest, first), up to 8 other lines
  that name an identifier or a URL (as the plain text's key lines), first and last lines.
- Plain text and code: head + tail, and between them the key lines of the middle
  (identifiers and URLs as :func:`~langchain_compact._render.key_lines` finds them, error
  lines, definitions, labelled numbers).

No input string makes :func:`structured_digest` raise, and base64-like blobs are replaced by
their size, never pasted. :func:`llm_digest` asks a chat model instead and falls back to
:func:`structured_digest` on any failure.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from langchain_compact._digest_parse import detect, scrub
from langchain_compact._digest_sections import Lines, clip, describe
from langchain_compact._placeholders import OMITTED_LINES_END, digest_header, omitted_lines
from langchain_compact._render import key_lines
from langchain_compact.errors import ConfigError

__all__ = [
    "DEFAULT_DIGEST_PROMPT",
    "DEFAULT_LLM_INPUT_CHARS",
    "Structure",
    "detect_structure",
    "llm_digest",
    "structured_digest",
]

logger = logging.getLogger("langchain_compact")

Structure = Literal["json", "jsonl", "table", "log", "code", "text"]
"""What :func:`detect_structure` can report."""

DEFAULT_LLM_INPUT_CHARS = 24_000
"""Characters of the raw result :func:`llm_digest` shows the model (head + tail beyond it)."""

DEFAULT_DIGEST_PROMPT = """You are reading one large tool result for an AI agent. The agent \
will see only your digest; the full text is archived. List tersely, with values exactly as \
they appear: what the result is; its record or line count; the key fields and their ranges \
(min, max, totals); the records, values and identifiers that stand out (largest, newest, \
last, failed); every distinct error and warning with its count. Never invent anything. Do \
not call tools. Stay under {max_tokens} tokens."""
"""Default instructions of :func:`llm_digest`; ``{max_tokens}`` is filled in."""


def _fit(header: str, lines: Lines, max_chars: int) -> str:
    """The header, then as many lines as fit in ``max_chars`` (lowest priority number first),
    in display order."""
    if len(header) >= max_chars:
        return header[:max_chars]
    used, chosen = len(header), []
    for index in sorted(range(len(lines)), key=lambda i: (lines[i][0], i)):
        cost = len(lines[index][1]) + 1
        if used + cost <= max_chars:
            chosen.append(index)
            used += cost
    return "\n".join([header, *(lines[i][1] for i in sorted(chosen))])


def _header(what: str, chars: int, note: str) -> str:
    return digest_header(what, chars, note)


#: A text longer than this is digested from a bounded view of it (its first and last
#: ``_VIEW_EDGE`` characters and ``_VIEW_WINDOWS`` windows of ``_VIEW_WINDOW`` spread over
#: the middle, whole lines), the header saying so: a 200 MB result read whole (detected as
#: JSON, then JSON Lines, a table, a log, split into lines each time) cost tens of seconds
#: and gigabytes. The full text is archived before it is digested.
DIGEST_READ_CHARS = 1 << 23
_VIEW_EDGE = 1 << 19
_VIEW_WINDOWS = 8
_VIEW_WINDOW = 1 << 16


def _lines_within(text: str, start: int, end: int) -> str:
    """``text[start:end]`` without the partial lines at either edge (where it has a break)."""
    if start > 0 and (cut := text.find("\n", start, end)) >= 0:
        start = cut + 1
    if end < len(text) and (cut := text.rfind("\n", start, end)) >= 0:
        end = cut
    return text[start:end]


def _view(text: str) -> tuple[str, str]:
    """The bounded view of a text over ``DIGEST_READ_CHARS``, and the note that says so."""
    middle = len(text) - 2 * _VIEW_EDGE
    step = middle // _VIEW_WINDOWS
    parts = [_lines_within(text, 0, _VIEW_EDGE)]
    for k in range(_VIEW_WINDOWS):
        start = _VIEW_EDGE + k * step + (step - _VIEW_WINDOW) // 2
        parts.append(_lines_within(text, start, start + _VIEW_WINDOW))
    parts.append(_lines_within(text, len(text) - _VIEW_EDGE, len(text)))
    view = "\n".join(parts)
    note = (
        f"sampled: {len(view):,} chars read (the start, the end and {_VIEW_WINDOWS} "
        "windows between), counts are of those"
    )
    return view, note


# --- plain text and code --------------------------------------------------------------

_ERROR_RE = re.compile(r"(?i:\b(?:error|exception|failed|failure|fatal|panic|traceback)\b)|Error\b")
_ERROR_WORDS = ("error", "exception", "fail", "fatal", "panic", "traceback")
_LABELLED_RE = re.compile(r"^\s*[A-Za-z][\w .\-]{0,40}[:=]\s*[-+$]?\d")
_PATH_RE = re.compile(
    r"(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+"
    r"|\b[\w\-]+\.(?:py|js|ts|rs|go|c|h|cc|cpp|java|json|yaml|yml|toml|md|txt|csv|sql|sh)\b"
)
_LINE_NO_RE = re.compile(r"^\s*\d+(?:\t|: ?)")
_DEF_RE = re.compile(
    r"(?:(?:pub|export|async|static|public|private|protected|final|abstract|override)\s+)*"
    r"(?:def|class|fn|func|function|interface|struct|enum|trait|impl|actor|primitive|fun|be)\s+\w"
)
_NOT_C_DEF = ("if ", "for ", "while ", "return ", "switch ", "else", "case ", "#")
_C_NAME_RE = re.compile(r"\**[A-Za-z_]\w*")


def _is_definition(line: str) -> bool:
    body = _LINE_NO_RE.sub("", line[:300], count=1)
    if _DEF_RE.match(body.lstrip()):
        return True
    head = body.split("(", 1)[0].split()  # C-like: `static ast_t* f(...)` at column 0
    return (
        "(" in body
        and body[:1].isalpha()
        and 2 <= len(head) <= 5
        and _C_NAME_RE.fullmatch(head[-1]) is not None
        and not any(c in "=:/,.;" for c in "".join(head))
        and not body.rstrip().endswith((";", ","))
        and not body.startswith(_NOT_C_DEF)
    )


def _key_rank(line: str, keyed: set[str], code: bool) -> int | None:
    """0 identifiers / URLs; 1 errors (definitions in code); 2 definitions (errors in code);
    3 labelled numbers and paths; None for other lines."""
    if line.strip()[:200] in keyed:
        return 0
    head = line[:300]
    low = head.lower()  # substring tests first: a regex search per line is the slow part
    error = any(w in low for w in _ERROR_WORDS) and bool(_ERROR_RE.search(head))
    definition = _is_definition(line)
    if error or definition:
        return 1 if (definition if code else error) else 2
    return 3 if _LABELLED_RE.match(head) or _PATH_RE.search(head) else None


def _text_kind(lines: list[str]) -> Structure:
    return "code" if sum(1 for ln in lines[:2000] if _is_definition(ln)) >= 3 else "text"


def _cut(text: str, head_n: int, tail_n: int, ends: int = 0) -> tuple[int, int]:
    """End of the head and start of the tail, on line boundaries where one is near.

    The last line (where a command reports its outcome) and the first (what the output is:
    a file's name, a command's header) stay whole when, together with what the tail keeps,
    they take no more than ``ends`` characters (at least ``head_n + tail_n``): the head,
    then the key lines between, give way for them."""
    ends = max(ends, head_n + tail_n)
    cut = text.rfind("\n", 0, head_n)
    head_end = cut if cut > head_n // 2 else head_n
    cut = text.find("\n", len(text) - tail_n)
    tail_start = cut + 1 if 0 <= cut < len(text) - tail_n // 2 else len(text) - tail_n
    last = text.rstrip().rfind("\n") + 1
    if last < tail_start and len(text) - last <= ends:
        head_end = min(head_end, last, max(0, head_n + tail_n - (len(text) - last)))
        tail_start = last
    first = text.find("\n")
    if first > 0 and head_end < first and first + len(text) - tail_start <= ends:
        head_end = first
    return head_end, tail_start


def _key_lines(text: str, start: int, end: int, budget: int, code: bool) -> list[tuple[int, str]]:
    """Key lines of ``text[start:end]`` as ``(offset, clipped line)``, best first, within
    ``budget`` characters (one newline each)."""
    lines = text[start:end].splitlines(keepends=True)
    filled = "".join(ln for ln in lines if not ln.isspace())
    keyed = set(key_lines(filled, limit=len(lines), width=200))
    ranked: list[list[tuple[int, str]]] = [[], [], [], []]
    seen: set[str] = set()
    offset = start
    for line in lines:
        if line.isspace():
            offset += len(line)
            continue
        rank = _key_rank(line, keyed, code)
        if rank is not None and len(ranked[rank]) < 400 and line not in seen:
            seen.add(line)
            ranked[rank].append((offset, clip(line.strip(), 160)))
        offset += len(line)
    picked = []
    for offset, line in (item for group in ranked for item in group):
        if len(line) + 1 <= budget:
            picked.append((offset, line))
            budget -= len(line) + 1
    return picked


def _ends(text: str, room: int) -> str:
    """``text`` in ``room`` characters: its head, a marker, and its last lines (where a
    command reports its outcome), the last line whole when it fits in half the room."""
    marker = " [...] "
    lines = text.rstrip().splitlines()
    last = lines[-1].strip() if lines else ""
    tail_room = max(0, min(len(last), room // 2)) if len(last) <= room // 2 else room // 3
    tail = last if len(last) <= tail_room else last[-tail_room:]
    head_room = room - len(tail) - len(marker)
    if head_room < 20:
        return clip(text, room)
    return clip(text, head_room) + marker + tail


def _text_digest(text: str, max_chars: int, note: str, chars: int | None = None) -> str:
    """Head + tail, the key lines of the middle between them; spare room widens both
    (``chars``: the length of the text the header names, default ``len(text)``)."""
    lines = text.splitlines()
    kind = _text_kind(lines)
    header = _header(f"{kind}: {len(lines):,} lines", len(text) if chars is None else chars, note)
    avail = max_chars - len(header) - 1 - 120  # 120: the two markers around the key lines
    text = scrub(text)
    if avail < 100 or len(text) <= avail:
        room = max_chars - len(header) - 1
        return _fit(header, [(1, text if len(text) <= room else _ends(text, room))], max_chars)
    head_end, tail_start = _cut(text, int(avail * 0.35), int(avail * 0.25), avail)
    room = max(0, avail - head_end - (len(text) - tail_start))
    picked = _key_lines(text, head_end, tail_start, room, kind == "code")
    spare = room - sum(len(line) + 1 for _, line in picked)
    if spare > 0:
        tail_n = len(text) - tail_start + spare * 45 // 100
        head_end, tail_start = _cut(text, head_end + spare * 55 // 100, tail_n, avail)
        picked = [p for p in picked if head_end <= p[0] < tail_start]
    picked = sorted(picked)

    def body_of(picked: list[tuple[int, str]]) -> list[str]:
        gap = text.count(chr(10), head_end, tail_start)
        body = [header, text[:head_end].rstrip("\n"), omitted_lines(gap, len(picked))]
        if picked:
            body.extend(line for _, line in picked)
            body.append(OMITTED_LINES_END)
        body.append(text[tail_start:])
        return body

    body = body_of(picked)
    out = "\n".join(body)
    while len(out) > max_chars and picked:  # the markers ran over: key lines give way first
        picked = picked[:-1]
        body = body_of(picked)
        out = "\n".join(body)
    if len(out) > max_chars:  # then the head gives way, the end stays
        body[1] = body[1][: max(0, len(body[1]) - (len(out) - max_chars))]
        out = "\n".join(body)
    return out[-max_chars:] if len(out) > max_chars else out


# --- public functions -------------------------------------------------------------------


def detect_structure(text: str) -> Structure:
    """The structure :func:`structured_digest` would use for ``text``.

    Example:
        >>> detect_structure('[{"id": 1}, {"id": 2}]'), detect_structure("a,b\\n1,2\\n3,4")
        ('json', 'table')
    """
    kind, _ = detect(text)
    return _text_kind(text.splitlines()) if kind == "text" else kind  # type: ignore[return-value]


def structured_digest(text: str, *, max_chars: int, header_note: str = "") -> str:
    """A digest of ``text`` in at most ``max_chars`` characters, chosen by its structure.

    The first line says what was digested (``[digest of a JSON array: 2,000 records;
    183,402 chars]``); ``header_note`` is appended inside it (the caller's recall pointer,
    for example). ``text`` that already fits is returned unchanged.

    Args:
        text: Any string (a tool result).
        max_chars: Hard bound on the length of the digest.
        header_note: Extra words for the header line.

    Returns:
        The digest; never longer than ``max_chars``.

    Raises:
        TypeError: If ``text`` is not a string.
        ConfigError: If ``max_chars`` is negative.

    Example:
        >>> import json
        >>> rows = [{"id": i, "price": i * 10} for i in range(1, 501)]
        >>> out = structured_digest(json.dumps(rows), max_chars=600)
        >>> print(out.splitlines()[0])
        [digest of a JSON array: 500 records; 13,784 chars]
        >>> "max 5,000 [#500]" in out and len(out) <= 600
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"structured_digest takes a str, got {type(text).__name__}.")
    if not isinstance(max_chars, int) or max_chars < 0:
        raise ConfigError(f"max_chars={max_chars!r} must be an integer >= 0.")
    if len(text) <= max_chars:
        return text
    chars = len(text)
    if chars > DIGEST_READ_CHARS:  # a bounded view, whatever the size
        text, sampled = _view(text)
        header_note = f"{header_note}; {sampled}" if header_note else sampled
    try:
        kind, payload = detect(text)
        what, lines = describe(kind, payload, max_chars)
        if what is not None:
            return _fit(_header(what, chars, header_note), lines, max_chars)
    except Exception:  # a detector's bug must not cost the caller its result
        logger.debug("structured digest fell back to plain text", exc_info=True)
    try:
        return _text_digest(text, max_chars, header_note, chars)
    except Exception:
        logger.debug("plain-text digest failed; clipping", exc_info=True)
        return clip(text, max_chars)


def llm_digest(
    model: BaseChatModel,
    *,
    max_tokens: int = 400,
    prompt: str | None = None,
    max_input_chars: int = DEFAULT_LLM_INPUT_CHARS,
) -> Callable[[str], str]:
    """A digest function that asks ``model`` for the key fields, records and errors.

    The call runs at temperature 0 where the model has the field, with an output bound,
    tagged ``nostream`` + ``SUMMARIZER_TAG`` so its tokens stay out of the user's stream. A
    reply that calls a tool, is empty or is over the bound, and any error, gives
    :func:`structured_digest` instead (``max_tokens * 4`` characters). The model sees the
    result (head + tail beyond ``max_input_chars``) and its structured digest, which covers
    the whole text; the answer is returned under the structured header line.

    Args:
        model: Any LangChain chat model.
        max_tokens: Output bound of the model call.
        prompt: Instructions; ``{max_tokens}`` is substituted. Defaults to
            :data:`DEFAULT_DIGEST_PROMPT`.
        max_input_chars: Characters of the raw result shown to the model.

    Returns:
        ``digest(text) -> str``; text of at most ``max_tokens * 4`` characters is returned
        unchanged, without a model call.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> digest = llm_digest(FakeListChatModel(responses=["2,000 orders; max 99 (#2,000)"]))
        >>> print(digest("[" + ",".join(['{"n": 1}'] * 2000) + "]"))
        [digest of a JSON array: 2,000 records; 18,001 chars]
        2,000 orders; max 99 (#2,000)
    """
    # Imported here: summarizers imports microcompact, which uses this module.
    from langchain_compact.summarizers import SUMMARIZER_TAG, LLMSummarizer

    if max_tokens < 1 or max_input_chars < 100:
        raise ConfigError("llm_digest needs max_tokens >= 1 and max_input_chars >= 100.")
    runnable = LLMSummarizer(model, max_tokens=max_tokens)._runnable(max_tokens)
    instructions = (prompt or DEFAULT_DIGEST_PROMPT).replace("{max_tokens}", str(max_tokens))
    config: RunnableConfig = {
        "tags": ["nostream", SUMMARIZER_TAG],
        "run_name": "langchain_compact_digest",
    }

    def digest(text: str) -> str:
        fallback = structured_digest(text, max_chars=max_tokens * 4)
        if fallback == text:
            return text
        shown = scrub(text)
        if len(shown) > max_input_chars:
            half = max_input_chars // 2
            omitted = len(shown) - 2 * half
            shown = f"{shown[:half]}\n[... {omitted:,} chars omitted ...]\n{shown[-half:]}"
        ask = (
            f"<tool_result>\n{shown}\n</tool_result>\n\n<structure of the whole result>\n"
            f"{fallback}\n</structure of the whole result>\n\nWrite the digest now."
        )
        try:
            reply = runnable.invoke([SystemMessage(instructions), HumanMessage(ask)], config)
            answer = LLMSummarizer._check(reply, max_tokens)
        except Exception as exc:  # any failure: the structured digest is the answer
            logger.warning("llm_digest fell back to the structured digest: %s", exc)
            return fallback
        return fallback.split("\n", 1)[0] + "\n" + answer

    return digest
