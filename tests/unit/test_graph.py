"""Graph scenarios (docs/design.md, B5/B6; docs/origins.md, section 2): whole agent runs, offline.

The agent is :class:`ContextReadingPolicy`, which can only take step k while step k-1's value
is visible in its input, on a :class:`DependentTask`; a run is judged by ``task.check`` against
``task.expected_values()``, so a lost fact shows up as a failed run, never as a number copied
from an earlier run.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from _scenarios import (
    FailingSummarizer,
    MemoryArchive,
    RaisingExtractive,
    RecordingSummarizer,
    ScriptedChatModel,
    all_checkpoint_histories,
    arun_graph,
    build_graph,
    manual_loop,
    play,
    run_graph,
    states_before,
)
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.tools import StructuredTool

import langchain_compact.summarizers as summarizers_module
from langchain_compact import CompactionConfig
from langchain_compact.compaction import decide
from langchain_compact.demo import DependentTask
from langchain_compact.history import validate_history
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
)
from langchain_compact.summarizers import SUMMARIZER_TAG, LLMSummarizer
from langchain_compact.tokens import approximate_tokens, context_tokens


def task_message(task: DependentTask) -> HumanMessage:
    return HumanMessage(task.prompt(), id="task")


def summaries(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if kind_of(m) == KIND_SUMMARY]


def step_results(messages: list[BaseMessage]) -> list[int]:
    """Steps whose run_step result is in ``messages`` (their ToolMessage is present)."""
    calls = {
        c["id"]: c["args"]["step"]
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    }
    return sorted(calls[m.tool_call_id] for m in messages if isinstance(m, ToolMessage))


def big_schema_tool(sentences: int = 130) -> StructuredTool:
    """A tool whose JSON schema is large, like many real tool sets: about 8.5 tokens a
    sentence by the piece-based estimate (130: ~1,100 tokens; 180: ~1,500)."""

    def lookup_docs(query: str) -> str:
        return "no documents found"

    description = "Search the docs. " + "Details of the search syntax and fields. " * sentences
    return StructuredTool.from_function(lookup_docs, name="lookup_docs", description=description)


# Scenario settings. Micro-compaction (with pressure relief) keeps most runs under the trigger,
# so the scenarios that are about *full* compaction either use a tiny window or keep the task's
# results out of micro-compaction (``micro_exclude_tools``, a documented knob): full
# compaction then has to do the work, whatever micro-compaction's tuning.
KEEP_RESULTS = ("run_step",)


# ~560-token results: 1,520 characters of CI log by the piece-based estimate (2,000 were
# ~560 tokens only at the old 3.6 characters a token; ~740 now, and a second summary was
# prepared before the seven-step run ended).


def seven() -> tuple[DependentTask, CompactionConfig]:
    """7 steps with ~560-token results that stay whole: exactly one full compaction."""
    config = CompactionConfig(context_window=5000, micro_exclude_tools=KEEP_RESULTS)
    return DependentTask(steps=7, payload_chars=1520), config


def fourteen(**changes: Any) -> tuple[DependentTask, CompactionConfig]:
    """14 steps whose ~560-token results stay whole: three compactions, no summary merge."""
    config = CompactionConfig(context_window=5000, micro_exclude_tools=KEEP_RESULTS)
    return DependentTask(steps=14, payload_chars=1520), config.replace(**changes)


# --------------------------------------------------------------------------- exp. 06


def test_exp06_compaction_triggers_on_reported_usage_not_the_local_estimate() -> None:
    task = DependentTask(steps=7, payload_chars=3000)
    tool = big_schema_tool()
    config = CompactionConfig(context_window=4000)
    trigger = config.trigger_tokens
    assert trigger is not None
    schema_tokens = approximate_tokens([], tools=[tool])
    assert schema_tokens > 1000, "the schemas are a large share of the real context"
    # The compaction layer is not told about the tools: only the model's usage reveals them.
    graph = build_graph(task, config=config, extra_tools=[tool], compaction_tools=None)
    run = run_graph(graph, [task_message(task)])

    assert task.check(run.final.text).ok, task.check(run.final.text).reason
    at_compaction = states_before(graph, "compact_summarize")
    assert at_compaction, "the run compacted"
    first = at_compaction[0]
    usage_msg = next(m for m in reversed(first) if isinstance(m, AIMessage) and m.usage_metadata)
    usage = usage_msg.usage_metadata
    assert usage is not None
    seen = first[: first.index(usage_msg)]
    assert usage["input_tokens"] >= approximate_tokens(seen) + schema_tokens - 10
    # The local estimate alone is under the trigger, the usage-anchored size is over it.
    assert approximate_tokens(first) < trigger <= context_tokens(first)
    assert decide(first, config=config).action == "compact"
    without_usage = [
        m.model_copy(update={"usage_metadata": None}) if isinstance(m, AIMessage) else m
        for m in first
    ]
    assert decide(without_usage, config=config).action == "continue"
    # ... and it compacted at the first gate whose decision was to compact, not later: every
    # earlier gate was under the trigger or had nothing (or too little, Budget.
    # worth_compacting) to compact yet.
    gates = states_before(graph, "agent")
    earlier = [h for h in gates if len(h) < len(first) and not summaries(h)]
    assert earlier and all(decide(h, config=config).action == "continue" for h in earlier)
    # the first compaction node ran there (applied, or not applied because it would not
    # have shrunk the context), judging the usage-anchored size
    attempts = [e for e in run.events if e.get("event") in ("compaction", "compaction_skipped")]
    assert attempts[0]["tokens_before"] == context_tokens(first)


# --------------------------------------------------------------------------- exp. 08


def test_exp08_seven_steps_one_compaction_no_interruption() -> None:
    task, config = seven()
    archive = MemoryArchive()
    graph = build_graph(task, config=config, archive=archive)
    run = run_graph(graph, [task_message(task)])

    verdict = task.check(run.final.text)
    assert verdict.ok, verdict.reason
    assert isinstance(run.final, AIMessage) and not run.final.tool_calls
    assert run.final.text.startswith(f"REPORT {task.code}")
    assert all(f"step {k} = {v}" in run.final.text for k, v in enumerate(task.expected_values(), 1))
    assert not any(kind_of(m) == KIND_STOP for m in run.messages), "no stop message"
    assert "compact_stop" not in run.path
    # Exactly one compaction, transparently followed by the model.
    assert run.path.count("compact_summarize") == 1 == run.state["compaction_count"]
    i = run.path.index("compact_summarize")
    assert run.path[i + 1] == "agent"
    transitions = [u.get("transition") for n, u in run.updates if n.startswith("compact_")]
    assert "compacted" in transitions
    assert run.state["last_compaction"]["tokens_before"] >= config.trigger_tokens
    assert run.state["last_compaction"]["tokens_after"] < config.trigger_tokens
    assert run.state["last_compaction"]["archive_ref"] == archive.records[-1]["ref"]
    assert run.compactions[0]["index"] == 1
    assert "stop_reason" not in run.state


# --------------------------------------------------------------------------- exp. 07


def test_exp07_fourteen_steps_two_compactions_summaries_never_resummarised() -> None:
    task, config = fourteen()
    recorder = RecordingSummarizer()
    graph = build_graph(task, config=config, summarizer=recorder)
    run = run_graph(graph, [task_message(task)])

    verdict = task.check(run.final.text)
    assert verdict.ok, verdict.reason
    assert len(run.compactions) >= 2 and len(recorder.calls) == len(run.compactions)
    assert all(e["merged_summaries"] == 0 for e in run.compactions)

    first_span, second_input = recorder.calls[0].messages, recorder.calls[1].messages
    first_update = next(u for n, u in run.updates if n == "compact_summarize")
    first_summary = next(m for m in first_update["messages"] if kind_of(m) == KIND_SUMMARY)
    assert get_meta(first_summary)["index"] == 1
    second_ids = {m.id for m in second_input}
    second_texts = [m.text for m in second_input]
    assert not second_ids & {m.id for m in first_span}
    assert not {m.text for m in first_span if m.text} & set(second_texts)
    assert first_summary.id not in second_ids
    assert not any(first_summary.text[200:400] in t for t in second_texts)
    assert all(kind_of(m) != KIND_SUMMARY for m in second_input)
    assert task.prompt() not in second_texts, "the pinned task is never summarised"
    # The first summary survives verbatim to the end.
    final_first = [m for m in run.messages if m.id == first_summary.id]
    assert len(final_first) == 1 and final_first[0].content == first_summary.content


def test_exp07_plain_truncation_at_the_same_budget_fails() -> None:
    task, config = fourteen()
    window = config.context_window
    assert window is not None

    def trim(history: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(
            history, max_tokens=window, token_counter=approximate_tokens, strategy="last"
        )

    run = manual_loop(task, prepare=trim)
    assert all(approximate_tokens(seen) <= window for seen in run.model_inputs)
    verdict = task.check(run.final.text)
    assert not verdict.ok
    assert verdict.missing_steps == tuple(range(1, 15))
    assert verdict.reason == (
        "no final report: the agent said: BLOCKED: the original task is no longer in my context"
    )


def test_exp07_fourteen_steps_with_summary_merges_finish() -> None:
    task = DependentTask(steps=14, payload_chars=1000)
    config = CompactionConfig(context_window=3000, micro_exclude_tools=KEEP_RESULTS)
    run = run_graph(build_graph(task, config=config), [task_message(task)])
    assert any(e["merged_summaries"] for e in run.compactions), "precondition: a merge happened"
    verdict = task.check(run.final.text)
    assert verdict.ok, verdict.reason


# --------------------------------------------------------------------------- dirty value


def test_stale_usage_on_the_kept_tail_does_not_retrigger() -> None:
    """In a natural run the kept anchor's usage plus what follows it is over the trigger."""
    task, config = seven()
    trigger = config.trigger_tokens
    assert trigger is not None
    graph = build_graph(task, config=config)
    run = run_graph(graph, [task_message(task)])
    assert task.check(run.final.text).ok

    update = next(u for n, u in run.updates if n == "compact_summarize")
    after = [m for m in update["messages"] if m.type != "remove"]
    anchor = max(
        (i for i, m in enumerate(after) if isinstance(m, AIMessage) and m.usage_metadata),
        default=-1,
    )
    summary = next(m for m in after if kind_of(m) == KIND_SUMMARY)
    assert anchor > after.index(summary)
    assert after[anchor].id in get_meta(summary)["kept_ids"], "the anchor is a kept message"
    usage = after[anchor].usage_metadata
    assert usage is not None
    stale = usage["input_tokens"] + usage["output_tokens"] + approximate_tokens(after[anchor + 1 :])
    assert stale >= trigger, "trusting the kept usage would re-trigger at once"
    assert decide(after, config=config).action == "continue"
    i = run.path.index("compact_summarize")
    assert run.path[i + 1] == "agent", "back to the model, not another compaction or a stop"
    assert run.path.count("compact_summarize") == 1


