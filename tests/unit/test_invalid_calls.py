"""Malformed tool calls and duplicate call ids (issue 31, items 1 and 2; docs/design.md, B2).

When a model emits a call whose arguments do not parse, langchain keeps it in
``AIMessage.invalid_tool_calls``; langchain's ``create_agent`` answers it with
``ToolMessage(status="error", tool_call_id=<its id>)`` and langchain-openai (and -anthropic)
send it as a tool call. The pairing used to read ``tool_calls`` only: it called that answer
an orphan and dropped it, so the provider got a call without a result (HTTP 400), the
middleware dropped and archived the answer langchain re-added on every turn, and with
``on_invalid_history="raise"`` the run crashed on the turn after any malformed call. Two
calls of one ``AIMessage`` sharing an id (answered once) passed the check unchanged, and
Anthropic refuses duplicate ``tool_use`` ids.

Every model input here is judged by :mod:`_payload`, which converts it with the providers'
own converters and checks their rules (never the package's own check). Each test fails on
the code before this change (36065eb).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from _payload import payload_problems
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore
from pydantic import SkipValidation

from langchain_compact import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    InvalidHistoryError,
    StoreArchive,
    add_compaction,
    compact_messages,
)
from langchain_compact.core import Compactor
from langchain_compact.history import (
    find_safe_cut,
    repair_history,
    repair_report,
    validate_history,
)
from langchain_compact.lcel import MessageCompactor

WINDOW = 8_000
MODES = ("repair", "raise")


def malformed(cid: str | None, name: str = "ls") -> dict[str, Any]:
    return {"name": name, "args": '{"path": "/tm', "id": cid, "error": "unterminated string"}


def call(cid: str, name: str = "ls", **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": cid, "type": "tool_call"}


def answer_of_langchain(cid: str) -> ToolMessage:
    """What langchain's ``create_agent`` adds for a malformed call (``factory.py``)."""
    return ToolMessage(
        f"Tool call ls with id {cid} could not be executed - arguments were malformed or "
        "truncated.",
        name="ls",
        tool_call_id=cid,
        status="error",
    )


def one_shot() -> list[BaseMessage]:
    """The issue's case: a malformed call and langchain's error result for it."""
    return [
        HumanMessage("List /tmp."),
        AIMessage("", invalid_tool_calls=[malformed("bad1")]),
        ToolMessage("error", status="error", tool_call_id="bad1"),
    ]


def unanswered_malformed() -> list[BaseMessage]:
    """What ``before_model`` sees after a turn with a good and a malformed call: the tool
    node answered the good one; langchain answers the other only in its model node."""
    return [
        HumanMessage("List /tmp."),
        AIMessage("", tool_calls=[call("c1", path="/")], invalid_tool_calls=[malformed("bad1")]),
        ToolMessage("bin etc tmp", tool_call_id="c1", name="ls"),
    ]


def duplicate_ids() -> list[BaseMessage]:
    """Two calls of one message sharing ``call_0`` (some local servers number per message),
    answered once."""
    return [
        HumanMessage("List / and /tmp."),
        AIMessage("", tool_calls=[call("call_0", path="/"), call("call_0", path="/tmp")]),
        ToolMessage("bin etc tmp", tool_call_id="call_0", name="ls"),
    ]


def shape(messages: Sequence[BaseMessage]) -> list[tuple[str, str, str | None]]:
    return [(m.type, m.text, getattr(m, "tool_call_id", None)) for m in messages]


def assert_payload_ok(messages: Sequence[BaseMessage]) -> None:
    assert payload_problems(messages) == [], messages


# -- the history functions ------------------------------------------------------------------


def test_a_malformed_call_and_its_error_result_are_a_valid_pair() -> None:
    validate_history(one_shot())
    assert repair_report(one_shot()).changes == []
    cut = [*one_shot(), HumanMessage("again"), AIMessage("ok")]
    assert find_safe_cut(cut, 2) == 1  # moves back to the call, not past an "orphan"


def test_an_unanswered_malformed_call_is_invalid_and_repair_answers_it() -> None:
    history = [*unanswered_malformed(), HumanMessage("go on")]
    with pytest.raises(InvalidHistoryError, match=r"messages\[1\].*'bad1'.*malformed"):
        validate_history(history)
    fixed = repair_report(history)
    assert [(c.index, c.action) for c in fixed.changes] == [(1, "answered")]
    assert fixed.messages[3].status == "error" and "malformed" in fixed.messages[3].text
    assert fixed.removed == []
    assert_payload_ok(fixed.messages)


def test_a_malformed_call_without_an_id_gets_one_in_its_own_list() -> None:
    history = [HumanMessage("go"), AIMessage("", invalid_tool_calls=[malformed(None)])]
    fixed = repair_report(history)
    (ai,) = [m for m in fixed.messages if isinstance(m, AIMessage)]
    assert ai.tool_calls == [] and ai.invalid_tool_calls[0]["id"]
    assert fixed.messages[-1].tool_call_id == ai.invalid_tool_calls[0]["id"]
    assert fixed.removed == [history[1]]
    assert_payload_ok(fixed.messages)


