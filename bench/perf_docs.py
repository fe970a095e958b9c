"""The speed-and-memory figures of ``docs/benchmarks.md``, generated from the results files.

``python -m bench.perf`` (``bench/results/perf.json``) and ``python -m bench.memory``
(``bench/results/memory.json``) rewrite the section between the ``perf:start`` and
``perf:end`` markers of ``docs/benchmarks.md`` when they write their default results file;
``python -m bench.perf_docs`` rewrites it from the files as they are.
``tests/test_docs.py`` fails when the section differs from what the files give.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks.md"
PERF = ROOT / "bench" / "results" / "perf.json"
MEMORY = ROOT / "bench" / "results" / "memory.json"
START = (
    "<!-- perf:start (generated from bench/results/perf.json and memory.json: "
    "bench/perf_docs.py) -->"
)
END = "<!-- perf:end -->"
_SECTION_RE = re.compile(re.escape(START) + r"\n(.*?)" + re.escape(END), re.S)


def _n(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def section(perf: dict[str, Any], memory: dict[str, Any]) -> str:
    """The section's markdown, from the two results files' contents."""
    today, base = perf["today"], perf.get("baseline", {})
    turns, cpu = today["turns"]["ordinary_ms"], today["turns"].get("ordinary_cpu_ms", {})
    old = base.get("turns", {}).get("ordinary_ms", {})
    merge = today.get("merge", {})
    dec = today["decision"]["median_ms"]
    one = today["one_shot"]
    lines = [
        "- **Speed** (`python -m bench.perf`, writes `bench/results/perf.json`, beside the "
        f"baseline measured on commit {base.get('meta', {}).get('commit', 'n/a')}, "
        "`bench/results/perf_baseline.json`; run on commit "
        f"{today['meta']['commit']}, {today['seconds']} s). Ordinary turns of a graph run "
        f"whose tool returns a distinct {today['turns']['result_chars']:,}-character log on "
        f"every turn ({today['turns']['turns']} turns, no usage reports): p50 "
        f"{_n(turns['p50'], 2)} ms, p99 {_n(turns['p99'], 2)} ms wall (baseline "
        f"{_n(old.get('p50'), 2)} and {_n(old.get('p99'), 2)} ms); CPU time on the turn's "
        f"thread p50 {_n(cpu.get('p50'), 2)} ms, p99 {_n(cpu.get('p99'), 2)} ms (the wall "
        "time adds what a loaded machine makes a turn wait).",
        "- **Merges** (same command, `merge` in the file; an LLM summarizer that sleeps "
        f"{merge.get('summarizer_latency_ms', 'n/a')} ms per call, preparing on, a "
        f"{merge.get('window', 0):,}-token window, {merge.get('runs', 1)} runs of "
        f"{merge.get('turns', 0)} turns): the pause at the trigger of the "
        f"{merge.get('merges', 0)} compactions with a prepared summary that merged earlier "
        f"summaries, median {_n(merge.get('merge_pause_ms', {}).get('median'))} ms, beside "
        f"{_n(merge.get('compaction_pause_ms', {}).get('median'))} ms for the "
        f"{merge.get('compactions', 0) - merge.get('merges', 0) - merge.get('unprepared', 0)}"
        f" that did not ({_n(merge.get('merge_over_compaction'), 2)}x; in CPU time on the "
        f"turn's thread {_n(merge.get('merge_pause_cpu_ms', {}).get('median'), 2)} and "
        f"{_n(merge.get('compaction_pause_cpu_ms', {}).get('median'), 2)} ms, "
        f"{_n(merge.get('merge_over_compaction_cpu'), 2)}x)"
        + (
            f". The {merge['unprepared']} that found no prepared summary called the model: "
            f"{_n(merge.get('unprepared_pause_ms_median'))} ms."
            if merge.get("unprepared")
            else "; every compaction found its summary prepared."
        ),
        "- **Decision and one-shot cost** (same command): the per-turn decision with every "
        f"message counted locally, {_n(dec.get('150'), 2)} / {_n(dec.get('2000'), 2)} / "
        f"{_n(dec.get('10000'), 2)} ms at 150 / 2,000 / 10,000 messages; `compact_history` "
        + " and ".join(
            f"{_n(v['seconds'], 2)} s ({_n(v['peak_mib'])} MiB) on {int(n):,} messages"
            for n, v in one["compact_history"].items()
        )
        + "; `compact_messages` "
        + " and ".join(
            f"{_n(v['seconds'], 2)} s ({_n(v['peak_mib'])} MiB) on {int(n):,} messages"
            for n, v in one["compact_messages"].items()
        )
        + f"; `import langchain_compact` {_n(today['import']['seconds'] * 1e3, 0)} ms.",
        "- **Memory over a long run** (`python -m bench.memory`, writes "
        f"`bench/results/memory.json`): {memory['turns']:,} turns of "
        f"`create_compacting_agent` with {memory['result_kb']} KB tool results: RSS "
        f"{_n(memory.get('rss_first_turn_mb'))} MB after the first turn (the tokenizer is "
        f"loaded by then), peak {_n(memory.get('rss_max_mb'))} MB "
        f"({_n(memory.get('peak_over_first_turn'), 2)}x), growth over the last "
        f"{memory['turns'] - memory['turns'] // 2:,} turns "
        f"{_n(memory.get('growth_last_half_mb'))} MB.",
    ]
    return "\n".join(lines)


def read_results() -> tuple[dict[str, Any], dict[str, Any]]:
    perf = json.loads(PERF.read_text(encoding="utf-8"))
    memory = json.loads(MEMORY.read_text(encoding="utf-8"))
    return perf, memory


def current(text: str) -> str | None:
    """The section as ``text`` (the page) holds it, or ``None`` without markers."""
    found = _SECTION_RE.search(text)
    return found.group(1).rstrip("\n") if found else None


def write(docs: Path = DOCS) -> None:
    """Rewrite the section of ``docs`` from the results files."""
    text = docs.read_text(encoding="utf-8")
    body = section(*read_results())
    new = _SECTION_RE.sub(lambda _: f"{START}\n{body}\n{END}", text)
    if new != text:
        docs.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    write()