def test_stale_usage_over_the_trigger_on_a_kept_message_does_not_retrigger() -> None:
    """A kept AIMessage whose own reported usage is over the trigger (e.g. a provider counted
    a large hidden prompt) must not trigger a second compaction after the first."""
    task = DependentTask(steps=7, payload_chars=600)
    config = CompactionConfig(context_window=3000)
    trigger = config.trigger_tokens
    assert trigger is not None
    history = play(task, rounds=3)
    last_ai = max(i for i, m in enumerate(history) if isinstance(m, AIMessage))
    history[last_ai] = history[last_ai].model_copy(
        update={"usage_metadata": {"input_tokens": 4000, "output_tokens": 20, "total_tokens": 4020}}
    )
    assert approximate_tokens(history) < trigger <= context_tokens(history)
    recorder = RecordingSummarizer()
    graph = build_graph(task, config=config, summarizer=recorder)
    run = run_graph(graph, history)

    assert task.check(run.final.text).ok, task.check(run.final.text).reason
    assert run.path[:3] == ["compact_micro", "compact_summarize", "agent"]
    assert len(recorder.calls) == 1 == run.path.count("compact_summarize")
    kept = next(m for m in run.messages if m.id == history[last_ai].id)
    assert isinstance(kept, AIMessage)
    assert kept.usage_metadata is not None and kept.usage_metadata["input_tokens"] == 4000
    compacted = next(u for n, u in run.updates if n == "compact_summarize")["messages"][1:]
    assert decide(compacted, config=config).action == "continue"


