"""``python -m bench.digest_sizes``: structured digests of the transcripts' large results.

For every tool result over 5,000 characters in the shared transcripts (and, for the agents
without native tool calls, every user observation over 5,000 characters after the task), it
reports the structure :func:`~langchain_compact.digest.detect_structure` finds, the digest
size against the original at ``max_chars=2,000``, the time per digest, and how many of the
result's identifiers, paths, URLs and hashes the digest keeps against a head + tail cut of the
same size. Then synthetic results where the fact that matters sits where a head + tail
cut drops it (the largest record last or in the middle, errors mid-log): is it kept?
``--max-chars N`` changes the bound.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter, defaultdict

from langchain_core.messages import HumanMessage, ToolMessage

from bench.workloads import load_transcripts
from langchain_compact._render import salient_items, salient_rank, tool_result_text
from langchain_compact.digest import detect_structure, structured_digest

LARGE = 5_000


def _head_tail(text: str, chars: int) -> str:
    return text[: chars // 2] + text[len(text) - chars // 2 :]


def _kept(items: list[str], shown: str) -> int:
    return sum(1 for item in items if item in shown)


def _synthetic() -> list[tuple[str, str, str]]:
    """(case, text, the fact a reader must find) for the seed's head + tail worry."""
    wide = [{"amount": 10 + i % 900, "id": f"ORD-{i}", "note": "x " * 800} for i in range(2_000)]
    wide[-1]["amount"] = 99_999
    mid = [{"amount": 10 + i % 900, "id": f"ORD-{i}"} for i in range(2_000)]
    mid[1_000]["amount"] = 99_999
    log = [f"2024-05-01 10:00:{i % 60:02d} INFO GET /api/{i} 200" for i in range(3_000)]
    log[1_700] = "2024-05-01 10:28:20 ERROR payment PAY-1700 timed out"
    csv = ["id,units,price"] + [f"{i},{i % 40},{10 + i % 90}" for i in range(3_000)]
    csv[1_500] = "1499,7,99999"
    return [
        ("JSON, 2,000 wide records, max in the last", json.dumps(wide), "99,999"),
        ("JSON, 2,000 records, max in the middle", json.dumps(mid), "99,999"),
        ("log, 3,000 lines, one error mid-log", "\n".join(log), "PAY-1700"),
        ("CSV, 3,000 rows, max mid-table", "\n".join(csv), "99,999"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-chars", type=int, default=2_000)
    bound = parser.parse_args().max_chars
    rows: dict[str, list[tuple[int, int, float, int, int, int]]] = defaultdict(list)
    sources: Counter[str] = Counter()
    for messages in load_transcripts().values():
        first_human = next((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), -1)
        for i, msg in enumerate(messages):
            observation = isinstance(msg, HumanMessage) and i != first_human
            if not (isinstance(msg, ToolMessage) or observation):
                continue
            text = tool_result_text(msg)
            if len(text) <= LARGE:
                continue
            sources["tool result" if isinstance(msg, ToolMessage) else "user observation"] += 1
            start = time.perf_counter()
            digest = structured_digest(text, max_chars=bound)
            elapsed = (time.perf_counter() - start) * 1000
            assert len(digest) <= bound
            items = [i for i in salient_items(text) if salient_rank(i) < 3]  # not bare numbers
            cut = _head_tail(text, len(digest))
            row = (len(text), len(digest), elapsed, len(items))
            rows[detect_structure(text)].append((*row, _kept(items, digest), _kept(items, cut)))
    print(f"large results (> {LARGE:,} chars): {dict(sources)}; max_chars={bound:,}")
    print(
        "| structure | n | mean original chars | mean digest chars | digest/original "
        "| ids, paths, URLs, hashes kept: digest | head + tail of the same size "
        "| ms per digest (max) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    everything = [r for group in rows.values() for r in group]
    for name, group in [*sorted(rows.items()), ("all", everything)]:
        orig = statistics.mean(r[0] for r in group)
        dig = statistics.mean(r[1] for r in group)
        items = sum(r[3] for r in group) or 1
        print(
            f"| {name} | {len(group)} | {orig:,.0f} | {dig:,.0f} | {dig / orig:.1%} "
            f"| {sum(r[4] for r in group) / items:.0%} | {sum(r[5] for r in group) / items:.0%} "
            f"| {statistics.mean(r[2] for r in group):.1f} ({max(r[2] for r in group):.1f}) |"
        )
    print("\n| synthetic result | chars | digest keeps the fact | head + tail keeps it | ms |")
    print("|---|---|---|---|---|")
    for case, text, fact in _synthetic():
        start = time.perf_counter()
        digest = structured_digest(text, max_chars=bound)
        elapsed = (time.perf_counter() - start) * 1000
        plain = fact.replace(",", "")
        cut = _head_tail(text, bound)
        kept = plain in cut or fact in cut
        print(f"| {case} | {len(text):,} | {fact in digest} | {kept} | {elapsed:.0f} |")


if __name__ == "__main__":
    main()
