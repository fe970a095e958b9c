"""Messages as plain text for summarizers (with a reference for each image or file block),
salient-detail extraction, and fitting summary sections to a token bound in linear time."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact.tokens import approximate_tokens

_ROLE = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}

#: Numbers (3+ digits or decimals), ids like QX-4821 / a1b2c3d4, paths and URLs.
_SALIENT_RE = re.compile(
    r"https?://[^\s\"'<>)\]]+"  # URLs
    r"|(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+"  # absolute / relative paths with a slash
    # file names: at most 255 characters (a name's limit) before the extension, so a long
    # run of hyphenated words is read a bounded number of times from each of its word
    # starts (unbounded, each start read the whole run: quadratic)
    r"|\b[\w\-]{1,255}\.(?:py|js|ts|rs|go|c|h|cc|cpp|java|json|yaml|yml|toml|md|txt|csv|sql|sh)\b"
    r"|\b[A-Z][A-Z0-9]*-\d+[A-Z0-9\-]*\b"  # ticket-like ids
    r"|[\u4e00-\u9fff]{1,8}-\d+"  # ids with a CJK prefix
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"  # hashes
    r"|\b\d+(?:[.,]\d+)+\b|\b\d{3,}\b"  # numbers
)


def tool_result_text(message: BaseMessage, *, references: bool = False) -> str:
    """The text of a message's content: text blocks joined; other blocks skipped, or (with
    ``references``) replaced by a reference (see :func:`block_reference`)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif references and (ref := block_reference(block)) is not None:
            parts.append(ref)
    return "\n".join(parts)


_PAYLOAD_KEYS = ("base64", "data", "file_data")
_URL_KEYS = ("url", "image_url", "file_url", "audio_url", "video_url")
_NAME_KEYS = ("filename", "name", "title")
_SKIPPED_BLOCKS = frozenset(
    {"text", "thinking", "redacted_thinking", "reasoning", "tool_use", "function_call",
     "tool_call", "tool_call_chunk", "server_tool_call", "server_tool_result"}
)  # fmt: skip


def _size(chars: int) -> str:
    size = chars * 3 // 4  # base64 -> bytes
    return f"{size} B" if size < 1024 else f"{size / 1024:.0f} KB"


def _payload_ref(payload: str, mime: str | None) -> str:
    digest = hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return ", ".join(p for p in ("inline", mime, _size(len(payload)), f"sha256 {digest}") if p)


def _url_ref(url: str) -> str:
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        mime = header[5:].split(";", 1)[0] or None
        return "data URL, " + _payload_ref(payload, mime).removeprefix("inline, ")
    return url if len(url) <= 300 else url[:297] + "..."


def block_reference(block: dict[str, object]) -> str | None:
    """A short reference for a non-text content block (image, file, audio...), or ``None``.

    URLs are kept (clipped to 300 characters); inline data is described by its type, size
    and a sha256 prefix, never pasted: ``[image: data URL, image/png, 12 KB, sha256 ...]``.

    Example:
        >>> block_reference({"type": "image_url", "image_url": {"url": "https://x.org/a.png"}})
        '[image: https://x.org/a.png]'
        >>> block_reference({"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"})
        '[image: inline, image/png, 9 B, sha256 ...]'
    """
    kind = str(block.get("type") or "block")
    if kind in _SKIPPED_BLOCKS:
        return None
    label = kind.removeprefix("input_").removesuffix("_url")
    fields = _block_fields(block)
    parts: list[str] = []
    name = _first_str(fields, _NAME_KEYS)
    if name:
        parts.append(name)
    where = _locator(fields)
    if where:
        parts.append(where)
    return f"[{label}: {', '.join(parts)}]" if parts else f"[{label} block]"


def _block_fields(block: dict[str, object]) -> dict[str, object]:
    """A block's fields with those of its nested source, URL, audio or file object."""
    fields: dict[str, object] = dict(block)
    for nested in ("source", "image_url", "input_audio", "file"):
        inner = block.get(nested)
        if isinstance(inner, dict):
            fields = {**fields, **inner}
        elif nested == "image_url" and isinstance(inner, str):
            fields["url"] = inner
    return fields


def _first_str(fields: dict[str, object], keys: Sequence[str]) -> str | None:
    """The first non-empty string among ``fields[key]`` for ``keys``."""
    return next((v for k in keys if isinstance(v := fields.get(k), str) and v), None)


