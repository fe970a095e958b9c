"""`compact_history` / `acompact_history` / `decide` as pure functions (docs/design.md, B5, B6)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from _scenarios import (
    OVERLONG_TEXT,
    FailingSummarizer,
    MemoryArchive,
    RaisingExtractive,
    RecordingSummarizer,
    manual_loop,
    play,
)
from langchain_core.language_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import langchain_compact._ops as ops_module
from langchain_compact import CompactionConfig, SummarizerError
from langchain_compact.compaction import (
    CompactionResult,
    acompact_history,
    compact_history,
    decide,
)
from langchain_compact.demo import DependentTask
from langchain_compact.history import validate_history
from langchain_compact.markers import KIND_PINNED_TASK, KIND_SUMMARY, get_meta, kind_of, with_meta
from langchain_compact.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from langchain_compact.tokens import approximate_tokens, context_tokens, precise_counter


async def compact(mode: str, messages: Sequence[BaseMessage], **kwargs: Any) -> CompactionResult:
    if mode == "sync":
        return compact_history(messages, **kwargs)
    return await acompact_history(messages, **kwargs)


MODES = ["sync", "async"]


def tool_round(k: int, body: str, *, calls: int = 1) -> list[BaseMessage]:
    """One AIMessage with ``calls`` parallel tool calls and their results."""
    tcs = [
        {"name": "read_file", "args": {"path": f"/srv/app/mod{k}_{j}.py"}, "id": f"c{k}_{j}"}
        for j in range(calls)
    ]
    out: list[BaseMessage] = [AIMessage("", tool_calls=tcs, id=f"a{k}")]
    for j in range(calls):
        text = f"reading mod{k}_{j}\n{body}\nexit status {100 + k}{j}"
        out.append(ToolMessage(text, tool_call_id=f"c{k}_{j}", name="read_file", id=f"t{k}_{j}"))
    return out


LOG = "\n".join(f"DEBUG worker-{i % 4} step {i} ok in {i * 7} ms" for i in range(40))
"""A 40-line log body (about 1,400 characters)."""


def sample_history(rounds: int = 6, *, system: bool = True, body: str = LOG) -> list[BaseMessage]:
    msgs: list[BaseMessage] = (
        [SystemMessage("You are a careful agent.", id="sys")] if system else []
    )
    msgs.append(HumanMessage("Fix ticket QX-4821. You must never touch prod.", id="task"))
    for k in range(1, rounds + 1):
        msgs += tool_round(k, body)
    msgs.append(AIMessage("All files read; patching next.", id="final-ai"))
    return msgs


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("mode", MODES)
async def test_pinned_task_boundary_metadata_and_archive(mode: str) -> None:
    history = sample_history()
    archive = MemoryArchive()
    config = CompactionConfig(context_window=10_000, keep_last_n=3)
    result = await compact(mode, history, config=config, archive=archive, thread_id="th")

    new = result.messages
    assert new[0] is history[0]
    assert kind_of(new[1]) == KIND_PINNED_TASK
    assert (new[1].id, new[1].content) == ("task", history[1].content)
    summary = new[2]
    assert summary is result.summary and kind_of(summary) == KIND_SUMMARY
    assert isinstance(summary, HumanMessage), "default summary_role is human"
    meta = get_meta(summary)
    tail = history[-3:]
    assert new[3:] == tail
    assert meta["index"] == 1
    assert meta["kept_ids"] == [m.id for m in tail]
    (record,) = archive.records
    assert meta["archive_ref"] == result.archive_ref == record["ref"]
    assert record["thread_id"] == "th"
    assert [m.id for m in record["messages"]] == [m.id for m in history[2:-3]]
    assert [m.id for m in result.compacted] == [m.id for m in history[2:-3]]
    assert meta["span_ids"] == [m.id for m in history[2:-3]]
    assert result.tokens_before == meta["tokens_before"] == approximate_tokens(history)
    # Counted with tiktoken (the estimate errs high), and the boundary's calibration makes
    # the estimate of the new history say the same.
    assert result.tokens_after == meta["tokens_after"] == precise_counter()(new)  # type: ignore[misc]
    assert context_tokens(new) == result.tokens_after
    assert result.tokens_after < result.tokens_before
    assert f"archived as {record['ref']}" in summary.text
    assert result.summarizer == meta["summarizer"] == "ExtractiveSummarizer"
    validate_history(new)


async def test_sync_and_async_give_identical_results() -> None:
    history = sample_history()
    config = CompactionConfig(context_window=10_000)
    a = compact_history(history, config=config)
    b = await acompact_history(history, config=config)
    assert a.messages == b.messages
    assert (a.tokens_before, a.tokens_after, a.removed_ids) == (
        b.tokens_before,
        b.tokens_after,
        b.removed_ids,
    )


@pytest.mark.parametrize("keep", range(0, 12))
def test_kept_tail_never_splits_a_parallel_batch(keep: int) -> None:
    history: list[BaseMessage] = [HumanMessage("Task: read everything", id="task")]
    history += tool_round(1, "a" * 200)
    history += tool_round(2, "b" * 200, calls=4)  # a parallel batch of four
    history += tool_round(3, "c" * 200, calls=2)
    result = compact_history(history, config=CompactionConfig(keep_last_n=keep))
    validate_history(result.messages)
    if result.summary is None:
        return
    b = result.messages.index(result.summary)
    tail = result.messages[b + 1 :]
    assert not tail or not isinstance(tail[0], ToolMessage)
    assert len(tail) >= min(keep, len(history) - 1) or len(tail) == 0
    assert tail == history[len(history) - len(tail) :]
    for batch_ai in ("a2", "a3"):
        ai = next(m for m in history if m.id == batch_ai)
        assert isinstance(ai, AIMessage)
        in_tail = {m.id for m in tail}
        group = {batch_ai} | {f"t{batch_ai[1:]}_{j}" for j in range(len(ai.tool_calls))}
        assert group <= in_tail or not group & in_tail, f"batch {batch_ai} was split"


def test_removed_ids_and_deterministic_summary_id() -> None:
    history = sample_history()
    config = CompactionConfig(keep_last_n=4)
    one = compact_history(history, config=config)
    two = compact_history(list(history), config=config)
    assert one.summary is not None and two.summary is not None
    assert one.summary.id == two.summary.id
    assert one.summary.id is not None and one.summary.id.startswith("lc-compact-summary-")
    kept = {m.id for m in one.messages}
    assert one.removed_ids == [m.id for m in history if m.id not in kept]
    assert set(one.removed_ids) == {m.id for m in one.compacted}
    assert "task" not in one.removed_ids and "sys" not in one.removed_ids
    changed = [*history[:3], history[3].model_copy(update={"content": "other"}), *history[4:]]
    other = compact_history(changed, config=config)
    assert other.summary is not None and other.summary.id != one.summary.id


def test_redactor_is_applied_to_what_is_summarised_and_archived() -> None:
    # A key = value line with data: the kind of line a summary keeps of a tool result.
    history = sample_history(body="deploy v2 with password=hunter2 and token 9f8e7d6c5b4a")
    archive = MemoryArchive()

    def redact(text: str) -> str:
        return text.replace("hunter2", "[REDACTED]").replace("9f8e7d6c5b4a", "[REDACTED]")

    config = CompactionConfig(keep_last_n=2, redactor=redact)
    result = compact_history(history, config=config, archive=archive)
    assert result.summary is not None
    assert "hunter2" not in result.summary.text and "9f8e7d6c5b4a" not in result.summary.text
    assert "[REDACTED]" in result.summary.text
    archived = " ".join(m.text for m in archive.records[0]["messages"])
    assert "hunter2" not in archived and "[REDACTED]" in archived
    plain = compact_history(history, config=config.replace(redactor=None))
    assert plain.summary is not None and "hunter2" in plain.summary.text, "control"


def test_nothing_to_compact_returns_the_input() -> None:
    history = [HumanMessage("task", id="task"), AIMessage("ok", id="a")]
    result = compact_history(history, config=CompactionConfig(keep_last_n=4))
    assert result.summary is None and result.messages == history
    assert result.reason == "nothing to compact"


def test_without_an_archive_the_summary_promises_no_recall() -> None:
    result = compact_history(sample_history(), config=CompactionConfig(keep_last_n=2))
    assert result.summary is not None and result.archive_ref is None
    assert "recall_archived" not in result.summary.text
    assert "originals are archived" not in result.summary.text


# --------------------------------------------------------------------------- tool-only span


def test_span_of_only_tool_calls_gets_a_real_summary_with_outcome_lines() -> None:
    task = DependentTask(steps=6, payload_chars=1500)
    history = play(task, rounds=6)
    result = compact_history(history, config=CompactionConfig(keep_last_n=2))
    assert result.summary is not None
    assert not any(isinstance(m, HumanMessage) for m in result.compacted), "tool-only span"
    values = task.expected_values()
    compacted_steps = [
        c["args"]["step"]
        for m in result.compacted
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    ]
    assert compacted_steps == [1, 2, 3, 4, 5]
    for k in compacted_steps:
        assert f"RESULT step={k} value={values[k - 1]}" in result.summary.text
    assert "## 2. Confirmed facts and data" in result.summary.text
    assert "run_step" in result.summary.text


# --------------------------------------------------------------------------- merge


class ScriptedSummarizer:
    """Short summaries of normal spans (so nothing is trimmed); a terse 'merged.' for merges."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        self.calls.append(list(messages))
        if all(kind_of(m) == KIND_SUMMARY for m in messages):
            return "merged."
        return "worked on: " + ", ".join(str(m.id) for m in messages)

    async def asummarize(self, messages: Sequence[BaseMessage], *, max_tokens: int) -> str:
        return self.summarize(messages, max_tokens=max_tokens)


