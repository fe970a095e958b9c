"""The per-turn fast paths give the full scan's answers, and read only what is new.

Reference implementations below are the full passes over the history that the package
used before the facts were remembered per history (boundary lookup, fresh anchor with the
tokens credited back, counts since the boundary, the original task).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_compact import markers
from langchain_compact._scan import FactsMemo
from langchain_compact.compaction import (
    compaction_info,
    decide,
    effective_trigger,
    removed_since_boundary,
)
from langchain_compact.config import CompactionConfig
from langchain_compact.history import last_boundary_index, original_task_index
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
    with_meta,
)
from langchain_compact.microcompact import micro_compact, micro_compact_with_count
from langchain_compact.tokens import approximate_tokens, context_tokens

# --------------------------------------------------------------------------- references


def ref_boundary(messages: Sequence[BaseMessage]) -> tuple[int, set[str]]:
    for i in range(len(messages) - 1, -1, -1):
        if kind_of(messages[i]) == KIND_SUMMARY:
            return i, {str(k) for k in get_meta(messages[i]).get("kept_ids") or []}
    return -1, set()


def ref_context_tokens(messages: Sequence[BaseMessage]) -> int:
    b, stale = ref_boundary(messages)
    scale, overhead = 1.0, 0
    if b >= 0:
        meta = get_meta(messages[b])
        ratio = meta.get("calibration")
        if isinstance(ratio, float) and 0.7 <= ratio <= 1.5:
            scale, overhead = ratio, int(meta.get("overhead", 0))
    for i in range(len(messages) - 1, b, -1):
        msg = messages[i]
        usage = msg.usage_metadata if isinstance(msg, AIMessage) else None
        if not usage or (msg.id is not None and msg.id in stale):
            continue
        anchored = usage["input_tokens"] + usage["output_tokens"]
        credit = sum(
            int(get_meta(m).get("saved_tokens", 0))
            for m in messages[:i]
            if msg.id is not None and get_meta(m).get("usage_anchor") == msg.id
        )
        rest = messages[i + 1 :]
        local = round(
            approximate_tokens(rest) * max(scale, ref_report_scale(messages, i, b, stale))
        )
        return max(0, anchored - credit) + (local if rest else 0)
    return round(approximate_tokens(messages) * scale) + overhead


def ref_report_scale(messages: Sequence[BaseMessage], i: int, b: int, stale: set[str]) -> float:
    """The provider's ratio on what the report at ``i`` added since the one before it."""
    j = next(
        (
            k
            for k in range(i - 1, b, -1)
            if isinstance(messages[k], AIMessage) and messages[k].usage_metadata
        ),
        None,
    )
    if j is None or messages[j].id in stale:
        return 1.0
    added = messages[j:i]
    reduced = any(
        get_meta(m).get("saved_tokens") or get_meta(m).get("removed_tokens") for m in added
    )
    local = approximate_tokens(added) - 3
    if reduced or len(added) < 2 or local < 200:
        return 1.0
    grew = messages[i].usage_metadata["input_tokens"] - messages[j].usage_metadata["input_tokens"]
    return min(1.5, max(1.0, grew / local))


def ref_info(messages: Sequence[BaseMessage]) -> tuple[int, int, int]:
    b, kept = ref_boundary(messages)
    if b < 0:
        return 0, sum(isinstance(m, AIMessage) for m in messages), 0
    meta = get_meta(messages[b])
    turns = sum(isinstance(m, AIMessage) and m.id not in kept for m in messages[b + 1 :])
    return int(meta.get("index", 1)), turns, int(meta.get("refill_streak", 0))


def ref_removed(messages: Sequence[BaseMessage]) -> int:
    b, _ = ref_boundary(messages)
    return sum(
        int(get_meta(m).get("removed_tokens", get_meta(m).get("saved_tokens", 0)))
        for m in messages[b + 1 :]
        if kind_of(m) in (KIND_CLEARED, KIND_TRUNCATED)
    )


def ref_task(messages: Sequence[BaseMessage]) -> int:
    first = -1
    for i, msg in enumerate(messages):
        kind = kind_of(msg)
        if kind == KIND_PINNED_TASK:
            return i
        if first < 0 and isinstance(msg, HumanMessage) and kind not in (KIND_SUMMARY, KIND_STOP):
            first = i
    return first