# --------------------------------------------------------------------------- no loop


def oversized_tail_history(payload: int) -> list[BaseMessage]:
    """task, two small tool rounds, then a result alone larger than a 1,000-token window."""
    msgs: list[BaseMessage] = [HumanMessage("Task: inspect three logs. Total steps: 3", id="h")]
    for k, size in enumerate([200, 200, payload], 1):
        call = {"name": "read_log", "args": {"n": k}, "id": f"c{k}", "type": "tool_call"}
        msgs.append(AIMessage("", tool_calls=[call], id=f"a{k}"))
        msgs.append(ToolMessage(f"log {k}\n" + "x" * size, tool_call_id=f"c{k}", id=f"t{k}"))
    return msgs


def test_an_unread_result_larger_than_the_window_is_digested_and_the_run_goes_on() -> None:
    # The newest result alone is larger than the 1,000-token window: the one case where a
    # result the model has not read is cut (archived whole first), instead of a stop.
    task = DependentTask(steps=3, payload_chars=0)
    recorder = RecordingSummarizer()
    archive = MemoryArchive()
    config = CompactionConfig(context_window=1000)
    # 8,000 x's: ~1,150 tokens by the piece-based estimate (~1,000 in o200k), over the fit
    # limit as 4,000 were only at the old 3.6 characters a token (~500 in o200k).
    history = oversized_tail_history(payload=8000)
    assert approximate_tokens(history[-1:]) > config.fit_tokens  # type: ignore[operator]
    graph = build_graph(task, config=config, summarizer=recorder, archive=archive)
    run = run_graph(graph, history)

    # The digest takes the room there is, so the older turns may be summarised first; the
    # model is then called with it (no stop).
    assert run.path[0] == "compact_micro" and "agent" in run.path[:3]
    assert "compact_stop" not in run.path
    t3 = next(m for m in run.messages if m.id == "t3")
    assert kind_of(t3) == KIND_TRUNCATED and get_meta(t3)["archive_ref"]
    archived = [m for r in archive.records for m in r["messages"]]
    assert any(m.content == history[-1].content for m in archived)
    assert run.path.count("compact_summarize") <= 1, "no compaction loop"


