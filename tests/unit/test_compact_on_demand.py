"""Issue 23, must-show 3: compaction on demand, with a focus the summary keeps first."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from langchain_compact import CompactionConfig, ExtractiveSummarizer
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

    from langchain_compact.summarizers import LLMSummarizer, focused

    summarizer = LLMSummarizer(FakeListChatModel(responses=["x"]))
    request = focused(summarizer, "the database")._request([HumanMessage("hi")], 500)
    assert "focus on: the database" in str(request[0].content)
    assert "## 0. Focus" in str(request[0].content)
    assert "focus" not in str(summarizer._request([HumanMessage("hi")], 500)[0].content).lower()


# --------------------------------------------------------------------------- the tool


@tool
def probe(service: str) -> str:
    """Probe one service."""
    body = "\n".join(f"{service} metric {k}: {k * 3}" for k in range(20))
    extra = (
        "\ndatabase password rotated: vault/db-7 expires 2027-03-01" if service == "svc2" else ""
    )
    return body + extra


class Scripted(BaseChatModel):
    """Probes svc1..svc4, asks for a compaction focused on the vault, probes svc5, answers."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-on-demand"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        n = self.calls
        if n <= 4 or n == 6:
            step = n if n <= 4 else 5
            call = {"name": "probe", "args": {"service": f"svc{step}"}, "id": f"p{n}"}
            msg = AIMessage("", tool_calls=[call])
        elif n == 5:
            call = {"name": "compact_conversation", "args": {"focus": "vault"}, "id": "k1"}
            msg = AIMessage("", tool_calls=[call])
        else:
            msg = AIMessage("audit done")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _check_tool_run(messages: list[BaseMessage]) -> None:
    assert messages[-1].content == "audit done"
    summary = _summary(messages)
    assert "vault/db-7 expires 2027-03-01" in _first_section(summary)
    answers = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "k1"]
    assert len(answers) == 1 and answers[0].text.startswith("Compacted:")
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids))


def test_the_tool_through_the_prebuilt_agent() -> None:
    from langchain_compact.graph import create_compacting_agent

    agent = create_compacting_agent(
        Scripted(),
        [probe],
        config=CompactionConfig(context_window=WINDOW, keep_last_n=2),
        archive=None,
        recall_tool=False,
        compact_tool=True,
        summarizer=ExtractiveSummarizer(),
    )
    out = agent.invoke({"messages": [("user", "Task: audit the services")]})
    _check_tool_run(out["messages"])


def test_the_tool_through_the_middleware() -> None:
    from langchain.agents import create_agent

    from langchain_compact.graph import make_compact_tool
    from langchain_compact.middleware import CompactionMiddleware

    middleware = CompactionMiddleware(config=CompactionConfig(context_window=WINDOW, keep_last_n=2))
    agent = create_agent(
        model=Scripted(), tools=[probe, make_compact_tool(middleware)], middleware=[middleware]
    )
    out = agent.invoke({"messages": [("user", "Task: audit the services")]})
    _check_tool_run(out["messages"])


def test_the_application_compacts_a_graph_thread() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_compact.graph import compact_thread, create_compacting_agent

    cfg = CompactionConfig(context_window=WINDOW, keep_last_n=2)
    model = Scripted(calls=1)  # probes svc2..svc4, then (call 5) would ask; stop it before
    agent = create_compacting_agent(
        model,
        [probe],
        config=cfg,
        archive=None,
        recall_tool=False,
        checkpointer=InMemorySaver(),
        summarizer=ExtractiveSummarizer(),
    )
    run: Any = {"configurable": {"thread_id": "app"}}
    agent.invoke(
        {"messages": [("user", "Task: audit the services")]}, run, interrupt_before=["tools"]
    )
    for _ in range(3):
        agent.invoke(None, run, interrupt_before=["tools"])
    turn = compact_thread(agent, run, Compactor(config=cfg), focus="vault")
    assert turn.outcome == "compacted"
    state = agent.get_state(run).values["messages"]
    assert "vault/db-7" in _first_section(_summary(state))


def test_lcel_compact_now_with_a_focus_and_memo() -> None:
    from langchain_compact.lcel import MessageCompactor

    compactor = MessageCompactor(config=CompactionConfig(context_window=WINDOW, keep_last_n=2))
    history = _history()
    out = compactor.compact_now(history, focus="database password")
    assert len(out) < len(history)
    assert "vault/db-7" in _first_section(_summary(out))
    grown = [*history, HumanMessage("next?", id="n")]
    replayed = compactor(grown)
    assert _summary(replayed).content == _summary(out).content
    out_async = asyncio.run(
        MessageCompactor(
            config=CompactionConfig(context_window=WINDOW, keep_last_n=2)
        ).acompact_now(history, focus="vault")
    )
    assert "vault/db-7" in _first_section(_summary(out_async))


def test_cli_compact_focus(tmp_path: Any) -> None:
    import json

    from langchain_core.messages import messages_from_dict, messages_to_dict

    from langchain_compact.cli import main

    source = tmp_path / "lc.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in messages_to_dict(_history())))
    out_file = tmp_path / "out.jsonl"
    argv = [source, "-o", out_file, "--archive", tmp_path / "a", "--thread-id", "t"]
    code = main(["compact", *map(str, argv), "--focus", "database password"])
    assert code == 0
    back = messages_from_dict([json.loads(line) for line in out_file.read_text().splitlines()])
    first = _first_section(_summary(back))
    assert first.startswith("## 0. Focus: database password")
    assert "vault/db-7 expires 2027-03-01" in first
