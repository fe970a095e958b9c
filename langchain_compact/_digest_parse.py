"""Parsing for :mod:`langchain_compact.digest`: structure detection, field statistics and
blob scrubbing. Every function is linear in its input and raises nothing on any string
(:func:`detect` treats a detector's exception as "not this structure")."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from typing import Any

_BLOB_RE = re.compile(r"[A-Za-z0-9+/_\-]{64,}={0,2}")
_MIXED = (re.compile(r"[a-z]"), re.compile(r"[A-Z]"), re.compile(r"\d"))


def _blob(match: re.Match[str]) -> str:
    run = match.group(0)
    # base64 mixes cases and digits, with few other characters; paths and names do not.
    others = sum(run.count(c) for c in "+/_-")
    if all(p.search(run) for p in _MIXED) and others * 8 <= len(run):
        return f"<blob of {len(run):,} chars>"
    return run


def scrub(text: str) -> str:
    """``text`` with base64-like runs (64+ characters) replaced by their size.

    Example:
        >>> scrub("png=" + "iVBORw0KGgo" * 10 + " ok")
        'png=<blob of 110 chars> ok'
    """
    return _BLOB_RE.sub(_blob, text)


_DIGIT_RE = re.compile(r"\d")
_NUMBER_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def parse_number(cell: str) -> int | float | None:
    """The number a table cell holds (``1,234.5`` included), or ``None``.

    Example:
        >>> parse_number(" 1,234.5 "), parse_number("42"), parse_number("nan")
        (1234.5, 42, None)
    """
    cell = cell.strip()
    if len(cell) > 40:
        return None
    if cell.isdigit() and cell.isascii():  # the common case, without a regex
        return int(cell)
    if not _NUMBER_RE.fullmatch(cell) or not _DIGIT_RE.search(cell):
        return None
    cell = cell.replace(",", "")
    try:
        return int(cell)
    except ValueError:
        return float(cell)


def number_text(value: float) -> str:
    """``value`` with thousands separators; never raises.

    Example:
        >>> number_text(1234567), number_text(2.0), number_text(0.125), number_text(10**40)
        ('1,234,567', '2', '0.125', '1.000000e+40')
    """
    try:
        if isinstance(value, int):
            return f"{value:,}" if abs(value) < 10**30 else f"{float(value):.6e}"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.10g}"
    except (OverflowError, ValueError):
        return "<huge number>"


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "other"


_CATEGORY_CAP = 30  # distinct short strings tracked per field


class Field:
    """Statistics of one JSON field or table column, gathered in one pass."""

    __slots__ = (
        "high",
        "high_at",
        "longest",
        "low",
        "low_at",
        "numbers",
        "present",
        "total",
        "types",
        "values",
    )

    def __init__(self) -> None:
        self.present = 0
        self.types: dict[str, int] = {}
        self.numbers = 0
        self.low: float | None = None
        self.high: float | None = None
        self.low_at = self.high_at = 0
        self.total: float = 0
        self.values: dict[str, int] | None = {}  # None: too many distinct values
        self.longest = 0  # characters of the longest string

    def add(self, value: object, index: int) -> None:
        """Count ``value`` of record number ``index`` (1-based)."""
        self.present += 1
        kind = _type_name(value)
        self.types[kind] = self.types.get(kind, 0) + 1
        if kind == "number":
            self._number(value, index)  # type: ignore[arg-type]
        elif kind in ("string", "bool"):
            self._category(json.dumps(value, ensure_ascii=False) if kind == "bool" else value)

    def add_cell(self, cell: str, index: int) -> None:
        """Count a table cell (numbers parsed; empty cells counted as ``empty``)."""
        number = parse_number(cell)
        if number is not None:
            self.add(number, index)
        elif cell.strip():
            self.add(cell.strip(), index)
        else:
            self.types["empty"] = self.types.get("empty", 0) + 1

    def _number(self, value: float, index: int) -> None:
        self.numbers += 1
        self.total += value
        if value != value:  # NaN: counted, never a min or max
            return
        if self.low is None or value < self.low:
            self.low, self.low_at = value, index
        if self.high is None or value > self.high:
            self.high, self.high_at = value, index

    def _category(self, value: object) -> None:
        key = str(value)
        self.longest = max(self.longest, len(key))
        if self.values is None or len(key) > 80:  # long text is not a category
            return
        if key not in self.values and len(self.values) >= _CATEGORY_CAP:
            self.values = None
            return
        self.values[key] = self.values.get(key, 0) + 1


def field_line(name: str, stats: Field, records: int) -> str:
    """``- price: number in 2,000/2,000; min 1 [#3], max 99 [#2,000], sum ..., mean ...``."""
    types = stats.types
    kinds = ", ".join(f"{k} {v:,}" for k, v in types.items()) if len(types) > 1 else ""
    kinds = kinds or next(iter(types), "no values")
    name = " ".join(name[:60].split())  # a key with line breaks stays on one line
    parts = [f"- {name}: {kinds} in {stats.present:,}/{records:,}"]
    if stats.numbers and stats.low is not None and stats.high is not None:
        try:
            mean = number_text(round(stats.total / stats.numbers, 4))
        except (OverflowError, ValueError):
            mean = "<huge number>"
        parts.append(
            f"min {number_text(stats.low)} [#{stats.low_at:,}], max {number_text(stats.high)} "
            f"[#{stats.high_at:,}], sum {number_text(stats.total)}, mean {mean}"
        )
    strings = types.get("string", 0) + types.get("bool", 0)
    if stats.longest > 80:
        parts.append(f"up to {stats.longest:,} chars")
    if strings and stats.values is None:
        parts.append(f"over {_CATEGORY_CAP} distinct values")
    elif strings and stats.values:
        values = sorted(stats.values.items(), key=lambda kv: -kv[1])
        if len(values) < strings:  # values repeat: show the top ones with counts
            top = ", ".join(
                f"{json.dumps(v[:40], ensure_ascii=False)} {n:,}" for v, n in values[:5]
            )
            parts.append(f"{len(values)} distinct: {top}")
    return scrub("; ".join(parts))[:240]


# --- detection ---------------------------------------------------------------------------


def _json(text: str) -> tuple[str, Any] | None:
    stripped = text.strip()
    if stripped[:1] not in ("[", "{") or stripped[-1:] not in ("]", "}"):
        return None
    try:
        return "json", (json.loads(stripped), 0)
    except ValueError:
        return None


def _jsonl(text: str) -> tuple[str, Any] | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2 or lines[0][:1] not in ("[", "{"):
        return None
    records, bad = [], 0
    for line in lines:
        try:
            value = json.loads(line) if line[:1] in ("[", "{") else None
        except ValueError:
            value = None
        if value is None:
            bad += 1
            if bad > 2 and bad > 0.1 * len(lines):
                return None
        else:
            records.append(value)
    return ("jsonl", (records, bad)) if len(records) >= 2 else None


#: The characters of a table's separator line (``|---|:--:|``, ``+===+``).
_SEP_CHARS_RE = re.compile(r"[\s|:+=\-]*")


def _is_separator(line: str) -> bool:
    """Whether ``line`` is a table separator: only separator characters, a ``-`` or ``=``
    among them. (One pattern ``[set]*[-=][set]*`` tried every ``-`` of a line that then
    failed, quadratic on a long run of dashes; this is one linear scan and two finds.)"""
    return ("-" in line or "=" in line) and _SEP_CHARS_RE.fullmatch(line) is not None


def _cells(line: str) -> list[str]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") else line
    return [c.strip() for c in line.split("|")]


def _pipe_table(lines: list[str]) -> tuple[str, Any] | None:
    sample = lines[:30]
    rows = [ln for ln in sample if "|" in ln and not _is_separator(ln)]
    separators = sum(1 for ln in sample if _is_separator(ln))
    if len(rows) < 3:
        return None
    counts = [len(_cells(ln)) for ln in rows]
    width = max(set(counts), key=counts.count)
    bordered = sum(1 for ln in rows if ln.lstrip().startswith("|"))
    if width < 2 or counts.count(width) < 0.8 * len(sample):
        return None
    if not separators and bordered < 0.8 * len(rows):
        return None
    table = [_cells(ln) for ln in lines if "|" in ln and not _is_separator(ln)]
    kind = "markdown" if separators and lines[0].lstrip().startswith("|") else "pipe"
    return "table", (kind, table[0], table[1:])


def _looks_like_header(row: list[str]) -> bool:
    cells = [c.strip() for c in row]
    return len(set(cells)) == len(cells) and all(
        c and len(c) <= 64 and parse_number(c) is None for c in cells
    )


_DELIMITERS = (("\t", "TSV"), (",", "CSV"), (";", "semicolon-separated"))


def _delimited_table(text: str, lines: list[str]) -> tuple[str, Any] | None:
    sample = "\n".join(lines[:30])
    best: tuple[int, str, str] | None = None
    for delimiter, kind in _DELIMITERS:
        if delimiter not in lines[0]:
            continue
        rows = [r for r in csv.reader(io.StringIO(sample), delimiter=delimiter) if r]
        width = len(rows[0])
        if width < 2 or len(rows) < 3 or not _looks_like_header(rows[0]):
            continue
        if sum(1 for r in rows if len(r) == width) < 0.9 * len(rows):
            continue
        if best is None or width > best[0]:
            best = (width, delimiter, kind)
    if best is None:
        return None
    table = [r for r in csv.reader(io.StringIO(text.strip()), delimiter=best[1]) if r]
    return "table", (best[2], table[0], table[1:])


def _table(text: str) -> tuple[str, Any] | None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) < 3:
        return None
    return _pipe_table(lines) or _delimited_table(text, lines)


