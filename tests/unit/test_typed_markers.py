"""Issue 32: a reduced message's accounting and a boundary's record are typed values
(``markers.Saving``, ``markers.Boundary``), read from the flat marker keys every checkpoint
holds, and no other module reads those keys by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from langchain_compact.markers import (
    META_KEY,
    Boundary,
    Saving,
    credited_savings,
    get_meta,
    with_meta,
)

ROOT = Path(__file__).resolve().parents[2] / "langchain_compact"

# (before: the marker's keys, then: saved, anchor, chars, precise) -> the keys after
SAVINGS = [
    # a first reduction
    ({}, (120, "r1", 2_000, 110), (2_000, 120, 120, "r1", 110)),
    # again after the same report: the savings since it add up, precise ones too
    (
        {
            "original_chars": 2_000,
            "saved_tokens": 120,
            "removed_tokens": 120,
            "usage_anchor": "r1",
            "saved_precise": 110,
        },
        (30, "r1", 0, 28),
        (2_000, 150, 150, "r1", 138),
    ),
    # after a newer report: the credit starts again, the removed tokens still add up
    (
        {
            "original_chars": 2_000,
            "saved_tokens": 120,
            "removed_tokens": 120,
            "usage_anchor": "r1",
            "saved_precise": 110,
        },
        (30, "r2", 0, 28),
        (2_000, 30, 150, "r2", 28),
    ),
    # without tiktoken: no precise count is recorded; an older precise one is not carried
    ({"saved_tokens": 40, "usage_anchor": "r1"}, (10, "r1", 500, None), (500, 50, 10, "r1", None)),
    # a marker written before saved_precise: the earlier saving counts as its own precise one
    ({"saved_tokens": 40, "usage_anchor": "r1"}, (10, "r1", 500, 9), (500, 50, 10, "r1", 49)),
]


@pytest.mark.parametrize(("before", "then", "after"), SAVINGS)
def test_a_saving_adds_up_as_the_one_rule_says(before: dict, then: tuple, after: tuple) -> None:
    saved, anchor, chars, precise = then
    new = Saving.of(before).then(saved=saved, anchor=anchor, chars=chars, precise=precise)
    keys = new.fields()
    want = dict(
        zip(
            ("original_chars", "saved_tokens", "removed_tokens", "usage_anchor", "saved_precise"),
            after,
            strict=True,
        )
    )
    if want["saved_precise"] is None:
        del want["saved_precise"]
    assert keys == want
    assert Saving.of(keys) == new  # what it writes reads back the same


def test_a_saving_reads_the_keys_a_message_carries() -> None:
    msg = with_meta(
        ToolMessage("[cleared]", tool_call_id="c"),
        kind="cleared",
        original_chars=9_000,
        saved_tokens=2_000,
        removed_tokens=2_500,
        usage_anchor="a3",
        saved_precise=1_900,
    )
    s = Saving.of(msg)
    assert (s.original_chars, s.saved_tokens, s.removed, s.usage_anchor) == (
        9_000,
        2_000,
        2_500,
        "a3",
    )
    assert s.credited == 1_900 and s.reduced
    # a marker older than removed_tokens: what it removed is what it saved
    assert Saving.of({"saved_tokens": 70}).removed == 70
    assert not Saving.of(HumanMessage("x")).reduced


# A boundary's marker dict as releases up to a0b9b4c wrote it (a JSON checkpoint's lists).
OLD_BOUNDARY = {
    "kind": "summary",
    "index": 3,
    "archive_ref": "transcript_20261201T120000000000Z_0123456789abcdef",
    "span_ids": ["m1", "m2", None],
    "kept_ids": ["m7", "m8"],
    "turns_since_previous": 4,
    "summarizer": "LLMSummarizer",
    "tokens_before": 7_100,
    "cause": "trigger",
    "calibration": 1.07,
    "overhead": 42,
    "replaced": {"m1": ["k1"]},
    "stale_reports": ["r7"],
    "precise_calibration": [1.02, 40],
    "refill_streak": 1,
    "tokens_after": 2_300,
    "provider_window": 6_000,
}


def test_a_boundary_reads_what_existing_checkpoints_hold() -> None:
    b = Boundary.of(OLD_BOUNDARY)
    assert (b.index, b.tokens_before, b.tokens_after, b.refill_streak) == (3, 7_100, 2_300, 1)
    assert b.kept == frozenset({"m7", "m8"}) and b.span_ids == ("m1", "m2", None)
    assert (b.calibration, b.overhead, b.precise_calibration) == (1.07, 42, (1.02, 40))
    assert (b.provider_window, b.cause, b.summarizer) == (6_000, "trigger", "LLMSummarizer")
    # what it writes back is the same record, _refed's own keys aside
    own = {k: v for k, v in OLD_BOUNDARY.items() if k not in ("kind", "replaced", "stale_reports")}
    assert b.fields() == own
    # a boundary without the later keys (a memory's, or an old one) reads as defaults
    bare = Boundary.of({"kind": "summary", "index": 0, "kept_ids": []})
    assert (bare.index, bare.tokens_after, bare.refill_streak, bare.provider_window) == (
        0,
        None,
        0,
        None,
    )
    assert Boundary.of({"provider_window": 0}).provider_window is None  # not a window
    for meta in (OLD_BOUNDARY, {}, {"kept_ids": None}):  # the one-key reader agrees
        assert Boundary.kept_in(meta) == Boundary.of(meta).kept


def test_a_compaction_writes_its_boundary_through_the_type() -> None:
    from langchain_core.messages import AIMessage

    from langchain_compact import CompactionConfig, ExtractiveSummarizer, compact_messages

    history = [HumanMessage("Fix the build.", id="t")]
    for i in range(12):
        call = {"name": "read", "args": {"path": f"f{i}"}, "id": f"c{i}"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        history.append(ToolMessage(f"line {i}\n" * 300, tool_call_id=f"c{i}", id=f"r{i}"))
    history.append(AIMessage("next", id="z"))
    out = compact_messages(
        history,
        config=CompactionConfig(context_window=4_000),
        summarizer=ExtractiveSummarizer(),
        archive=None,
    )
    boundary = next(m for m in out if get_meta(m).get("kind") == "summary")
    written = Boundary.of(boundary)
    assert written.index == 1 and written.tokens_after is not None
    assert written.fields().items() <= boundary.response_metadata[META_KEY].items()


# the marker keys Saving and Boundary own, as a lookup in another module would spell them
_OWNED = (
    "saved_tokens",
    "removed_tokens",
    "saved_precise",
    "usage_anchor",
    "original_chars",
    "tokens_after",
    "tokens_before",
    "kept_ids",
    "span_ids",
    "refill_streak",
    "precise_calibration",
    "calibration",
    "overhead",
    "turns_since_previous",
)
# a marker dict's name has "meta" in it (meta, bmeta, get_meta(m), boundary_meta, ...)
_LOOKUP = re.compile(
    r"""meta\w*(?:\([^)]*\))?(?:\.get\(|\[)\s*["'](""" + "|".join(_OWNED) + r""")["']"""
)


def test_no_other_module_reads_the_marker_keys_by_name() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "markers.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _LOOKUP.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "read them through markers.Saving / markers.Boundary:\n" + "\n".join(found)
    # the check finds what it looks for
    assert _LOOKUP.search('int(get_meta(m).get("saved_tokens", 0))')
    assert _LOOKUP.search('bmeta["kept_ids"]') and not _LOOKUP.search('report["tokens_after"]')


@pytest.mark.parametrize(
    "meta",
    [
        {},
        {"saved_tokens": 70},
        {"saved_tokens": 70, "removed_tokens": 90},
        {"saved_tokens": 70, "saved_precise": 60, "usage_anchor": "r"},
        {"saved_tokens": 70, "saved_precise": 80},
        {"saved_tokens": 70, "saved_precise": None},
    ],
)
def test_the_one_key_readers_agree_with_the_value(meta: dict) -> None:
    whole = Saving.of(meta)
    assert Saving.credited_in(meta) == whole.credited
    assert Saving.removed_in(meta) == whole.removed
    assert Saving.anchor_in(meta) == whole.usage_anchor
    assert credited_savings(meta) == whole.credited  # the function earlier releases exported
