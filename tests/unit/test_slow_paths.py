"""Issue 31 items 6 and 7: no text makes an entry's work grow faster than its size.

Growth, never a wall-clock limit: each test times one entry on an adversarial text of ``n``
and of ``4n`` characters in the same run (the best of a few repeats, each repeated until the
small one takes a few milliseconds) and bounds the ratio. Linear work gives about 4; the
bound 8 leaves room for noise on a loaded machine, and the paths these tests pin were
quadratic (16) or cubic (64). Memory: the traced peak of passing one huge result through
an entry, against the result's size.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_compact import _facts
from langchain_compact._digest_parse import detect
from langchain_compact._render import key_lines
from langchain_compact.config import CompactionConfig
from langchain_compact.lcel import compact_messages

LINEAR_BOUND = 8.0


def _cpu(fn: Callable[[], Any], repeat: int) -> float:
    """CPU seconds of ``repeat`` calls (CPU time: a loaded machine delays, never bills us)."""
    start = time.process_time()
    for _ in range(repeat):
        fn()
    return time.process_time() - start


def growth(fn: Callable[[str], Any], make: Callable[[int], str], n: int) -> float:
    """``cost(4n) / cost(n)`` of ``fn`` on ``make(size)``, both in this run: the best of
    interleaved tries, each repeated until the small one takes 20 ms."""
    small, large = make(n), make(4 * n)
    fn(small)  # warm (imports, caches of compiled patterns)
    repeat = 1
    while _cpu(lambda: fn(small), repeat) < 0.02 and repeat < 1 << 16:
        repeat *= 2
    best_small = best_large = float("inf")
    gc.disable()
    try:
        for _ in range(5):
            best_small = min(best_small, _cpu(lambda: fn(small), repeat))
            best_large = min(best_large, _cpu(lambda: fn(large), repeat))
    finally:
        gc.enable()
    return best_large / best_small


def _fresh_facts(text: str) -> Any:
    _facts._FACT_MEMO.clear()
    return _facts.fact_lines(text)


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("blank lines", lambda n: "\n" * n),
        ("blank lines between words", lambda n: "head\n" + "\n" * n + "tail"),
        ("blank lines with spaces", lambda n: " \n" * (n // 2)),
    ],
)
def test_fact_scoring_is_linear_in_blank_lines(name: str, make: Callable[[int], str]) -> None:
    # Was cubic: ``_COLON_RE``'s ``^\s*[-*]?\s*`` over the joined lines split each run of
    # blank lines k**2 ways at each of its k line starts (4,000 blank lines: 418 s).
    assert growth(_fresh_facts, make, 250) < LINEAR_BOUND, name
    # The same lines as before on text around the blank lines.
    text = "noise\n\n\n\nstatus: shipped\n\n  - name: v 12\n\norder_id = QX-4821\n:\n\nx: \n\ny"
    assert _fresh_facts(text) == ["status: shipped", "- name: v 12", "order_id = QX-4821"]


def test_key_lines_is_linear_in_the_lines_it_finds() -> None:
    # Was quadratic: each match searched the whole text for each of ten line breaks.
    def many(text: str) -> list[str]:
        return key_lines(text, limit=10**9)

    line = "see QX-12" + " " * 90 + "\n"
    assert growth(many, lambda n: line * (n // len(line)), 100_000) < LINEAR_BOUND
    assert key_lines("a\nsee QX-1 ok\rb QX-2\u2028c https://x.org\n", limit=9) == [
        "see QX-1 ok",
        "b QX-2",
        "c https://x.org",
    ]


def test_table_separator_check_is_linear() -> None:
    # Was quadratic: ``[set]*[-=][set]*`` tried every dash of a line that then failed.
    def rows(n: int) -> str:
        return "\n".join(["|" + "-" * n + "x"] * 3)

    assert growth(detect, rows, 2_000) < LINEAR_BOUND
    table = "| a | b |\n|---|:-:|\n" + "".join(f"| {i} | {2 * i} |\n" for i in range(6))
    rows = [[str(i), str(2 * i)] for i in range(6)]
    assert detect(table) == ("table", ("markdown", ["a", "b"], rows))
    assert detect(table.replace(":-:", "-x-"))[1][2][0] == ["---", "-x-"]  # not a separator


def _history(text: str) -> list[Any]:
    messages: list[Any] = [HumanMessage("Run the steps; report each value.", id="u0")]
    for i in range(12):
        call = {"name": "run_step", "args": {"step": i}, "id": f"c{i}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        body = text if i == 0 else f"RESULT step={i} value={1000 + i}\n" + "log line\n" * 300
        messages.append(ToolMessage(body, tool_call_id=f"c{i}", id=f"t{i}"))
    return messages


def test_compact_messages_is_linear_in_an_old_results_blank_lines() -> None:
    # The report: 1,006 characters of blank lines took 5.9 s, 1,506 took 19.7 s.
    config = CompactionConfig(context_window=8_000)

    def run(text: str) -> Any:
        _facts._FACT_MEMO.clear()
        return compact_messages(_history(text), config=config, archive=None)

    assert growth(run, lambda n: "done\n" + "\n" * n + "RESULT step=0 value=7", 250) < 8


# --------------------------------------------------------------------------- item 7
