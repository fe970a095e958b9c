"""Issue 23, must-show 2: a provider that enforces a window smaller than the configured one.

The fake model raises langchain-core's ``ContextOverflowError`` when its input (counted with
tiktoken ``o200k_base``) is over the enforced window. 24 tool turns finish through the graph,
the middleware and LCEL: each refusal is followed by one recovery (the whole turn under the
learned window) and one retry, and the window it teaches keeps later calls under the
enforced one (one refusal per run).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError as CoreOverflow
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from langchain_compact import CompactionConfig, ContextOverflowError, ExtractiveSummarizer
from langchain_compact.core import PROVIDER_WINDOW_KEY, Compactor, TurnContext
from langchain_compact.markers import KIND_SUMMARY, get_meta, kind_of
from langchain_compact.tokens import TiktokenCounter

WINDOW = 16_000  # configured
ENFORCED = 9_000  # what the provider accepts
TURNS = 24

_COUNT = TiktokenCounter()


def _payload(i: int) -> str:
    rows = [
        f"step {i} row {r}: value={i * 1000 + r} status=ok path=/data/{i}/{r}.csv"
        for r in range(60)
    ]
    return "\n".join(rows) + f"\nRESULT step {i} = {i * 7}"


@tool
def fetch(step: int) -> str:
    """Fetch the data of one step."""
    return _payload(step)


def _llamacpp_refusal(text: str) -> Exception:
    """What ``ChatOpenAI`` raises for llama-cpp-python's HTTP 400 answer to a request over
    its context (checked against the real server in
    tests/integration/test_overflow_real_server.py)."""
    import httpx
    from langchain_openai.chat_models.base import OpenAIInvalidRequestError

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(400, request=request)
    return OpenAIInvalidRequestError(message=text, response=response, body=None)


class EnforcingModel(BaseChatModel):
    """Calls ``fetch`` once per turn for ``turns`` turns, then answers; refuses any input
    over ``enforced`` tokens (o200k) the way a provider does, and reports usage."""

    enforced: int = ENFORCED
    turns: int = TURNS
    calls: int = 0
    refusals: int = 0
    sizes: list[int] = Field(default_factory=list)
    llamacpp: bool = False
    """Refuse the way ChatOpenAI reports llama-cpp-python's server answer (an
    invalid-request error, not langchain-core's ContextOverflowError)."""

    @property
    def _llm_type(self) -> str:
        return "enforcing-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tokens = _COUNT(messages)
        if tokens > self.enforced:
            self.refusals += 1
            text = (
                f"This model's maximum context length is {self.enforced} tokens. However, "
                f"you requested {tokens + 64} tokens ({tokens} in the messages, 64 in the "
                "completion). Please reduce the length of the messages or completion."
            )
            if self.llamacpp:
                raise _llamacpp_refusal(text)
            raise CoreOverflow(text)
        self.sizes.append(tokens)
        self.calls += 1
        usage = {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}
        if self.calls <= self.turns:
            msg = AIMessage(
                "",
                tool_calls=[
                    {"name": "fetch", "args": {"step": self.calls}, "id": f"c{self.calls}"}
                ],
                usage_metadata=usage,
            )
        else:
            msg = AIMessage(f"done after {self.calls - 1} steps", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _config() -> CompactionConfig:
    return CompactionConfig(context_window=WINDOW)


def _learned(messages: Sequence[BaseMessage]) -> int | None:
    summaries = [m for m in messages if kind_of(m) == KIND_SUMMARY]
    return get_meta(summaries[-1]).get(PROVIDER_WINDOW_KEY) if summaries else None


def _check_run(model: EnforcingModel, messages: Sequence[BaseMessage]) -> None:
    assert messages[-1].content == f"done after {TURNS} steps"
    assert model.calls == TURNS + 1
    assert model.refusals == 1, "the learned window keeps later calls under the enforced one"
    assert max(model.sizes) <= ENFORCED
    learned = _learned(messages)
    # In the compactor's own count, which errs high against o200k (the provider's count
    # here) by up to a fifth: the refused input's local count.
    assert learned is not None and learned <= ENFORCED * 1.25


# --------------------------------------------------------------------------- the core


def test_overflow_learns_the_window_and_reduces() -> None:
    core = Compactor(config=_config())
    history: list[BaseMessage] = [HumanMessage("Task: fetch every step", id="t")]
    for i in range(1, 7):
        history.append(
            AIMessage(
                "", id=f"a{i}", tool_calls=[{"name": "fetch", "args": {"step": i}, "id": f"c{i}"}]
            )
        )
        history.append(ToolMessage(_payload(i), tool_call_id=f"c{i}", id=f"r{i}"))
    assert core.decide(history).action == "continue"  # the configured window says it fits
    turn = core.overflow(history, "t")
    assert turn.outcome == "compacted"
    assert turn.events[0]["event"] == "provider_overflow"
    # The whole turn's ladder ran under the learned window: clearing came first.
    assert turn.events[1]["event"] in ("micro_compaction", "compaction")
    learned = turn.events[0]["window"]
    # Below the refused size (the smaller of the compactor's and tiktoken's count, less the
    # margin), and recorded on the reduced history.
    assert learned < min(core.count(history), _COUNT(history))
    assert core.learned_window(turn.messages) == learned
    assert core.count(turn.messages) <= core.config.fit_tokens  # the config is not narrowed
    narrowed = core.settings(TurnContext().narrowed(learned))
    assert core.count(turn.messages) <= (narrowed.fit_tokens or 0)
    # Later compactions carry the learned window on.
    grown = [*turn.messages, *history[-6:]]
    again = core.turn(grown, "t")
    if again.outcome == "compacted":
        assert _learned(again.messages) == learned


def test_overflow_cuts_an_oversized_task_when_nothing_else_is_left() -> None:
    """A lone task the provider refuses is cut to head and tail (archived whole), as a turn
    that cannot fit does; only a call nothing can reduce stops."""
    core = Compactor(config=_config(), archive=None)
    task = HumanMessage("x " * 5000, id="t")
    turn = core.overflow([task], "t", write_stop=False)
    assert turn.outcome == "compacted"
    assert get_meta(turn.messages[0]).get("truncated") is True
    assert core.count(turn.messages) < core.count([task])
    stopped = core.overflow([HumanMessage("Task: say hi", id="t")], "t", write_stop=False)
    assert stopped.outcome == "stopped"
    assert "refused" in stopped.reason and "every reduction" in stopped.reason


def test_package_error_is_the_core_error() -> None:
    assert issubclass(ContextOverflowError, CoreOverflow)


# --------------------------------------------------------------------------- middleware


def _agent(model: EnforcingModel) -> Any:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    return create_agent(
        model=model,
        tools=[fetch],
        middleware=[CompactionMiddleware(config=_config())],
    )


def test_middleware_compacts_and_retries_on_refusal() -> None:
    model = EnforcingModel()
    out = _agent(model).invoke(
        {"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 200}
    )
    _check_run(model, out["messages"])
    assert out["compaction_count"] >= 1


def test_middleware_compacts_and_retries_on_refusal_async() -> None:
    model = EnforcingModel()
    out = asyncio.run(
        _agent(model).ainvoke(
            {"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 200}
        )
    )
    _check_run(model, out["messages"])


# --------------------------------------------------------------------------- the graph


def test_prebuilt_agent_compacts_and_retries_on_refusal() -> None:
    from langchain_compact.graph import create_compacting_agent

    model = EnforcingModel()
    agent = create_compacting_agent(
        model,
        [fetch],
        config=_config(),
        archive=None,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )
    out = agent.invoke({"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 300})
    _check_run(model, out["messages"])
    assert out["compaction_count"] >= 1


def test_prebuilt_agent_compacts_and_retries_on_refusal_async() -> None:
    from langchain_compact.graph import create_compacting_agent

    model = EnforcingModel()
    agent = create_compacting_agent(
        model,
        [fetch],
        config=_config(),
        archive=None,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )
    out = asyncio.run(
        agent.ainvoke({"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 300})
    )
    _check_run(model, out["messages"])


def test_add_compaction_wraps_a_users_model_node() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from langchain_compact.graph import add_compaction

    model = EnforcingModel()
    seen: list[int] = []

    def agent(state: MessagesState) -> dict[str, Any]:
        seen.append(len(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([fetch]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, model_node="agent", config=_config())
    graph = builder.compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "overflow"}, "recursion_limit": 300}
    out = graph.invoke({"messages": [("user", "Task: fetch every step")]}, run)
    _check_run(model, out["messages"])
    # The node ran once more than the model answered: the refused call, then its retry.
    assert len(seen) == model.calls + model.refusals
    # The state holds the compacted history: one summary per compaction, no duplicates.
    ids = [m.id for m in graph.get_state(run).values["messages"]]
    assert len(ids) == len(set(ids))


def test_add_compaction_without_overflow_retry_lets_the_refusal_through() -> None:
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from langchain_compact.graph import add_compaction

    model = EnforcingModel()
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([fetch]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, config=_config(), overflow_retry=False)
    with pytest.raises(CoreOverflow):
        builder.compile().invoke(
            {"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 300}
        )


# --------------------------------------------------------------------------- LCEL


def _chain_run(chain: Any, *, invoke: Any) -> list[BaseMessage]:
    """Drive a chain the way an application loop does: the raw history grows, the tools run."""
    history: list[BaseMessage] = [HumanMessage("Task: fetch every step", id="t")]
    for _ in range(TURNS + 1):
        reply = invoke(chain, history)
        history.append(reply)
        for call in reply.tool_calls:
            history.append(fetch.invoke({**call, "type": "tool_call"}))
        if not reply.tool_calls:
            break
    return history


def test_lcel_compacts_and_retries_on_refusal() -> None:
    from langchain_compact.lcel import MessageCompactor, with_overflow_retry

    model = EnforcingModel()
    compactor = MessageCompactor(config=_config())
    chain = with_overflow_retry(model, compactor)
    config = {"configurable": {"thread_id": "lcel"}}
    history = _chain_run(chain, invoke=lambda c, h: c.invoke(h, config))
    assert history[-1].content == f"done after {TURNS} steps"
    assert model.calls == TURNS + 1
    assert model.refusals == 1
    assert max(model.sizes) <= ENFORCED
    learned = compactor.learned_window("lcel")
    assert learned is not None and learned <= ENFORCED * 1.25
    assert compactor.compactions >= 1


def test_lcel_compacts_and_retries_on_refusal_async() -> None:
    from langchain_compact.lcel import MessageCompactor

    model = EnforcingModel()
    compactor = MessageCompactor(config=_config())
    chain = compactor.wrap(model)

    async def run() -> list[BaseMessage]:
        history: list[BaseMessage] = [HumanMessage("Task: fetch every step", id="t")]
        for _ in range(TURNS + 1):
            reply = await chain.ainvoke(history)
            history.append(reply)
            for call in reply.tool_calls:
                history.append(await fetch.ainvoke({**call, "type": "tool_call"}))
            if not reply.tool_calls:
                break
        return history

    history = asyncio.run(run())
    assert history[-1].content == f"done after {TURNS} steps"
    assert model.refusals == 1
    assert max(model.sizes) <= ENFORCED


def test_lcel_second_refusal_raises() -> None:
    from langchain_compact.lcel import with_overflow_retry

    model = EnforcingModel(enforced=10)  # nothing fits
    chain = with_overflow_retry(model, config=_config())
    with pytest.raises(CoreOverflow):
        chain.invoke([HumanMessage("Task: fetch every step " * 20, id="t")])


# --------------------------------------------------------------------------- llama.cpp's answer


def test_is_provider_overflow() -> None:
    from langchain_core.exceptions import ModelInvalidRequestError

    from langchain_compact.errors import is_provider_overflow

    assert is_provider_overflow(CoreOverflow("too long"))
    assert is_provider_overflow(_llamacpp_refusal("This model's maximum context length is 512"))
    assert not is_provider_overflow(ContextOverflowError("a stop"))
    assert not is_provider_overflow(ModelInvalidRequestError("bad tool schema"))
    assert not is_provider_overflow(ValueError("maximum context length"))  # not a model error


def test_llamacpp_answer_is_handled_by_the_middleware() -> None:
    model = EnforcingModel(llamacpp=True)
    out = _agent(model).invoke(
        {"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 200}
    )
    _check_run(model, out["messages"])


def test_llamacpp_answer_is_handled_by_the_graph() -> None:
    from langchain_compact.graph import create_compacting_agent

    model = EnforcingModel(llamacpp=True)
    agent = create_compacting_agent(
        model,
        [fetch],
        config=_config(),
        archive=None,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )
    out = agent.invoke({"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 300})
    _check_run(model, out["messages"])


def test_llamacpp_answer_is_handled_by_lcel() -> None:
    from langchain_compact.lcel import with_overflow_retry

    model = EnforcingModel(llamacpp=True)
    chain = with_overflow_retry(model, config=_config())
    history = _chain_run(chain, invoke=lambda c, h: c.invoke(h))
    assert history[-1].content == f"done after {TURNS} steps"
    assert model.refusals == 1


def test_each_refusal_is_followed_by_one_recovery_then_the_retry() -> None:
    from langchain_compact.graph import create_compacting_agent
    from langchain_compact.markers import EVENT_KEY

    model = EnforcingModel()
    agent = create_compacting_agent(
        model,
        [fetch],
        config=_config(),
        archive=None,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )
    events: list[str] = []
    last: Any = None
    for mode, chunk in agent.stream(
        {"messages": [("user", "Task: fetch every step")]},
        {"recursion_limit": 300},
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            events.append(chunk[EVENT_KEY]["event"])
        else:
            last = chunk
    assert events.count("provider_overflow") == 1
    at = events.index("provider_overflow")
    # The recovery's first reduction follows the refusal (the turn's ladder: clearing first).
    assert events[at + 1] in ("micro_compaction", "compaction")
    assert last["messages"][-1].content == f"done after {TURNS} steps"
    assert model.refusals == 1 and model.calls == TURNS + 1