def grow(history: list[BaseMessage], k: int, fact: str) -> list[BaseMessage]:
    return [*history, HumanMessage(f"note {k}: {fact}", id=f"n{k}"), *tool_round(k, "y" * 150)]


@pytest.mark.parametrize("mode", MODES)
async def test_summaries_merge_only_past_the_budget_and_fidelity_runs_on_the_merge(
    mode: str,
) -> None:
    facts = [
        "ticket QX-4821",
        "path /srv/app/settings.py",
        "https://ci.example.com/run/77",
        "port 50123",
    ]
    summarizer = ScriptedSummarizer()
    config = CompactionConfig(context_window=1200, keep_last_n=2)
    history: list[BaseMessage] = [HumanMessage("Task: harden the service.", id="task")]
    results = []
    for k, fact in enumerate(facts, 1):
        history = grow(history, k, fact)
        result = await compact(mode, history, summarizer=summarizer, config=config)
        results.append(result)
        history = result.messages
    assert [r.merged for r in results][:2] == [0, 0], "one summary, then two: under budget"
    merge_at = next(i for i, r in enumerate(results) if r.merged)
    merged_result = results[merge_at]
    # The merge is the only call that received summaries, and it received exactly them.
    with_summaries = [c for c in summarizer.calls if any(kind_of(m) == KIND_SUMMARY for m in c)]
    assert len(with_summaries) == sum(1 for r in results if r.merged)
    assert all(kind_of(m) == KIND_SUMMARY for c in with_summaries for m in c)
    assert len(with_summaries[0]) == merged_result.merged >= 2
    merged_msg = next(m for m in merged_result.messages if get_meta(m).get("merged_from"))
    assert get_meta(merged_msg)["merged_from"] == [m.id for m in with_summaries[0]]
    assert set(get_meta(merged_msg)["merged_from"]) <= set(merged_result.removed_ids)
    # The summarizer said only "merged.": the fidelity check restored every detail.
    assert "merged." in merged_msg.text and "## Supplement" in merged_msg.text
    for fact in facts[:merge_at]:
        assert fact.split()[-1] in merged_msg.text, fact
    validate_history(merged_result.messages)
    assert merged_result.messages[0].content == "Task: harden the service."


