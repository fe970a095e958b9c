"""The demo workload: the dependent task and the scripted context-reading policy."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_compact.demo import ContextReadingPolicy, DependentTask, read_context

Prepare = Callable[[list[BaseMessage]], list[BaseMessage]]


def run_loop(
    task: DependentTask,
    *,
    prepare: Prepare = list,
    start: list[BaseMessage] | None = None,
    max_turns: int = 40,
) -> list[BaseMessage]:
    """A plain agent loop: model -> tools -> model ..., the model sees ``prepare(history)``."""
    model = ContextReadingPolicy().bind_tools(task.tools())
    tools = {t.name: t for t in task.tools()}
    history: list[BaseMessage] = start or [HumanMessage(task.prompt())]
    for _ in range(max_turns):
        reply = model.invoke(prepare(history))
        history.append(reply)
        if not reply.tool_calls:
            return history
        for call in reply.tool_calls:
            result = tools[call["name"]].invoke(call)
            assert isinstance(result, ToolMessage)
            history.append(result)
    raise AssertionError(f"no final answer after {max_turns} model turns")


def report_for(task: DependentTask, values: list[int]) -> str:
    lines = [f"step {k} = {v}" for k, v in enumerate(values, 1)]
    return "\n".join([f"REPORT {task.code}", *lines])


# -- the task -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": 0}, "steps must be an integer >= 1"),
        ({"payload_chars": -1}, "payload_chars must be an integer >= 0"),
        ({"constraint_code": "no code"}, "constraint_code must be"),
        ({"constraint_code": "ABC"}, "contain a digit"),
    ],
)
def test_invalid_task_settings_fail_at_construction(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DependentTask(**kwargs)  # type: ignore[arg-type]


def test_tool_is_deterministic_large_and_ends_with_the_result() -> None:
    task = DependentTask(seed=3, payload_chars=6000)
    tool = task.tools()[0]
    expected = task.expected_values()
    text = tool.invoke({"step": 1, "previous": task.starting_value})
    assert text == tool.invoke({"step": 1, "previous": task.starting_value})
    assert 5000 < len(text) <= 6000
    assert text.splitlines()[-1] == f"RESULT step=1 value={expected[0]}"
    assert all(10_000 <= v < 1_000_000 for v in expected)
    logs = "".join(tool.invoke({"step": k, "previous": 1}) for k in range(1, 15))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in logs), "some log lines are Chinese"
    assert tool.invoke({"step": 2, "previous": 1}).endswith(f"value={task.step_value(2, 1)}"), (
        "a wrong previous still gets an answer, computed from what was given"
    )
    assert task.step_value(2, 1) != expected[1]
    assert tool.invoke({"step": 15, "previous": 1}).startswith("ERROR: step 15 is out of range")
    assert (
        DependentTask(payload_chars=0)
        .tools()[0]
        .invoke({"step": 1, "previous": 5})
        .startswith("RESULT step=1 value=")
    )


def test_prompt_states_steps_start_and_constraint() -> None:
    task = DependentTask(steps=7, seed=11, constraint_code="ZZ-0001")
    view = read_context([HumanMessage(task.prompt())])
    assert (view.steps, view.starting_value, view.code) == (7, task.starting_value, "ZZ-0001")
    assert view.values == {0: task.starting_value}
    assert DependentTask(seed=1).code != DependentTask(seed=2).code


def test_check_names_missing_wrong_and_constraint() -> None:
    task = DependentTask(steps=5)
    values = task.expected_values()
    assert task.check(report_for(task, values)).ok
    bad = list(values)
    bad[2] += 1
    verdict = task.check(report_for(task, bad).replace(f"step 5 = {values[4]}", ""))
    assert (verdict.ok, verdict.missing_steps, verdict.wrong_steps) == (False, (5,), (3,))
    assert verdict.reason.startswith("step 5 missing from the final report; step 3 reported")
    assert f"expected {values[2]}" in verdict.reason
    longer_code = report_for(task, values).replace(task.code, task.code + "9", 1)
    assert not task.check(longer_code).constraint_ok
    blocked = task.check("BLOCKED: the value of step 2 is no longer in my context")
    assert blocked.missing_steps == (1, 2, 3, 4, 5)
    assert blocked.reason == (
        "no final report: the agent said: BLOCKED: the value of step 2 is no longer in my context"
    )


# -- the policy over whole runs ---------------------------------------------------------------


def test_plain_loop_finishes_the_14_step_task() -> None:
    task = DependentTask()
    history = run_loop(task)
    expected = task.expected_values()
    previous = [task.starting_value, *expected[:-1]]
    calls = [c["args"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == [{"step": k, "previous": p} for k, p in enumerate(previous, 1)]
    assert history[-1].content == report_for(task, expected)
    assert task.check(history[-1].text).ok


def test_trimming_loses_early_values_and_the_run_fails_with_a_reason() -> None:
    task = DependentTask()

    def keep_task_and_tail(history: list[BaseMessage]) -> list[BaseMessage]:
        tail = trim_messages(
            history[1:],
            strategy="last",
            max_tokens=4000,
            token_counter=count_tokens_approximately,
            start_on="ai",
        )
        return [history[0], *tail]

    history = run_loop(task, prepare=keep_task_and_tail)
    final = history[-1].text
    assert final == (
        "BLOCKED: the value of step 1 is no longer in my context (later steps are);"
        " cannot write the report"
    )
    assert sum(isinstance(m, ToolMessage) for m in history) < task.steps
    verdict = task.check(final)
    assert not verdict.ok
    assert verdict.missing_steps == tuple(range(1, 15))
    assert "value of step 1 is no longer in my context" in verdict.reason


def test_trimming_the_task_itself_blocks() -> None:
    task = DependentTask()

    def tail_only(history: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(
            history,
            strategy="last",
            max_tokens=4000,
            token_counter=count_tokens_approximately,
            start_on=["human", "ai"],
        )

    final = run_loop(task, prepare=tail_only)[-1].text
    assert final == "BLOCKED: the original task is no longer in my context"
    assert not task.check(final).ok


def test_a_lost_value_blocks_naming_the_step() -> None:
    task = DependentTask()
    history = run_loop(task)[:-1]  # everything before the final report
    edited: list[BaseMessage] = []
    for message in history:
        if isinstance(message, ToolMessage) and message.text.endswith(
            f"RESULT step=5 value={task.expected_values()[4]}"
        ):
            message = message.model_copy(update={"content": "[cleared: run_step result]"})
        if isinstance(message, AIMessage) and message.tool_calls[0]["args"]["step"] == 6:
            call = {**message.tool_calls[0], "args": {"step": 6}}
            message = message.model_copy(update={"tool_calls": [call]})
        edited.append(message)
    assert len(edited) == len(history)
    reply = ContextReadingPolicy().invoke(edited)
    assert reply.tool_calls == []
    assert reply.text == (
        "BLOCKED: the value of step 5 is no longer in my context (later steps are);"
        " cannot write the report"
    )
    assert ContextReadingPolicy().invoke(history).text == report_for(task, task.expected_values())


def _summaries(task: DependentTask) -> dict[str, str]:
    v1, v2 = task.expected_values()[:2]
    start = task.starting_value
    restated = (
        f"The task has {task.steps} steps in total; the initial value is {start}; the final"
        f" report must start with REPORT {task.code}."
    )
    return {
        "equals": f"{task.prompt()}\n\nDone so far: step 1 = {v1}, step 2 = {v2}.",
        "value words": f"{task.prompt()}\nstep 1 value {v1}; step 2: value {v2}",
        "key=value": f"{restated}\nDone: step=1 value={v1}\nRESULT step=2 value={v2}",
        "json tool calls": (
            f"{restated}\nTool calls: run_step {json.dumps({'step': 2, 'previous': v1})},"
            f" run_step {json.dumps({'previous': v2, 'step': 3})} (result cleared)"
        ),
        "call syntax": f"{restated}\nrun_step(step=2, previous={v1}); step 2 -> {v2}",
    }


@pytest.mark.parametrize("form", list(_summaries(DependentTask())))
def test_a_summary_only_context_continues_from_step_3(form: str) -> None:
    task = DependentTask()
    summary = _summaries(task)[form]
    reply = ContextReadingPolicy().invoke([HumanMessage(summary)])
    assert reply.tool_calls[0]["args"] == {"step": 3, "previous": task.expected_values()[1]}
    history = run_loop(task, start=[HumanMessage(summary)])
    assert task.check(history[-1].text).ok, task.check(history[-1].text).reason


def test_report_without_a_visible_code_fails_the_constraint() -> None:
    task = DependentTask(steps=2)
    v1, v2 = task.expected_values()
    reply = ContextReadingPolicy().invoke(f"Total steps: 2. step 1 = {v1}, step 2 = {v2}")
    assert reply.text == f"REPORT\nstep 1 = {v1}\nstep 2 = {v2}"
    verdict = task.check(reply.text)
    assert (verdict.ok, verdict.constraint_ok, verdict.missing_steps) == (False, False, ())


# -- the policy as a chat model ---------------------------------------------------------------


def test_usage_counts_the_bound_tool_schemas() -> None:
    task = DependentTask(steps=3)
    messages: list[BaseMessage] = [HumanMessage(task.prompt())]
    local = count_tokens_approximately(messages)
    plain = ContextReadingPolicy().invoke(messages)
    bound = ContextReadingPolicy().bind_tools(task.tools()).invoke(messages)
    schemas = json.dumps([convert_to_openai_tool(t) for t in task.tools()], sort_keys=True)
    assert plain.usage_metadata is not None and bound.usage_metadata is not None
    assert plain.usage_metadata["input_tokens"] == local
    assert bound.usage_metadata["input_tokens"] == local + count_tokens_approximately(
        [HumanMessage(schemas)]
    )
    assert bound.usage_metadata["input_tokens"] > local
    assert bound.usage_metadata["output_tokens"] == count_tokens_approximately([bound])
    usage = bound.usage_metadata
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert bound.response_metadata["model_provider"] == "scripted"
    assert bound.response_metadata["model_name"] == "context-reading-policy"
    counted = ContextReadingPolicy(token_counter=len).bind_tools(task.tools()).invoke(messages)
    assert counted.usage_metadata is not None
    assert counted.usage_metadata["input_tokens"] == 2


def test_runs_are_deterministic() -> None:
    first, second = run_loop(DependentTask(steps=7)), run_loop(DependentTask(steps=7))
    assert first == second
    assert run_loop(DependentTask(steps=7, seed=8))[-1].text != first[-1].text


def test_recorder_is_shared_by_bound_copies() -> None:
    recorder: list[list[BaseMessage]] = []
    task = DependentTask(steps=1, payload_chars=0)
    model = ContextReadingPolicy(recorder=recorder).bind_tools(task.tools())
    model.invoke(task.prompt())
    assert recorder == [[HumanMessage(task.prompt())]]


async def test_async_matches_sync() -> None:
    task = DependentTask(steps=3)
    model = ContextReadingPolicy().bind_tools(task.tools())
    messages = run_loop(task)[:-1]
    assert await model.ainvoke(messages) == model.invoke(messages)


def test_non_message_input_is_rejected_clearly() -> None:
    with pytest.raises(TypeError, match="reads BaseMessage objects"):
        read_context(["Total steps: 3"])  # type: ignore[list-item]


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(1, 9), seed=st.integers(0, 10_000))
def test_any_task_completes_with_the_exact_values(steps: int, seed: int) -> None:
    task = DependentTask(steps=steps, seed=seed, payload_chars=0)
    final = run_loop(task)[-1].text
    assert final == report_for(task, task.expected_values())
