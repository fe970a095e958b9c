"""Beside provider-native compaction (issue 23.5): a reply carrying the provider's own
compaction item (OpenAI Responses ``compaction`` item, Anthropic ``compaction`` block) goes
back to the provider unchanged and in place, through the graph, the middleware and LCEL,
at every window: never cleared, cut, digested or summarised away. Checked on the payload
``ChatOpenAI`` / ``ChatAnthropic`` would send (``_get_request_payload``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    JsonlArchive,
    MessageCompactor,
    create_compacting_agent,
)
from langchain_compact._compaction_plan import plan_compaction
from langchain_compact._provider_items import carries_provider_compaction
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.markers import KIND_PINNED_TASK, KIND_SUMMARY, kind_of
from langchain_compact.tokens import context_tokens

ITEMS: dict[str, dict[str, Any]] = {
    # langchain-openai keeps a Responses API output item of type "compaction" as a block
    "openai": {"type": "compaction", "id": "cmp_0a1b2c", "encrypted_content": "gAAAAB-opaque"},
    # langchain-anthropic keeps the compaction block (content summary, opaque fields) as is
    "anthropic": {
        "type": "compaction",
        "content": "Summary of the earlier steps, kept by the provider.",
        "encrypted_content": "opaque-state",
    },
}
CARRIER_AT = 4  # the 4th model call's reply carries the provider's item
WINDOWS = (2500, 5000, 12000)
STEPS = 18


class CompactingProvider(ContextReadingPolicy):
    """The demo policy whose ``CARRIER_AT``-th reply carries a provider compaction item, as
    ``ChatOpenAI(context_management=...)`` / ``ChatAnthropic(context_management=...)``
    return it (the item first, then the reply's text and tool calls)."""

    provider: str = "openai"
    calls: list[list[BaseMessage]] = []  # noqa: RUF012 (per instance: set in the tests)

    def _respond(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls.append(list(messages))
        result = super()._respond(messages)
        if len(self.calls) != CARRIER_AT:
            return result
        reply = result.generations[0].message
        assert isinstance(reply, AIMessage)
        blocks: list[Any] = [copy.deepcopy(ITEMS[self.provider])]
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        carrier = reply.model_copy(
            update={"content": blocks, "response_metadata": {"model_provider": self.provider}}
        )
        return ChatResult(generations=[ChatGeneration(message=carrier)])


def payload_items(provider: str, messages: list[BaseMessage]) -> list[Any]:
    """The compaction items in the request the provider's chat model would send."""
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(model="gpt-5", api_key="sk-test", use_responses_api=True)  # type: ignore[arg-type]
        payload = model._get_request_payload(messages)
        return [
            (i, item) for i, item in enumerate(payload["input"]) if item.get("type") == "compaction"
        ]
    from langchain_anthropic import ChatAnthropic

    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-test")  # type: ignore[arg-type]
    payload = model._get_request_payload(messages)
    return [
        (i, block)
        for i, message in enumerate(payload["messages"])
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "compaction"
    ]


def check_calls(provider: str, calls: list[list[BaseMessage]]) -> int:
    """Every model input after the item was returned holds it once, unchanged, after the
    pinned task or summary it follows and before the newest turn; the payload carries it
    as the provider sent it. Returns how many inputs were compacted around it."""
    assert len(calls) > CARRIER_AT, "the run ended before the provider compacted"
    compacted = 0
    for seen in calls[CARRIER_AT:]:
        carriers = [i for i, m in enumerate(seen) if carries_provider_compaction(m)]
        assert len(carriers) == 1, [type(m).__name__ for m in seen]
        i = carriers[0]
        assert seen[i].content[0] == ITEMS[provider], seen[i].content
        assert 0 < i < len(seen) - 1
        assert kind_of(seen[0]) in (None, KIND_PINNED_TASK) and isinstance(seen[0], HumanMessage)
        compacted += any(kind_of(m) == KIND_SUMMARY for m in seen)
        items = payload_items(provider, seen)
        assert [item for _, item in items] == [ITEMS[provider]], items
    return compacted


def task_and_model(provider: str) -> tuple[DependentTask, CompactingProvider]:
    return DependentTask(steps=STEPS, payload_chars=1000, seed=5), CompactingProvider(
        provider=provider, calls=[]
    )


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("provider", sorted(ITEMS))
def test_graph_keeps_the_providers_item(provider: str, window: int, tmp_path: Path) -> None:
    task, model = task_and_model(provider)
    archive = JsonlArchive(tmp_path)
    agent = create_compacting_agent(
        model, task.tools(), config=CompactionConfig(context_window=window),
        checkpointer=InMemorySaver(), archive=archive, summarizer=ExtractiveSummarizer()
    )  # fmt: skip
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 400}
    out = agent.invoke({"messages": [("user", task.prompt())]}, run)
    assert task.check(out["messages"][-1].text).ok
    compacted = check_calls(provider, model.calls)
    assert window != WINDOWS[0] or compacted, "the small window compacts around the item"
    refs = archive.refs(thread_id="t")
    assert refs or window != WINDOWS[0]
    archived = [m for ref in refs for m in archive.read(ref, thread_id="t")]
    assert not any(carries_provider_compaction(m) for m in archived), "never archived away"


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("provider", sorted(ITEMS))
def test_middleware_keeps_the_providers_item(provider: str, window: int) -> None:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    task, model = task_and_model(provider)
    middleware = CompactionMiddleware(config=CompactionConfig(context_window=window))
    agent = create_agent(model=model, tools=task.tools(), middleware=[middleware])
    out = agent.invoke({"messages": [("user", task.prompt())]}, {"recursion_limit": 400})
    assert task.check(out["messages"][-1].text).ok
    compacted = check_calls(provider, model.calls)
    assert window != WINDOWS[0] or compacted


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("provider", sorted(ITEMS))
def test_lcel_keeps_the_providers_item(provider: str, window: int) -> None:
    task, model = task_and_model(provider)
    compactor = MessageCompactor(config=CompactionConfig(context_window=window))
    bound = model.bind_tools(task.tools())
    tools = {t.name: t for t in task.tools()}
    history: list[BaseMessage] = [HumanMessage(task.prompt(), id="task")]
    for _ in range(100):
        reply = bound.invoke(compactor(history, {"configurable": {"thread_id": "t"}}))
        history.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            result = tools[call["name"]].invoke(call)
            assert isinstance(result, ToolMessage)
            history.append(result)
    assert task.check(history[-1].text).ok
    compacted = check_calls(provider, model.calls)
    assert window != WINDOWS[0] or compacted


def test_the_plan_never_takes_the_item_and_keeps_its_tool_results_with_it() -> None:
    carrier = AIMessage(
        content=[ITEMS["anthropic"]],
        tool_calls=[{"name": "f", "args": {}, "id": "k1"}],
        id="carrier",
    )
    rounds: list[BaseMessage] = []
    for i in range(6):
        rounds += [
            AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}], id=f"a{i}"),
            ToolMessage("x" * 400, tool_call_id=f"c{i}", id=f"t{i}"),
        ]
    config = CompactionConfig(context_window=4000, keep_last_n=2)
    task = HumanMessage("Task", id="task")
    result = ToolMessage("r", tool_call_id="k1", id="r1")
    # The item in the middle: the span ends before it.
    plan = plan_compaction([task, *rounds[:4], carrier, result, *rounds[4:]], config)
    assert plan is not None and [m.id for m in plan.span] == ["a0", "t0", "a1", "t1"]
    assert [m.id for m in plan.tail][:2] == ["carrier", "r1"]
    # The item first after the task: it joins the head with its result; the rest is the span.
    plan = plan_compaction([task, carrier, result, *rounds], config)
    assert plan is not None and [m.id for m in plan.head] == ["task", "carrier", "r1"]
    assert kind_of(plan.head[0]) == KIND_PINNED_TASK and plan.span[0].id == "a0"


