"""Structured digests of large tool results: per structure, the hard bound, fallbacks, blobs,
linear work, and the LLM digest with its fallback."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from _data import all_trajectories, load_trajectory
from _scenarios import ScriptedChatModel
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_compact import _digest_parse, _digest_sections, _render
from langchain_compact import digest as digest_module
from langchain_compact.digest import detect_structure, llm_digest, structured_digest
from langchain_compact.errors import ConfigError
from langchain_compact.summarizers import SUMMARIZER_TAG

BLOB_RE = re.compile(r"[A-Za-z0-9+/]{64,}")


def orders(n: int = 2_000, *, wide: bool = False) -> list[dict[str, Any]]:
    """``n`` orders; the largest amount is in the LAST record."""
    rows = [
        {
            "amount": round(10 + (i * 37) % 900 + 0.25, 2),
            "id": f"ORD-{i}",
            "status": ("paid", "refunded", "pending")[i % 3],
            "customer": {"tier": ("gold", "basic")[i % 2], "visits": i % 17},
            **({"note": "lorem ipsum " * 100} if wide else {}),
        }
        for i in range(1, n + 1)
    ]
    rows[-1]["amount"] = 99_999.5
    return rows


# --- JSON --------------------------------------------------------------------------------


def test_json_array_digest_shows_the_max_held_by_the_last_record() -> None:
    text = json.dumps(orders(wide=True))
    out = structured_digest(text, max_chars=2_000)
    assert len(out) <= 2_000
    assert out.startswith("[digest of a JSON array: 2,000 records;")
    assert "max 99,999.5 [#2,000]" in out
    assert '"id":"ORD-2000"' in out and '"id":"ORD-1"' in out  # first and last records
    assert '3 distinct: "refunded" 667, "pending" 667, "paid" 666' in out
    assert "- customer.tier: string in 2,000/2,000; 2 distinct" in out
    assert "- note: string in 2,000/2,000; up to 1,200 chars\n" in out
    assert "min 0 [#17], max 16 [#16]" in out  # customer.visits, one level down
    # A head + tail cut of the same size has the last record's tail, not its amount.
    cut = text[:1_000] + text[-1_000:]
    assert "99999.5" not in cut


def test_json_object_digest_descends_into_its_largest_array() -> None:
    text = json.dumps({"page": 3, "items": orders(600), "total": 600, "next": None})
    out = structured_digest(text, max_chars=1_500, header_note="full text archived")
    assert out.startswith('[digest of a JSON object: 600 records under "items";')
    assert out.splitlines()[0].endswith("; full text archived]")
    assert "other keys: page=3, total=600, next=null" in out
    assert "max 99,999.5 [#600]" in out


def test_json_lines_and_keyed_objects() -> None:
    rows = orders(300)
    jsonl = "\n".join(json.dumps(r) for r in rows) + "\nnot json\n"
    out = structured_digest(jsonl, max_chars=1_200)
    assert out.startswith("[digest of JSON Lines: 300 records (1 lines not JSON);")
    assert "max 99,999.5 [#300]" in out
    keyed = json.dumps({r["id"]: r for r in rows})
    out = structured_digest(keyed, max_chars=1_200)
    assert out.startswith("[digest of a JSON object: 300 entries keyed by name;")
    assert "keys: ORD-1 ... ORD-300" in out


def test_json_array_of_arrays_is_counted_by_inner_records() -> None:
    pairs = [[{"flight": f"HAT{i}", "price": i}, {"flight": f"HAT{i + 1}", "price": 2 * i}]
             for i in range(200)]  # fmt: skip
    out = structured_digest(json.dumps(pairs), max_chars=1_000)
    assert "200 records (arrays; 400 inner records)" in out
    assert "- price: number in 400/400; min 0 [#1], max 398 [#400]" in out


# --- tables and logs ---------------------------------------------------------------------


def test_csv_digest_has_rows_header_column_stats_and_last_row() -> None:
    lines = ["id,region,units,price"] + [
        f"{i},{('north', 'south')[i % 2]},{i % 50},{i * 1.5}" for i in range(1, 3_001)
    ]
    out = structured_digest("\n".join(lines), max_chars=1_000)
    assert out.startswith("[digest of a CSV table: 3,000 rows x 4 columns;")
    assert "header: id | region | units | price" in out
    assert "- price: number in 3,000/3,000; min 1.5 [#1], max 4,500 [#3,000], sum 6,752,250" in out
    assert '2 distinct: "south" 1,500, "north" 1,500' in out
    assert "last row (#3,000): 3000 | north | 0 | 4500.0" in out


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("a\tb\n" + "\n".join(f"{i}\t{i * 2}" for i in range(2_000)), "TSV"),
        (
            "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i * 2} |" for i in range(2_000)),
            "markdown",
        ),
        (" a | b\n---+---\n" + "\n".join(f" {i} | {i * 2}" for i in range(2_000)), "pipe"),
    ],
)
def test_tsv_markdown_and_pipe_tables(text: str, kind: str) -> None:
    out = structured_digest(text, max_chars=800)
    assert out.startswith(f"[digest of a {kind} table: 2,000 rows x 2 columns;")
    assert "- b: number in 2,000/2,000; min 0 [#1], max 3,998 [#2,000]" in out


def test_log_digest_keeps_the_errors_at_the_end() -> None:
    lines = [
        f"2024-05-01 10:{i // 60 % 60:02d}:{i % 60:02d} INFO GET /api/{i} 200" for i in range(4_000)
    ]
    lines += ["2024-05-01 11:07:00 WARN disk 91% full"] * 3
    lines += [f"2024-05-01 11:08:{s:02d} ERROR payment PAY-{s} timed out" for s in range(5)]
    lines += ["2024-05-01 11:09:00 ERROR database connection lost (pool=main)"]
    out = structured_digest("\n".join(lines), max_chars=1_200)
    assert out.startswith("[digest of a log: 4,009 lines;")
    assert "levels: INFO 4,000, ERROR 6, WARN 3" in out
    assert "(timestamps 2024-05-01 10:00:00 .. 2024-05-01 11:09:00)" in out
    # Deduplicated with counts: the most frequent first, then the newest.
    errors = [ln for ln in out.splitlines() if "ERROR" in ln and "x, last at line" in ln]
    assert errors[0].startswith("5x, last at line 4,008: ") and "PAY-4 timed out" in errors[0]
    assert errors[1].startswith("1x, last at line 4,009: ") and "connection lost" in errors[1]
    assert "3x, last at line 4,003: 2024-05-01 11:07:00 WARN disk 91% full" in out
    assert out.endswith(
        "line 4,009: 2024-05-01 11:09:00 ERROR database connection lost (pool=main)"
    )


# --- plain text and code -----------------------------------------------------------------


def test_plain_text_keeps_head_tail_and_key_lines_of_the_middle() -> None:
    filler = [f"ordinary sentence number {i} says nothing in particular." for i in range(400)]
    filler[150] = "The incident is tracked as INC-4821 at https://status.example.com/i/4821"
    filler[250] = "Traceback: ValueError raised in the parser"
    filler[300] = "total: 1234 widgets"
    filler[350] = "wrote the report to /srv/reports/q3/summary.csv"
    text = "START of the report\n" + "\n".join(filler) + "\nEND of the report"
    out = structured_digest(text, max_chars=1_500)
    assert out.startswith("[digest of text: 402 lines;") and len(out) <= 1_500
    assert "START of the report" in out and out.endswith("END of the report")
    for line in (filler[150], filler[250], filler[300], filler[350]):
        assert line in out


def test_code_digest_lists_definitions_of_the_middle() -> None:
    body = [f"    x{i} = compute({i})" for i in range(600)]
    for at, name in ((200, "alpha"), (300, "beta"), (400, "gamma")):
        body[at] = f"def {name}(value):"
    text = "\n".join(f"{i + 1:6}\t{line}" for i, line in enumerate(body))
    out = structured_digest(text, max_chars=1_200)
    assert out.startswith("[digest of code: 600 lines;")
    for name in ("alpha", "beta", "gamma"):
        assert f"def {name}(value):" in out


@pytest.mark.full_transcripts
def test_transcripts_large_results_are_digested_within_the_bound() -> None:
    """Every tool result or observation over 5,000 characters in the shared transcripts."""
    kinds: dict[str, int] = {}
    for path in all_trajectories():
        messages = load_trajectory(path)
        for msg in messages[2:]:  # after the system prompt and the task
            if isinstance(msg, (ToolMessage, HumanMessage)) and len(str(msg.content)) > 5_000:
                text = str(msg.content)
                out = structured_digest(text, max_chars=2_000, header_note="archived")
                assert len(out) <= 2_000 and out.startswith("[digest of ")
                assert out.splitlines()[0].endswith(f"{len(text):,} chars; archived]")
                kinds[detect_structure(text)] = kinds.get(detect_structure(text), 0) + 1
    assert kinds == {"code": 10, "json": 1, "text": 10}, kinds


# --- robustness --------------------------------------------------------------------------


def test_malformed_json_falls_back_to_the_next_detector() -> None:
    broken = json.dumps(orders(300))[:-40]  # cut mid-record, as a truncated response is
    assert detect_structure(broken) == "text"
    out = structured_digest(broken, max_chars=1_000)
    assert out.startswith("[digest of text: 1 lines;") and len(out) <= 1_000
    log = "\n".join(["{broken json"] + [f"12:00:{i % 60:02d} ERROR e{i}" for i in range(500)])
    assert detect_structure(log) == "log"
    csv = "\n".join(["[a,b", *[f"{i},{i}" for i in range(500)]])
    assert detect_structure(csv) == "table"  # "[a" and "b" make a header row
    assert detect_structure(csv.replace("[a,b", "[1,2")) == "text"  # a CSV needs a header


def test_base64_blobs_are_never_pasted() -> None:
    blob = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB" * 300
    cases = [
        json.dumps([{"id": i, "image": blob} for i in range(20)]),
        "\n".join([f"10:00:{i:02d} INFO upload {blob}" for i in range(30)]),
        f"head\n{blob}\nmiddle line\n{blob}\ntail",
        "a,b\n" + "\n".join(f"{i},{blob}" for i in range(10)),
    ]
    for text in cases:
        out = structured_digest(text, max_chars=2_000)
        assert not BLOB_RE.search(out), out
        assert "<blob of 9,600 chars>" in out


def test_paths_hashes_and_separators_are_not_blobs() -> None:
    keep = [
        "/__home__user__LLM_CTF_Database__2017__CSAW-Finals__forensics__Flash_challenge_dir",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "-" * 120,
    ]
    for text in keep:
        assert _digest_parse.scrub(text) == text


def test_text_that_fits_is_returned_unchanged_and_bad_bounds_are_refused() -> None:
    assert structured_digest("short", max_chars=10) == "short"
    assert structured_digest("x" * 50, max_chars=0) == ""
    with pytest.raises(ConfigError, match="max_chars=-1 must be an integer >= 0"):
        structured_digest("x", max_chars=-1)
    with pytest.raises(TypeError, match="takes a str, got list"):
        structured_digest(["x"], max_chars=5)  # type: ignore[arg-type]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=60,
)
LOG_LINES = st.lists(
    st.tuples(
        st.sampled_from(["ERROR", "WARN", "INFO", "DEBUG", "[error]", "x"]), st.text(max_size=40)
    ),
    min_size=1,
    max_size=80,
).map(
    lambda rows: "\n".join(
        f"2024-01-01 00:00:0{i % 10} {lv} {msg}" for i, (lv, msg) in enumerate(rows)
    )
)
TABLES = st.lists(
    st.lists(st.text(max_size=12), min_size=2, max_size=4), min_size=1, max_size=60
).map(lambda rows: "\n".join(",".join(r) for r in [["a", "b", "c", "d"][: len(rows[0])], *rows]))
SAMPLE_LINES = ["ERROR x", "def f(x):", "ID-12 https://a.b/c", "total: 5", "| a | b |", "a,b"]
TEXT_LINES = st.lists(st.text(max_size=120) | st.sampled_from(SAMPLE_LINES), max_size=150).map(
    "\n".join
)
ANY_TEXT = st.text(max_size=3_000) | TEXT_LINES | JSON_VALUES.map(json.dumps) | LOG_LINES | TABLES
BOUNDS = st.integers(0, 600) | st.integers(0, 2_500)


@settings(max_examples=300, deadline=None)
@given(text=ANY_TEXT, max_chars=BOUNDS, note=st.text(max_size=30))
def test_never_raises_and_never_exceeds_max_chars(text: str, max_chars: int, note: str) -> None:
    out = structured_digest(text, max_chars=max_chars, header_note=note)
    assert len(out) <= max_chars
    assert out == text or len(text) > max_chars


@settings(max_examples=100, deadline=None)
@given(text=ANY_TEXT, max_chars=st.integers(50, 800))
def test_detection_and_digest_are_idempotent(text: str, max_chars: int) -> None:
    kind = detect_structure(text)
    assert detect_structure(text) == kind and detect_structure(text + "\n") == kind
    once = structured_digest(text, max_chars=max_chars)
    assert structured_digest(once, max_chars=max_chars) == once  # a digest already fits


def _steps(func: Callable[[], object]) -> int:
    """Python lines executed in the digest modules while ``func`` runs (deterministic)."""
    files = {m.__file__ for m in (digest_module, _digest_parse, _digest_sections, _render)}
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename not in files:
            return None
        if event == "line":
            count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        func()
    finally:
        sys.settrace(old)
    return count


MAKERS: dict[str, Callable[[int], str]] = {
    "json": lambda n: json.dumps(orders(n)),
    "jsonl": lambda n: "\n".join(json.dumps(r) for r in orders(n)),
    "table": lambda n: "a,b,c\n" + "\n".join(f"{i},x{i % 7},{i * 3}" for i in range(n)),
    "log": lambda n: "\n".join(
        f"10:00:{i % 60:02d} {('INFO', 'ERROR')[i % 5 == 0]} job {i}" for i in range(n)
    ),
    "code": lambda n: "\n".join(f"def f{i}(x):\n    return x + {i}  # error" for i in range(n)),
    "text": lambda n: "\n".join(f"line {i}: ISSUE-{i} see https://x.io/{i}" for i in range(n)),
}


@pytest.mark.parametrize("kind", list(MAKERS))
def test_work_grows_linearly_with_the_input(kind: str) -> None:
    small, large = MAKERS[kind](500), MAKERS[kind](2_000)
    assert detect_structure(small) == detect_structure(large) == kind
    steps_small = _steps(lambda: structured_digest(small, max_chars=2_000))
    steps_large = _steps(lambda: structured_digest(large, max_chars=2_000))
    # 4x the input: about 4x the work (a quadratic loop would make it about 16x).
    assert steps_large <= 4.5 * steps_small, (steps_small, steps_large)


# --- LLM digest --------------------------------------------------------------------------


class _Tags(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tags: list[list[str]] = []

    def on_chat_model_start(self, *args: Any, tags: list[str] | None = None, **kw: Any) -> None:
        self.tags.append(list(tags or []))


def test_llm_digest_answers_under_the_structured_header_at_temperature_zero() -> None:
    handler = _Tags()
    model = ScriptedChatModel(replies=[AIMessage("2,000 orders; max 99,999.5 (ORD-2000)")])
    model.callbacks = [handler]
    text = json.dumps(orders())
    out = llm_digest(model, max_tokens=300, max_input_chars=4_000)(text)
    assert out == (
        f"[digest of a JSON array: 2,000 records; {len(text):,} chars]\n"
        "2,000 orders; max 99,999.5 (ORD-2000)"
    )
    assert model.log.temperatures == [0] and model.log.max_tokens == [300]
    assert any("nostream" in t and SUMMARIZER_TAG in t for t in handler.tags)
    request = model.log.inputs[0][-1].content
    assert len(request) < 4_000 + 2 * 1_200 + 400  # head + tail of the raw text, and the digest
    assert "max 99,999.5 [#2,000]" in request  # the whole text's structure reaches the model


@pytest.mark.parametrize(
    "model",
    [
        FakeListChatModel(responses=[""]),  # empty answer
        GenericFakeChatModel(messages=iter([])),  # the model fails
        GenericFakeChatModel(
            messages=iter([AIMessage("", tool_calls=[{"name": "cat", "args": {}, "id": "c1"}])])
        ),  # a tool call is refused
        FakeListChatModel(responses=["word " * 5_000]),  # over the bound
    ],
    ids=["empty", "error", "tool-call", "over-bound"],
)
def test_llm_digest_falls_back_to_the_structured_digest(model: Any) -> None:
    text = "\n".join(f"10:00:{i % 60:02d} ERROR failure {i}" for i in range(400))
    out = llm_digest(model, max_tokens=200)(text)
    assert out == structured_digest(text, max_chars=800)


def test_llm_digest_skips_the_model_for_short_text_and_checks_its_options() -> None:
    model = ScriptedChatModel(replies=[AIMessage("unused")])
    assert llm_digest(model, max_tokens=100)("short result") == "short result"
    assert model.calls == 0
    with pytest.raises(ConfigError, match="max_tokens >= 1"):
        llm_digest(model, max_tokens=0)
    with pytest.raises(TypeError, match="needs a langchain chat model"):
        llm_digest("gpt-4o", max_tokens=10)  # type: ignore[arg-type]
