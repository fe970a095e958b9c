"""``python -m bench.slow_paths``: the time of every text-processing entry on adversarial texts.

Each entry (digest, facts, render, placeholders, redaction, archive search, recall, token
estimate) is run on texts built to make a backtracking pattern or a rescanning loop work
hard: runs of blank lines, spaces, tabs, ``:`` ``=`` ``|`` ``-`` repeated, long lines
without a line break, deep brackets, many short lines, one huge token. Each (entry, text)
pair runs at sizes ``n``, ``2n`` and ``4n`` characters in a child process with a time limit
(a cubic pattern in C ignores signals); a pair whose time grows more than 3x per doubling
is flagged. Then one huge tool result at two sizes passes through the archive write and the
token count, with its peak traced memory (item 7 of issue 31).

Writes ``bench/results/slow_paths.json`` and prints the curves. ``--sizes 2000,4000,8000``
changes the sizes, ``--limit S`` the time limit of a pair, ``--only WORD`` keeps the entries
whose name holds WORD.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "slow_paths.json"
RATIO_FLAG = 3.0


def _texts() -> dict[str, Callable[[int], str]]:
    """Adversarial texts of about ``n`` characters, by name."""

    def rep(unit: str) -> Callable[[int], str]:
        return lambda n: (unit * (n // len(unit) + 1))[:n]

    return {
        "blank lines": rep("\n"),
        "blank lines between words": lambda n: "head\n" + "\n" * (n - 10) + "tail",
        "spaces": rep(" "),
        "tabs": rep("\t"),
        "space lines": rep(" \n"),
        "colons": rep(":"),
        "equals": rep("="),
        "pipes": rep("|"),
        "dashes": rep("-"),
        "dashes then x": lambda n: "-" * (n - 1) + "x",
        "separator cells then x": lambda n: rep("|-=: ")(n - 1) + "x",
        "key then spaces": lambda n: "key" + " " * (n - 5) + "x\n",
        "key colon spaces": lambda n: "key:" + " " * (n - 5) + "\n",
        "colon lines": rep("a:\n"),
        "equals lines": rep("a=\n"),
        "dash lines": rep("-\n"),
        "long line": rep("abcdefgh "),
        "huge token": rep("x"),
        "upper token": rep("A"),
        "base64": rep("QUJDRGVmZ2gxMjM0NTY3OA"),
        "deep brackets": lambda n: "[" * (n // 2) + "]" * (n - n // 2),
        "open brackets": rep("{"),
        "many short lines": rep("a\n"),
        "ids": rep("see QX-12 "),
        "id lines": rep("see QX-12" + " " * 90 + "\n"),
        "paths": rep("/a"),
        "slash words": rep("/abcdefgh"),
        "urls": rep("http://"),
        "numbers": rep("1,"),
        "json-ish": rep('{"a": 1, '),
        "password=": rep("password="),
        "bearer": rep("Bearer "),
        "key: value": rep("name: v "),
        "log lines": rep("2024-01-01 12:00:00 ERROR x\n"),
        "pipe table rows": rep("| a | b |\n|---|---|\n"),
        "pipe rows of dashes": lambda n: "\n".join(["|" + "-" * (n // 3 - 3) + "x"] * 3),
        "cjk": rep("中文-"),
    }


def _entries() -> dict[str, Callable[[str], Any]]:
    """Every text-processing entry, as a function of one text."""
    from langchain_core.messages import AIMessage, ToolMessage

    from langchain_compact import _facts, _placeholders, _render
    from langchain_compact._digest_parse import detect, scrub
    from langchain_compact._recall import RecallRenderer
    from langchain_compact.archive import JsonlArchive  # noqa: F401 (import cost only)
    from langchain_compact.config import CompactionConfig
    from langchain_compact.digest import detect_structure, structured_digest
    from langchain_compact.lcel import compact_messages
    from langchain_compact.redaction import redact_secrets
    from langchain_compact.tokens import approx_text

    def search(text: str) -> Any:
        from langchain_compact._archive_records import Record

        message = ToolMessage(text, tool_call_id="c1").model_dump()
        record = Record("r1", [{"type": "tool", "data": message}])
        return _search_records([record], text)

    def recall(text: str) -> str:
        hit = ("r1", 0, ToolMessage(text, tool_call_id="c1"))
        crit = {"query": "x", "tool_call_id": None, "message_id": None}
        return RecallRenderer(name="recall", max_chars=4000).render([hit], crit, page=1)

    return {
        "digest.structured_digest": lambda t: structured_digest(t, max_chars=2000),
        "digest.detect_structure": detect_structure,
        "digest_parse.detect": detect,
        "digest_parse.scrub": scrub,
        "facts.score_lines": _facts._score_lines,
        "facts.facts_block": _facts.facts_block,
        "facts.result_gist": lambda t: (_facts._FACT_MEMO.clear(), _facts.result_gist(t)),
        "facts.key_fact_text": _facts.key_fact_text,
        "facts.condense_summary": lambda t: _facts.condense_summary(t, 500),
        "facts.placeholder_facts": lambda t: _facts.placeholder_facts(
            _placeholders.append_facts("[cleared]", [t])
        ),
        # as the digest calls it: every key line of the middle of a text
        "render.key_lines": lambda t: _render.key_lines(t, limit=10**9),
        "render.salient_items": _render.salient_items,
        "render.render_message": lambda t: _render.render_message(AIMessage(t), max_chars=4000),
        "render.cut_to_tokens": lambda t: _render._cut_to_tokens(t, 500),
        "render.context_of": lambda t: _render.context_of("x", t),
        "placeholders.parse_cleared": _placeholders.parse_cleared,
        "placeholders.parse_cut_notice": _placeholders.parse_cut_notice,
        "placeholders.parse_summary_header": _placeholders.parse_summary_header,
        "placeholders.parse_digest_header": _placeholders.parse_digest_header,
        "placeholders.kept_facts": _placeholders.kept_facts,
        "redaction.redact_secrets": redact_secrets,
        "archive_search.search_records": search,
        "recall.render": recall,
        "tokens.approx_text": approx_text,
        "lcel.compact_messages": lambda t: compact_messages(
            _history(t), config=CompactionConfig(context_window=8_000), archive=None
        ),
    }


def _history(text: str) -> list[Any]:
    """A history over the trigger whose oldest tool result is ``text`` (issue 31's case)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    messages: list[Any] = [HumanMessage("Run the steps; report each value.", id="u0")]
    for i in range(12):
        call = {"name": "run_step", "args": {"step": i}, "id": f"c{i}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        body = text if i == 0 else f"RESULT step={i} value={1000 + i}\n" + "log line\n" * 300
        messages.append(ToolMessage(body, tool_call_id=f"c{i}", id=f"t{i}"))
    return messages


#: The slow paths issue 31 reported and this benchmark found, printed first (key lines at
#: larger sizes: a line has to be found hundreds of times before its quadratic term shows).
KNOWN: tuple[tuple[str, str, tuple[int, ...] | None], ...] = (
    ("facts.score_lines", "blank lines", None),
    ("lcel.compact_messages", "blank lines", None),
    ("render.key_lines", "id lines", (100_000, 200_000, 400_000)),
    ("digest_parse.detect", "pipe rows of dashes", None),
    ("render.salient_items", "cjk", None),
)


def _search_records(records: list[Any], text: str) -> Any:
    from langchain_compact._archive_search import search_records

    word = (text.split() or ["x"])[0][:20]
    return search_records(
        records, query=word, tool_call_id=None, message_id=None, limit=5, offset=0
    )


def _time(fn: Callable[[str], Any], text: str, reps: int = 3) -> float:
    """Best CPU seconds of ``reps`` calls (CPU time: a loaded machine delays, never bills)."""
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        fn(text)
        best = min(best, time.process_time() - start)
    return best


def _child(entry: str, text_name: str, sizes: list[int], conn: Any) -> None:
    fn = _entries()[entry]
    make = _texts()[text_name]
    fn(make(100))  # warm: imports, compiled patterns, tokenizer
    for n in sizes:
        conn.send((n, _time(fn, make(n))))
    conn.close()


def _run_pair(entry: str, text_name: str, sizes: list[int], limit: float) -> list[Any]:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(entry, text_name, sizes, child))
    proc.start()
    child.close()
    times: list[Any] = []
    deadline = time.monotonic() + limit
    while len(times) < len(sizes):
        left = deadline - time.monotonic()
        if left <= 0 or not parent.poll(left):
            break
        try:
            times.append(parent.recv()[1])
        except EOFError:
            break
    killed = proc.is_alive()
    if killed:
        proc.kill()
    proc.join()
    if not killed and proc.exitcode:  # the entry raised: a broken case, not a slow one
        raise RuntimeError(f"{entry} on {text_name!r} failed (exit code {proc.exitcode})")
    return times + [None] * (len(sizes) - len(times))


def _ratios(times: list[Any]) -> list[float | None]:
    return [(b / a if a and b is not None else None) for a, b in itertools.pairwise(times)]


def _flag(times: list[Any]) -> bool:
    if any(t is None for t in times):
        return True  # over the time limit
    if times[-1] < 0.002:  # too fast to tell growth from noise
        return False
    ratios = [r for r in _ratios(times) if r is not None]
    return bool(ratios) and min(ratios) > RATIO_FLAG


def _huge(sizes_mb: list[int]) -> list[dict[str, Any]]:
    """One huge tool result at each size: seconds (untraced) and traced peak memory of each
    stage a result passes through, and of a whole ``compact_messages`` call that archives
    it (the archive read back holds it whole)."""
    import tempfile
    import tracemalloc

    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from langchain_compact._fingerprint import message_key
    from langchain_compact.archive import JsonlArchive
    from langchain_compact.config import CompactionConfig
    from langchain_compact.digest import structured_digest
    from langchain_compact.lcel import compact_messages
    from langchain_compact.tokens import TiktokenCounter, approx_text

    counter = TiktokenCounter()
    counter.count_text("load the encoding " * 10)

    def history(text: str) -> list[Any]:
        out: list[Any] = [HumanMessage("Run the steps; report each value.", id="u0")]
        for i in range(6):
            call = {"name": "run", "args": {"i": i}, "id": f"c{i}"}
            out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
            body = text if i == 1 else f"RESULT step={i} value={i}"
            out.append(ToolMessage(body, tool_call_id=f"c{i}", id=f"t{i}"))
        return out

    def stages(text: str, folder: str) -> dict[str, Callable[[], Any]]:
        message = ToolMessage(text, tool_call_id="c1", id="m1")
        archive = JsonlArchive(folder)
        config = CompactionConfig(context_window=30_000)
        return {
            "message_key": lambda: message_key(message),
            "approx_text": lambda: approx_text(text),
            "count_text": lambda: counter.count_text(text),
            "structured_digest": lambda: structured_digest(text, max_chars=2000),
            "JsonlArchive.write": lambda: archive.write([message], thread_id="t", reason="b"),
            "compact_messages": lambda: compact_messages(
                history(text), config=config, archive=JsonlArchive(folder + "/c")
            ),
        }

    rows = []
    line = "2024-01-01 12:00:00 INFO step done value=12345 path=/a/b/c\n"
    for mb in sizes_mb:
        row: dict[str, Any] = {"mb": mb}
        for traced in (False, True):
            # A fresh text per pass: no cache of the first pass answers the second.
            seed = "traced " if traced else ""
            one = (seed + line) * (mb * 1_000_000 // len(seed + line) + 1)
            text = one[: mb * 1_000_000]
            del one
            with tempfile.TemporaryDirectory() as folder:
                for name, stage in stages(text, folder).items():
                    if traced:
                        tracemalloc.start()
                    start = time.perf_counter()
                    stage()
                    seconds = time.perf_counter() - start
                    entry = row.setdefault(name, {})
                    if traced:
                        peak = tracemalloc.get_traced_memory()[1]
                        tracemalloc.stop()
                        entry["peak_mb"] = round(peak / 1e6, 1)
                        entry["peak_x"] = round(peak / len(text), 2)
                    else:
                        entry["s"] = round(seconds, 3)
                if not traced:
                    archive = JsonlArchive(folder + "/c")
                    refs = archive.refs(thread_id="default")
                    kept = [m.content for r in refs for m in archive.read(r, thread_id="default")]
                    row["archived_whole"] = text in kept
        rows.append(row)
    return rows


def dumps(result: dict[str, Any]) -> str:
    """The results as JSON, one case a line (925 cases stay a short, diffable file)."""
    parts = []
    for key, value in result.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            rows = ",\n  ".join(json.dumps(row) for row in value)
            parts.append(f" {json.dumps(key)}: [\n  {rows}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4000,8000,16000")
    parser.add_argument("--limit", type=float, default=20.0)
    parser.add_argument("--only", default="")
    parser.add_argument("--huge", default="10,20", help="huge result sizes in MB ('' skips)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    import subprocess

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    curves = []
    flagged = []
    print("known slow paths, CPU ms at each size:")
    known = []
    for entry, text_name, own in KNOWN:
        at = list(own or sizes)
        times = _run_pair(entry, text_name, at, args.limit)
        shown = ", ".join(
            f"{n:,}: " + ("timeout" if t is None else f"{t * 1e3:.2f}")
            for n, t in zip(at, times, strict=True)
        )
        print(f"  {entry:24} {text_name:20} {shown}", flush=True)
        known.append({"entry": entry, "text": text_name, "sizes": at, "seconds": times})
    pairs = [(e, t) for e in _entries() for t in _texts()]
    for entry, text_name in pairs:
        if args.only and args.only not in entry:
            continue
        times = _run_pair(entry, text_name, sizes, args.limit)
        row = {
            "entry": entry,
            "text": text_name,
            "sizes": sizes,
            "seconds": [None if t is None else float(f"{t:.3g}") for t in times],
            "ratios": [None if r is None else round(r, 2) for r in _ratios(times)],
        }
        curves.append(row)
        if _flag(times):
            flagged.append(row)
            shown = ", ".join("timeout" if t is None else f"{t * 1e3:.1f} ms" for t in times)
            print(f"FLAG {entry} on {text_name}: {shown}", flush=True)
    slowest = sorted(
        curves, key=lambda r: -(1e9 if r["seconds"][-1] is None else r["seconds"][-1])
    )[:15]
    print(f"\nslowest at {sizes[-1]:,} chars:")
    for row in slowest:
        shown = ", ".join("timeout" if t is None else f"{t * 1e3:.2f}" for t in row["seconds"])
        print(f"  {row['entry']:32} {row['text']:26} ms {shown}  ratios {row['ratios']}")
    huge = _huge([int(s) for s in args.huge.split(",") if s]) if args.huge else []
    for row in huge:
        stages = [(k, v) for k, v in row.items() if isinstance(v, dict)]
        print(f"huge result of {row['mb']} MB (archived whole: {row['archived_whole']}):")
        for k, v in stages:
            print(f"  {k:20} {v['s']:8.3f} s   peak {v['peak_mb']:7.1f} MB ({v['peak_x']}x)")
    result = {
        "commit": commit,
        "sizes": sizes,
        "limit_s": args.limit,
        "known": known,
        "flagged": flagged,
        "curves": curves,
        "huge": huge,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(result))
    print(f"{len(flagged)} flagged of {len(curves)}; wrote {out}")
    return result


if __name__ == "__main__":
    main()
