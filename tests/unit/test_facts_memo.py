"""The facts of a thread's histories are remembered by the compactor, per thread (issue 32,
"Hidden state"): every entry point of a run reads through the memo of the run's thread
(``Compactor.memo(thread_id)``), so a turn reads only the new messages' metadata, and
nothing is remembered at module level (``tests/unit/test_hidden_state.py``)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from _scenarios import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from langchain_compact import CompactionConfig, CompactionMiddleware, ExtractiveSummarizer
from langchain_compact._scan import FactsMemo
from langchain_compact.core import MEMO_THREADS, Compactor
from langchain_compact.graph import create_compacting_agent


@tool
def read(n: int) -> str:
    """Read chunk n."""
    return f"chunk {n}: " + " ".join(f"w{n}_{k}" for k in range(120))


def _replies(n: int) -> list[BaseMessage]:
    calls = [
        AIMessage("", tool_calls=[{"name": "read", "args": {"n": i}, "id": f"c{i}"}])
        for i in range(n)
    ]
    return [*calls, AIMessage("done")]


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The thread of every memo the compactors are asked for."""
    seen: list[str | None] = []
    real = Compactor.memo

    def spy(self: Compactor, thread_id: str | None) -> FactsMemo:
        seen.append(thread_id)
        return real(self, thread_id)

    monkeypatch.setattr(Compactor, "memo", spy)
    return seen


def _run(agent: Any) -> list[BaseMessage]:
    """The agent's run on thread ``"t"`` to its final answer: the final messages."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small windows warn
        out = agent.invoke(
            {"messages": [HumanMessage("read every chunk", id="task")]},
            {"configurable": {"thread_id": "t"}, "recursion_limit": 300},
        )
    messages: list[BaseMessage] = out["messages"]
    assert messages[-1].text == "done"
    return messages


def _check(seen: list[str | None]) -> None:
    assert seen, "the run read no history through a memo"
    assert set(seen) == {"t"}, f"a step read without the thread's memo: {set(seen)}"


def test_a_graph_runs_nodes_and_edges_read_through_the_threads_memo(
    asked: list[str | None],
) -> None:
    agent = create_compacting_agent(
        ScriptedChatModel(replies=_replies(30)),
        [read],
        config=CompactionConfig(context_window=3_000),
        archive=None,
        summarizer=ExtractiveSummarizer(),
    )
    out = _run(agent)
    assert any(m.response_metadata.get("langchain_compact") for m in out)
    _check(asked)


def test_the_middlewares_turns_read_through_the_threads_memo(asked: list[str | None]) -> None:
    middleware = CompactionMiddleware(
        config=CompactionConfig(context_window=3_000),
        archive=None,
        summarizer=ExtractiveSummarizer(),
    )
    agent = create_agent(ScriptedChatModel(replies=_replies(30)), [read], middleware=[middleware])
    _run(agent)
    _check(asked)


def test_a_compactor_keeps_one_memo_per_thread_and_forgets_the_least_recent() -> None:
    core = Compactor(config=CompactionConfig(context_window=8_000), archive=None)
    first = core.memo("a")
    assert core.memo("a") is first and core.memo("b") is not first
    assert core.memo(None) is not core.memo(None)  # no thread: remembered nowhere
    for k in range(MEMO_THREADS):
        core.memo(f"other-{k}")
    assert core.memo("a") is not first  # forgotten: the least recently used


def test_a_memo_holds_its_newest_histories_and_answers_as_a_full_scan() -> None:
    from langchain_compact._scan import history_facts

    memo = FactsMemo(size=2)
    grown: list[Any] = [HumanMessage("task", id="h")]
    for k in range(5):  # one history growing: one entry, extended
        grown = [*grown, AIMessage(f"a{k}", id=f"a{k}")]
        assert memo.facts(grown) == history_facts(grown)
    assert len(memo) == 1
    for k in range(3):  # other histories (other first messages): the newest two are kept
        other = [HumanMessage(f"task {k}", id=f"h{k}"), AIMessage("ok", id=f"o{k}")]
        assert memo.facts(other) == history_facts(other)
    assert len(memo) == 2
    with pytest.raises(ValueError, match="size must be at least 1"):
        FactsMemo(size=0)
