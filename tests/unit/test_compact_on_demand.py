"""Issue 23, must-show 3: compaction on demand, with a focus the summary keeps first."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_compact import CompactionConfig
from langchain_compact.core import Compactor
from langchain_compact.markers import KIND_SUMMARY, get_meta, kind_of

WINDOW = 50_000  # far from the trigger: only the request compacts


def _history(steps: int = 6) -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("Task: audit the services", id="t")]
    for i in range(1, steps + 1):
        call = {"name": "probe", "args": {"service": f"svc{i}"}, "id": f"c{i}"}
        history.append(AIMessage("", id=f"a{i}", tool_calls=[call]))
        body = "\n".join(f"svc{i} metric {k}: {k * i}" for k in range(20))
        extra = "database password rotated: vault/db-7 expires 2027-03-01" if i == 2 else ""
        history.append(ToolMessage(f"{body}\n{extra}", tool_call_id=f"c{i}", id=f"r{i}"))
    history.append(AIMessage("Audited all services.", id="done"))
    return history


def _summary(messages: list[BaseMessage]) -> BaseMessage:
    return [m for m in messages if kind_of(m) == KIND_SUMMARY][-1]


def _first_section(summary: BaseMessage) -> str:
    text = str(summary.content)
    start = text.index("## ")
    nxt = text.find("\n## ", start + 3)
    return text[start : nxt if nxt > 0 else None]


def test_compact_now_with_a_focus_lists_its_facts_first() -> None:
    core = Compactor(config=CompactionConfig(context_window=WINDOW, keep_last_n=2))
    history = _history()
    assert core.decide(history).action == "continue"
    turn = core.compact_now(history, "t", focus="database password")
    assert turn.outcome == "compacted"
    summary = _summary(turn.messages)
    first = _first_section(summary)
    assert first.startswith("## 0. Focus: database password")
    assert "vault/db-7 expires 2027-03-01" in first
    assert get_meta(summary)["focus"] == "database password"
    assert [e["event"] for e in turn.events][:2] == ["compaction_on_demand", "compaction"]


def test_compact_now_obeys_the_cooldown_no_loop() -> None:
    core = Compactor(config=CompactionConfig(context_window=WINDOW, keep_last_n=2))
    turn = core.compact_now(_history(), "t")
    assert turn.outcome == "compacted"
    again = core.compact_now(turn.messages, "t")
    assert again.outcome == "continue" and "model turn" in again.reason
    assert again.messages == turn.messages


def test_compact_now_async() -> None:
    core = Compactor(config=CompactionConfig(context_window=WINDOW, keep_last_n=2))
    turn = asyncio.run(core.acompact_now(_history(), "t", focus="vault"))
    assert turn.outcome == "compacted"
    assert "vault/db-7" in _first_section(_summary(turn.messages))


def test_llm_summarizer_is_told_the_focus() -> None:
    from langchain_core.language_models import FakeListChatModel

    from langchain_compact.summarizers import LLMSummarizer, focusing

    summarizer = LLMSummarizer(FakeListChatModel(responses=["x"]))
    with focusing("the database"):
        request = summarizer._request([HumanMessage("hi")], 500)
    assert "focus on: the database" in str(request[0].content)
    assert "## 0. Focus" in str(request[0].content)
    assert "focus" not in str(summarizer._request([HumanMessage("hi")], 500)[0].content).lower()