def test_a_call_that_cannot_fit_stops_after_one_compaction() -> None:
    # A system prompt alone larger than the window: nothing the package may remove makes
    # the call fit, so the run stops with a message instead of looping.
    task = DependentTask(steps=3, payload_chars=0)
    recorder = RecordingSummarizer()
    config = CompactionConfig(context_window=1000)
    history = [SystemMessage("rules " * 1500, id="sys"), *oversized_tail_history(payload=200)]
    graph = build_graph(task, config=config, summarizer=recorder)
    run = run_graph(graph, history)
    assert len(recorder.calls) <= 1, "at most one compaction, no loop"
    assert run.path[-1] == "compact_stop" and kind_of(run.final) == KIND_STOP
    assert "cannot fit" in run.state["stop_reason"] or "too large" in run.state["stop_reason"]
    assert run.state["transition"] == "stopped"


# --------------------------------------------------------------------------- limits


def test_max_compactions_reached_stops_with_done_pending_blocked_and_how_to_continue() -> None:
    task, config = fourteen(max_compactions=2)
    graph = build_graph(task, config=config)
    run = run_graph(graph, [task_message(task)])

    assert run.path.count("compact_summarize") == 2 == run.state["compaction_count"]
    assert run.path[-1] == "compact_stop"
    assert kind_of(run.final) == KIND_STOP
    assert not task.check(run.final.text).ok, "the task was not finished"
    text = run.final.text
    assert "Blocked: the compaction limit max_compactions=2 is reached" in text
    assert "done:" in text and "pending:" in text and "How to continue:" in text
    assert "max_compactions" in text.split("How to continue:")[1]
    # "done" names the newest finished step with its true value.
    last = step_results(run.messages)[-1]
    assert f"RESULT step={last} value={task.expected_values()[last - 1]}" in text
    assert run.state["stop_reason"] == "the compaction limit max_compactions=2 is reached"