_LEVEL_RE = re.compile(
    r"\b(FATAL|CRITICAL|ERROR|WARNING|WARN|NOTICE|INFO|DEBUG|TRACE)\b"
    r"|(?i:\[(fatal|critical|error|warning|warn|notice|info|debug|trace)\]"
    r"|\blevel=\"?(fatal|critical|error|warning|warn|notice|info|debug|trace)\b)"
)
_STAMP_RE = re.compile(
    r"\W{0,3}(\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?|\d\d:\d\d:\d\d"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)"
)


def _log(text: str) -> tuple[str, Any] | None:
    lines = text.splitlines()
    levels: list[str | None] = []
    first = last = ""
    marked = filled = 0
    for line in lines:
        head = line[:200]
        if not head or head.isspace():
            levels.append(None)
            continue
        level = _LEVEL_RE.search(head)
        stamp = _STAMP_RE.match(head)
        if stamp:
            first, last = first or stamp.group(1), stamp.group(1)
        found = None if level is None else (level.group(1) or level.group(2) or level.group(3))
        levels.append(None if found is None else found.upper().replace("WARNING", "WARN"))
        marked += bool(level or stamp)
        filled += 1
    if filled < 3 or marked < max(3, 0.3 * filled):
        return None
    return "log", (lines, levels, [first, last] if first else [])


_DETECTORS: tuple[Callable[[str], tuple[str, Any] | None], ...] = (_json, _jsonl, _table, _log)


def detect(text: str) -> tuple[str, Any]:
    """``(kind, parsed)`` with kind ``json``, ``jsonl``, ``table``, ``log`` or ``text``.

    Example:
        >>> detect('{"a": 1}')
        ('json', ({'a': 1}, 0))
        >>> detect("{broken")[0]
        'text'
    """
    for detector in _DETECTORS:
        try:
            found = detector(text)
        except Exception:  # malformed input (csv limits, deep nesting): not this structure
            found = None
        if found is not None:
            return found
    return "text", None
