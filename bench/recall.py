"""Benchmark: archive writes and recall lookups over a 10,000-message archive (B8).

Builds one thread's archive from the shared trajectories (repeated with fresh ids until
10,000 messages), written in chunks as compaction would, into a :class:`JsonlArchive` in a
temp dir and a :class:`StoreArchive` over ``InMemoryStore``. Times 50 recalls by
``tool_call_id`` and 50 by keywords (median, p95), plus write cost and bytes per write.

Run ``python -m bench.recall`` (prints JSON) or call :func:`run` (returns a flat dict).
The trajectories come from ``LC_TRAJECTORY_DIR`` or ``../shared/data/trajectories``.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.store.memory import InMemoryStore

from bench.workloads import TRAJECTORY_DIR
from langchain_compact import _archive_files, _archive_records
from langchain_compact.archive import (
    JsonlArchive,
    StoreArchive,
    TranscriptArchive,
    make_recall_tool,
)

N_MESSAGES = 10_000
CHUNK = 50  # messages per archive write (one compaction span)
LOOKUPS = 50
THREAD = "bench"
_WORD = re.compile(r"[A-Za-z_]{6,}")


def _load(path: Path, rep: int) -> list[BaseMessage]:
    """One trajectory as messages; ids and tool-call ids made unique per repetition."""
    out: list[dict[str, Any]] = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        raw = json.loads(line)
        msg: dict[str, Any] = {
            "role": raw["role"],
            "content": raw.get("content") or "",
            "id": f"{path.stem}-r{rep}-{i}",
        }
        if raw.get("tool_calls"):
            msg["tool_calls"] = [
                {
                    "id": f"{path.stem}-{c['id']}-r{rep}",
                    "name": c["function"]["name"],
                    "args": json.loads(c["function"]["arguments"] or "{}"),
                }
                for c in raw["tool_calls"]
            ]
        if raw.get("tool_call_id"):
            msg["tool_call_id"] = f"{path.stem}-{raw['tool_call_id']}-r{rep}"
        out.append(msg)
    return convert_to_messages(out)


def build_messages(n: int = N_MESSAGES) -> list[BaseMessage]:
    """The shared trajectories, repeated with fresh ids, cut to ``n`` messages."""
    paths = sorted(TRAJECTORY_DIR.glob("*.jsonl"))
    if not paths:
        raise FileNotFoundError(f"no trajectories in {TRAJECTORY_DIR}; set LC_TRAJECTORY_DIR")
    messages: list[BaseMessage] = []
    rep = 0
    while len(messages) < n:
        for path in paths:
            messages.extend(_load(path, rep))
        rep += 1
    return messages[:n]


def _stats(prefix: str, samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {
        f"{prefix}.median_ms": round(statistics.median(ms), 3),
        f"{prefix}.p95_ms": round(p95, 3),
    }


def _time(calls: list[Callable[[], Any]]) -> list[float]:
    samples = []
    for call in calls:
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def _bench_archive(
    name: str,
    archive: TranscriptArchive,
    messages: list[BaseMessage],
    record_bytes: Callable[[str], int],
    reset_cache: Callable[[], None],
) -> dict[str, float]:
    chunks = [messages[i : i + CHUNK] for i in range(0, len(messages), CHUNK)]
    refs: list[str] = []
    writes: list[float] = []
    for chunk in chunks:
        start = time.perf_counter()
        refs.append(archive.write(chunk, thread_id=THREAD, reason="bench"))
        writes.append(time.perf_counter() - start)
    again = _time([lambda: archive.write(chunks[0], thread_id=THREAD, reason="bench")])
    sizes = [record_bytes(ref) for ref in refs]

    rng = random.Random(0)
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    targets = rng.sample(tools, LOOKUPS)
    queries = []
    for m in rng.sample([m for m in messages if len(_WORD.findall(m.text)) >= 2], LOOKUPS):
        words = _WORD.findall(m.text)
        queries.append(" ".join(rng.sample(words, 2)))

    reset_cache()
    cold = _time([lambda: archive.search(thread_id=THREAD, tool_call_id=targets[0].tool_call_id)])
    for m in targets:  # correctness, not timing: recall returns the original text
        [hit] = archive.search(thread_id=THREAD, tool_call_id=m.tool_call_id)
        assert hit.message.content == m.content
    ids = [m.tool_call_id for m in targets]
    by_id = _time([partial(archive.search, thread_id=THREAD, tool_call_id=i) for i in ids])
    by_kw = _time([partial(archive.search, thread_id=THREAD, query=q, limit=5) for q in queries])
    tool = make_recall_tool(archive)
    config: RunnableConfig = {"configurable": {"thread_id": THREAD}}
    via_tool = _time([partial(tool.invoke, {"tool_call_id": i}, config) for i in ids])
    return {
        f"{name}.writes": len(refs),
        **_stats(f"{name}.write", writes),
        f"{name}.idempotent_rewrite_ms": round(again[0] * 1000, 3),
        f"{name}.bytes_per_write.mean": round(statistics.mean(sizes)),
        f"{name}.bytes_total": sum(sizes),
        f"{name}.recall_tool_call_id.cold_ms": round(cold[0] * 1000, 3),
        **_stats(f"{name}.recall_tool_call_id", by_id),
        **_stats(f"{name}.recall_keyword", by_kw),
        **_stats(f"{name}.recall_tool_invoke", via_tool),
    }


def run() -> dict[str, float]:
    """Run the benchmark and return its numbers (flat ``{"<archive>.<metric>": value}``)."""
    messages = build_messages()
    results: dict[str, float] = {
        "messages": len(messages),
        "tool_messages": sum(isinstance(m, ToolMessage) for m in messages),
        "tool_calls": sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage)),
        "chunk_size": CHUNK,
        "lookups": LOOKUPS,
    }
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = JsonlArchive(tmp)
        folder = Path(tmp) / _archive_records.thread_key(THREAD)
        results |= _bench_archive(
            "jsonl",
            jsonl,
            messages,
            lambda ref: (folder / f"{ref}.jsonl").stat().st_size,
            _archive_files.read_jsonl.cache_clear,
        )
    store = InMemoryStore()
    archive = StoreArchive(store)
    namespace = (*archive.namespace, _archive_records.thread_key(THREAD))

    def store_bytes(ref: str) -> int:
        item = store.get(namespace, _archive_records.parse_ref(ref))
        return len(_archive_records.dumps(item.value if item else {}).encode())

    results |= _bench_archive("store_inmemory", archive, messages, store_bytes, lambda: None)
    return results


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