def test_thrash_guard_lets_a_small_window_that_makes_progress_finish() -> None:
    # Results of ~19% of the window refill the context within one turn after every
    # compaction; each compaction still frees room, so the run is progress, not thrash.
    task, config = fourteen(context_window=3000, thrash_limit=1)
    run = run_graph(build_graph(task, config=config), [task_message(task)])
    assert task.check(run.final.text).ok, run.state.get("stop_reason")
    assert run.path.count("compact_summarize") >= 3


def test_cooldown_holds_full_compaction_off_while_micro_still_runs() -> None:
    # Large tool schemas the compaction layer cannot shrink keep the context near the trigger,
    # so without a cooldown a compaction follows almost every turn.
    # Sized for the piece-based estimate as it was for the old 3.6 characters a token: a
    # ~1,500-token schema (180 sentences; 130 are ~1,100 tokens now) and ~260-token results
    # (700 characters; 1,000 are ~370 now).
    task = DependentTask(steps=14, payload_chars=700)
    tool = big_schema_tool(sentences=180)
    cooldown = 4
    config = CompactionConfig(context_window=4000, cooldown_turns=cooldown)
    trigger = config.trigger_tokens
    assert trigger is not None
    graph = build_graph(task, config=config, extra_tools=[tool])
    run = run_graph(graph, [task_message(task)])
    assert task.check(run.final.text).ok, run.state.get("stop_reason")

    path = run.path
    marks = [i for i, n in enumerate(path) if n == "compact_summarize"]
    assert len(marks) >= 2
    for a, b in pairwise(marks):
        assert path[a:b].count("agent") >= cooldown, "no full compaction inside the cooldown"
    # Inside a cooldown the gate saw the context over the trigger and still let the model run.
    held = [
        h for h in states_before(graph, "agent") if summaries(h) and context_tokens(h) >= trigger
    ]
    assert held, "the cooldown held a due compaction off"
    # ... and micro-compaction still ran there.
    for a, b in pairwise(marks):
        assert any(
            n == "compact_micro" and u.get("transition") == "micro_compacted"
            for n, u in run.updates[a + 1 : b]
        )

    no_cooldown = run_graph(
        build_graph(task, config=config.replace(cooldown_turns=0), extra_tools=[tool]),
        [task_message(task)],
    )
    # Without the cooldown the run also finishes (each compaction frees room: no thrash),
    # but compacts again sooner after the first compaction.
    assert task.check(no_cooldown.final.text).ok
    gaps = [i for i, n in enumerate(no_cooldown.path) if n == "compact_summarize"]
    assert len(gaps) >= len(marks)
    assert no_cooldown.path[gaps[0] : gaps[1]].count("agent") < cooldown


@pytest.mark.parametrize(
    ("window", "payload", "large_tool_result_chars"),
    # A quarter of the window by the piece-based estimate (CI logs are ~2.7 characters a
    # token; 3,600 and 7,000 characters were a quarter only at the old 3.6 a token).
    [(4000, 2700, 5000), (8000, 5400, 5000), (8000, 5400, None)],
    ids=["whole-results", "truncated-results", "no-truncation"],
)
def test_defaults_forty_steps_quarter_window_results_finish(
    window: int, payload: int, large_tool_result_chars: int | None
) -> None:
    task = DependentTask(steps=40, payload_chars=payload)
    config = CompactionConfig(
        context_window=window, large_tool_result_chars=large_tool_result_chars
    )
    result = task.tools()[0].invoke({"step": 1, "previous": task.starting_value})
    share = approximate_tokens([ToolMessage(result, tool_call_id="x")]) / window
    assert 0.22 < share < 0.28, "each result is about a quarter of the window"
    run = run_graph(build_graph(task, config=config), [task_message(task)])
    verdict = task.check(run.final.text)
    assert verdict.ok, f"{verdict.reason}; stop_reason={run.state.get('stop_reason')}"
    assert not any(kind_of(m) == KIND_STOP for m in run.messages)


