"""The token caches keep counts, never the counted texts.

Counting 300 one-megabyte tool results used to leave hundreds of MB resident, because the
text caches and the per-message cache were keyed by the texts themselves. These tests check
retention structurally (reference counts, traced allocations after the texts are dropped),
and that a re-count is still served from the cache (O(new messages) per turn).
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import _estimate as estimate_module
from langchain_compact import tokens as tokens_module
from langchain_compact.microcompact import clear_tool_results
from langchain_compact.tokens import TiktokenCounter, approximate_tokens, context_tokens

MB = 1 << 20


def _big(tag: str, size: int = MB) -> str:
    """A distinct text of ``size`` characters (never interned, never seen before)."""
    head = f"result {tag} {id(object())}: "
    return head + "x" * (size - len(head))


def _tool_message(text: str, n: int) -> ToolMessage:
    return ToolMessage(text, tool_call_id=f"call-{n}", name="read", id=f"tool-{n}")


COUNTERS: dict[str, Callable[[list[BaseMessage]], int]] = {
    "approximate_tokens": approximate_tokens,
    "TiktokenCounter": TiktokenCounter(),
    "context_tokens": lambda messages: context_tokens(messages),
}


@pytest.mark.parametrize("name", list(COUNTERS))
def test_counting_a_message_keeps_no_reference_to_its_text(name: str) -> None:
    counter = COUNTERS[name]
    text = _big(name, 50_000)
    message = _tool_message(text, 1)
    before = sys.getrefcount(text)
    assert counter([message]) > 1_000
    assert counter([message]) > 1_000  # a cache hit must not add a reference either
    assert sys.getrefcount(text) == before, "a token cache holds the message text"


def test_counting_texts_keeps_no_reference_to_them() -> None:
    counter = TiktokenCounter()
    plain, block = _big("plain", 20_000), _big("block", 20_000)
    # List content (no per-message cache) and a message without id go through the text caches.
    messages: list[BaseMessage] = [
        HumanMessage(plain),
        AIMessage([{"type": "text", "text": block}], id="ai-1"),
    ]
    refs = [sys.getrefcount(plain), sys.getrefcount(block)]
    approximate_tokens(messages)
    counter(messages)
    counter.count_text(plain)
    clear_tool_results([*messages, _tool_message(plain, 2)], keep=0)  # the micro path
    assert [sys.getrefcount(plain), sys.getrefcount(block)] == refs


def test_large_results_counted_once_are_freed_when_dropped() -> None:
    """The issue's scenario in small: 40 MB of results counted, dropped, nothing left."""
    counter = TiktokenCounter()
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        history: list[BaseMessage] = [HumanMessage("read the logs")]
        for n in range(40):
            history.append(_tool_message(_big(f"n{n}"), n))
            approximate_tokens(history)  # every turn re-counts the growing history
            context_tokens(history)
        counter(history[:3])  # exact counts too (tiktoken is slow on MBs: three results)
        assert tracemalloc.get_traced_memory()[0] - baseline > 40 * MB  # alive while in use
        del history
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert retained < 4 * MB, f"{retained / MB:.1f} MB still held after dropping 40 MB"


class _CountingPieces:
    """Stands in for the estimate's pass over a text (``_estimate.pieces``, which every text
    an estimate reads goes through) and records the length of every text it reads."""

    def __init__(self, inner: Callable[[str], int]) -> None:
        self.inner = inner
        self.scanned: list[int] = []

    def __call__(self, text: str) -> int:
        self.scanned.append(len(text))
        return self.inner(text)


def test_recounting_a_history_scans_only_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    history: list[BaseMessage] = [HumanMessage("task", id="h0")]
    for n in range(30):
        history.append(_tool_message(_big(f"r{n}", 5_000), n))
    first = approximate_tokens(history)
    spy = _CountingPieces(estimate_module.pieces)
    monkeypatch.setattr(estimate_module, "pieces", spy)
    assert approximate_tokens(history) == first
    assert spy.scanned == [], "re-counting an unchanged history must be served from the cache"
    new = _tool_message(_big("new", 7_000), 99)
    assert approximate_tokens([*history, new]) == first + approximate_tokens([new]) - 3
    assert 7_000 in spy.scanned
    assert all(n < 5_000 or n == 7_000 for n in spy.scanned), "an old text was scanned again"


def test_text_caches_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens_module, "_APPROX_TEXT_LIMIT", 8)
    counter = TiktokenCounter(max_cache_entries=8)
    # Long enough to be cached (shorter texts are counted again, never stored).
    texts = [f"text number {n} " + "word " * tokens_module.UNCACHED_BELOW for n in range(50)]
    for text in texts:
        assert tokens_module.approx_text(text) > 0
        counter.count_text(text)
    assert len(tokens_module._APPROX_TEXT_CACHE) <= 8
    assert len(counter._cache) <= 8
    # Counts stay exact after evictions.
    fresh = TiktokenCounter()
    assert [counter.count_text(t) for t in texts] == [fresh.count_text(t) for t in texts]
    tokens_module._APPROX_TEXT_CACHE.clear()
    short = TiktokenCounter()
    assert tokens_module.approx_text("a short id_123") == tokens_module._estimate("a short id_123")
    assert short.count_text("a short id_123") > 0
    assert not tokens_module._APPROX_TEXT_CACHE and not short._cache


def test_memory_bench_runs_and_reports_rss(tmp_path: Path) -> None:
    """Smoke test of ``python -m bench.memory`` (numbers are quoted from real runs, not here)."""
    from bench import memory

    out = tmp_path / "memory.json"
    memory.main(["--turns", "12", "--result-kb", "50", "--every", "5", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["turns"] == 12 and [s["turn"] for s in result["samples"]] == [1, 5, 10, 12]
    assert result["rss_end_mb"] > 0 and result["token_cache_entries"]["messages"] > 0


def test_count_caches_drop_what_no_history_holds_and_keep_what_is_read() -> None:
    """Two generations: a read entry moves back to the young one, an unread one goes after
    two rotations, so a long run's cache holds at most two generations."""
    cache = tokens_module.Generations()
    for n in range(10):
        tokens_module._make_room(cache, 4)
        cache[("dead", n)] = n
        cache.get(("live", 0)) or cache.__setitem__(("live", 0), 7)  # read on every turn
    assert cache.get(("live", 0)) == 7 and ("live", 0) in cache
    assert ("dead", 0) not in cache and cache.get(("dead", 0)) is None
    assert len(cache) + len(cache.old) <= 8
    cache.clear()
    assert not cache and not cache.old


def test_count_cache_generations_grow_with_the_longest_history() -> None:
    assert tokens_module.generation_size(10) == tokens_module.GENERATION_LEAST
    assert tokens_module.generation_size(50_000) == 100_000
    assert tokens_module.generation_size(10**7) == 200_000
    counter = TiktokenCounter(max_cache_entries=50_000)
    counter._hold(5_000)
    assert counter._generation == 10_000
    counter._hold(10)
    assert counter._generation == 10_000  # never shrinks
