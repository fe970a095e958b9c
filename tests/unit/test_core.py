"""The core object: one count per turn, handed from the micro step to the decision only for
the very list the step left."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import CompactionConfig
from langchain_compact.core import Compactor
from langchain_compact.tokens import context_tokens


def _history(chars: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Task: read and report.", id="task")]
    for i in range(3):
        out.append(AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": f"c{i}"}]))
        out.append(ToolMessage("x " * chars, tool_call_id=f"c{i}", name="read", id=f"r{i}"))
    return out


def test_the_decision_reuses_the_micro_steps_count_only_for_the_list_it_left() -> None:
    core = Compactor(config=CompactionConfig(context_window=100_000))
    small = _history(100)
    step = core.micro(small, "t")
    assert core.decide(step.messages).tokens == step.tokens == context_tokens(small)
    # same length, same ids, other objects and contents: counted afresh, never reused
    big = _history(3_000)
    assert core.decide(big).tokens == context_tokens(big) > step.tokens
