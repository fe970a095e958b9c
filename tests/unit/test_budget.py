"""The budget's rules as tables of numbers: each row a window (and settings), each column a
rule (docs/design.md, "The budget"). A rule that changes changes a number here."""

from __future__ import annotations

from typing import Any

import pytest

from langchain_compact.budget import (
    DEFAULT_REPLY_RESERVE_CAP,
    MIN_SUMMARY_TOKENS,
    MIN_SUPPLEMENT_TOKENS,
    SUMMARY_HEADER_TOKENS,
    Budget,
    chars_for_tokens,
)
from langchain_compact.config import CompactionConfig

RULES = (
    "reserve",
    "fit",
    "trigger",
    "micro_gate",
    "micro_target",
    "prepare",
    "fold",
    "task_max",
    "large_result",
    "summaries",
    "summary_bound",
    "facts",
    "next_summary",
    "facts_roof",
    "max_overhead",
    "prepared_keeps_newer",
)

# window, settings, then one number per rule in RULES: the fixed lines, then the shares
TABLE: list[tuple[int, dict[str, Any], tuple[int, ...]]] = [
    # the defaults: reserve a twentieth (at most 4,096), trigger 0.75, gate = trigger,
    # target 0.3 (at most 0.6 of the gate), prepare 0.6, fold 1.0, task 0.25, result 0.2,
    # summaries 0.25, one summary at most 2,000
    (4_000, {},
     (200, 3_800, 3_000, 3_000, 1_200, 2_400, 4_000,
      1_000, 800, 1_000, 1_000, 500, 380, 3_400, 1_000, 2_700)),
    (8_000, {},
     (400, 7_600, 6_000, 6_000, 2_400, 4_800, 8_000,
      2_000, 1_600, 2_000, 2_000, 1_000, 760, 6_800, 2_000, 5_400)),
    (16_000, {},
     (800, 15_200, 12_000, 12_000, 4_800, 9_600, 16_000,
      4_000, 3_200, 4_000, 2_000, 1_000, 1_520, 13_600, 4_000, 10_800)),
    (128_000, {},
     (4_096, 123_904, 96_000, 96_000, 38_400, 76_800, 128_000,
      32_000, 25_600, 32_000, 2_000, 8_000, 2_000, 109_952, 32_000, 86_400)),
    (200_000, {},
     (4_096, 195_904, 150_000, 150_000, 60_000, 120_000, 200_000,
      50_000, 40_000, 50_000, 2_000, 12_500, 2_000, 172_952, 50_000, 135_000)),
    (1_000_000, {},
     (4_096, 995_904, 750_000, 750_000, 300_000, 600_000, 1_000_000,
      250_000, 200_000, 250_000, 2_000, 62_500, 2_000, 872_952, 250_000, 675_000)),
    # a tiny window: the smallest summary still has its 64 tokens
    (200, {},
     (10, 190, 150, 150, 60, 120, 200,
      50, 40, 50, 64, 32, 19, 170, 50, 135)),
    # the trigger capped by the fit limit, the gate by the trigger, the target by 0.6 of the gate
    (8_000, {"trigger_ratio": 1.0, "micro_trigger_ratio": 1.0, "micro_target_ratio": 0.9},
     (400, 7_600, 7_600, 7_600, 4_560, 4_800, 8_000,
      2_000, 1_600, 2_000, 2_000, 1_000, 760, 7_600, 2_000, 6_200)),
    # an explicit reserve (0: the whole window), prepare capped by the trigger
    (10_000, {"reply_reserve_tokens": 0, "trigger_ratio": 0.5, "prepare_ratio": 0.9},
     (0, 10_000, 5_000, 5_000, 3_000, 5_000, 10_000,
      2_500, 2_000, 2_500, 2_000, 1_000, 1_000, 7_500, 2_500, 5_000)),
    # a small summary bound, a large summary budget: the facts take a quarter of the budget
    (40_000, {"summary_max_tokens": 500, "summary_budget_ratio": 0.5, "fold_ratio": 0.5},
     (2_000, 38_000, 30_000, 30_000, 12_000, 24_000, 20_000,
      10_000, 8_000, 20_000, 500, 5_000, 500, 34_000, 10_000, 27_000)),
]  # fmt: skip


@pytest.mark.parametrize(("window", "settings", "expected"), TABLE)
def test_the_rooms_of_a_window(
    window: int, settings: dict[str, Any], expected: tuple[int, ...]
) -> None:
    budget = Budget(window=window, **settings)
    assert dict(zip(RULES, expected, strict=True)) == {r: getattr(budget, r) for r in RULES}
    # the config builds the same budget from the same settings
    assert CompactionConfig(context_window=window, **settings).budget == budget


# fixed part -> room (trigger - fixed), tail (fit - fixed - 144), unread_share ((fit - fixed) / 4)
FIXED = [
    (128_000, 0, 96_000, 123_760, 30_976),
    (128_000, 2_000, 94_000, 121_760, 30_476),
    (8_000, 1_000, 5_000, 6_456, 1_650),
    (8_000, 6_000, 0, 1_456, 400),
    (8_000, 7_500, 0, 0, 25),
    (8_000, 9_000, 0, 0, 0),
]