# --------------------------------------------------------------------------- histories


def usage(n: int) -> dict[str, int]:
    return {"input_tokens": n, "output_tokens": 7, "total_tokens": n + 7}


def random_message(rng: random.Random, k: int, ids: list[str]) -> BaseMessage:
    """One message of a plausible history (markers included), id ``m{k}``."""
    roll = rng.random()
    mid = f"m{k}"
    if roll < 0.25:
        return AIMessage(
            "step " * rng.randint(1, 30),
            id=mid,
            usage_metadata=usage(rng.randint(50, 5_000)) if rng.random() < 0.7 else None,
        )
    if roll < 0.55:
        msg: BaseMessage = ToolMessage("out " * rng.randint(1, 200), tool_call_id=f"c{k}", id=mid)
        if rng.random() < 0.3:
            kind = rng.choice([KIND_CLEARED, KIND_TRUNCATED])
            fields: dict[str, Any] = {"kind": kind, "saved_tokens": rng.randint(1, 300)}
            if rng.random() < 0.5:
                fields["removed_tokens"] = rng.randint(1, 500)
            if ids and rng.random() < 0.7:
                fields["usage_anchor"] = rng.choice(ids)
            msg = with_meta(msg, **fields)
        return msg
    if roll < 0.75:
        msg = HumanMessage("ask " * rng.randint(1, 20), id=mid)
        if rng.random() < 0.05:
            msg = with_meta(msg, kind=KIND_PINNED_TASK)
        return msg
    if roll < 0.8:
        kept = rng.sample(ids, min(len(ids), rng.randint(0, 3)))
        fields = {"kind": KIND_SUMMARY, "index": rng.randint(1, 5), "kept_ids": kept}
        if rng.random() < 0.5:
            fields["refill_streak"] = rng.randint(0, 3)
        if rng.random() < 0.5:
            fields["tokens_after"] = rng.randint(100, 9_000)
        if rng.random() < 0.5:
            fields["calibration"] = rng.choice([0.9, 1.2, 3.0])
            fields["overhead"] = rng.randint(0, 200)
        return with_meta(HumanMessage("summary " * 10, id=mid), **fields)
    if roll < 0.83:
        return with_meta(AIMessage("stopped", id=mid), kind=KIND_STOP)
    return SystemMessage("rules", id=mid)


def random_history(rng: random.Random, n: int, start: int = 0) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    ids: list[str] = []
    for k in range(start, start + n):
        msg = random_message(rng, k, ids)
        if isinstance(msg, AIMessage):
            ids.append(str(msg.id))
        out.append(msg)
    return out


CONFIG = CompactionConfig(context_window=12_000)


