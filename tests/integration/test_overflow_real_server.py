"""Issue 23, must-show 2 against the real llama.cpp server: its context (``--n_ctx``) is
smaller than the configured window, so a run that trusts the configured window is refused.

What the server answers (checked here): HTTP 400 "This model's maximum context length is N
tokens. However, you requested M tokens (...)". langchain-openai maps an overflow to
langchain-core's ``ContextOverflowError`` only when the text holds OpenAI's
``context_length_exceeded`` code (or a few other providers' phrases); this answer does not,
so ``ChatOpenAI`` raises ``OpenAIInvalidRequestError``. ``errors.is_provider_overflow``
recognises it, and the integrations compact and retry on it.

The base model does not call tools, so a thin wrapper scripts the tool calls while every
call still goes through ``ChatOpenAI`` to the server (real refusals, real usage reports).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError as CoreOverflow
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import ConfigDict, Field

from bench import _llama
from langchain_compact import CompactionConfig, ExtractiveSummarizer
from langchain_compact.errors import is_provider_overflow

pytestmark = [pytest.mark.server, pytest.mark.timeout(900)]

N_CTX = 1024  # what the server enforces
WINDOW = 4096  # what the compactor is told
TURNS = 24


@pytest.fixture(scope="module")
def small_server() -> Iterator[_llama.Server]:
    original = _llama.SERVER_FLAGS
    flags = list(original)
    flags[flags.index("--n_ctx") + 1] = str(N_CTX)
    _llama.SERVER_FLAGS = tuple(flags)
    try:
        with _llama.llama_server() as server:
            _llama.SERVER_FLAGS = original
            yield server
    finally:
        _llama.SERVER_FLAGS = original


@tool
def fetch(step: int) -> str:
    """Fetch the data of one step."""
    rows = [f"step {step} row {r}: value={step * 100 + r} ok" for r in range(8)]
    return "\n".join(rows) + f"\nRESULT step {step} = {step * 7}"


class ScriptedOverServer(BaseChatModel):
    """Sends every call to the server; replaces the reply's text by a scripted ``fetch``
    call (the usage report stays the server's)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: Any
    turns: int = TURNS
    calls: int = 0
    refusals: list[str] = Field(default_factory=list)
    prompt_tokens: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-over-llama-cpp"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            reply = self.inner.invoke(messages)
        except Exception as exc:
            self.refusals.append(f"{type(exc).__name__}: {exc}")
            raise
        usage = reply.usage_metadata
        self.prompt_tokens.append(int((usage or {}).get("input_tokens", 0)))
        self.calls += 1
        if self.calls <= self.turns:
            call = {"name": "fetch", "args": {"step": self.calls}, "id": f"c{self.calls}"}
            msg = AIMessage("", tool_calls=[call], usage_metadata=usage)
        else:
            msg = AIMessage(f"done after {self.calls - 1} steps", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def test_the_servers_answer_is_not_the_core_error_but_is_recognised(
    small_server: _llama.Server,
) -> None:
    model = _llama.chat_model(small_server, max_tokens=8)
    with pytest.raises(Exception) as caught:
        model.invoke([HumanMessage("word " * (2 * N_CTX))])
    assert not isinstance(caught.value, CoreOverflow)
    assert "maximum context length is 1024" in str(caught.value)
    assert is_provider_overflow(caught.value)


def test_middleware_finishes_24_turns_against_the_smaller_server_context(
    small_server: _llama.Server,
) -> None:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    model = ScriptedOverServer(inner=_llama.chat_model(small_server, max_tokens=8))
    agent = create_agent(
        model=model,
        tools=[fetch],
        middleware=[CompactionMiddleware(config=CompactionConfig(context_window=WINDOW))],
    )
    out = agent.invoke({"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 200})
    assert out["messages"][-1].content == f"done after {TURNS} steps"
    assert len(model.refusals) == 1, model.refusals
    assert "maximum context length" in model.refusals[0]
    assert max(model.prompt_tokens) + 8 <= N_CTX


def test_graph_finishes_24_turns_against_the_smaller_server_context(
    small_server: _llama.Server,
) -> None:
    from langchain_compact.graph import create_compacting_agent

    model = ScriptedOverServer(inner=_llama.chat_model(small_server, max_tokens=8))
    agent = create_compacting_agent(
        model,
        [fetch],
        config=CompactionConfig(context_window=WINDOW),
        archive=None,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )
    out = agent.invoke({"messages": [("user", "Task: fetch every step")]}, {"recursion_limit": 300})
    assert out["messages"][-1].content == f"done after {TURNS} steps"
    assert len(model.refusals) == 1, model.refusals
    assert max(model.prompt_tokens) + 8 <= N_CTX


def test_lcel_finishes_24_turns_against_the_smaller_server_context(
    small_server: _llama.Server,
) -> None:
    from langchain_compact.lcel import with_overflow_retry

    model = ScriptedOverServer(inner=_llama.chat_model(small_server, max_tokens=8))
    chain = with_overflow_retry(model, config=CompactionConfig(context_window=WINDOW))
    history: list[BaseMessage] = [HumanMessage("Task: fetch every step", id="t")]
    for _ in range(TURNS + 1):
        reply = chain.invoke(history)
        history.append(reply)
        for call in reply.tool_calls:
            history.append(fetch.invoke({**call, "type": "tool_call"}))
        if not reply.tool_calls:
            break
    assert history[-1].content == f"done after {TURNS} steps"
    assert len(model.refusals) == 1, model.refusals