KEEP_RESULTS = ("run_step",)
"""micro_exclude_tools for the loops below: full compaction has to do the work."""


def test_merges_keep_every_value_their_summaries_held() -> None:
    task = DependentTask(steps=14, payload_chars=1000)
    config = CompactionConfig(context_window=3000, micro_exclude_tools=KEEP_RESULTS)
    recorder = RecordingSummarizer()
    run = manual_loop(task, config=config, summarizer=recorder)
    assert task.check(run.final.text).ok
    merges = [r for r in run.results if r.merged]
    merge_calls = [c for c in recorder.calls if all(kind_of(m) == KIND_SUMMARY for m in c.messages)]
    assert merges and len(merge_calls) == len(merges)
    for result, call in zip(merges, merge_calls, strict=True):
        held = " ".join(m.text for m in call.messages)
        values = [v for v in task.expected_values() if str(v) in held]
        assert values, "the merged summaries held step values"
        merged_msg = next(m for m in result.messages if get_meta(m).get("merged_from"))
        lost = [v for v in values if str(v) not in merged_msg.text]
        assert not lost, f"{len(lost)} of {len(values)} values lost by the merge"


def test_without_a_merge_summaries_stay_verbatim_and_the_run_finishes() -> None:
    task = DependentTask(steps=14, payload_chars=1000)
    config = CompactionConfig(
        context_window=3000, summary_budget_ratio=1.0, micro_exclude_tools=KEEP_RESULTS
    )
    run = manual_loop(task, config=config)
    assert len(run.results) >= 3 and not any(r.merged for r in run.results)
    assert task.check(run.final.text).ok
    first = run.results[0].summary
    assert first is not None
    assert [m.content for m in run.history if m.id == first.id] == [first.content]