@pytest.mark.parametrize("provider", sorted(ITEMS))
def test_the_providers_report_after_its_item_anchors_the_count(provider: str) -> None:
    rounds: list[BaseMessage] = [HumanMessage("Task: read the logs", id="task")]
    for i in range(20):
        rounds += [
            AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}], id=f"a{i}"),
            ToolMessage(f"log line {i}\n" * 150, tool_call_id=f"c{i}", id=f"t{i}"),
        ]
    # The reply carrying the item, then the next call's report: the provider counted its
    # compacted context (the item and what follows), not the rounds before the item.
    carrier = AIMessage(content=[ITEMS[provider], {"type": "text", "text": "ok"}], id="carrier")
    usage = {"input_tokens": 700, "output_tokens": 20, "total_tokens": 720}
    reply = AIMessage("noted", id="reply", usage_metadata=usage)
    history = [*rounds, carrier, HumanMessage("go on", id="h"), reply, HumanMessage("next")]
    local = context_tokens(rounds)
    assert local > 10 * 720  # what the provider compacted away, counted locally
    for verify in (False, True):  # graph and middleware; LCEL checks the report first
        tokens = context_tokens(history, verify_anchor=verify)
        assert 720 < tokens < 800, (verify, tokens)
    # The same report without the provider's item cannot describe the history (LCEL).
    plain = carrier.model_copy(update={"content": "ok"})
    assert context_tokens([*rounds, plain, *history[-3:]], verify_anchor=True) > local