def test_read_results_are_digested_then_cleared_and_unread_ones_stay_whole() -> None:
    task = DependentTask(steps=14, payload_chars=6000)
    config = CompactionConfig(context_window=5000)
    graph = build_graph(task, config=config)
    run_graph(graph, [task_message(task)])
    gates = states_before(graph, "agent")
    assert any(kind_of(m) == KIND_TRUNCATED for h in gates for m in h), "precondition"
    for history in gates:
        results = [m for m in history if isinstance(m, ToolMessage)]
        if results and isinstance(history[-1], ToolMessage):
            assert kind_of(results[-1]) is None, "the result about to be read is whole"
    # Under pressure, results digested earlier go later: cleared (placeholders with facts)
    # or, once the kept tail is down to the newest turn, summarised.
    assert any(kind_of(m) in (KIND_CLEARED, KIND_SUMMARY) for h in gates for m in h)
    assert all(
        kind_of(m) != KIND_TRUNCATED for m in gates[-1][:-4] if isinstance(m, ToolMessage)
    ), "no old digest stays verbatim"


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_every_summarizer_failing_stops_with_the_history_intact(mode: str) -> None:
    task, config = seven()
    config = config.replace(summarizer_retries=1)
    RaisingExtractive.calls = 0
    graph = build_graph(task, config=config, summarizer=RaisingExtractive())
    start = [task_message(task)]
    run = run_graph(graph, start) if mode == "sync" else await arun_graph(graph, start)

    assert RaisingExtractive.calls == 2, "tried, retried once, no other summarizer left"
    assert run.path[-2:] == ["compact_summarize", "compact_stop"]
    assert kind_of(run.final) == KIND_STOP
    assert "every summarizer failed" in run.state["stop_reason"]
    before = states_before(graph, "compact_summarize")[0]
    assert [(m.id, m.content) for m in run.messages[:-1]] == [(m.id, m.content) for m in before]
    assert not summaries(run.messages)


def test_summarizer_failure_falls_back_to_extractive_in_a_graph() -> None:
    task, config = seven()
    failing = FailingSummarizer("exception")
    graph = build_graph(task, config=config, summarizer=failing)
    run = run_graph(graph, [task_message(task)])
    assert task.check(run.final.text).ok
    assert failing.calls == 2
    (event,) = run.compactions
    assert event["summarizer"] == "fallback:ExtractiveSummarizer"
    assert len(event["errors"]) == 2 and "HTTP 503" in event["errors"][0]


# --------------------------------------------------------------------------- invariants


def test_three_compactions_keep_the_task_verbatim_and_every_history_valid() -> None:
    task, config = fourteen()
    graph = build_graph(task, config=config)
    run = run_graph(graph, [task_message(task)])
    assert run.state["compaction_count"] >= 3
    histories = all_checkpoint_histories(graph)
    assert len(histories) > 40
    for history in histories:
        validate_history(history, allow_pending=True)
        if history:
            assert history[0].content == task.prompt()
    assert kind_of(run.messages[0]) == KIND_PINNED_TASK
    assert run.messages[0].content == task.prompt() and run.messages[0].id == "task"


# --------------------------------------------------------------------------- wiring


