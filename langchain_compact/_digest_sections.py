"""Section builders of :mod:`langchain_compact.digest`: the lines of a JSON, table or log
digest, each with a priority (lower is kept first when the digest must shrink)."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_compact._digest_parse import Field, field_line, scrub
from langchain_compact._render import key_lines

Lines = list[tuple[int, str]]
"""(priority, line) pairs in display order; lower priorities are kept first."""


def clip(text: str, width: int, *, middle: bool = False) -> str:
    """``text`` on one line, at most ``width`` characters (cut in the middle if asked).

    Example:
        >>> clip("a\\nb" + "c" * 50, 20), clip("head " + "x" * 50 + " tail", 25, middle=True)
        ('a bcccccccccccccc...', 'head xxxxxxxx ... xx tail')
    """
    text = scrub(text).replace("\r", "").replace("\n", " ")
    if len(text) <= width:
        return text
    if middle and width > 20:
        head = (width - 5) * 2 // 3
        return f"{text[:head]} ... {text[len(text) - (width - 5 - head) :]}"
    return text[: max(0, width - 3)] + "..."


# --- JSON ------------------------------------------------------------------------------


def _json_kind(value: object) -> str:
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else ""


def _dump(value: object, width: int) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return clip(text, width, middle=True)


def _largest_array(value: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """The longest list in ``value`` or one object below it, with its dotted path."""
    best: tuple[str, list[Any]] | None = None
    for key, item in value.items():
        inner = item.items() if isinstance(item, dict) else [("", item)]
        for sub, candidate in inner:
            if isinstance(candidate, list) and (best is None or len(candidate) > len(best[1])):
                best = (f"{key}.{sub}" if sub else key, candidate)
    return best if best is not None and len(best[1]) >= 2 else None


def _records_lines(records: list[Any], max_chars: int, noun: str = "record") -> Lines:
    """Fields with their statistics, then the first and last records."""
    fields: dict[str, Field] = {}
    kinds: dict[str, int] = {}
    for index, record in enumerate(records, 1):
        kind = _json_kind(record) or type(record).__name__
        kinds[kind] = kinds.get(kind, 0) + 1
        items = record.items() if isinstance(record, dict) else [("(value)", record)]
        for key, value in items:
            _field(fields, str(key), value, index)
            if isinstance(value, dict) and len(value) <= 50:
                for sub, inner in value.items():
                    _field(fields, f"{key}.{sub}", inner, index)
    lines: Lines = []
    if len(kinds) > 1:
        lines.append((1, "record types: " + ", ".join(f"{k} {n:,}" for k, n in kinds.items())))
    n = len(records)
    lines.append((1, f"fields ({len(fields):,}; [#k] = {noun} number, 1-based):"))
    for rank, (name, stats) in enumerate(fields.items()):
        lines.append((3 if stats.numbers or rank < 12 else 4, field_line(name, stats, n)))
    # First and last records always; with room left, those holding a field's maximum.
    picks = {1: (2, f"first {noun}"), n: (2, f"last {noun} (#{n:,})")}
    for name, stats in fields.items():
        if stats.numbers and name != "(value)" and len(picks) < 6:
            picks.setdefault(stats.high_at, (5, f"{noun} #{stats.high_at:,} (max {name[:40]})"))
    for at in (2, n - 1):
        picks.setdefault(at, (6, f"{noun} #{at:,}"))
    width = max(80, min(600, max_chars // 5))
    for at in sorted(a for a in picks if 1 <= a <= n):
        prio, label = picks[at]
        lines.append((prio, f"{label}: {_dump(records[at - 1], width)}"))
    return lines


def _field(fields: dict[str, Field], name: str, value: object, index: int) -> None:
    stats = fields.get(name)
    if stats is None:
        if len(fields) >= 300:  # bounded: records with ever-new keys
            return
        stats = fields[name] = Field()
    stats.add(value, index)


def _json_lines(value: object, bad: int, jsonl: bool, max_chars: int) -> tuple[str, Lines]:
    lines: Lines = []
    if jsonl:
        assert isinstance(value, list)
        skipped = f" ({bad:,} lines not JSON)" if bad else ""
        return f"JSON Lines: {len(value):,} records{skipped}", _records_lines(value, max_chars)
    if isinstance(value, list):
        what = f"a JSON array: {len(value):,} records"
        if len(value) > 1 and all(isinstance(v, list) for v in value):
            inner = [item for v in value for item in v]
            what += f" (arrays; {len(inner):,} inner records)"
            value = inner
        return what, (_records_lines(value, max_chars) if value else lines)
    assert isinstance(value, dict)
    found = _largest_array(value)
    if found is None and len(value) >= 5:
        dicts = [v for v in value.values() if isinstance(v, dict)]
        if len(dicts) >= 0.8 * len(value):
            keys = list(value)
            lines.append((1, f"keys: {clip(keys[0], 60)} ... {clip(keys[-1], 60)}"))
            what = f"a JSON object: {len(value):,} entries keyed by name"
            return what, lines + _records_lines(list(value.values()), max_chars, "entry")
    if found is None:
        for key, item in value.items():
            shown = (
                _dump(item, 160)
                if not isinstance(item, (dict, list))
                else (f"{_json_kind(item)} of {len(item):,}: {_dump(item, 120)}")
            )
            lines.append((1, f"- {clip(str(key), 60)}: {shown}"))
        return f"a JSON object: {len(value):,} keys", lines
    path, records = found
    others = [
        f"{clip(str(k), 40)}="
        + (_dump(v, 60) if not isinstance(v, (dict, list)) else f"<{_json_kind(v)} of {len(v):,}>")
        for k, v in value.items()
        if v is not records
    ]
    if others:
        lines.append((1, clip("other keys: " + ", ".join(others), 400)))
    what = f'a JSON object: {len(records):,} records under "{clip(path, 60)}"'
    return what, lines + _records_lines(records, max_chars)


# --- tables and logs ------------------------------------------------------------------


def _table_lines(
    payload: tuple[str, list[str], list[list[str]]], max_chars: int
) -> tuple[str, Lines]:
    kind, header, rows = payload
    columns = [Field() for _ in header]
    irregular = 0
    for index, row in enumerate(rows, 1):
        irregular += len(row) != len(header)
        for stats, cell in zip(columns, row, strict=False):
            stats.add_cell(cell, index)
    what = f"a {kind} table: {len(rows):,} rows x {len(header)} columns"
    lines: Lines = [(1, clip("header: " + " | ".join(header), 400))]
    if irregular:
        lines.append((1, f"{irregular:,} rows have another number of cells than the header"))
    for rank, (name, stats) in enumerate(zip(header, columns, strict=True)):
        prio = 3 if stats.numbers or rank < 12 else 4
        lines.append((prio, field_line(name or f"column {rank + 1}", stats, len(rows))))
    width = max(80, min(400, max_chars // 6))
    for label, at in (("first row", 0), ("second row", 1), ("last row", len(rows) - 1)):
        if 0 <= at < len(rows) and (at < len(rows) - 1 or label == "last row"):
            lines.append((2, f"{label} (#{at + 1:,}): {clip(' | '.join(rows[at]), width)}"))
    return what, lines


_ERROR_LEVELS = ("FATAL", "CRITICAL", "ERROR")
_GROUPED_LEVELS = (*_ERROR_LEVELS, "WARN")
#: The most lines naming an identifier or a URL a log's digest keeps.
_LOG_KEY_LINES = 8


def _log_lines(
    payload: tuple[list[str], list[str | None], list[str]], max_chars: int
) -> tuple[str, Lines]:
    lines_in, levels, stamps = payload
    counts: dict[str, int] = {}
    groups: dict[tuple[bool, str], list[Any]] = {}  # (is error, shape) -> [count, last index]
    for index, (line, level) in enumerate(zip(lines_in, levels, strict=True)):
        if level is None:
            continue
        counts[level] = counts.get(level, 0) + 1
        if level in _ERROR_LEVELS or level == "WARN":
            key = (level in _ERROR_LEVELS, re.sub(r"\d+", "#", line[:300]))
            group = groups.setdefault(key, [0, index])
            group[0] += 1
            group[1] = index
    what = f"a log: {len(lines_in):,} lines"
    by_level = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    span = f" (timestamps {stamps[0]} .. {stamps[-1]})" if stamps else ""
    out: Lines = [(1, f"levels: {by_level or 'none'}{span}")]
    width = max(80, min(300, max_chars // 8))
    for is_error in (True, False):
        found = [(v[0], v[1]) for k, v in groups.items() if k[0] is is_error]
        found.sort(key=lambda g: (-g[0], -g[1]))
        for n, index in found[:200]:
            text = f"{n:,}x, last at line {index + 1:,}: {clip(lines_in[index], width)}"
            out.append((2 if is_error else 4, text))
    out += _log_key_lines(lines_in, levels, {index for _n, index in groups.values()}, width)
    out += _log_ends(lines_in, max_chars - sum(len(text) + 1 for _, text in out) - 200, width)
    return what, out


def _log_key_lines(
    lines_in: list[str], levels: list[str | None], grouped: set[int], width: int
) -> Lines:
    """The lines that name an identifier or a URL, wherever they are (a plain text's digest
    keeps its key lines too): a build's one line of a ticket, a key or an artifact's URL
    is no error, and a head-and-tail view drops it with the middle."""
    line_at: dict[str, int] = {}
    for index, line in enumerate(lines_in):
        line_at.setdefault(line.strip()[:200], index)
    out: Lines = []
    for keyed in key_lines("\n".join(lines_in), limit=_LOG_KEY_LINES, width=200):
        at = line_at.get(keyed, -1)
        if at >= 0 and at not in grouped and levels[at] not in _GROUPED_LEVELS:
            out.append((2, f"line {at + 1:,}: {clip(lines_in[at], width)}"))
    return out


def _log_ends(lines_in: list[str], spare: int, width: int) -> Lines:
    """The first and last lines, then as many more from both ends as ``spare`` characters
    allow (the room is the caller's: a digest of an unread result may have most of the
    window)."""
    n = len(lines_in)
    last = max(0, n - 3)
    head: Lines = []
    tail: Lines = []
    i, j = 0, last - 1
    while i <= j:
        line = f"line {i + 1:,}: {clip(lines_in[i], width)}"
        if i >= 2:
            if spare < len(line) + 1:
                break
            spare -= len(line) + 1
        head.append((5 if i < 2 else 6, line))
        i += 1
        if i <= j and i > 2:
            line = f"line {j + 1:,}: {clip(lines_in[j], width)}"
            if spare < len(line) + 1:
                break
            spare -= len(line) + 1
            tail.insert(0, (6, line))
            j -= 1
    ends: Lines = [(3, f"line {at + 1:,}: {clip(lines_in[at], width)}") for at in range(last, n)]
    return [*head, *tail, *ends]


def describe(kind: str, payload: Any, max_chars: int) -> tuple[str | None, Lines]:
    """What the parsed ``payload`` of a ``kind`` is, and its digest lines (``None`` and no
    lines for plain text, which the caller digests itself).

    Example:
        >>> describe("json", ([{"n": 1}, {"n": 5}], 0), 500)[0]
        'a JSON array: 2 records'
    """
    if kind in ("json", "jsonl"):
        value, bad = payload
        return _json_lines(value, bad, kind == "jsonl", max_chars)
    if kind == "table":
        return _table_lines(payload, max_chars)
    if kind == "log":
        return _log_lines(payload, max_chars)
    return None, []