# --------------------------------------------------------------------------- failures


def llm_with_tool_call() -> tuple[LLMSummarizer, Callable[[], int]]:
    reply = AIMessage("", tool_calls=[{"name": "run_step", "args": {"step": 1}, "id": "x"}])
    fake = FakeMessagesListChatModel(responses=[reply] * 10)
    return LLMSummarizer(fake), lambda: fake.i


def failing(kind: str) -> tuple[Summarizer, Callable[[], int]]:
    if kind == "tool_call":
        return llm_with_tool_call()
    s = FailingSummarizer(kind)
    return s, lambda: s.calls


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["exception", "timeout", "empty", "tool_call", "overlong"])
async def test_summarizer_failure_retries_then_falls_back_and_loses_nothing(
    kind: str, mode: str
) -> None:
    history = sample_history()
    config = CompactionConfig(
        context_window=10_000,
        keep_last_n=3,
        summarizer_retries=1,
        summarizer_timeout=0.05,
        summary_max_tokens=400,
    )
    summarizer, calls = failing(kind)
    result = await compact(mode, history, summarizer=summarizer, config=config)
    reference = compact_history(history, config=config, summarizer=ExtractiveSummarizer())

    assert calls() == 2, "one try and one retry"
    assert result.summarizer == "fallback:ExtractiveSummarizer"
    assert len(result.errors) == 2
    assert result.summary is not None and reference.summary is not None
    assert result.summary.content == reference.summary.content, "the full fallback summary"
    assert [(m.id, m.content) for m in result.messages] == [
        (m.id, m.content) for m in reference.messages
    ]
    assert OVERLONG_TEXT[:200] not in result.summary.text
    assert get_meta(result.summary)["summarizer"] == "fallback:ExtractiveSummarizer"


@pytest.mark.parametrize("mode", MODES)
async def test_extractive_failing_raises_and_changes_nothing(mode: str) -> None:
    history = sample_history()
    snapshot = [m.model_copy(deep=True) for m in history]
    RaisingExtractive.calls = 0
    with pytest.raises(SummarizerError, match="every summarizer failed"):
        await compact(mode, history, summarizer=RaisingExtractive(), config=CompactionConfig())
    assert RaisingExtractive.calls == 2
    assert history == snapshot


@pytest.mark.parametrize("mode", MODES)
async def test_primary_and_fallback_failing_raise(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ops_module, "ExtractiveSummarizer", RaisingExtractive)  # the fallback
    RaisingExtractive.calls = 0
    primary = FailingSummarizer("exception")
    history = sample_history()
    with pytest.raises(SummarizerError) as info:
        await compact(mode, history, summarizer=primary, config=CompactionConfig())
    assert (primary.calls, RaisingExtractive.calls) == (2, 1)
    assert "HTTP 503" in str(info.value) and "broken on purpose" in str(info.value)