def test_a_malformed_call_reusing_a_valid_calls_id_is_renamed_in_its_own_list() -> None:
    history = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[call("c1")], invalid_tool_calls=[malformed("c1")]),
        ToolMessage("ok", tool_call_id="c1"),
    ]
    with pytest.raises(InvalidHistoryError, match="two tool calls with the id 'c1'"):
        validate_history(history)
    fixed = repair_history(history)
    ai = fixed[1]
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls[0]["id"] == "c1" and ai.invalid_tool_calls[0]["id"] != "c1"
    validate_history(fixed)
    assert_payload_ok(fixed)


def test_duplicate_ids_in_one_message_are_reported_and_repaired() -> None:
    with pytest.raises(InvalidHistoryError, match=r"messages\[1\] has two tool calls.*call_0"):
        validate_history(duplicate_ids())
    fixed = repair_report(duplicate_ids())
    assert [c.action for c in fixed.changes] == ["renamed", "closed"]
    assert fixed.removed == [duplicate_ids()[1]]  # the original call list is archived
    assert_payload_ok(fixed.messages)
    # two answers: the second follows its call (re-paired), nothing is dropped
    both = [*duplicate_ids(), ToolMessage("x y", tool_call_id="call_0", name="ls")]
    fixed = repair_report(both)
    assert [c.action for c in fixed.changes] == ["renamed", "re-paired"]
    assert [m.text for m in fixed.messages[2:]] == ["bin etc tmp", "x y"]
    assert_payload_ok(fixed.messages)


def test_the_safe_cut_keeps_a_duplicate_id_batch_out_of_the_kept_tail() -> None:
    history = [*duplicate_ids(), HumanMessage("next"), AIMessage("done")]
    assert find_safe_cut(history, 1) == 3


# -- the core and the LCEL chain --------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_compact_messages_keeps_the_pair_and_answers_a_missing_result(mode: str) -> None:
    cfg = CompactionConfig(context_window=WINDOW, on_invalid_history=mode)  # type: ignore[arg-type]
    assert compact_messages(one_shot(), config=cfg) == one_shot()
    out = compact_messages(unanswered_malformed(), config=cfg)
    assert out[:3] == unanswered_malformed() and len(out) == 4
    assert_payload_ok(out)


def test_duplicate_ids_never_reach_the_model_and_raise_when_asked() -> None:
    archive = StoreArchive(InMemoryStore())
    out = compact_messages(
        duplicate_ids(), config=CompactionConfig(context_window=WINDOW), archive=archive
    )
    assert_payload_ok(out)
    refs = archive.refs(thread_id="default")
    assert [m.id for r in refs for m in archive.read(r, thread_id="default")] == [None]
    with pytest.raises(InvalidHistoryError, match="two tool calls"):
        compact_messages(
            duplicate_ids(),
            config=CompactionConfig(context_window=WINDOW, on_invalid_history="raise"),
        )


def test_raise_mode_still_raises_for_a_real_defect_after_a_malformed_call() -> None:
    history = [*unanswered_malformed(), HumanMessage("go"), ToolMessage("?", tool_call_id="zz")]
    turn = Compactor(config=CompactionConfig(context_window=WINDOW)).turn(history, "t")
    assert turn.repair is not None
    assert [c.action for c in turn.repair.changes] == ["answered", "dropped"]
    assert_payload_ok(turn.messages)
    strict = Compactor(config=CompactionConfig(context_window=WINDOW, on_invalid_history="raise"))
    with pytest.raises(InvalidHistoryError, match=r"messages\[4\].*orphan"):
        strict.turn(history, "t")


def test_lcel_chain_answers_once_and_keeps_the_langchain_result() -> None:
    inputs: list[list[BaseMessage]] = []
    archive = StoreArchive(InMemoryStore())
    compactor = MessageCompactor(
        config=CompactionConfig(context_window=WINDOW), archive=archive, thread_id="l"
    )
    chain = compactor.as_runnable() | RunnableLambda(lambda ms: inputs.append(list(ms)) or ms)
    history = [*one_shot(), AIMessage("", invalid_tool_calls=[malformed("bad2")])]
    chain.invoke(history)
    chain.invoke([*history, HumanMessage("and now?")])
    chain.invoke([*history, HumanMessage("and now?"), AIMessage("ok")])
    for seen in inputs:
        assert_payload_ok(seen)
        assert seen[:3] == one_shot()  # langchain's result is kept, never dropped
    assert archive.refs(thread_id="l") == []  # nothing removed, nothing archived


# -- graph nodes -------------------------------------------------------------------------------