@pytest.mark.parametrize(("window", "fixed", "room", "tail", "share"), FIXED)
def test_the_rooms_beside_a_fixed_part(
    window: int, fixed: int, room: int, tail: int, share: int
) -> None:
    budget = Budget(window=window)
    assert (budget.room(fixed), budget.tail(fixed), budget.unread_share(fixed)) == (
        room,
        tail,
        share,
    )


# (span, summary bound) -> the restored originals the summarizer may read: fit - span - bound
RESTORE = [(8_000, 3_000, 1_000, 3_600), (8_000, 7_000, 1_000, 0), (128_000, 50_000, 2_000, 71_904)]


@pytest.mark.parametrize(("window", "span", "bound", "restore"), RESTORE)
def test_the_originals_restored_for_the_summarizer(
    window: int, span: int, bound: int, restore: int
) -> None:
    assert Budget(window=window).restore(span, bound) == restore


# new summary's tokens -> merge bound (summaries - new, at least half of summaries, at least 64),
# the summarizer's bound (at most half of summaries), the dense part (a quarter of summaries)
MERGES = [
    (128_000, 0, 32_000, 16_000, 8_000),
    (128_000, 10_000, 22_000, 16_000, 8_000),
    (128_000, 20_000, 16_000, 16_000, 8_000),
    (8_000, 500, 1_500, 1_000, 500),
    (8_000, 3_000, 1_000, 1_000, 500),
    (400, 90, 64, 64, 25),
]


@pytest.mark.parametrize(("window", "new", "bound", "call", "dense"), MERGES)
def test_the_bounds_of_a_merge(window: int, new: int, bound: int, call: int, dense: int) -> None:
    budget = Budget(window=window)
    assert (budget.merge_bound(new), budget.merge_call_bound(new), budget.merge_dense) == (
        bound,
        call,
        dense,
    )


# after (tokens a compaction left) -> the trigger then: halfway from after to the fit limit
RAISED = [
    (128_000, 0, 96_000),
    (128_000, 95_999, 96_000),
    (128_000, 96_000, 109_952),
    (128_000, 110_000, 116_952),
    (128_000, 123_904, 123_904),
    (128_000, 200_000, 123_904),
    (8_000, 7_000, 7_300),
]


@pytest.mark.parametrize(("window", "after", "trigger"), RAISED)
def test_the_trigger_after_a_compaction_over_it(window: int, after: int, trigger: int) -> None:
    assert Budget(window=window).raised_trigger(after) == trigger


# (left beside the kept messages, bound) -> summary_bound_in, crowded
SQUEEZED = [
    (10_000, 2_000, 2_000, False),
    (2_000, 2_000, 1_400, False),
    (999, 2_000, 699, True),
    (1_000, 2_000, 700, False),
    (50, 2_000, 64, True),
    (0, 2_000, 64, True),
]


@pytest.mark.parametrize(("left", "bound", "summary", "crowded"), SQUEEZED)
def test_the_summary_in_the_room_left(left: int, bound: int, summary: int, crowded: bool) -> None:
    assert (Budget.summary_bound_in(left, bound), Budget.crowded(left, bound)) == (summary, crowded)


@pytest.mark.parametrize(
    ("span", "prose"), [(0, 64), (100, 64), (256, 64), (260, 65), (8_000, 2_000), (100_000, 25_000)]
)
def test_a_summary_prose_is_a_quarter_of_its_span(span: int, prose: int) -> None:
    assert Budget.summary_prose(span) == prose


@pytest.mark.parametrize(
    ("tokens", "margin", "near"),
    [
        (7_600, 0.1, True),
        (6_841, 0.1, True),
        (6_840, 0.1, False),
        (0, 0.1, False),
        (7_599, 0.0, False),
    ],
)
def test_near_the_fit_limit(tokens: int, margin: float, near: bool) -> None:
    assert Budget(window=8_000).near_fit(tokens, margin) is near  # fit 7,600


def test_the_fixed_numbers() -> None:
    assert (DEFAULT_REPLY_RESERVE_CAP, SUMMARY_HEADER_TOKENS, MIN_SUMMARY_TOKENS) == (4_096, 80, 64)
    budget = Budget(window=8_000)
    assert budget.worth_compacting == 2 * (80 + 64) == 288
    assert Budget.supplement_floor() == MIN_SUPPLEMENT_TOKENS == 32
    assert Budget(window=10_000_000).reserve == DEFAULT_REPLY_RESERVE_CAP


@pytest.mark.parametrize(
    ("tokens", "text", "text_tokens", "chars"),
    [(100, "", 0, 400), (0, "", 0, 1), (100, "x" * 900, 100, 900), (10, "ab" * 10, 40, 5)],
)
def test_characters_for_tokens(tokens: int, text: str, text_tokens: int, chars: int) -> None:
    assert chars_for_tokens(tokens, text=text, text_tokens=text_tokens) == chars