# --------------------------------------------------------------------------- decide


def with_usage(message: BaseMessage, tokens: int) -> AIMessage:
    assert isinstance(message, AIMessage)
    return message.model_copy(
        update={
            "usage_metadata": {
                "input_tokens": tokens,
                "output_tokens": 10,
                "total_tokens": tokens + 10,
            }
        }
    )


def test_decide_uses_reported_usage_over_the_local_estimate() -> None:
    history = sample_history(rounds=2)
    config = CompactionConfig(context_window=2000, keep_last_n=2)
    local = approximate_tokens(history)
    assert local < 1500
    assert decide(history, config=config).action == "continue"
    history[-1] = with_usage(history[-1], 1600)  # tool schemas etc. the estimate cannot see
    decision = decide(history, config=config)
    assert (decision.action, decision.tokens) == ("compact", 1610)
    assert decision.trigger == 1500


def test_decide_after_compaction_ignores_stale_usage_on_kept_messages() -> None:
    history = sample_history(rounds=4)
    config = CompactionConfig(context_window=4000, keep_last_n=3)
    history[-1] = with_usage(history[-1], 5000)
    assert decide(history, config=config).action == "compact"
    result = compact_history(history, config=config)
    assert any(m.id == "final-ai" for m in result.messages), "the usage message was kept"
    decision = decide(result.messages, config=config)
    assert decision.action == "continue"
    # Counted locally, calibrated on the last report before the compaction (a ratio within
    # 0.7..1.5, the rest as fixed overhead capped at a quarter of the window), not the stale
    # 5000.
    meta = get_meta(result.messages[[kind_of(m) for m in result.messages].index(KIND_SUMMARY)])
    ratio = meta["calibration"]
    assert 0.7 <= ratio <= 1.5 and meta["overhead"] == 1000
    local = approximate_tokens(result.messages)
    assert decision.tokens == context_tokens(result.messages) == round(local * ratio) + 1000
    assert decision.tokens < 5000


def test_decide_stops_when_the_kept_tail_alone_is_over() -> None:
    """Issue 19 changed this on purpose: a kept tail (``keep_last_n``) over the fit limit no
    longer stops; it shrinks, whole batches at a time, down to the newest turn, and the
    turns before it are summarised. A stop only when the newest turn alone cannot fit."""
    config = CompactionConfig(context_window=1000)
    assert config.fit_tokens is not None
    # Four messages, all within keep_last_n=4: the engine before issue 19 stopped here.
    older = AIMessage("plan: " + "z" * 4000, id="plan")
    history = [HumanMessage("task", id="task"), older, *tool_round(1, "z" * 3000)]
    assert context_tokens(history) > config.fit_tokens
    assert decide(history, config=config).action == "compact"
    result = compact_history(history, config=config)
    assert [m.id for m in result.compacted] == ["plan"]
    assert result.tokens_after <= config.fit_tokens
    # The newest turn alone over the window. (12,000 characters: the 6,000 this used were
    # 1,700 tokens at 3.6 characters per token, ~860 by the piece-based estimate: under the
    # 950-token fit limit.)
    history = [HumanMessage("task", id="task"), *tool_round(1, "z" * 12000)]
    decision = decide(history, config=config)
    assert decision.action == "stop"
    assert "nothing is left to compact" in decision.reason


def compacted_then(turns: int, *, config: CompactionConfig, size: int) -> list[BaseMessage]:
    history = sample_history(rounds=4)
    history = compact_history(history, config=config).messages
    for k in range(10, 10 + turns):
        history += tool_round(k, "w" * size)
    return history