class Scripted(BaseChatModel):
    """Replays ``replies`` and records every input."""

    replies: Annotated[list[AIMessage], SkipValidation()]
    inputs: Annotated[list[list[BaseMessage]], SkipValidation()]

    @property
    def _llm_type(self) -> str:
        return "scripted-malformed"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.inputs.append(list(messages))
        reply = self.replies[len(self.inputs) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def ls(path: str) -> str:
    """List a directory."""
    return f"files of {path}: a.txt b.txt"


def script() -> list[AIMessage]:
    """A good and a malformed call, two good turns, a malformed call alone (the run ends),
    then, on the user's next message, the answer."""
    return [
        AIMessage("", tool_calls=[call("c1", path="/")], invalid_tool_calls=[malformed("bad1")]),
        AIMessage("", tool_calls=[call("c2", path="/a")]),
        AIMessage("", tool_calls=[call("c3", path="/b")]),
        AIMessage("", invalid_tool_calls=[malformed("bad2")]),
        AIMessage("Done: a.txt and b.txt."),
    ]


def check_run(model: Scripted, archive: StoreArchive, thread: str) -> None:
    assert len(model.inputs) == len(model.replies)
    for seen in model.inputs:
        assert_payload_ok(seen)
    for earlier, later in zip(model.inputs, model.inputs[1:], strict=False):
        assert later[: len(earlier)] == earlier  # nothing dropped between two turns
    assert archive.refs(thread_id=thread) == []  # nothing dropped, nothing archived
    final = model.inputs[-1]
    answers = [m.tool_call_id for m in final if isinstance(m, ToolMessage)]
    assert sorted(answers) == ["bad1", "bad2", "c1", "c2", "c3"]  # each answered once


@pytest.mark.parametrize("mode", MODES)
def test_graph_answers_a_malformed_call_once(mode: str) -> None:
    model = Scripted(replies=script(), inputs=[])

    def agent(state: CompactionState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([ls]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    archive = StoreArchive(InMemoryStore())
    cfg = CompactionConfig(context_window=WINDOW, on_invalid_history=mode)  # type: ignore[arg-type]
    add_compaction(builder, config=cfg, archive=archive)
    graph = builder.compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "g"}}
    graph.invoke({"messages": [HumanMessage("List / then /a and /b.")]}, run)
    graph.invoke({"messages": [HumanMessage("And the result?")]}, run)
    check_run(model, archive, "g")
    validate_history(graph.get_state(run).values["messages"])


def test_graph_keeps_a_malformed_calls_result_from_the_input() -> None:
    model = Scripted(replies=[AIMessage("ok")], inputs=[])
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_edge(START, "agent")
    add_compaction(builder, config=CompactionConfig(context_window=WINDOW), archive=None)
    builder.compile().invoke({"messages": one_shot()})
    assert [shape(m) for m in model.inputs] == [shape(one_shot())]


# -- create_agent + CompactionMiddleware ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_middleware_answers_a_malformed_call_once(mode: str) -> None:
    """langchain's own answer (added in its model node, after ``before_model``) and the
    package's are one result: none is dropped and re-added on the next turn, and
    ``on_invalid_history="raise"`` does not crash on the turn after a malformed call."""
    model = Scripted(replies=script(), inputs=[])
    archive = StoreArchive(InMemoryStore())
    cfg = CompactionConfig(context_window=WINDOW, on_invalid_history=mode)  # type: ignore[arg-type]
    agent = create_agent(
        model=model,
        tools=[ls],
        middleware=[CompactionMiddleware(config=cfg, archive=archive)],
        checkpointer=InMemorySaver(),
    )
    run = {"configurable": {"thread_id": "m"}}
    await agent.ainvoke({"messages": [HumanMessage("List / then /a and /b.")]}, run)
    out = await agent.ainvoke({"messages": [HumanMessage("And the result?")]}, run)
    check_run(model, archive, "m")
    validate_history(out["messages"])


@pytest.mark.parametrize("mode", MODES)
def test_middleware_keeps_langchains_own_answer(mode: str) -> None:
    """A state already holding langchain's answer (its model node added it): kept as is."""
    model = Scripted(replies=[AIMessage("Listed.")], inputs=[])
    archive = StoreArchive(InMemoryStore())
    cfg = CompactionConfig(context_window=WINDOW, on_invalid_history=mode)  # type: ignore[arg-type]
    agent = create_agent(
        model=model, tools=[ls], middleware=[CompactionMiddleware(config=cfg, archive=archive)]
    )
    start = [*unanswered_malformed(), answer_of_langchain("bad1")]
    agent.invoke({"messages": start}, {"configurable": {"thread_id": "k"}})
    assert [shape(m) for m in model.inputs] == [shape(start)]
    assert archive.refs(thread_id="k") == []


# -- what reads the calls besides the pairing ----------------------------------------------------


def test_a_prepared_turn_renames_a_malformed_call_with_its_result() -> None:
    from langchain_compact._prepare import repeat_turn

    again = repeat_turn(one_shot()[1:])
    assert_payload_ok([HumanMessage("go"), *again])
    assert again[0].invalid_tool_calls[0]["id"] == again[1].tool_call_id != "bad1"


def test_the_extractive_summary_names_a_malformed_call() -> None:
    from langchain_compact.summarizers import ExtractiveSummarizer

    text = ExtractiveSummarizer().summarize(unanswered_malformed(), max_tokens=400)
    assert "ls with malformed arguments" in text
    assert "'bad1'" not in text and "pending: ls with malformed arguments" in text