async def test_sync_and_async_runs_give_the_same_final_messages() -> None:
    task, config = seven()
    sync_run = run_graph(build_graph(task, config=config), [task_message(task)])
    async_run = await arun_graph(build_graph(task, config=config), [task_message(task)])
    invoked = build_graph(task, config=config).invoke(
        {"messages": [task_message(task)]}, {"configurable": {"thread_id": "i"}}
    )
    ainvoked = await build_graph(task, config=config).ainvoke(
        {"messages": [task_message(task)]}, {"configurable": {"thread_id": "a"}}
    )

    def shape(messages: list[BaseMessage]) -> list[tuple[str, object]]:
        return [(m.type, m.content) for m in messages]

    assert task.check(sync_run.final.text).ok
    assert sync_run.count("compaction") == 1
    assert shape(sync_run.messages) == shape(async_run.messages)
    assert shape(invoked["messages"]) == shape(ainvoked["messages"]) == shape(sync_run.messages)
    assert sync_run.path == async_run.path
    varies = ("archive_ref", "pause_seconds", "seconds")  # refs are time-stamped; timings
    strip = [{k: v for k, v in e.items() if k not in varies} for e in sync_run.events]
    assert strip == [{k: v for k, v in e.items() if k not in varies} for e in async_run.events]


async def _stream_messages(
    task: DependentTask, summarizer: LLMSummarizer, *, mode: str
) -> list[tuple[str, BaseMessage]]:
    graph = build_graph(task, config=seven()[1], summarizer=summarizer)
    inputs: Any = {"messages": [task_message(task)]}
    config: Any = {"configurable": {"thread_id": "m"}}
    out: list[tuple[str, BaseMessage]] = []
    item: Any
    if mode == "sync":
        for item in graph.stream(inputs, config, stream_mode="messages"):
            out.append((item[1]["langgraph_node"], item[0]))
    else:
        async for item in graph.astream(inputs, config, stream_mode="messages"):
            out.append((item[1]["langgraph_node"], item[0]))
    return out


SUMMARY_WORDS = "## 1. Goal ZQXWORD alpha ZQXWORD beta ZQXWORD"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_summarizer_tokens_never_reach_the_messages_stream(mode: str) -> None:
    task = seven()[0]
    fake = ScriptedChatModel(replies=[AIMessage(SUMMARY_WORDS)])
    streamed = await _stream_messages(task, LLMSummarizer(fake), mode=mode)
    assert fake.calls == 1
    chunks = [(node, m) for node, m in streamed if isinstance(m, AIMessageChunk)]
    assert not chunks, "no summarizer token was streamed"
    carrying = [(node, m) for node, m in streamed if "ZQXWORD" in m.text]
    # The summary reaches the stream only as the state update of the summarize node: one
    # whole message, tagged as a summary so a UI can render it as such.
    assert [(node, kind_of(m)) for node, m in carrying] == [("compact_summarize", KIND_SUMMARY)]


async def test_without_the_nostream_tag_the_summarizer_would_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control for the test above: the fake streams, and only the tag keeps it out."""
    monkeypatch.setattr(
        summarizers_module.LLMSummarizer,
        "_config",
        staticmethod(lambda: {"tags": [SUMMARIZER_TAG]}),
    )
    task = seven()[0]
    fake = ScriptedChatModel(replies=[AIMessage(SUMMARY_WORDS)])
    leaked = await _stream_messages(task, LLMSummarizer(fake), mode="async")
    assert any(isinstance(m, AIMessageChunk) and "ZQXWORD" in m.text for _, m in leaked)


class _Starts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tags: list[list[str]] = []

    def on_chat_model_start(self, *args: Any, tags: list[str] | None = None, **kw: Any) -> None:
        self.tags.append(list(tags or []))


@pytest.mark.parametrize(
    "mode",
    [
        "sync",
        "async",
    ],
)
async def test_the_summarizer_call_is_a_traced_child_of_the_graph_run(mode: str) -> None:
    task = seven()[0]
    fake = ScriptedChatModel(replies=[AIMessage(SUMMARY_WORDS)])
    graph = build_graph(task, config=seven()[1], summarizer=LLMSummarizer(fake))
    handler = _Starts()
    config: Any = {"configurable": {"thread_id": "c"}, "callbacks": [handler]}
    if mode == "sync":
        graph.invoke({"messages": [task_message(task)]}, config)
    else:
        await graph.ainvoke({"messages": [task_message(task)]}, config)
    assert fake.calls == 1
    summarizer_runs = [t for t in handler.tags if SUMMARIZER_TAG in t]
    assert len(summarizer_runs) == 1 and "nostream" in summarizer_runs[0]
