"""The model node's wrappers add one runnable layer, not two (issue 29, item 3: a worker's
per-turn cost unchanged).

``add_compaction`` wraps the model node twice: the overflow guard (a provider's refusal
for length) and the entry (a call that did not come through the gate). Each runnable layer
is one more traced run and one more callback and config setup on every model call; the
entry calls the guard's functions directly, so the node runs under one wrapper run. The
count compares the graph with the same graph before ``add_compaction``: the wrapped graph
has exactly one run more per model call named like the model node (the count fails on
0de96a4, where the guard was a runnable of its own, with two more).
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_compact import CompactionConfig
from langchain_compact.graph import add_compaction

REPLIES = 3


class Runs(BaseCallbackHandler):
    """The names of every chain run started."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, name: str | None = None, **kw: Any
    ) -> None:
        self.names.append(str(name if name is not None else kw.get("run_name")))


def graph(compacting: bool, overflow_retry: bool = True) -> Any:
    """``START -> agent -> (agent again until REPLIES answers) -> END``."""
    replies = [AIMessage(f"answer {k}", id=f"a{k}") for k in range(REPLIES)]
    model = FakeMessagesListChatModel(responses=replies)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def again(state: MessagesState) -> str:
        answers = sum(isinstance(m, AIMessage) for m in state["messages"])
        return END if answers >= REPLIES else "agent"

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", again, ["agent", END])
    if compacting:
        add_compaction(
            builder, config=CompactionConfig(context_window=8_000), overflow_retry=overflow_retry
        )
    return builder.compile()


def agent_runs(compacting: bool, is_async: bool, overflow_retry: bool = True) -> int:
    runs = Runs()
    config = {"callbacks": [runs]}
    state = {"messages": [HumanMessage("task", id="task")]}
    g = graph(compacting, overflow_retry)
    out = asyncio.run(g.ainvoke(state, config)) if is_async else g.invoke(state, config)
    assert sum(isinstance(m, AIMessage) for m in out["messages"]) == REPLIES
    return runs.names.count("agent")


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("overflow_retry", [True, False], ids=["guard", "no-guard"])
def test_one_wrapper_run_per_model_call(is_async: bool, overflow_retry: bool) -> None:
    plain = agent_runs(False, is_async)
    wrapped = agent_runs(True, is_async, overflow_retry)
    assert wrapped == plain + REPLIES
