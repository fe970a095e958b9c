"""Compacted histories are legal for real provider integrations (docs/design.md, B2, B5).

The summary message, the pinned task, cleared and truncated tool results and the stop message
all go through langchain-openai's and langchain-anthropic's own message conversion.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any, Literal

import pytest
from _scenarios import all_checkpoint_histories, build_graph, run_graph
from langchain_anthropic.chat_models import _format_messages
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai.chat_models.base import _convert_message_to_dict

from langchain_compact import CompactionConfig
from langchain_compact.demo import DependentTask
from langchain_compact.history import validate_history
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_PINNED_TASK,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    kind_of,
)

SYSTEM = "You are a build agent. Follow the task exactly."


def compacted_run(
    summary_role: Literal["human", "system"],
    *,
    payload: int = 6000,
    window: int = 5000,
    max_compactions: int | None = None,
    micro_exclude_tools: tuple[str, ...] = ("run_step",),
) -> tuple[list[BaseMessage], list[list[BaseMessage]]]:
    """Final messages and every checkpointed history of a 14-step graph run."""
    task = DependentTask(steps=14, payload_chars=payload)
    config = CompactionConfig(
        context_window=window,
        summary_role=summary_role,
        max_compactions=max_compactions,
        micro_exclude_tools=micro_exclude_tools,
    )
    graph = build_graph(task, config=config)
    start = [SystemMessage(SYSTEM, id="sys"), HumanMessage(task.prompt(), id="task")]
    run = run_graph(graph, start)
    return run.messages, all_checkpoint_histories(graph)


@pytest.fixture(scope="module")
def default_run() -> tuple[list[BaseMessage], list[list[BaseMessage]]]:
    return compacted_run("human")


@pytest.fixture(scope="module")
def stopped_run() -> tuple[list[BaseMessage], list[list[BaseMessage]]]:
    # Defaults in a tight window: results are cleared, one compaction, then a stop.
    return compacted_run(
        "human", payload=1000, window=1500, max_compactions=1, micro_exclude_tools=()
    )


def kinds(messages: list[BaseMessage]) -> set[str | None]:
    return {kind_of(m) for m in messages}


def test_the_fixture_covers_every_marker(
    default_run: tuple[list[BaseMessage], list[list[BaseMessage]]],
    stopped_run: tuple[list[BaseMessage], list[list[BaseMessage]]],
) -> None:
    messages, histories = default_run
    seen = set().union(*(kinds(h) for h in histories + stopped_run[1]))
    assert {KIND_SUMMARY, KIND_PINNED_TASK, KIND_CLEARED, KIND_TRUNCATED} <= seen
    assert kind_of(stopped_run[0][-1]) == KIND_STOP
    assert DependentTask(steps=14).check(messages[-1].text).ok


def test_no_system_message_after_index_0_with_the_default_config(
    default_run: tuple[list[BaseMessage], list[list[BaseMessage]]],
) -> None:
    _, histories = default_run
    assert any(kinds(h) & {KIND_SUMMARY} for h in histories)
    for history in histories:
        assert not any(isinstance(m, SystemMessage) for m in history[1:])
        validate_history(history, allow_pending=True)


def _openai(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [_convert_message_to_dict(m) for m in messages]


@pytest.mark.parametrize("which", ["default_run", "stopped_run"])
def test_openai_conversion_accepts_every_compacted_history(
    which: str, request: pytest.FixtureRequest
) -> None:
    _, histories = request.getfixturevalue(which)
    for history in histories:
        converted = _openai(history)
        json.dumps(converted)  # the request body is serialisable
        roles = [d["role"] for d in converted]
        assert roles.count("system") == (1 if history else 0)
        summary_dicts = [
            d for m, d in zip(history, converted, strict=True) if kind_of(m) == KIND_SUMMARY
        ]
        assert all(d["role"] == "user" for d in summary_dicts)
        for m, d in zip(history, converted, strict=True):
            if isinstance(m, ToolMessage):
                assert d["role"] == "tool" and d["tool_call_id"] == m.tool_call_id


@pytest.mark.parametrize("which", ["default_run", "stopped_run"])
def test_anthropic_conversion_accepts_every_compacted_history(
    which: str, request: pytest.FixtureRequest
) -> None:
    _, histories = request.getfixturevalue(which)
    for history in histories:
        if not history:
            continue
        system, formatted = _format_messages(history, model="claude-sonnet-4-5")
        assert system == SYSTEM
        json.dumps(formatted)
        assert formatted[0]["role"] == "user"
        roles = [d["role"] for d in formatted]
        assert all(a != b for a, b in pairwise(roles)), "roles alternate"
        summary_texts = [m.text for m in history if kind_of(m) == KIND_SUMMARY]
        dumped = json.dumps(formatted, ensure_ascii=False)
        for text in summary_texts:
            assert json.dumps(text, ensure_ascii=False)[1:80] in dumped


def test_summary_role_system_is_legal_for_openai_but_not_for_anthropic_by_default() -> None:
    """Why the default is "human": a mid-list system summary breaks Anthropic's formatting."""
    messages, _ = compacted_run("system")
    assert any(isinstance(m, SystemMessage) and kind_of(m) == KIND_SUMMARY for m in messages[1:])
    assert sum(d["role"] == "system" for d in _openai(messages)) >= 2
    with pytest.raises(ValueError, match="non-consecutive system messages"):
        _format_messages(messages, model="claude-sonnet-4-5")
    system, formatted = _format_messages(
        messages, model="claude-sonnet-4-5", mid_conversation_system_messages=True
    )
    assert system == SYSTEM and formatted