def check_all(messages: list[BaseMessage], memo: FactsMemo | None = None) -> None:
    """Every fast path equals its full-scan reference on ``messages`` (read through
    ``memo``, a thread's memo of earlier histories, when given)."""
    assert last_boundary_index(messages, memo=memo) == ref_boundary(messages)[0]
    assert original_task_index(messages, memo=memo) == ref_task(messages)
    assert removed_since_boundary(messages, memo=memo) == ref_removed(messages)
    info = compaction_info(messages, memo=memo)
    assert (info.count, info.turns_since, info.refill_streak) == ref_info(messages)
    assert context_tokens(messages, memo=memo) == ref_context_tokens(messages)
    b, _ = ref_boundary(messages)
    after = get_meta(messages[b]).get("tokens_after") if b >= 0 else None
    trigger = CONFIG.trigger_tokens
    assert trigger is not None and CONFIG.fit_tokens is not None
    expected = trigger
    if isinstance(after, int) and after >= trigger:
        expected = max(trigger, min(CONFIG.fit_tokens, (after + CONFIG.fit_tokens) // 2))
    assert effective_trigger(messages, CONFIG, memo=memo) == expected


@pytest.mark.parametrize("seed", range(12))
def test_fast_paths_equal_the_full_scan_on_random_histories(seed: int) -> None:
    rng = random.Random(seed)
    history = random_history(rng, rng.randint(1, 300))
    check_all(history)


@pytest.mark.parametrize("seed", range(6))
def test_a_history_that_grows_turn_by_turn_keeps_the_full_scans_answers(seed: int) -> None:
    rng = random.Random(100 + seed)
    memo = FactsMemo()
    history = random_history(rng, 120)
    k = len(history)
    for _turn in range(25):
        check_all(history, memo)
        new = random_history(rng, rng.randint(1, 6), start=k)
        k += len(new)
        history = [*history, *new]  # a new list, the same objects: as a graph state grows
    check_all(history, memo)
    assert len(memo) >= 1


@pytest.mark.parametrize("seed", range(6))
def test_forks_and_same_id_edits_are_not_served_from_the_memo(seed: int) -> None:
    rng = random.Random(200 + seed)
    memo = FactsMemo()
    base = random_history(rng, 150)
    check_all(base, memo)
    # A fork from a checkpoint: an earlier prefix, then other messages.
    fork = [*base[:90], *random_history(rng, 30, start=1_000)]
    check_all(fork, memo)
    check_all(base, memo)
    # Edits with the same ids: a new object with other metadata in the middle.
    for _ in range(5):
        edited = list(base)
        i = rng.randrange(1, len(base) - 1)
        old = edited[i]
        replacement = random_message(rng, 5_000 + i, [str(m.id) for m in base[:i]])
        edited[i] = replacement.model_copy(update={"id": old.id})
        check_all(edited, memo)
        check_all(base, memo)


def test_an_edited_boundary_with_the_same_id_changes_the_answers() -> None:
    history: list[BaseMessage] = [HumanMessage("task", id="task")]
    for k in range(80):
        history.append(AIMessage(f"a{k}", id=f"a{k}", usage_metadata=usage(1_000 + k)))
        history.append(ToolMessage("r" * 50, tool_call_id=f"c{k}", id=f"t{k}"))
    summary = with_meta(HumanMessage("summary", id="s"), kind=KIND_SUMMARY, index=1)
    history.insert(100, summary)
    memo = FactsMemo()
    assert compaction_info(history, memo=memo).count == 1  # now remembered
    edited = list(history)
    edited[100] = with_meta(summary, index=4, kept_ids=["a79"])  # same id, new metadata
    assert compaction_info(edited, memo=memo).count == 4
    assert (compaction_info(edited, memo=memo).turns_since,) == (ref_info(edited)[1],)
    assert context_tokens(edited, memo=memo) == ref_context_tokens(edited)


# --------------------------------------------------------------------------- cost


def get_meta_calls(fn: Any) -> int:
    """How many times ``markers.get_meta`` runs during ``fn()`` (however it was imported)."""
    code = markers.get_meta.__code__
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def long_thread(n: int, *, real_usage: bool = False) -> list[BaseMessage]:
    """A system prompt, a task and ``n`` tool rounds; with ``real_usage`` each call reports
    the local count of its input (else a token count that is far too small)."""
    history: list[BaseMessage] = [SystemMessage("rules", id="sys"), HumanMessage("go", id="task")]
    for k in range(n):
        call = {"name": "ls", "args": {}, "id": f"c{k}"}
        seen = approximate_tokens(history) if real_usage else 50 + k
        history.append(AIMessage("", tool_calls=[call], id=f"a{k}", usage_metadata=usage(seen)))
        history.append(ToolMessage("file " * 200, tool_call_id=f"c{k}", name="ls", id=f"t{k}"))
    return history


def test_a_turn_reads_the_metadata_of_the_new_messages_only() -> None:
    config = CompactionConfig(context_window=1_000_000)
    memo = FactsMemo()  # the thread's, as a compactor keeps it
    history = long_thread(1_500)  # 3,002 messages, far under the trigger
    micro_compact_with_count(history, config, memo=memo)
    decide(history, config=config, memo=memo)
    grown = [*history, *long_thread(1)[2:]]  # one more call and its result

    def turn(memo: FactsMemo | None) -> None:
        result = micro_compact_with_count(grown, config, memo=memo)
        decide(result.messages, config=config, tokens=result.tokens, memo=memo)

    assert get_meta_calls(lambda: turn(memo)) <= 20, "a turn must read only the new messages"
    # Without a memo (nothing remembered at module level) the same turn reads it all.
    assert get_meta_calls(lambda: turn(None)) >= len(grown)


def test_threads_that_start_with_the_same_message_object_do_not_evict_each_other() -> None:
    """Threads of one process often share their first message object (a module-level
    system prompt). Each turn of each thread still reads only its new messages, with the
    threads' turns interleaved (one remembered history per first message made every turn
    of either thread read the whole history again)."""
    config = CompactionConfig(context_window=1_000_000)
    shared = long_thread(600)
    threads = [list(shared), [shared[0], *long_thread(900)[1:]]]
    memos = [FactsMemo(), FactsMemo()]  # one per thread, as a compactor keeps them
    for history, memo in zip(threads, memos, strict=True):
        decide(history, config=config, memo=memo)
    for k in range(3):
        for t, history in enumerate(threads):
            history += [
                AIMessage("", id=f"x{t}-{k}", usage_metadata=usage(60 + k)),
                HumanMessage("next", id=f"h{t}-{k}"),
            ]
            grown = list(history)  # a new list of the same messages, as add_messages makes
            memo = memos[t]
            assert get_meta_calls(lambda h=grown, m=memo: decide(h, config=config, memo=m)) <= 20


# --------------------------------------------------------------------------- micro_compact


def test_micro_compact_with_count_returns_the_count_after_its_changes() -> None:
    config = CompactionConfig(context_window=16_000)
    history = long_thread(60, real_usage=True)
    for tokens in (None, context_tokens(history)):
        result = micro_compact_with_count(history, config, tokens=tokens)
        assert result.changed, "over the gate: old results are cleared"
        assert result.tokens == context_tokens(result.messages)
        assert decide(result.messages, config=config, tokens=result.tokens) == decide(
            result.messages, config=config
        )
        pairs = enumerate(zip(history, result.messages, strict=True))
        assert [i for i, (a, b) in pairs if a is not b] == list(result.changed)
        assert result.messages == micro_compact(history, config)


def test_micro_compact_with_count_under_the_gate_changes_nothing_and_counts_once() -> None:
    config = CompactionConfig(context_window=1_000_000)
    history = long_thread(60)
    result = micro_compact_with_count(history, config)
    assert result.changed == () and result.messages == history
    assert result.tokens == context_tokens(history)
    passed = micro_compact_with_count(history, config, tokens=12_345)
    assert passed.tokens == 12_345, "the caller's count is used as it is when nothing changes"
    out = micro_compact(history, config)
    assert out == history and out is not history, "micro_compact still returns a new list"


def test_a_large_result_edited_into_an_old_position_is_digested_after_a_quiet_turn() -> None:
    config = CompactionConfig(context_window=1_000_000, large_tool_result_chars=5_000)
    history = long_thread(60)
    assert micro_compact_with_count(history, config).changed == ()  # marks the history checked
    edited = list(history)
    old = edited[11]
    assert isinstance(old, ToolMessage)
    edited[11] = old.model_copy(update={"content": "line of output\n" * 1_000})  # same id
    result = micro_compact_with_count(edited, config)
    assert result.changed == (11,)
    assert kind_of(result.messages[11]) == KIND_TRUNCATED
    # Other settings check again from the start: a smaller limit finds the old results.
    smaller = config.replace(large_tool_result_chars=60, large_tool_result_keep_chars=20)
    assert len(micro_compact_with_count(history, smaller).changed) > 50


def test_a_bad_message_is_still_named() -> None:
    history: list[Any] = long_thread(40)
    history[5] = {"role": "user", "content": "hi"}
    from langchain_compact.errors import InvalidHistoryError

    with pytest.raises(InvalidHistoryError, match=r"messages\[5\]"):
        micro_compact(history, CompactionConfig(context_window=100_000))


def test_a_failure_while_extending_leaves_the_memo_consistent() -> None:
    history = long_thread(40)
    memo = FactsMemo()
    assert compaction_info(history, memo=memo).turns_since == 40  # remembered
    bad = with_meta(ToolMessage("x", tool_call_id="c0", id="bad"), kind=KIND_CLEARED)
    bad.response_metadata["langchain_compact"]["saved_tokens"] = "many"  # not a number
    for _ in range(2):  # the second call must read the bad message again, not the memo
        with pytest.raises(ValueError):
            compaction_info([*history, bad], memo=memo)
    grown = [*history, AIMessage("next", id="n")]
    assert compaction_info(grown, memo=memo).turns_since == 41
    assert compaction_info(history, memo=memo).turns_since == 40