def _locator(fields: dict[str, object]) -> str | None:
    """Where a block's content is: its URL, a description of its inline data, or its file id."""
    mime = fields.get("mime_type") or fields.get("media_type") or fields.get("format")
    mime = mime if isinstance(mime, str) else None
    url = _first_str(fields, _URL_KEYS)
    payload = _first_str(fields, _PAYLOAD_KEYS)
    file_id = fields.get("file_id") or (
        fields.get("id") if fields.get("source_type") == "id" else None
    )
    if url:
        return _url_ref(url)
    if payload:
        return _url_ref(payload) if payload.startswith("data:") else _payload_ref(payload, mime)
    if isinstance(file_id, str) and file_id:
        return f"file id {file_id}"
    return None


def message_text(message: BaseMessage) -> str:
    """The text of a message with a reference for each non-text block (see
    :func:`block_reference`), so images and files are not silently lost from summaries."""
    return tool_result_text(message, references=True)


#: Identifiers worth keeping from the middle of a long output: ticket-like ids and URLs.
_KEY_RE = re.compile(r"\b[A-Z][A-Z0-9]*-\d+|[\u4e00-\u9fff]{1,8}-\d+|https?://")


#: The line boundaries of ``str.splitlines``.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK_RE = re.compile(f"[{_LINE_BREAKS}]")


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
        # The line's start lies at or after ``pos`` (the end of the last line found) and its
        # end is the next break: each character is read a bounded number of times, however
        # many lines match (a search of the whole text per match was quadratic).
        start = max(text.rfind(c, pos, match.start()) for c in _LINE_BREAKS) + 1
        start = max(start, pos)
        brk = _BREAK_RE.search(text, match.end())
        end = brk.start() if brk else len(text)
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
    text = message_text(message)
    if max_chars is not None and len(text) > max_chars:
        half = max_chars // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} chars ...]\n{text[-half:]}"
    lines = [f"[{role}] {text}".rstrip()]
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            lines.append(
                f"  -> called {render_call(call['name'], call['args'])} [{call.get('id')}]"
            )
        for bad in message.invalid_tool_calls:
            lines.append(
                f"  -> called {bad.get('name') or 'a tool'} with malformed arguments "
                f"{bad.get('args')!r} [{bad.get('id')}]"
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
    line_start, line_end = start, end
    start = max(start, pos - width)
    end = min(end, pos + len(item) + width)
    # Clip between words, never inside one: a number cut short reads as another number.
    while start > line_start and not text[start - 1].isspace():
        start += 1
        if start >= pos:
            start = pos
            break
    if end < line_end and not text[end].isspace():
        cut = text.rfind(" ", pos + len(item), end)
        end = cut if cut > 0 else pos + len(item)
    return text[start:end].strip()


# --------------------------------------------------------------------------- fitting


def _tokens(text: str) -> int:
    return approximate_tokens([HumanMessage(text)])


def _cut_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (measured, CJK-aware)."""
    # Every character costs at least 1/3.6 token, so nothing past 4 * max_tokens characters
    # can stay; a huge text is first clipped far beyond that, never measured whole.
    text = text[: 64 * (max_tokens + 1)]
    while text and (tokens := _tokens(text)) > max_tokens:
        text = text[: int(len(text) * max_tokens / tokens * 0.95)]
    # Never end inside a word: a number cut short ("841070" -> "84107") is a wrong fact.
    return word_prefix(text)


def word_prefix(text: str) -> str:
    """``text`` without a trailing partial word (cut at the last whitespace)."""
    if not text or text[-1].isspace():
        return text
    cut = max(text.rfind(" "), text.rfind("\n"))
    return text[:cut] if cut > 0 else ""


class _Drops:
    """The order in which :func:`fit_sections` drops entries, computed once in O(entries).

    Each step drops, from the section with the most characters left (the first on ties), its
    oldest entry after the first. ``order[k]`` is the section of the (k+1)-th drop.
    """

    def __init__(
        self,
        sections: list[tuple[str, list[str]]],
        weights: list[float] | None = None,
        protect: Sequence[int] = (),
    ) -> None:
        # A section's characters count times its weight: a weight below 1 keeps its
        # entries longer (facts outlive the list of calls that produced them).
        w = weights or [1.0] * len(sections)
        chars = [sum(len(i) for i in items) * w[s] for s, (_, items) in enumerate(sections)]
        # A protected section's entries never take part (``fit_sections``'s ``protect``).
        left = [0 if s in protect else len(items) for s, (_, items) in enumerate(sections)]
        nxt = [1] * len(sections)
        self.order: list[int] = []
        while True:
            best = -1
            for s, n in enumerate(left):
                if n > 1 and (best < 0 or chars[s] > chars[best]):
                    best = s
            if best < 0:
                break
            chars[best] -= len(sections[best][1][nxt[best]]) * w[best]
            nxt[best] += 1
            left[best] -= 1
            self.order.append(best)


def _render_sections(
    sections: list[tuple[str, list[str]]], dropped: list[int], gone: Sequence[int] = ()
) -> str:
    """The sections with ``dropped[s]`` entries after the first left out of each; a section
    in ``gone`` shows none of its entries (only how many were omitted)."""
    parts = []
    for s, ((title, items), n) in enumerate(zip(sections, dropped, strict=True)):
        if s in gone and items:
            shown = [f"({len(items)} older entries omitted; archived)"]
        else:
            shown = items[:1]
            if n:
                shown.append(f"({n} older entries omitted; archived)")
            shown += items[1 + n :]
        parts.append(f"## {title}\n" + "\n".join(f"- {i}" for i in shown))
    return "\n".join(parts)


def fit_sections(
    sections: list[tuple[str, list[str]]],
    max_tokens: int,
    *,
    weights: list[float] | None = None,
    protect: Sequence[int] = (),
) -> str:
    """Render, dropping the oldest entries (after the first) of the longest section until
    the text fits ``max_tokens``; each section says how many entries it omitted.

    The entries of a section in ``protect`` (the summary's goal and hard constraints) are
    the last thing to go, and are never cut mid-entry (:func:`_squeeze`): the other
    sections lose their first entries too, then clipped ``user:`` entries (whose constraints
    have entries of their own) are cut to their first words, then whole entries go, the
    ``constraint:`` ones last. Without ``protect`` the text is cut to fit.

    Linear: the drop order is computed on running totals, the number of drops is found with
    per-entry token estimates, and the text is rendered and measured only around the answer
    (where it is about ``max_tokens`` long), never once per dropped entry.
    """
    order = _Drops(sections, weights, protect).order
    overhead = _tokens("")
    costs = [[_tokens(f"- {i}\n") - overhead for i in items] for _, items in sections]
    estimate = _tokens(_render_sections([(t, []) for t, _ in sections], [0] * len(sections)))
    estimate += sum(sum(c) for c in costs)
    dropped = [0] * len(sections)
    k = 0
    while estimate > max_tokens and k < len(order):
        s = order[k]
        if not dropped[s]:
            estimate += 10  # the "(n older entries omitted; archived)" line
        dropped[s] += 1
        estimate -= costs[s][dropped[s]]
        k += 1
    return _settle(sections, order, k, max_tokens, protect)


#: How a ``user:`` entry cut to make room ends (``_clip`` of the summarizer ends the same).
_CLIPPED = " ..."
#: The words a ``user:`` entry keeps at least when the room is short.
_MIN_WORDS = 12


def _squeeze(
    sections: list[tuple[str, list[str]]],
    dropped: list[int],
    protect: Sequence[int],
    max_tokens: int,
) -> str:
    """Past every ordinary drop, with ``protect``: the text cut to ``max_tokens`` when the
    cut leaves the protected entries whole; else the other sections' first entries go (the
    last section first, the facts last), then clipped ``user:`` entries of the protected
    sections are cut to their first words, then whole protected entries go, ``user:`` ones
    first, oldest first: a constraint is the last thing dropped, and never cut.

    The work is bounded: one render per section, one for the clipping, and a binary search
    over how many protected entries go (never one render per entry)."""
    squeeze = _Squeeze(sections, dropped, protect, max_tokens)
    for step in (
        squeeze.whole,
        squeeze.without_others,
        squeeze.clipped,
        squeeze.without_protected,
    ):
        text = step()
        if text is not None:
            return text
    return squeeze.cut()


class _Squeeze:
    """:func:`_squeeze`'s steps, in order, over one copy of the sections: each returns the
    text when it fits, else ``None`` (and leaves its change for the next)."""

    def __init__(
        self,
        sections: list[tuple[str, list[str]]],
        dropped: list[int],
        protect: Sequence[int],
        max_tokens: int,
    ) -> None:
        self.sections = [(title, list(items)) for title, items in sections]
        self.dropped, self.protect, self.max_tokens = dropped, protect, max_tokens
        self.gone: list[int] = []
        self.victims: list[tuple[int, int]] = []

    def attempt(self, secs: list[tuple[str, list[str]]]) -> str | None:
        """The text of ``secs``, or cut to the bound when the cut leaves the protected
        entries whole."""
        text = _render_sections(secs, self.dropped, self.gone)
        if _tokens(text) <= self.max_tokens:
            return text
        cut = _cut_to_tokens(text, self.max_tokens) + "\n"
        whole = all(f"- {item}\n" in cut for s in self.protect for item in secs[s][1])
        return _DANGLING_RE.sub("", cut.rstrip()) if whole else None

    def whole(self) -> str | None:
        return self.attempt(self.sections)

    def without_others(self) -> str | None:
        """The other sections' first entries go, the last section first."""
        for s in range(len(self.sections) - 1, -1, -1):
            if s not in self.protect and self.sections[s][1]:
                self.gone.append(s)
                text = self.attempt(self.sections)
                if text is not None:
                    return text
        return None

    def clipped(self) -> str | None:
        """Clipped ``user:`` entries of the protected sections cut to their first words."""
        for s in self.protect:
            items = self.sections[s][1]
            for j, item in enumerate(items):
                words = item.split()
                if (
                    item.startswith("user: ")
                    and item.endswith(_CLIPPED)
                    and len(words) > _MIN_WORDS
                ):
                    items[j] = " ".join(words[:_MIN_WORDS]) + _CLIPPED
        return self.attempt(self.sections)

    def without(self, n: int) -> list[tuple[str, list[str]]]:
        """The sections without the first ``n`` victims."""
        drop = set(self.victims[:n])
        out = []
        for s, (title, items) in enumerate(self.sections):
            if s in self.protect:
                left = [i for j, i in enumerate(items) if (s, j) not in drop]
                if len(left) < len(items):
                    left.insert(0, f"({len(items) - len(left)} older entries omitted; archived)")
                items = left
            out.append((title, items))
        return out

    def without_protected(self) -> str | None:
        """The fewest whole protected entries gone that fit, found in O(log n) renders."""
        # The protected entries in the order they go: user's words first, then
        # constraints, oldest first within each.
        self.victims = [
            (s, j)
            for user in (True, False)
            for s in self.protect
            for j, item in enumerate(self.sections[s][1])
            if item.startswith("user: ") == user
        ]
        lo, hi = 1, len(self.victims)
        best: str | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            found = self.attempt(self.without(mid))
            if found is not None:
                best, hi = found, mid - 1
            else:
                lo = mid + 1
        return best

    def cut(self) -> str:
        """Every protected entry gone, and the text cut to the bound."""
        text = _render_sections(self.without(len(self.victims)), self.dropped, self.gone)
        return _cut_to_tokens(text, self.max_tokens)


#: A bullet with nothing after it, or a heading with no entry, at the end of a cut text.
_DANGLING_RE = re.compile(r"(?:\n(?:-|##[^\n]*))+$")


def fits_sections(
    sections: list[tuple[str, list[str]]], max_tokens: int, *, whole: str | None = None
) -> bool:
    """Whether :func:`fit_sections` can fit ``sections`` in ``max_tokens`` by dropping
    entries: the smallest rendering (each section down to its first entry and the omitted
    line; the section titled ``whole`` with every entry) fits. Otherwise it cuts the text
    at the bound, wherever that falls (inside an entry: a tool result's fact line cut to
    ``RESULT``, its value gone)."""
    dropped = [0 if t == whole else max(0, len(items) - 1) for t, items in sections]
    return _tokens(_render_sections(sections, dropped)) <= max_tokens


def _settle(
    sections: list[tuple[str, list[str]]],
    order: list[int],
    k: int,
    max_tokens: int,
    protect: Sequence[int] = (),
) -> str:
    """From the estimated ``k`` drops, step to the fewest drops whose text really fits."""

    def state(n: int) -> list[int]:
        counts = [0] * len(sections)
        for s in order[:n]:
            counts[s] += 1
        return counts

    dropped = state(k)
    text = _render_sections(sections, dropped)
    if _tokens(text) > max_tokens:  # the estimate was low: drop more
        while k < len(order):
            dropped[order[k]] += 1
            k += 1
            text = _render_sections(sections, dropped)
            if _tokens(text) <= max_tokens:
                return text
        if protect:
            return _squeeze(sections, dropped, protect, max_tokens)
        return _cut_to_tokens(text, max_tokens)
    while k > 0:  # the estimate was high: put entries back while the text still fits
        dropped[order[k - 1]] -= 1
        candidate = _render_sections(sections, dropped)
        if _tokens(candidate) > max_tokens:
            break
        text = candidate
        k -= 1
    return text