def test_decide_limits_max_compactions_cooldown_and_thrash() -> None:
    base = CompactionConfig(context_window=1500, keep_last_n=2)
    # over the trigger, still fits ("w" * 240: 120 o200k tokens; 800 of them are 400)
    two_turns = compacted_then(2, config=base, size=240)
    assert context_tokens(two_turns) >= base.trigger_tokens  # type: ignore[operator]
    assert decide(two_turns, config=base).action == "compact"
    stop = decide(two_turns, config=base.replace(max_compactions=1))
    assert (stop.action, stop.reason) == (
        "stop",
        "the compaction limit max_compactions=1 is reached",
    )
    assert decide(two_turns, config=base.replace(cooldown_turns=3)).action == "continue"
    assert decide(two_turns, config=base.replace(cooldown_turns=2)).action == "compact"
    # Thrash: a compaction that left the context over the trigger and no smaller, and the
    # context over the trigger again one turn later: a limit of 1 stops at once.
    one_turn = compacted_then(1, config=base, size=2400)
    assert decide(one_turn, config=base).action == "compact"
    stuck = stuck_once(one_turn)
    assert decide(stuck, config=base).action == "compact"
    thrash = decide(stuck, config=base.replace(thrash_limit=1))
    assert thrash.action == "stop" and thrash.reason.startswith("thrash guard: 1 compactions")
    # A compaction that freed room is progress: the same history with streak 0 goes on.
    assert decide(one_turn, config=base.replace(thrash_limit=1)).action == "compact"


def stuck_once(history: list[BaseMessage]) -> list[BaseMessage]:
    """``history`` with its newest summary marked as a compaction that made no progress."""
    i = max(j for j, m in enumerate(history) if kind_of(m) == KIND_SUMMARY)
    return [*history[:i], with_meta(history[i], refill_streak=1), *history[i + 1 :]]


# --------------------------------------------------------------------------- long runs


def test_three_compactions_keep_the_task_verbatim_and_every_history_valid() -> None:
    task = DependentTask(steps=14, payload_chars=1000)
    config = CompactionConfig(
        context_window=3000, summary_budget_ratio=1.0, micro_exclude_tools=KEEP_RESULTS
    )
    run = manual_loop(task, config=config)
    assert len(run.results) >= 3
    assert task.check(run.final.text).ok
    for history in run.histories:
        validate_history(history, allow_pending=True)
        assert history[0].content == task.prompt()
    for result in run.results:
        validate_history(result.messages)
        assert result.messages[0].content == task.prompt()
        assert kind_of(result.messages[0]) == KIND_PINNED_TASK
    for seen in run.model_inputs:
        assert sum(m.content == task.prompt() for m in seen) == 1


def test_tail_slimming_keeps_the_ref_that_holds_an_earlier_cut_original(tmp_path: Any) -> None:
    """A result cut earlier (its original archived under ref R1) that a compaction's tail
    slimming clears keeps R1: the new record does not hold it, so tagging the new ref would
    send recall to a record without the original."""
    from langchain_compact._compaction_phases import slim_tail
    from langchain_compact._ops import drive
    from langchain_compact.archive import JsonlArchive
    from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED

    archive = JsonlArchive(directory=tmp_path)
    original = ToolMessage("early " * 400, tool_call_id="c1", name="read", id="t1")
    r1 = archive.write([original], thread_id="th", reason="micro-compaction")
    cut = with_meta(
        original.model_copy(update={"content": "early " * 100 + "[... cut ...]"}),
        kind=KIND_TRUNCATED,
        archive_ref=r1,
    )
    tail: list[BaseMessage] = [
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "c1"}], id="a1"),
        cut,
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "c2"}], id="a2"),
        ToolMessage("later " * 400, tool_call_id="c2", name="read", id="t2"),
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "c3"}], id="a3"),
        ToolMessage("newest " * 40, tool_call_id="c3", name="read", id="t3"),
        AIMessage("done reading", id="a4"),
    ]
    config = CompactionConfig(context_window=4000)
    out = drive(slim_tail(tail, config, archive, "th", approximate_tokens, keep=0))

    by_id = {m.id: m for m in out}
    assert kind_of(by_id["t1"]) == KIND_CLEARED and kind_of(by_id["t2"]) == KIND_CLEARED
    assert get_meta(by_id["t1"])["archive_ref"] == r1
    r2 = get_meta(by_id["t2"])["archive_ref"]
    assert r2 != r1
    assert [m.id for m in archive.read(r1, thread_id="th")] == ["t1"]
    assert "t1" not in [m.id for m in archive.read(r2, thread_id="th")]


