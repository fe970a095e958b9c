"""Issue 28, item 6: the overflow recovery uses every reduction a turn has.

The provider refuses any input over 6,000 tokens (o200k) while the compactor is told
16,000, and each ``read()`` result is about 3,000 tokens. After two reads the refused call is
``[task, call, result 1, call, result 2]``: no span is left to summarise (the kept tail is
everything), but clearing result 1 (read already) fits. The recovery runs the whole turn
(clearing, digests, argument stubs, the summary, the last resorts) under the window the
refusal teaches, records that window on what it reduced, and the third read goes out
without a second refusal. It raises the clear error only when every reduction is spent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError as CoreOverflow
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from langchain_compact import (
    CompactionConfig,
    ContextOverflowError,
    ExtractiveSummarizer,
    JsonlArchive,
)
from langchain_compact.core import PROVIDER_WINDOW_KEY, Compactor
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
)
from langchain_compact.tokens import TiktokenCounter, approximate_tokens

WINDOW = 16_000  # configured
ENFORCED = 6_000  # what the provider accepts
RESULT_TOKENS = 3_000  # each read() result, o200k
READS = 3
TASK = "Task: read the three modules and say what each one does"

_COUNT = TiktokenCounter()
#: What clearing or digesting a read result leaves (a placeholder, or a digest of it).
REDUCED = (KIND_CLEARED, KIND_TRUNCATED)


@cache
def _file(i: int) -> str:
    """Module ``i``'s log: about :data:`RESULT_TOKENS` o200k tokens of log lines, under
    the size a read result is digested at in the configured window (a fifth of it)."""
    lines: list[str] = []
    for k in range(10_000):
        lines.append(
            f"2024-05-0{i} 12:{k % 60:02d}:{k * 7 % 60:02d} INFO worker-{k % 8} module {i} "
            f"processed job {k} in {k * 3 % 1000} ms status=ok"
        )
        if k < 50:
            continue
        text = "\n".join(lines)
        if _COUNT([ToolMessage(text, tool_call_id="x")]) >= RESULT_TOKENS:
            return text + f"\nEND OF MODULE {i}"
    raise AssertionError("unreachable")


@tool
def read(path: str) -> str:
    """Read one source file."""
    return _file(int(path.removeprefix("/src/mod").removesuffix(".py")))


class ReadingModel(BaseChatModel):
    """Reads ``reads`` files, one per turn, then answers; refuses any input over
    ``enforced`` tokens (o200k) the way a provider does, and reports usage."""

    enforced: int = ENFORCED
    reads: int = READS
    calls: int = 0
    refusals: int = 0
    sizes: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "reading-fake"

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
            raise CoreOverflow(
                f"This model's maximum context length is {self.enforced} tokens. However, "
                f"your messages resulted in {tokens} tokens."
            )
        self.sizes.append(tokens)
        self.calls += 1
        usage = {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}
        if self.calls <= self.reads:
            n = self.calls
            msg = AIMessage(
                "",
                tool_calls=[{"name": "read", "args": {"path": f"/src/mod{n}.py"}, "id": f"c{n}"}],
                usage_metadata=usage,
            )
        else:
            msg = AIMessage(f"done: read {self.calls - 1} modules", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _config() -> CompactionConfig:
    return CompactionConfig(context_window=WINDOW)


def _refused_history() -> list[BaseMessage]:
    """The call the provider refuses: the task, two calls and their results."""
    history: list[BaseMessage] = [HumanMessage(TASK, id="t")]
    for n in (1, 2):
        call = {"name": "read", "args": {"path": f"/src/mod{n}.py"}, "id": f"c{n}"}
        history.append(AIMessage("", id=f"a{n}", tool_calls=[call]))
        history.append(ToolMessage(_file(n), tool_call_id=f"c{n}", id=f"r{n}"))
    return history


def _results(messages: Sequence[BaseMessage]) -> dict[str, BaseMessage]:
    return {str(m.tool_call_id): m for m in messages if isinstance(m, ToolMessage)}


def _check_run(model: ReadingModel, messages: Sequence[BaseMessage]) -> None:
    """The run finished with one refusal: the recovery cleared the read result, the
    learned window kept the third read under the enforced one, and no summary was needed."""
    assert messages[-1].content == f"done: read {READS} modules"
    assert model.refusals == 1, "the learned window keeps later calls under the enforced one"
    assert model.calls == READS + 1
    assert max(model.sizes) <= ENFORCED
    results = _results(messages)
    assert kind_of(results["c1"]) in REDUCED  # read already: cleared or digested by the recovery
    assert kind_of(results["c3"]) is None  # the newest result reached the model whole
    assert results["c3"].content == _file(3)
    learned = Compactor.learned_window(messages)
    assert learned is not None and learned < ENFORCED
    assert not any(kind_of(m) == KIND_SUMMARY for m in messages)  # clearing was enough


def _check_archived(archive: JsonlArchive, messages: Sequence[BaseMessage], thread: str) -> None:
    """Every result the run cleared is in the archive, whole."""
    cleared = [m for m in _results(messages).values() if kind_of(m) in REDUCED]
    assert cleared
    for placeholder in cleared:
        ref = get_meta(placeholder)["archive_ref"]
        originals = archive.read(ref, thread_id=thread)
        call_id = placeholder.tool_call_id
        match = [m for m in originals if getattr(m, "tool_call_id", None) == call_id]
        n = int(str(placeholder.tool_call_id).removeprefix("c"))
        assert match and match[0].content == _file(n)


# --------------------------------------------------------------------------- the core


def test_the_refused_call_has_no_span_to_summarise_but_clearing_fits() -> None:
    history = _refused_history()
    assert _COUNT(history) > ENFORCED  # the provider refuses it
    # Each result is read whole at the configured window (not digested on arrival).
    large = int(WINDOW * _config().large_result_ratio)
    assert all(approximate_tokens([m]) < large for m in history[2::2])
    cleared = [*history[:2], ToolMessage("cleared", tool_call_id="c1", id="r1"), *history[3:]]
    assert _COUNT(cleared) < ENFORCED / 2 + 500  # clearing result 1 fits


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_overflow_clears_a_read_result_under_the_learned_window(mode: str, tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    core = Compactor(config=_config(), archive=archive)
    history = _refused_history()
    assert core.decide(history).action == "continue"  # the configured window says it fits
    if mode == "sync":
        turn = core.overflow(history, "t", write_stop=False)
    else:
        turn = asyncio.run(core.aoverflow(history, "t", write_stop=False))
    assert turn.outcome == "compacted", turn.reason
    assert turn.history == turn.messages
    events = [e["event"] for e in turn.events]
    assert events[0] == "provider_overflow"
    assert "micro_compaction" in events
    learned = turn.events[0]["window"]
    assert learned < min(core.count(history), _COUNT(history))  # below the refused size
    results = _results(turn.messages)
    assert kind_of(results["c1"]) in REDUCED
    assert results["c2"] is history[4]  # unread: untouched
    assert _COUNT(turn.messages) <= ENFORCED
    # Recorded on what it reduced (no boundary was made), and read back by the next turn.
    assert get_meta(results["c1"])[PROVIDER_WINDOW_KEY] == learned
    assert core.learned_window(turn.messages) == learned
    _check_archived(archive, turn.messages, "t")


def test_later_turns_of_the_thread_keep_the_learned_window() -> None:
    core = Compactor(config=_config())
    turn = core.overflow(_refused_history(), "t", write_stop=False)
    call = {"name": "read", "args": {"path": "/src/mod3.py"}, "id": "c3"}
    grown = [
        *turn.messages,
        AIMessage("", id="a3", tool_calls=[call]),
        ToolMessage(_file(3), tool_call_id="c3", id="r3"),
    ]
    assert _COUNT(grown) > ENFORCED
    nxt = core.turn(grown, "t", write_stop=False)
    assert nxt.outcome == "continue"
    assert _COUNT(nxt.messages) <= ENFORCED  # result 2 cleared before the call goes out
    assert kind_of(_results(nxt.messages)["c2"]) in REDUCED


def test_the_learned_window_is_read_from_any_message_and_the_smallest_wins() -> None:
    """A window recorded on a reduced message counts even before the boundary (a cut task
    stands there), and in a long history the scan remembers it as the history grows."""
    from langchain_compact.markers import with_meta

    task = with_meta(HumanMessage(TASK, id="t"), **{PROVIDER_WINDOW_KEY: 5_000})
    summary = with_meta(HumanMessage("summary", id="s"), kind=KIND_SUMMARY)
    summary = with_meta(summary, **{PROVIDER_WINDOW_KEY: 9_000})
    assert Compactor.learned_window([task, summary]) == 5_000
    history: list[BaseMessage] = [HumanMessage(TASK, id="t")]
    for n in range(40):
        history.append(AIMessage(f"step {n}", id=f"a{n}"))
        history.append(HumanMessage(f"ok {n}", id=f"h{n}"))
    assert Compactor.learned_window(history) is None
    history[5] = with_meta(history[5], **{PROVIDER_WINDOW_KEY: 4_321})
    assert Compactor.learned_window(history) == 4_321
    grown = [*history, AIMessage("more", id="m")]
    assert Compactor.learned_window(grown) == 4_321  # read on from the remembered facts


def test_overflow_stops_with_the_clear_error_when_nothing_is_reducible() -> None:
    core = Compactor(config=_config())
    history: list[BaseMessage] = [HumanMessage(TASK, id="t")]
    turn = core.overflow(history, "t", write_stop=False)
    assert turn.outcome == "stopped"
    assert "refused the call for its length and nothing is left to compact" in turn.reason
    assert "every reduction a turn has is spent" in turn.reason
    assert turn.messages == history


# --------------------------------------------------------------------------- the graph


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_graph_recovers_by_clearing(mode: str, tmp_path: Path) -> None:
    from langchain_compact.graph import create_compacting_agent

    model = ReadingModel()
    archive = JsonlArchive(tmp_path)
    agent = create_compacting_agent(
        model,
        [read],
        config=_config(),
        archive=archive,
        recall_tool=False,
        summarizer=ExtractiveSummarizer(),
    )
    start = {"messages": [("user", TASK)]}
    run = {"configurable": {"thread_id": "g"}, "recursion_limit": 100}
    out = agent.invoke(start, run) if mode == "sync" else asyncio.run(agent.ainvoke(start, run))
    _check_run(model, out["messages"])
    _check_archived(archive, out["messages"], "g")


def test_graph_raises_the_clear_error_when_nothing_is_reducible() -> None:
    from langchain_compact.graph import create_compacting_agent

    model = ReadingModel(enforced=5)  # refuses even the task
    agent = create_compacting_agent(
        model, [read], config=_config(), archive=None, summarizer=ExtractiveSummarizer()
    )
    with pytest.raises(ContextOverflowError, match="every reduction a turn has is spent"):
        agent.invoke({"messages": [("user", TASK)]}, {"recursion_limit": 100})
    assert model.refusals == 1  # no retry of a call nothing could reduce


# --------------------------------------------------------------------------- middleware


def _agent(model: ReadingModel, archive: Any = None) -> Any:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    return create_agent(
        model=model,
        tools=[read],
        middleware=[CompactionMiddleware(config=_config(), archive=archive)],
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_middleware_recovers_by_clearing(mode: str, tmp_path: Path) -> None:
    model = ReadingModel()
    archive = JsonlArchive(tmp_path)
    agent = _agent(model, archive)
    start = {"messages": [("user", TASK)]}
    run = {"configurable": {"thread_id": "m"}, "recursion_limit": 100}
    out = agent.invoke(start, run) if mode == "sync" else asyncio.run(agent.ainvoke(start, run))
    _check_run(model, out["messages"])
    _check_archived(archive, out["messages"], "m")


def test_middleware_raises_the_clear_error_when_nothing_is_reducible() -> None:
    model = ReadingModel(enforced=5)
    with pytest.raises(ContextOverflowError, match="every reduction a turn has is spent"):
        _agent(model).invoke({"messages": [("user", TASK)]}, {"recursion_limit": 100})
    assert model.refusals == 1


# --------------------------------------------------------------------------- LCEL


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_lcel_recovers_by_clearing(mode: str) -> None:
    from langchain_compact.lcel import MessageCompactor, with_overflow_retry

    model = ReadingModel()
    compactor = MessageCompactor(config=_config())
    chain = with_overflow_retry(model, compactor)
    config = {"configurable": {"thread_id": "l"}}

    async def run() -> list[BaseMessage]:
        history: list[BaseMessage] = [HumanMessage(TASK, id="t")]
        for _ in range(READS + 1):
            if mode == "sync":
                reply = chain.invoke(history, config)
            else:
                reply = await chain.ainvoke(history, config)
            history.append(reply)
            for call in reply.tool_calls:
                history.append(read.invoke({**call, "type": "tool_call"}))
            if not reply.tool_calls:
                break
        return history

    history = asyncio.run(run())
    assert history[-1].content == f"done: read {READS} modules"
    assert model.refusals == 1
    assert max(model.sizes) <= ENFORCED
    learned = compactor.learned_window("l")
    assert learned is not None and learned < ENFORCED
    assert compactor.compactions == 0  # clearing was enough


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_lcel_raises_the_clear_error_when_nothing_is_reducible(mode: str) -> None:
    from langchain_compact.lcel import with_overflow_retry

    model = ReadingModel(enforced=5)
    chain = with_overflow_retry(model, config=_config())
    history = [HumanMessage(TASK, id="t")]
    with pytest.raises(ContextOverflowError, match="every reduction a turn has is spent"):
        if mode == "sync":
            chain.invoke(history)
        else:
            asyncio.run(chain.ainvoke(history))
    assert model.refusals == 1  # no retry of a call nothing could reduce
