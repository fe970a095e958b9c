"""When and how much: the decisions of :mod:`langchain_compact.budget` as tables of numbers.

Each row is one turn's numbers (:class:`TurnNumbers`) and what the decision says; nothing
here builds a message or counts a token. ``compaction.decide`` and ``core.Compactor`` only
gather these numbers and act on the verdict (tests/unit/test_compaction.py and
test_core.py hold that end to end).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from langchain_compact.budget import (
    MIN_SHRINK,
    Budget,
    TurnNumbers,
    Verdict,
    after_compaction,
    compaction_cause,
    decide_again,
    decision,
    on_demand_refusal,
    prepare_window,
    quiet_next_turn,
    recount,
    refill_streak,
    settled,
    worth_applying,
)

B = Budget(window=1_000)  # reserve 50, fit 950, trigger 750, fold 1,000, worth 288

#: A turn with every number gathered: no compaction yet, a span of 500 tokens to summarise.
BASE = TurnNumbers(
    tokens=500,
    trigger=B.trigger,
    fit=B.fit,
    window=B.window,
    fold=B.fold,
    worth=B.worth_compacting,
    removed=0,
    count=0,
    turns_since=5,
    refill_streak=0,
    has_span=True,
    span_removed=0,
    span_tokens=500,
)


def test_the_base_numbers_are_the_budgets() -> None:
    assert (BASE.fit, BASE.trigger, BASE.fold, BASE.worth) == (950, 750, 1_000, 288)


# (changes to BASE, action, reason starts with)
DECISIONS: list[tuple[dict[str, object], str, str]] = [
    ({}, "continue", "under the trigger"),
    ({"tokens": 749}, "continue", "under the trigger"),
    ({"tokens": 750}, "compact", "750 tokens >= trigger 750"),
    ({"tokens": 960}, "compact", "960 tokens >= trigger 750"),
    # the raised trigger (after a compaction that could not get under 750) is what counts
    ({"tokens": 800, "trigger": 850}, "continue", "under the trigger"),
    # over the trigger, nothing to summarise: go on while the call fits, else stop
    ({"tokens": 800, "has_span": False}, "continue", "over the trigger, nothing to compact"),
    ({"tokens": 960, "has_span": False}, "stop", "the next call cannot fit: 960 tokens"),
    # a span too small to be worth a summarizer call waits while the call fits
    ({"tokens": 800, "span_tokens": 287}, "continue", "over the trigger, too little"),
    ({"tokens": 800, "span_tokens": 288}, "compact", "800 tokens"),
    ({"tokens": 960, "span_tokens": 10}, "compact", "960 tokens"),
    # the user's cap
    ({"tokens": 800, "count": 2, "max_compactions": 2}, "stop", "the compaction limit"),
    ({"tokens": 800, "count": 1, "max_compactions": 2}, "compact", "800 tokens"),
    # the cooldown holds while the call fits, not past the fit limit
    ({"tokens": 800, "count": 1, "turns_since": 1, "cooldown_turns": 2}, "continue", "cooldown"),
    ({"tokens": 800, "count": 1, "turns_since": 2, "cooldown_turns": 2}, "compact", "800"),
    ({"tokens": 960, "count": 1, "turns_since": 1, "cooldown_turns": 2}, "compact", "960"),
    # the thrash guard: the limit of stuck compactions, each within one turn of the last
    ({"tokens": 800, "count": 3, "turns_since": 1, "refill_streak": 3}, "stop", "thrash guard"),
    ({"tokens": 800, "count": 3, "turns_since": 2, "refill_streak": 3}, "compact", "800"),
    ({"tokens": 800, "count": 3, "turns_since": 1, "refill_streak": 2}, "compact", "800"),
    # under the trigger, the cleared results reach the fold: due when the span holds them
    ({"removed": 1_000, "span_removed": 1_000}, "compact", "the results cleared since"),
    ({"removed": 999, "span_removed": 999}, "continue", "under the trigger"),
    ({"removed": 1_000, "span_removed": 400}, "continue", "cleared results wait in the tail"),
    ({"removed": 1_000, "has_span": False}, "continue", "cleared results wait in the tail"),
    # folding is upkeep: it waits out the cooldown and never spends the last compaction
    (
        {
            "removed": 1_000,
            "span_removed": 1_000,
            "count": 1,
            "turns_since": 0,
            "cooldown_turns": 1,
        },
        "continue",
        "under the trigger",
    ),
    (
        {"removed": 1_000, "span_removed": 1_000, "count": 1, "max_compactions": 2},
        "continue",
        "under the trigger",
    ),
    (
        {"removed": 1_000, "span_removed": 1_000, "count": 1, "max_compactions": 3},
        "compact",
        "the results cleared since",
    ),
]


@pytest.mark.parametrize(("changes", "action", "reason"), DECISIONS)
def test_the_decision(changes: dict[str, object], action: str, reason: str) -> None:
    verdict = decision(replace(BASE, **changes))  # type: ignore[arg-type]
    assert verdict.need is None
    assert (verdict.action, verdict.reason[: len(reason)]) == (action, reason)


def test_the_stop_reason_states_the_window_and_the_reserve() -> None:
    verdict = decision(replace(BASE, tokens=960, has_span=False))
    assert verdict.reason == (
        "the next call cannot fit: 960 tokens with 50 reserved for the reply exceed the "
        "1000-token window, and nothing is left to compact"
    )


UNKNOWN = {"count": None, "turns_since": None, "refill_streak": None, "has_span": None}
UNKNOWN |= {"span_removed": None, "span_tokens": None}

# (numbers known, the first number the decision asks for; None: it decides without more)
NEEDS: list[tuple[dict[str, object], str | None]] = [
    ({"tokens": 500}, None),  # under the trigger: no history read, no plan
    ({"tokens": 800}, "info"),
    ({"tokens": 800, "count": 0, "turns_since": 5, "refill_streak": 0}, "plan"),
    (
        {"tokens": 800, "count": 2, "turns_since": 5, "refill_streak": 0, "max_compactions": 2},
        "plan",  # planned before the cap is read (as the decision always has)
    ),
    (
        {"tokens": 800, "count": 0, "turns_since": 5, "refill_streak": 0, "has_span": True},
        "span_tokens",
    ),
    (  # over the fit limit the span's size does not matter: no count of it
        {"tokens": 960, "count": 0, "turns_since": 5, "refill_streak": 0, "has_span": True},
        None,
    ),
    ({"removed": 1_000, "count": 0, "turns_since": 5, "refill_streak": 0}, "plan"),
    (
        {"removed": 1_000, "count": 0, "turns_since": 5, "refill_streak": 0, "has_span": True},
        "span_removed",
    ),
    (  # the span's size is not read under the trigger
        {
            "removed": 1_000,
            "count": 0,
            "turns_since": 5,
            "refill_streak": 0,
            "has_span": True,
            "span_removed": 1_000,
        },
        None,
    ),
]


@pytest.mark.parametrize(("known", "need"), NEEDS)
def test_the_decision_asks_only_for_what_it_reads(known: dict[str, object], need: str) -> None:
    numbers = replace(BASE, **{**UNKNOWN, **known})  # type: ignore[arg-type]
    assert decision(numbers).need == need


def test_a_verdict_that_needs_a_number_is_no_decision() -> None:
    assert decision(replace(BASE, tokens=800, count=None)) == Verdict(
        "continue", "needs info", "info"
    )


# ---------------------------------------------------------------------- recounts

# (action, estimate, fit, near the fit limit, the recount asked for)
RECOUNTS = [
    ("continue", 500, 950, False, None),
    ("continue", 940, 950, True, "floor"),
    ("compact", 940, 950, True, None),  # a compaction under the fit limit keeps its timing
    ("compact", 960, 950, False, "exact"),
    ("stop", 960, 950, True, "exact"),
    ("stop", 960, None, False, None),
]


@pytest.mark.parametrize(("action", "tokens", "fit", "near", "kind"), RECOUNTS)
def test_which_recount_a_decision_waits_for(
    action: str, tokens: int, fit: int | None, near: bool, kind: str | None
) -> None:
    assert recount(action, tokens, fit, near) == kind  # type: ignore[arg-type]


# (kind, estimate, recounted, fit, decided again)
AGAIN = [
    ("exact", 960, 940, 950, True),
    ("exact", 960, 960, 950, False),
    ("exact", 960, None, 950, False),
    ("floor", 940, 960, 950, True),  # the exact floor is over the fit limit: decide on it
    ("floor", 940, 945, 950, False),  # under it the call fits: the estimate's timing holds
    ("floor", 940, None, 950, False),  # no tiktoken: no floor
    ("floor", 940, 960, None, False),
]


@pytest.mark.parametrize(("kind", "tokens", "recounted", "fit", "again"), AGAIN)
def test_when_a_recount_changes_the_decision(
    kind: str, tokens: int, recounted: int | None, fit: int | None, again: bool
) -> None:
    assert decide_again(kind, tokens, recounted, fit) is again  # type: ignore[arg-type]


# ---------------------------------------------------------------------- after a compaction

# (confirmed, fit, the compaction's own count, judged by)
SETTLED = [(960, 950, 940, 940), (960, 950, 955, 960), (960, 950, None, 960), (930, 950, 940, 930)]


@pytest.mark.parametrize(("confirmed", "fit", "after", "judged"), SETTLED)
def test_the_size_a_compacted_history_is_judged_by(
    confirmed: int, fit: int, after: int | None, judged: int
) -> None:
    assert settled(confirmed, fit, after) == judged


@pytest.mark.parametrize(
    ("tokens", "verdict"),
    [(700, "continue"), (750, "over_trigger"), (950, "over_trigger"), (951, "stop")],
)
def test_the_check_after_a_compaction(tokens: int, verdict: str) -> None:
    assert after_compaction(tokens, B.fit, B.trigger) == verdict


# ---------------------------------------------------------------------- preparing ahead

# (preparing on, action, tokens, prepare point, may prepare)
PREPARE = [
    (True, "continue", 600, 600, True),
    (True, "continue", 599, 600, False),
    (False, "continue", 700, 600, False),
    (True, "compact", 700, 600, False),
    (True, "continue", 700, None, False),
]


@pytest.mark.parametrize(("on", "action", "tokens", "start", "may"), PREPARE)
def test_whether_a_summary_may_be_prepared(
    on: bool, action: str, tokens: int, start: int | None, may: bool
) -> None:
    assert prepare_window(on, action, tokens, start) is may  # type: ignore[arg-type]


# (tokens ahead, trigger, micro gate, fold, cleared so far, the next turn is quiet)
AHEAD = [
    (600, 750, 700, 1_000, 0, True),
    (700, 750, 700, 1_000, 0, False),  # the micro gate clears
    (700, 650, 700, 1_000, 0, False),  # the gate is never above the trigger
    (600, 750, None, 1_000, 0, True),  # no micro gate: the trigger
    (600, 750, 700, 1_000, 1_000, False),  # the cleared results are due
    (600, 750, 700, None, 10_000, True),
]


@pytest.mark.parametrize(("ahead", "trigger", "gate", "fold", "removed", "quiet"), AHEAD)
def test_whether_the_next_turn_is_quiet(
    ahead: int, trigger: int, gate: int | None, fold: int | None, removed: int, quiet: bool
) -> None:
    assert quiet_next_turn(ahead, trigger, gate, fold, removed) is quiet


# ---------------------------------------------------------------------- applying, on demand

# (tokens found, tokens freed, fit, applied)
APPLY = [
    (10_000, 100, 20_000, False),  # 1% of 10,000 is 100: not more
    (10_000, 101, 20_000, True),
    (10_000, -50, 20_000, False),  # a summary larger than what it replaces
    (30_000, -50, 20_000, True),  # over the fit limit: applied whatever it frees
    (10_000, 0, None, True),
    (40, 1, 1_000, False),  # at least one token
    (40, 2, 1_000, True),
]


@pytest.mark.parametrize(("before", "freed", "fit", "applied"), APPLY)
def test_whether_a_compaction_is_worth_applying(
    before: int, freed: int, fit: int | None, applied: bool
) -> None:
    assert MIN_SHRINK == 0.01
    assert worth_applying(before, freed, fit) is applied


# (compactions so far, turns since, cap, cooldown, refusal starts with)
ON_DEMAND = [
    (0, 0, None, 0, ""),
    (1, 0, None, 0, "a compaction ran 0 model turn(s) ago; the next one may run after 1"),
    (1, 1, None, 0, ""),
    (1, 2, None, 3, "a compaction ran 2 model turn(s) ago; the next one may run after 3"),
    (2, 9, 2, 0, "the compaction limit max_compactions=2 is reached"),
    (1, 9, 2, 0, ""),
]


@pytest.mark.parametrize(("count", "since", "cap", "cooldown", "refusal"), ON_DEMAND)
def test_an_on_demand_refusal(
    count: int, since: int, cap: int | None, cooldown: int, refusal: str
) -> None:
    assert on_demand_refusal(count, since, cap, cooldown) == refusal


# ---------------------------------------------------------------------- the thrash guard


@pytest.mark.parametrize(
    ("tokens", "trigger", "cause"),
    [(750, 750, "trigger"), (749, 750, "fold"), (900, 850, "trigger"), (0, None, "trigger")],
)
def test_what_made_a_compaction_run(tokens: int, trigger: int | None, cause: str) -> None:
    assert compaction_cause(tokens, trigger) == cause


# (by the trigger, tokens before, tokens after, trigger, compaction #, turns since, streak so far,
#  the streak it records)
STREAKS = [
    (True, 800, 800, 750, 3, 1, 2, 3),  # stuck, one turn after the last: one more in a row
    (True, 800, 900, 750, 3, 0, 2, 3),
    (True, 800, 800, 750, 3, 2, 2, 1),  # stuck, but not within one turn: a new streak
    (True, 800, 800, 750, 1, 0, 0, 1),  # the first compaction starts one
    (True, 800, 799, 750, 3, 1, 2, 0),  # it freed room: progress
    (True, 800, 749, 750, 3, 1, 2, 0),  # under the trigger: progress
    (False, 800, 800, 750, 3, 1, 2, 0),  # folding cleared results in is routine
    (True, 800, 800, None, 3, 1, 2, 0),
]


@pytest.mark.parametrize(
    ("by_trigger", "before", "after", "trigger", "index", "since", "previous", "streak"), STREAKS
)
def test_the_thrash_guards_count(
    by_trigger: bool,
    before: int,
    after: int,
    trigger: int | None,
    index: int,
    since: int,
    previous: int,
    streak: int,
) -> None:
    assert (
        refill_streak(
            by_trigger=by_trigger,
            tokens_before=before,
            tokens_after=after,
            trigger=trigger,
            index=index,
            turns_since=since,
            previous=previous,
        )
        == streak
    )
