"""History structure (docs/design.md, B2): pairing validation, safe cuts, repair.

Property tests build random *valid* histories with parallel tool batches (results in random
order) and check the invariants against an independent reading of the structure.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from _data import all_trajectories, load_trajectory
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_compact.errors import InvalidHistoryError
from langchain_compact.history import (
    INTERRUPTED_RESULT,
    find_safe_cut,
    is_summary,
    last_boundary_index,
    original_task_index,
    repair_history,
    repair_report,
    validate_history,
)
from langchain_compact.markers import KIND_PINNED_TASK, KIND_STOP, KIND_SUMMARY, with_meta

TRANSCRIPTS = all_trajectories()
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
words = st.text(alphabet="abcdefgh xyz", max_size=12)


# --- strategies ------------------------------------------------------------------------------


@st.composite
def histories(
    draw: st.DrawFn, *, min_tool_batches: int = 0, max_units: int = 10
) -> list[BaseMessage]:
    """A valid history: human / system / ai text / ai with 1-4 parallel calls + shuffled results."""
    kinds = draw(
        st.lists(st.sampled_from(["human", "system", "ai_text", "ai_tools"]), max_size=max_units)
    )
    for _ in range(min_tool_batches):
        kinds.insert(draw(st.integers(0, len(kinds))), "ai_tools")
    msgs: list[BaseMessage] = []
    n_calls = 0
    for kind in kinds:
        mid = f"m{len(msgs)}"
        if kind == "human":
            msgs.append(HumanMessage(draw(words), id=mid))
        elif kind == "system":
            msgs.append(SystemMessage(draw(words), id=mid))
        elif kind == "ai_text":
            msgs.append(AIMessage(draw(words), id=mid))
        else:
            k = draw(st.integers(1, 4))
            ids = [f"call{n_calls + j}" for j in range(k)]
            n_calls += k
            calls = [
                {"name": f"tool{j % 2}", "args": {"n": j}, "id": cid} for j, cid in enumerate(ids)
            ]
            msgs.append(AIMessage(draw(words), tool_calls=calls, id=mid))
            for cid in draw(st.permutations(ids)):
                msgs.append(
                    ToolMessage(f"result {cid}", tool_call_id=cid, name="tool", id=f"r-{cid}")
                )
    return msgs


# A damage op: (kind, a, b); indices are taken modulo the current length.
damage_ops = st.lists(
    st.tuples(
        st.sampled_from(["delete", "dup", "swap", "shuffle"]),
        st.integers(0, 60),
        st.integers(0, 60),
    ),
    max_size=6,
)


def damage(
    messages: Sequence[BaseMessage],
    ops: Sequence[tuple[str, int, int]],
    *,
    dup_tool_calls: bool = True,
) -> list[BaseMessage]:
    out = list(messages)
    for kind, a, b in ops:
        if not out:
            break
        i, j = a % len(out), b % (len(out) + 1)
        if kind == "delete":
            del out[i]
        elif kind == "dup":
            if not dup_tool_calls and isinstance(out[i], AIMessage) and out[i].tool_calls:
                continue
            out.insert(j, out[i])
        elif kind == "swap":
            j %= len(out)
            out[i], out[j] = out[j], out[i]
        else:
            lo, hi = sorted((i, j))
            chunk = out[lo:hi]
            random.Random(a * 61 + b).shuffle(chunk)
            out[lo:hi] = chunk
    return out


def is_valid(messages: Sequence[BaseMessage], **kw: bool) -> bool:
    try:
        validate_history(messages, **kw)
    except InvalidHistoryError:
        return False
    return True


def non_tool_keys(messages: Sequence[BaseMessage]) -> list[tuple[str, str | None, object]]:
    return [(m.type, m.id, m.content) for m in messages if not isinstance(m, ToolMessage)]


def owner_index(messages: Sequence[BaseMessage], tool_index: int) -> int:
    """Index of the AIMessage a tool result belongs to: the nearest non-tool message before it."""
    i = tool_index - 1
    while isinstance(messages[i], ToolMessage):
        i -= 1
    return i


# --- properties ------------------------------------------------------------------------------


@PROPERTY
@given(histories())
def test_generated_histories_are_valid(msgs: list[BaseMessage]) -> None:
    validate_history(msgs)
    assert repair_history(msgs) == msgs, "repair must not change a valid history"


@PROPERTY
@given(histories(min_tool_batches=1))
def test_every_safe_cut_leaves_both_sides_valid(msgs: list[BaseMessage]) -> None:
    for i in range(len(msgs) + 1):
        c = find_safe_cut(msgs, i)
        assert 0 <= c <= i
        assert is_valid(msgs[:c]) and is_valid(msgs[c:]), (i, c)
        # The largest such cut: every cut between c and i splits a batch.
        for later in range(c + 1, i + 1):
            assert not (is_valid(msgs[:later]) and is_valid(msgs[later:])), (i, c, later)


@PROPERTY
@given(histories(), st.data())
def test_orphan_result_is_reported_at_its_index(
    msgs: list[BaseMessage], data: st.DataObject
) -> None:
    pos = data.draw(st.integers(0, len(msgs)))
    broken = [*msgs[:pos], ToolMessage("stray", tool_call_id="orphan-call"), *msgs[pos:]]
    with pytest.raises(InvalidHistoryError) as info:
        validate_history(broken, allow_pending=True)
    assert info.value.index == pos
    assert f"messages[{pos}]" in str(info.value)


@PROPERTY
@given(histories(min_tool_batches=1), st.data())
def test_missing_result_is_reported_at_its_ai_message(
    msgs: list[BaseMessage], data: st.DataObject
) -> None:
    tool_positions = [i for i, m in enumerate(msgs) if isinstance(m, ToolMessage)]
    j = data.draw(st.sampled_from(tool_positions))
    expected = owner_index(msgs, j)
    broken = msgs[:j] + msgs[j + 1 :]
    with pytest.raises(InvalidHistoryError) as info:
        validate_history(broken)
    assert info.value.index == expected
    assert f"messages[{expected}]" in str(info.value)
    # Still pending only if the broken batch is the last thing in the history.
    tail_is_batch = all(isinstance(m, ToolMessage) for m in broken[expected + 1 :])
    assert is_valid(broken, allow_pending=True) == tail_is_batch


@PROPERTY
@given(histories(), damage_ops)
def test_repair_validates_damaged_histories(
    msgs: list[BaseMessage], ops: list[tuple[str, int, int]]
) -> None:
    damaged = damage(msgs, ops, dup_tool_calls=False)
    repaired = repair_history(damaged)
    validate_history(repaired)
    assert non_tool_keys(repaired) == non_tool_keys(damaged)
    _check_tool_messages_come_from_input_or_are_interruptions(damaged, repaired)


_DUP_EXAMPLE = [
    HumanMessage("go", id="h"),
    AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}], id="a"),
    ToolMessage("files", tool_call_id="c1", name="ls", id="t"),
]


@PROPERTY
@given(histories(), damage_ops)
@example(msgs=_DUP_EXAMPLE, ops=[("dup", 1, 3)])
def test_repair_validates_damaged_histories_with_duplicated_calls(
    msgs: list[BaseMessage], ops: list[tuple[str, int, int]]
) -> None:
    damaged = damage(msgs, ops, dup_tool_calls=True)
    repaired = repair_history(damaged)
    validate_history(repaired)
    assert non_tool_keys(repaired) == non_tool_keys(damaged)


def _check_tool_messages_come_from_input_or_are_interruptions(
    damaged: Sequence[BaseMessage], repaired: Sequence[BaseMessage]
) -> None:
    originals = {id(m) for m in damaged}
    for m in repaired:
        if isinstance(m, ToolMessage) and id(m) not in originals:
            assert m.status == "error" and "interrupted" in str(m.content)


# --- transcripts -----------------------------------------------------------------------------


def unanswered_call_index(messages: Sequence[BaseMessage]) -> int:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage) and any(c["id"] not in answered for c in m.tool_calls):
            return i
    return -1


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_transcripts_validate_and_cut_safely(path: Path) -> None:
    msgs = load_trajectory(path)
    validate_history(msgs, allow_pending=True)
    pending = unanswered_call_index(msgs)
    if pending >= 0:
        with pytest.raises(InvalidHistoryError) as info:
            validate_history(msgs)
        assert info.value.index == pending
    else:
        validate_history(msgs)
    for i in range(len(msgs) + 1):
        c = find_safe_cut(msgs, i)
        assert c <= i
        validate_history(msgs[:c], allow_pending=c == len(msgs))
        validate_history(msgs[c:], allow_pending=True)
    assert repair_history(msgs)[: len(msgs)] == msgs


@pytest.mark.full_transcripts
def test_two_transcripts_end_with_an_unanswered_call() -> None:
    pending = [p.stem for p in TRANSCRIPTS if unanswered_call_index(load_trajectory(p)) >= 0]
    assert sorted(pending) == [
        "openhands__ponyc-4593__llama-4-maverick",
        "openhands__ponyc-4595__llama-4-maverick",
    ]


# --- explicit cases --------------------------------------------------------------------------


def _call(cid: str, name: str = "ls") -> dict[str, object]:
    return {"name": name, "args": {}, "id": cid}


def test_duplicate_result_is_rejected_and_repaired() -> None:
    ai = AIMessage("", tool_calls=[_call("c1")])
    t = ToolMessage("x", tool_call_id="c1")
    with pytest.raises(InvalidHistoryError, match="second time") as info:
        validate_history([HumanMessage("go"), ai, t, t])
    assert info.value.index == 3
    assert repair_history([HumanMessage("go"), ai, t, t]) == [HumanMessage("go"), ai, t]


def test_tool_call_without_id_is_rejected_and_repaired() -> None:
    ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": None}])
    with pytest.raises(InvalidHistoryError, match="without an id") as info:
        validate_history([HumanMessage("go"), ai])
    assert info.value.index == 1
    repaired = repair_history([HumanMessage("go"), ai])
    validate_history(repaired)
    assert [m.type for m in repaired] == ["human", "ai", "tool"]


def test_repair_closes_dangling_calls_with_an_error_result() -> None:
    ai = AIMessage("", tool_calls=[_call("c1"), _call("c2", "cat")])
    msgs = [HumanMessage("go"), ai, ToolMessage("ok", tool_call_id="c2"), HumanMessage("next")]
    with pytest.raises(InvalidHistoryError, match="no ToolMessage"):
        validate_history(msgs)
    repaired = repair_history(msgs)
    validate_history(repaired)
    added = [m for m in repaired if isinstance(m, ToolMessage) and m.tool_call_id == "c1"]
    assert len(added) == 1 and added[0].status == "error" and added[0].name == "ls"
    assert msgs[2] in repaired
    assert repaired.index(added[0]) < repaired.index(msgs[3])


def test_pending_calls_allowed_only_at_the_end() -> None:
    ai = AIMessage("", tool_calls=[_call("c1")])
    validate_history([HumanMessage("go"), ai], allow_pending=True)
    with pytest.raises(InvalidHistoryError) as info:
        validate_history([HumanMessage("go"), ai, HumanMessage("?")], allow_pending=True)
    assert info.value.index == 1


def test_result_of_an_earlier_batch_is_an_orphan() -> None:
    a1 = AIMessage("", tool_calls=[_call("c1")])
    a2 = AIMessage("", tool_calls=[_call("c2")])
    msgs = [a1, ToolMessage("1", tool_call_id="c1"), a2, ToolMessage("2", tool_call_id="c2")]
    validate_history(msgs)
    # c2's result moved before c2 was called: an orphan at index 1.
    with pytest.raises(InvalidHistoryError, match="orphan") as info:
        validate_history([a1, msgs[3], msgs[1], a2])
    assert info.value.index == 1


@pytest.mark.parametrize("bad", [{"role": "user", "content": "hi"}, "hi", None, 42])
@pytest.mark.parametrize("position", [0, 1, 3])
@pytest.mark.parametrize("func", [validate_history, repair_history])
def test_non_messages_raise_naming_the_index(func, bad: object, position: int) -> None:
    msgs: list[object] = [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    msgs.insert(position, bad)
    with pytest.raises(InvalidHistoryError, match=rf"messages\[{position}\]") as info:
        func(msgs)
    assert info.value.index == position
    assert "convert_to_messages" in str(info.value)


def test_find_safe_cut_bounds() -> None:
    msgs = [HumanMessage("a"), AIMessage("b")]
    assert find_safe_cut(msgs, 0) == 0
    assert find_safe_cut(msgs, 2) == 2
    for bad in (-1, 3):
        with pytest.raises(IndexError):
            find_safe_cut(msgs, bad)


def test_markers_and_task_index() -> None:
    task = HumanMessage("the task")
    summary = with_meta(HumanMessage("summary"), kind=KIND_SUMMARY)
    stop = with_meta(HumanMessage("stopped"), kind=KIND_STOP)
    pinned = with_meta(HumanMessage("the task"), kind=KIND_PINNED_TASK)
    assert is_summary(summary) and not is_summary(task)
    assert last_boundary_index([task, AIMessage("x")]) == -1
    assert last_boundary_index([summary, task, summary, AIMessage("x")]) == 2
    assert original_task_index([SystemMessage("s"), summary, stop, task]) == 3
    assert original_task_index([SystemMessage("s"), summary, task, pinned]) == 3
    assert original_task_index([SystemMessage("s"), AIMessage("x")]) == -1


# --- repair says what it changed and loses no real result (issue 12, item 2) ---------------


def test_a_reused_call_id_is_re_paired_not_replaced_by_interrupted() -> None:
    a1 = AIMessage("", tool_calls=[_call("c1")], id="a1")
    a2 = AIMessage("", tool_calls=[_call("c1", "cat")], id="a2")
    r1 = ToolMessage("first result", tool_call_id="c1", id="r1")
    r2 = ToolMessage("second result", tool_call_id="c1", id="r2")
    msgs = [HumanMessage("go"), a1, r1, a2, r2, AIMessage("done")]
    fixed = repair_report(msgs)
    validate_history(fixed.messages)
    assert fixed.messages == repair_history(msgs)  # the old signature returns the same
    texts = [m.content for m in fixed.messages if isinstance(m, ToolMessage)]
    assert texts == ["first result", "second result"]  # nothing "interrupted"
    new_id = fixed.messages[3].tool_calls[0]["id"]  # type: ignore[attr-defined]
    assert new_id != "c1" and fixed.messages[4].tool_call_id == new_id  # type: ignore[attr-defined]
    assert [(c.index, c.action) for c in fixed.changes] == [(3, "renamed"), (4, "re-paired")]
    assert "'c1'" in fixed.changes[0].detail and repr(new_id) in fixed.changes[1].detail
    assert fixed.removed == [a2, r2]  # the originals of what was rewritten, to archive


def test_a_duplicate_id_inside_one_batch_keeps_both_results() -> None:
    ai = AIMessage("", tool_calls=[_call("c1"), _call("c1", "cat")])
    msgs = [ai, ToolMessage("one", tool_call_id="c1"), ToolMessage("two", tool_call_id="c1")]
    fixed = repair_report(msgs)
    validate_history(fixed.messages)
    assert [m.content for m in fixed.messages[1:]] == ["one", "two"]


def test_a_call_without_an_id_gets_its_result() -> None:
    ai = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": None}])
    result = ToolMessage("a.txt b.txt", tool_call_id="unknown")
    fixed = repair_report([HumanMessage("go"), ai, result, AIMessage("ok")])
    validate_history(fixed.messages)
    assert [m.type for m in fixed.messages] == ["human", "ai", "tool", "ai"]
    assert fixed.messages[2].content == "a.txt b.txt"
    assert {c.action for c in fixed.changes} == {"renamed", "re-paired"}


def test_an_orphan_only_history_reports_what_it_dropped() -> None:
    orphan = ToolMessage("precious output", tool_call_id="zz")
    fixed = repair_report([orphan])
    assert fixed.messages == []
    assert [(c.index, c.action) for c in fixed.changes] == [(0, "dropped")]
    assert "'zz'" in fixed.changes[0].detail
    assert fixed.removed == [orphan]


def test_closing_a_dangling_call_is_reported() -> None:
    ai = AIMessage("", tool_calls=[_call("c1")])
    fixed = repair_report([HumanMessage("go"), ai, HumanMessage("?")])
    assert [(c.index, c.action) for c in fixed.changes] == [(1, "closed")]
    assert fixed.removed == []


def test_fresh_ids_never_collide_with_existing_ones() -> None:
    a1 = AIMessage("", tool_calls=[_call("c1")])
    a2 = AIMessage("", tool_calls=[_call("c1_dup2")])  # the id a naive rename would pick
    a3 = AIMessage("", tool_calls=[_call("c1")])
    msgs = [a1, ToolMessage("1", tool_call_id="c1"), a3, ToolMessage("3", tool_call_id="c1")]
    msgs[2:2] = [a2, ToolMessage("2", tool_call_id="c1_dup2")]
    fixed = repair_report(msgs)
    validate_history(fixed.messages)
    assert [m.content for m in fixed.messages if isinstance(m, ToolMessage)] == ["1", "2", "3"]


@PROPERTY
@given(histories(), damage_ops)
def test_repair_keeps_every_input_result_or_reports_it_removed(
    msgs: list[BaseMessage], ops: list[tuple[str, int, int]]
) -> None:
    damaged = damage(msgs, ops, dup_tool_calls=True)
    fixed = repair_report(damaged)
    validate_history(fixed.messages)
    kept = {id(m) for m in fixed.messages}
    removed = {id(m) for m in fixed.removed}
    for m in damaged:
        assert id(m) in kept or id(m) in removed
    dropped = sum(c.action == "dropped" for c in fixed.changes)
    tool_in = sum(isinstance(m, ToolMessage) for m in damaged)
    tool_out = sum(
        isinstance(m, ToolMessage) and m.content != INTERRUPTED_RESULT for m in fixed.messages
    )
    assert tool_out == tool_in - dropped  # every real result is kept unless reported dropped


# --- a compaction leaves no orphan behind (issue 12, item 12; langchain #38352) -------------


@PROPERTY
@given(histories(min_tool_batches=1), damage_ops)
def test_the_tail_after_a_safe_cut_is_valid_even_in_a_broken_history(
    msgs: list[BaseMessage], ops: list[tuple[str, int, int]]
) -> None:
    damaged = damage(msgs, ops)
    for i in range(len(damaged) + 1):
        c = find_safe_cut(damaged, i)
        assert 0 <= c <= len(damaged)
        validate_history(damaged[c:], allow_pending=True)
        if is_valid(damaged, allow_pending=True):
            assert c <= i  # a valid history never moves forward


def _orphan_history() -> list[BaseMessage]:
    """An orphan result in the state (langchain #38352): providers answer it with 400."""
    msgs: list[BaseMessage] = [HumanMessage("Task: fix the build", id="task")]
    for k in range(6):
        msgs.append(AIMessage("", tool_calls=[_call(f"c{k}")], id=f"a{k}"))
        msgs.append(ToolMessage(f"log {k} " * 40, tool_call_id=f"c{k}", id=f"r{k}"))
        if k == 3:
            msgs.append(ToolMessage("stray result", tool_call_id="lost", id="orphan"))
    msgs.append(AIMessage("all done", id="end"))
    return msgs


@pytest.mark.parametrize("keep", range(1, 10))
def test_compaction_leaves_no_orphan_behind(keep: int) -> None:
    from langchain_compact.compaction import compact_history
    from langchain_compact.config import CompactionConfig

    msgs = _orphan_history()
    assert not is_valid(msgs, allow_pending=True)  # precondition
    result = compact_history(msgs, config=CompactionConfig(keep_last_n=keep))
    validate_history(result.messages, allow_pending=True)
    assert "orphan" not in {m.id for m in result.messages}
    assert "orphan" in {m.id for m in result.compacted}  # summarised (and archived), not lost
