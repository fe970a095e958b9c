"""The facts of a text that must stay visible when the text itself leaves the context.

A cleared tool result keeps, in its placeholder, the lines that carry facts a later step may
need: ``key = value`` / ``key: value`` lines, labelled numbers, ticket-like ids, paths and URLs.
The selection is bounded (a few lines, a few hundred characters) and linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from langchain_compact._placeholders import FACTS_MARK, append_facts, kept_facts
from langchain_compact._render import word_prefix
from langchain_compact.tokens import PRECOUNT_HOOKS, approx_text, precise_counter

__all__ = [
    "CONSTRAINT_RE",
    "FACTS_MARK",
    "condense_summary",
    "fact_lines",
    "is_key_fact",
    "key_fact_text",
    "placeholder_facts",
    "remember_facts",
    "result_gist",
    "unlabel",
    "with_facts",
]

#: ``key = value`` / ``key: value``: a key of up to four words that start with a letter
#: (JSON ``"key": value`` too), so log stamps like ``INFO 03:47`` are not keys.
_KEY = r"""^\s*[-*]?\s*["']?[A-Za-z_][\w\-.]*(?: [A-Za-z_][\w\-.]*){0,3}["']?\s*"""
_EQ_RE = re.compile(_KEY + r"(?:=|:=)(?!=)\s*\S")  # not ``pkg==1.2`` pins
_COLON_RE = re.compile(_KEY + r":(?!:)\s*\S")
#: Ticket-like ids and URLs: a line that names one is as strong a fact as ``key = value``.
_STRONG_ID_RE = re.compile(r"\b[A-Z][A-Z0-9]*-\d+|[\u4e00-\u9fff]{1,8}-\d+|https?://")
#: Those, or paths with a slash.
_PATH_RE = re.compile(r"(?:^|\s)(?:~|\.{1,2})?/[\w.\-]+/")
_ID_RE = re.compile(_STRONG_ID_RE.pattern + "|" + _PATH_RE.pattern)
_NUM_RE = re.compile(r"\d")
#: What every ticket-like id of ``_STRONG_ID_RE`` holds: a ``-`` with a digit after it.
_DASH_DIGIT_RE = re.compile(r"-\d")
_BLOCK_REF_RE = re.compile(r"^\[(?:image|file|audio|video|document)\b")
_ANY_BLOCK_REF_RE = re.compile(r"\[(?:image|file|audio|video|document)\b")
#: Lines that look like code or markup rather than facts.
_NOISE_RE = re.compile(r"^\s*(?:#|//|import |from |def |class |return |if |for |while |\{|\}|<)")

#: A sentence that states a constraint, requirement or prohibition.
CONSTRAINT_RE = re.compile(
    r"\b(must|never|always|only|do not|don't|required?|forbidden|no more than|at most|at least|"
    r"exactly|ensure|avoid|constraint|deadline|without)\b|必须|不要|不能|禁止|只|务必|不得",
    re.IGNORECASE,
)

DEFAULT_LIMIT = 6
DEFAULT_MAX_CHARS = 480
_WIDTH = 160
_SCAN_LINES = 4_000  # bound the scan of texts with very many lines (head and tail are scanned)
#: A longer text is scanned in part: its first and last ``_EDGE_CHARS`` characters and
#: ``_WINDOWS`` windows of ``_WINDOW_CHARS`` spread over the middle, whole lines only, so
#: the work per cleared result is bounded whatever its size.
_SCAN_CHARS = 24_000
_EDGE_CHARS = 8_000
_WINDOWS = 8
_WINDOW_CHARS = 500
#: The line boundaries of ``str.splitlines``.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _clip(line: str) -> str:
    """``line`` within the width, cut between words (a number cut short is a wrong fact)."""
    if len(line) <= _WIDTH:
        return line
    return word_prefix(line[: _WIDTH - 4]).rstrip() + " ..."


def _hints(line: str) -> tuple[bool, bool, bool, bool] | None:
    """Which of :func:`_score`'s patterns can match ``line``, by what every match of each
    needs (``in`` tests, far cheaper than a pattern call): a ticket-like id a ``-`` with a
    digit after it or a URL ``://``, ``key = value`` a ``=``, a path ``/`` (it has two),
    ``key: value`` a ``:``. ``(id, eq, path, colon)``, or ``None`` when none can."""
    eq, colon, path = "=" in line, ":" in line, "/" in line
    strong = ("-" in line and _DASH_DIGIT_RE.search(line) is not None) or "://" in line
    return (strong, eq, path, colon) if strong or eq or path or colon else None


def _score(line: str) -> int | None:
    """0: ``key = value`` with a number or an id, or a line naming a ticket-like id or URL
    (an id in the middle of a log outranks the numbers of every log line around it); 1:
    ``key: value`` with data, or a line with a path; 2: other key/value lines; ``None``: not a
    fact line. Each pattern runs only where :func:`_hints` says it can match."""
    hints = _hints(line)
    if hints is None or _NOISE_RE.match(line):
        return None
    strong, eq, path, colon = hints
    if strong and _STRONG_ID_RE.search(line):
        return 0
    # No ticket-like id or URL: an id (``_ID_RE``) is a path, data is a path or a digit.
    # Each pattern runs at most once, and only where the answer depends on it.
    if eq and _EQ_RE.match(line):
        return 0 if (path and _PATH_RE.search(line)) or _NUM_RE.search(line) else 2
    if path and _PATH_RE.search(line):
        return 1
    if colon and _COLON_RE.match(line):
        return 1 if _NUM_RE.search(line) else 2
    return None


def _last_line(text: str) -> str:
    """The last non-blank line of ``text``, stripped (``''`` if none), without splitting it."""
    text = text.rstrip()
    start = max(text.rfind(c) for c in _LINE_BREAKS) + 1
    return text[start:].strip()


def _whole_lines(text: str, start: int, end: int) -> list[str]:
    """The lines wholly inside ``text[start:end]`` (a line cut by either edge is dropped,
    unless the window holds no line break at all: then the window is one line)."""
    chunk = text[start:end]
    lines = chunk.splitlines()
    if len(lines) <= 1:
        return lines
    if start > 0 and text[start - 1] not in _LINE_BREAKS:
        lines = lines[1:]
    if end < len(text) and chunk[-1] not in _LINE_BREAKS:
        lines = lines[:-1]
    return lines


def _scanned_lines(text: str) -> list[str]:
    """The lines :func:`fact_lines` reads, in text order: all of them up to ``_SCAN_CHARS``
    characters (the first and last ``_SCAN_LINES // 2`` of very many), else the edges and
    windows spread over the middle."""
    if len(text) <= _SCAN_CHARS:
        lines = text.splitlines()
        if len(lines) > _SCAN_LINES:
            half = _SCAN_LINES // 2
            lines = lines[:half] + lines[-half:]
        return lines
    lines = _whole_lines(text, 0, _EDGE_CHARS)
    middle = len(text) - 2 * _EDGE_CHARS
    step = middle // _WINDOWS
    for k in range(_WINDOWS):
        start = _EDGE_CHARS + k * step + (step - _WINDOW_CHARS) // 2
        lines += _whole_lines(text, start, start + _WINDOW_CHARS)
    return lines + _whole_lines(text, len(text) - _EDGE_CHARS, len(text))


def is_key_fact(line: str) -> bool:
    """Whether ``line`` is a fact of the best kind: ``key = value`` with a number or an id,
    or a line naming a ticket-like id or URL.

    Example:
        >>> is_key_fact("RESULT step=11 value=930810"), is_key_fact("building 3 targets")
        (True, False)
    """
    return _score(line.strip()) == 0


def fact_lines(
    text: str,
    *,
    limit: int = DEFAULT_LIMIT,
    max_chars: int = DEFAULT_MAX_CHARS,
    best_only: bool = False,
) -> list[str]:
    """Up to ``limit`` lines of ``text`` that carry facts, best first, in text order.

    With ``best_only``, only the best lines: ``key = value`` with a number or an id, and
    lines naming a ticket-like id or URL.

    Example:
        >>> fact_lines("Looking up the order...\\norder_id = QX-4821\\nstatus: shipped\\nbye")
        ['order_id = QX-4821', 'status: shipped']
    """
    chosen: list[tuple[int, str]] = []
    used = 0
    # The first ``limit`` fact lines of the best rank are among the first ``limit`` scored.
    scored = _scored(text) if limit <= _MEMO_KEEP else _score_lines(text)
    for score, pos, line in scored:
        if best_only and score > 0:
            continue
        if len(chosen) >= limit or used + len(line) > max_chars:
            break
        chosen.append((pos, line))
        used += len(line) + 3
    return [line for _pos, line in sorted(chosen)]


#: The scored fact lines of a text, per (length, hash) of the text: a result's facts are
#: read when it is cleared, digested and summarised, and may be found ahead
#: (:func:`remember_facts`). Keys and a few short lines only, never the text; bounded.
_FACT_MEMO: dict[tuple[int, int], tuple[tuple[int, int, str], ...]] = {}
_FACT_MEMO_LIMIT = 1_024
#: Scored lines kept per text (a caller asking for more lines scores the text again).
_MEMO_KEEP = 16


def remember_facts(text: str) -> None:
    """Score the fact lines of ``text`` ahead, and count the block of them a placeholder
    would carry (the precount thread does this for large unread results, so the turn
    that clears one finds its facts and their counts ready: the placeholder is then
    counted as its short head plus this block, see ``approx_text_parts``)."""
    _scored(text)
    block = facts_block(text)
    if block:
        approx_text(block)
        counter = precise_counter()  # loaded: this runs on the precount thread
        if counter is not None:
            counter.count_text(block)


if remember_facts not in PRECOUNT_HOOKS:
    PRECOUNT_HOOKS.append(remember_facts)


def _line_scores(lines: list[str]) -> list[tuple[int, int]]:
    """``(index, score)`` of the (stripped) ``lines`` :func:`_score` accepts, in order."""
    return [(i, score) for i, line in enumerate(lines) if (score := _score(line)) is not None]


def _scored(text: str) -> tuple[tuple[int, int, str], ...]:
    """The first ``_MEMO_KEEP`` of :func:`_score_lines` (memoised)."""
    key = (len(text), hash(text))
    found = _FACT_MEMO.get(key)
    if found is None:
        found = _score_lines(text)[:_MEMO_KEEP]
        if len(_FACT_MEMO) >= _FACT_MEMO_LIMIT:
            _FACT_MEMO.clear()
        _FACT_MEMO[key] = found
    return found


def _score_lines(text: str) -> tuple[tuple[int, int, str], ...]:
    """``(score, position, clipped line)`` of every distinct fact line :func:`fact_lines`
    reads in ``text``, best first."""
    lines = [raw.strip() for raw in _scanned_lines(text)]
    scored: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for pos, score in _line_scores(lines):
        line = lines[pos]
        if line in seen:
            continue
        seen.add(line)
        scored.append((score, pos, _clip(line)))
    return tuple(sorted(scored))


def result_gist(text: str, *, limit: int = 3) -> list[str]:
    """The lines a summary should keep of one tool result, most important first: the last
    line (where commands report their outcome), then ``key = value`` lines with data.

    Example:
        >>> result_gist("$ make\\nbuilding...\\nlog noise\\nRESULT step=2 value=664579")
        ['RESULT step=2 value=664579']
    """
    last = _last_line(text)
    if not last:
        return []
    chosen = dict.fromkeys([_clip(last)])
    # References to images and files (their payloads never reach a summary) are kept whole.
    if _ANY_BLOCK_REF_RE.search(text):
        lines = (ln.strip() for ln in text.splitlines())
        chosen.update(dict.fromkeys(ln for ln in lines if _BLOCK_REF_RE.match(ln)))
    for line in fact_lines(text, limit=limit, best_only=True):
        if len(chosen) >= limit:
            break
        chosen.setdefault(line, None)
    return list(chosen)


def with_facts(placeholder: str, text: str) -> str:
    """``placeholder`` followed by the fact lines of ``text`` (if any): its last line (where
    commands report their outcome) first, then the lines :func:`fact_lines` picks."""
    return placeholder + facts_block(text)


def facts_block(text: str) -> str:
    """What :func:`with_facts` appends to a placeholder for ``text`` (``""`` when ``text``
    has no fact line): :data:`FACTS_MARK` and the lines."""
    line = _last_line(text)
    last = [_clip(line)] if line and not _NOISE_RE.match(line) else []
    facts = list(dict.fromkeys([*last, *fact_lines(text, limit=DEFAULT_LIMIT - len(last))]))
    return append_facts("", facts)


def placeholder_facts(placeholder: str, *, limit: int = 3) -> list[str]:
    """The fact lines a placeholder kept, best first (``key = value`` with data).

    Example:
        >>> placeholder_facts(with_facts("[cleared]", "noise\\nRESULT step=2 value=7"))
        ['RESULT step=2 value=7']
    """
    lines = kept_facts(placeholder)
    if not lines:
        return []
    best = fact_lines("\n".join(lines), limit=limit, best_only=True)
    return best or lines[:limit]


# --------------------------------------------------------------------------- condensing

_BULLETS_RE = re.compile(r"^(?:[-*•]\s+)+")
#: ``item: item: item: rest`` (a supplement entry quoting an earlier supplement entry).
_REPEAT_RE = re.compile(r"(\S{1,80}?: )\1+")
#: Lines that only say something was left out, or that nothing was recorded.
_FILLER_RE = re.compile(
    r"^\(?\d+ (?:older entries omitted|more details)|^\[\.\.\. \d+ chars \.\.\.\]$"
    r"|^(?:none recorded|unknown|no new goal or constraint stated|\(nothing salient\)"
    r"|none beyond the pinned task \(its goal and constraints stand\))$"
)
_OMITTED_RE = re.compile(r"^\((\d+) older entries omitted")
#: The heading of a summary's first section (the goal and hard constraints).
_GOAL_HEADING_RE = re.compile(r"^##\s*1\.")
#: The heading of a summary's fidelity supplement (``summarizers.fidelity_supplement``):
#: verbatim lines the summary left out, a courtesy beside what the summary states.
_SUPPLEMENT_HEADING_RE = re.compile(r"^##\s*Supplement\b")
#: Lines a merged summary can drop first: calls (their arguments are archived) and the
#: wording of placeholders (their fact lines are separate).
_LOW_RE = re.compile(
    r"^(?:->\s*)?called \w|^\[tool result (?:cleared|\w+ \()|to save context: \S+ returned \d+"
)
_SALIENT_RE = re.compile(r"\d{3,}|\d[.,]\d|/[\w.\-]+/|\w\.\w{1,4}\b")


def _rank(line: str) -> int:
    """0: constraints, the user's words, ticket-like ids and URLs; 1: ``key = value`` with
    data; 2: other lines with data; 3: calls, placeholder wording and prose."""
    line = unlabel(line)
    if _LOW_RE.search(line):
        return 3
    if CONSTRAINT_RE.search(line) or line.startswith(("user:", "[user]")):
        return 0
    if _STRONG_ID_RE.search(line):
        return 0
    score = _score(line)
    if score == 0:
        return 1
    return 2 if score is not None or _SALIENT_RE.search(line) else 3


def key_fact_text(text: str) -> str:
    r"""The lines of ``text`` that a dense merge keeps longest (constraints, the user's words,
    ids, ``key = value`` facts), one fact a line.

    Example:
        >>> key_fact_text("- called f(5)\n- facts kept: total = 123 | WARNING x.py:9\n- QX-4")
        'total = 123\nQX-4'
    """
    lines = (_BULLETS_RE.sub("", p.strip()) for ln in text.splitlines() for p in ln.split(" | "))
    parts = (p.removeprefix(FACTS_MARK.strip()).strip() for p in lines)
    return "\n".join(p for p in parts if p and _rank(p) <= 1)


#: The label the extractive summarizer puts on a tool outcome: ``run_step [call_7]``.
_CALL_LABEL_RE = re.compile(r"[\w.-]+ \[[\w.-]+\]")


def unlabel(line: str) -> str:
    """``line`` without a ``label: `` prefix that only repeats what follows (a supplement
    entry ``664579: RESULT value=664579``) or names the tool (``run_step: RESULT ...``)."""
    label, sep, rest = line.partition(": ")
    tool_label = " " not in label or _CALL_LABEL_RE.fullmatch(label) is not None
    if sep and rest and tool_label and (label in rest or _EQ_RE.match(rest)):
        return rest
    return line


#: Joins the kept lines of one rank in :func:`condense_summary` (a line break: no line of
#: ``splitlines`` holds one).
_APART = "\n"


def condense_summary(text: str, max_tokens: int, *, soft_tokens: int | None = None) -> str:
    r"""A merged summary, dense: one line per fact, within ``max_tokens``.

    Bullets are flattened (merges nest them), `` | ``-joined fact lines split, repeated
    ``item: item:`` prefixes collapsed, filler lines dropped, duplicates and lines another
    line already contains removed (the newest copy stays, a summary's over a supplement's),
    labels that only repeat the line dropped. Headings (``## ...``) are kept while they head
    a line. Over ``soft_tokens`` (default ``max_tokens``), a fidelity supplement's plain data
    lines go first, then the oldest calls and prose lines, then the oldest other data
    lines; over ``max_tokens``, then the oldest ``key = value`` facts, then the other
    constraints, the user's words and ticket-like ids, and last the lines of the goal section
    (``## 1.``, kept whole, one entry per line), a line that states a constraint the very
    last. One line says how many were omitted (they are archived with the summaries
    merged).

    Example:
        >>> condense_summary("## Facts\n- - a = 1\n- a = 1\n- called f({})\n- QX-9: QX-9: ok", 200)
        '## Facts\n- a = 1\n- called f({})\n- QX-9: ok'
    """
    parsed = _Parsed.of(text)
    keep, ranks = _deduped(parsed)
    soft = max_tokens if soft_tokens is None else min(soft_tokens, max_tokens)
    dropped = _trimmed(parsed, keep, ranks, max_tokens, soft)
    return _rendered(parsed, keep, dropped + parsed.carried)


@dataclass
class _Parsed:
    """A summary text as :func:`condense_summary` reads it: one entry per heading or fact,
    the entries of the goal section and of fidelity supplements, and how many entries an
    earlier condensing said it omitted."""

    entries: list[tuple[bool, str]] = field(default_factory=list)  # (is_heading, text)
    goal: set[int] = field(default_factory=set)  # the "Goal and hard constraints" section
    supplement: set[int] = field(default_factory=set)  # a fidelity supplement's lines
    carried: int = 0

    @classmethod
    def of(cls, text: str) -> _Parsed:
        parsed = cls()
        in_goal = in_supplement = False
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                in_goal = _GOAL_HEADING_RE.match(line) is not None
                in_supplement = _SUPPLEMENT_HEADING_RE.match(line) is not None
                parsed.entries.append((True, line))
            elif in_goal:  # the user's words and constraints: one entry each, never split
                parsed.add(_BULLETS_RE.sub("", line).strip(), parsed.goal)
            else:
                line = unlabel(_REPEAT_RE.sub(r"\1", _BULLETS_RE.sub("", line)).strip())
                # One line per fact: the `` | ``-joined fact lines of a placeholder go apart.
                for part in line.removeprefix(FACTS_MARK.strip()).split(" | "):
                    part = _BULLETS_RE.sub("", part).strip()
                    parsed.add(part, parsed.supplement if in_supplement else None)
        return parsed

    def add(self, line: str, section: set[int] | None) -> None:
        omitted = _OMITTED_RE.match(line)
        if omitted:
            self.carried += int(omitted.group(1))
        elif line and not _FILLER_RE.match(line):
            if section is not None:
                section.add(len(self.entries))
            self.entries.append((False, line))

    def courtesy(self, i: int, ranks: dict[str, int]) -> bool:
        """Whether entry ``i`` is a supplement's plain data line (not an id, a ``key =
        value`` fact or a constraint): what the summaries left out as a courtesy, which
        goes before anything a summary states (filler log lines kept over a merged
        summary's files and decisions lost both)."""
        return i in self.supplement and ranks[self.entries[i][1]] >= 2


def _deduped(parsed: _Parsed) -> tuple[set[int], dict[str, int]]:
    """The entries kept after duplicates and contained lines go, and each line's rank.

    The newest copy of a line stays (a supplement's copy of a line a summary states stands
    for nothing: the newest copy outside the supplements stays when there is one); a line
    that a longer line of the same rank or better states whole goes (longest first, so each
    line is checked against kept ones). A fact inside a call or a placeholder's wording
    stays on its own line: those go first when the bound is tight, and would take it along.
    The goal's lines are checked against the goal's only (a fact that quotes a constraint
    does not stand for it), a supplement's against the supplements' only."""
    entries = parsed.entries
    keep = _newest_copies(parsed)
    ranks = {t: _rank(t) for h, t in entries if not h}
    _drop_contained(parsed, keep, ranks)
    return keep, ranks


def _newest_copies(parsed: _Parsed) -> set[int]:
    """The headings and the newest copy of each line (outside the supplements when a copy
    is there)."""
    entries, supplement = parsed.entries, parsed.supplement
    newest = {t: i for i, (h, t) in enumerate(entries) if not h and i in supplement}
    newest.update({t: i for i, (h, t) in enumerate(entries) if not h and i not in supplement})
    return {i for i, (h, t) in enumerate(entries) if h or newest[t] == i}


def _drop_contained(parsed: _Parsed, keep: set[int], ranks: dict[str, int]) -> None:
    """Drop from ``keep`` each line a longer kept line of its bucket states whole."""
    entries, goal, supplement = parsed.entries, parsed.goal, parsed.supplement
    # The kept lines of each bucket (a rank, the goal, the supplements), joined by a
    # character no line holds, so "a longer kept line holds it" is one substring search per
    # bucket searched.
    kept: dict[object, str] = {}
    for i in sorted((i for i in keep if not entries[i][0]), key=lambda i: -len(entries[i][1])):
        line = entries[i][1]
        rank = ranks[line]
        searched: tuple[object, ...] = ("goal",) if i in goal else tuple(range(rank + 1))
        own: object = "goal" if i in goal else rank
        if i in supplement:
            searched, own = (*searched, "supplement"), "supplement"
        if len(line) >= 8 and any(line in kept.get(b, "") for b in searched):
            keep.discard(i)
        else:
            kept[own] = kept.get(own, "") + _APART + line


def _trimmed(
    parsed: _Parsed, keep: set[int], ranks: dict[str, int], max_tokens: int, soft: int
) -> int:
    """Drop entries from ``keep`` until the text fits (see :func:`condense_summary` for the
    order); how many were dropped."""
    entries, goal = parsed.entries, parsed.goal
    # A line's cost: what it adds to a message (the message's own overhead cancels out).
    cost = {i: approx_text(f"- {entries[i][1]}") for i in keep}
    total = sum(cost[i] for i in keep if not entries[i][0])
    total += sum(len(entries[i][1]) // 3 + 1 for i in keep if entries[i][0])
    dropped = 0
    # The goal's lines go last, and of those a constraint (a line that states one) last; a
    # supplement's plain data lines first.
    order = sorted(
        (i for i in keep if not entries[i][0]),
        key=lambda i: (
            i in goal,
            i in goal and CONSTRAINT_RE.search(entries[i][1]) is not None,
            not parsed.courtesy(i, ranks),
            -ranks[entries[i][1]],
            i,
        ),
    )
    for i in order:
        rank = 0 if i in goal else ranks[entries[i][1]]
        # key = value facts (the values a task computed) go only over the bound, as the
        # docstring says: kept to halfway between the soft bound and the bound, a dense merge
        # of a 60-step task's values in a 4,000-token window (~600 tokens of them, ~545 to
        # halfway, as the piece-based estimate and o200k count them) dropped three, and the
        # task could not finish. Calls and other data lines still go over the soft bound.
        limit = soft if rank >= 2 else max_tokens
        if total + (12 if dropped else 0) <= limit:
            continue
        keep.discard(i)
        total -= cost[i]
        dropped += 1
    return dropped


def _rendered(parsed: _Parsed, keep: set[int], omitted: int) -> str:
    out = [
        line if heading else f"- {line}"
        for i, (heading, line) in enumerate(parsed.entries)
        if i in keep
    ]
    # A heading with nothing under it (the next kept entry is a heading, or none) goes.
    lines = [
        ln
        for k, ln in enumerate(out)
        if not ln.startswith("#") or (k + 1 < len(out) and not out[k + 1].startswith("#"))
    ]
    if omitted:
        lines.append(f"- ({omitted} older entries omitted; archived)")
    return "\n".join(lines)
