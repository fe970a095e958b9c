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
import hashlib
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
import tiktoken
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_compact import _facts
from langchain_compact._digest_parse import detect
from langchain_compact._fingerprint import message_key
from langchain_compact._render import key_lines, salient_items
from langchain_compact.archive import JsonlArchive
from langchain_compact.config import CompactionConfig
from langchain_compact.digest import DIGEST_READ_CHARS, structured_digest
from langchain_compact.lcel import compact_messages
from langchain_compact.tokens import ENCODED_WHOLE_CHARS, TiktokenCounter

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


@pytest.mark.parametrize("unit", ["中文-", "ab-"])
def test_salient_items_is_linear_in_hyphenated_runs(unit: str) -> None:
    # Was quadratic: the file-name pattern read the whole run from each of its word starts.
    assert growth(salient_items, lambda n: (unit * n)[:n], 4_000) < LINEAR_BOUND
    assert salient_items("see a-b-c.py, QX-12 and 1234") == ["a-b-c.py", "QX-12", "1234"]


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


def _peak(fn: Callable[[], Any]) -> int:
    """Bytes of the traced peak of ``fn()`` beyond what was allocated before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _huge_text(chars: int, seed: str = "") -> str:
    line = f"2024-01-01 12:00:00 INFO {seed}step done value=12345 path=/a/b/c\n"
    return (line * (chars // len(line) + 1))[:chars]


HUGE = 8_000_000


def test_archive_write_copies_a_huge_result_a_few_times(tmp_path: Any) -> None:
    # Was five copies (the record joined, then a line break appended, then encoded; the
    # hash over another joined and encoded copy); now its JSON line and bounded pieces.
    text = _huge_text(HUGE, "w")
    message = ToolMessage(text, tool_call_id="c1", id="t1")
    archive = JsonlArchive(tmp_path)
    refs: list[str] = []
    peak = _peak(lambda: refs.append(archive.write([message], thread_id="t", reason="r")))
    assert peak < 3.5 * HUGE, f"{peak / HUGE:.1f} copies"
    assert archive.read(refs[0], thread_id="t")[0].content == text  # nothing lost
    assert archive.write([message], thread_id="t", reason="again") == refs[0]  # same digest


def test_message_key_of_a_huge_result_is_hashed_in_bounded_slices() -> None:
    text = _huge_text(HUGE, "k")
    message = ToolMessage(text, tool_call_id="c1")
    keys: list[str] = []
    assert _peak(lambda: keys.append(message_key(message))) < 0.5 * HUGE
    # The key is the one a single encoding gives (slices change nothing), and remembered.
    h = hashlib.sha256()
    for part in ("tool", text, "", "{}", "c1", "success", "null"):
        raw = part.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)
    assert keys[0] == h.hexdigest()[:16]
    again = message.model_copy(update={"status": "error"})
    assert message_key(again) != keys[0]
    assert _peak(lambda: message_key(message)) < 0.01 * HUGE  # no second pass


def test_counting_a_huge_result_holds_a_bounded_token_list() -> None:
    # Was one token list of the whole text (an int object per token: ten copies' worth).
    counter = TiktokenCounter()
    counter.count_text("load the encoding " * 10)
    size = HUGE // 2
    text = _huge_text(size, "c")
    counts: list[int] = []
    # At most one slice's token list (~14 MB here) at once, whatever the size.
    assert _peak(lambda: counts.append(counter.count_text(text))) < 20_000_000
    whole = len(tiktoken.get_encoding("o200k_base").encode(text))
    assert abs(counts[0] - whole) <= size // ENCODED_WHOLE_CHARS + 1  # a token a slice
    assert _peak(lambda: counter.count_text(text)) < 0.01 * size  # counted once (cached)


def test_digest_of_a_huge_result_reads_a_bounded_view() -> None:
    # Was every detector over the whole text (split into lines several times): seconds and
    # many copies per 10 MB; now a bounded view whatever the size, and the header says so.
    text = _huge_text(4 * HUGE, "d") + "RESULT final value=99\n"
    out: list[str] = []
    assert _peak(lambda: out.append(structured_digest(text, max_chars=2_000))) < len(text) / 4
    assert f"{len(text):,} chars" in out[0].splitlines()[0]
    assert "sampled" in out[0].splitlines()[0]
    assert "RESULT final value=99" in out[0]
    # Over the bound, the work no longer grows with the size.
    small, large = _huge_text(DIGEST_READ_CHARS + 1, "d"), _huge_text(4 * DIGEST_READ_CHARS, "d")

    def digest(text: str) -> str:
        return structured_digest(text, max_chars=2_000)

    assert growth(digest, lambda n: small if n < len(large) else large, len(small)) < 2


# The bench forks a child per case (a pattern stuck in C ignores signals): Python 3.12 warns
# about fork in a process with threads (a precount thread may be alive); the child only
# computes and sends numbers.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_the_slow_paths_bench_runs_and_flags_nothing(tmp_path: Any) -> None:
    from bench.slow_paths import main

    out = tmp_path / "slow_paths.json"
    result = main(["--sizes", "500,1000", "--only", "facts.score", "--huge", "", "--out", str(out)])
    assert out.exists() and len(result["known"]) == 5
    assert not result["flagged"], result["flagged"]
    assert all(t is not None for row in result["known"] for t in row["seconds"])