def test_a_merge_prepared_with_the_summary_is_what_the_trigger_uses() -> None:
    """The merge of the earlier summaries is made beside the model call with the summary
    (premerge), so the compaction at the trigger does no merge work; a merge over other
    summaries than the prepared one was made for is done on the spot."""
    from langchain_compact._compaction_phases import Compaction, compaction_steps, premerge
    from langchain_compact._compaction_plan import plan_compaction
    from langchain_compact._ops import drive

    summarizer = ScriptedSummarizer()
    config = CompactionConfig(context_window=1200, keep_last_n=2)
    history: list[BaseMessage] = [HumanMessage("Task: harden the service.", id="task")]
    for k in range(1, 3):  # two compactions: two summaries in the head
        history = grow(history, k, f"fact {k}")
        history = compact_history(history, summarizer=summarizer, config=config).messages
    history = grow(history, 3, "fact 3")
    plan = plan_compaction(history, config)
    assert plan is not None
    config = config.replace(summary_budget_ratio=0.05)  # the summaries are over it already
    text = "worked on: a1, t1_0"
    ids, merged = premerge(plan.head, text, config, approximate_tokens)
    assert len(ids) == 2 and merged
    for ready, used in (((tuple(ids), "PREPARED MERGE"), True), ((("other",), "NO"), False)):
        calls = len(summarizer.calls)
        job = Compaction(
            history,
            plan,
            config,
            summarizer,
            prepared_text=text,
            prepared_covers=len(plan.span),
            prepared_merge=ready,
        )
        result = drive(compaction_steps(job))
        assert result.merged == 2
        assert ("PREPARED MERGE" in result.messages[1].text) is used
        assert len(summarizer.calls) == calls  # the prepared summary: no model call either way


def test_a_merge_the_supplement_could_make_due_is_prepared_too() -> None:
    """premerge sees the summary without the fidelity supplement the trigger adds to it:
    when the summaries and the summary fit the budget but the supplement could push them
    over, the merge is prepared as well (else the trigger merged on the spot, a model call
    or a condensing pass in the pause that preparing removes)."""
    from langchain_compact._compaction_phases import premerge
    from langchain_compact._compaction_plan import plan_compaction
    from langchain_compact._ops import facts_bound
    from langchain_compact.budget import SUMMARY_HEADER_TOKENS
    from langchain_compact.markers import KIND_SUMMARY, kind_of

    summarizer = ScriptedSummarizer()
    config = CompactionConfig(context_window=1200, keep_last_n=2)
    history: list[BaseMessage] = [HumanMessage("Task: harden the service.", id="task")]
    for k in range(1, 3):
        history = grow(history, k, f"fact {k}")
        history = compact_history(history, summarizer=summarizer, config=config).messages
    history = grow(history, 3, "fact 3")
    plan = plan_compaction(history, config)
    assert plan is not None
    text = "worked on: a1, t1_0"
    earlier = [m for m in plan.head if kind_of(m) == KIND_SUMMARY]
    assert len(earlier) == 2
    window = 100_000
    fits = (
        approximate_tokens(earlier)
        + approximate_tokens([HumanMessage(text)])
        + SUMMARY_HEADER_TOKENS
        + 1  # the summaries and the summary fit, with a token to spare
    )
    config = config.replace(context_window=window, summary_budget_ratio=(fits + 0.5) / window)
    assert int(config.summary_budget_ratio * window) == fits
    assert facts_bound(config) > 1  # the supplement alone could pass the budget
    ids, merged = premerge(plan.head, text, config, approximate_tokens)
    assert len(ids) == 2 and merged

    # With room for the largest supplement beside them (the bound grows with the budget),
    # nothing is prepared; a token less, and the merge is.
    def at(budget: int) -> CompactionConfig:
        return config.replace(summary_budget_ratio=(budget + 0.5) / window)

    roomy = next(b for b in range(fits, 10 * window) if fits - 1 + facts_bound(at(b)) <= b)
    assert premerge(plan.head, text, at(roomy), approximate_tokens) == ([], "")
    assert premerge(plan.head, text, at(roomy - 1), approximate_tokens)[0] == ids
