"""Zero-pause compaction: the summary is prepared before the trigger, concurrently with the
model call, and swapped in at the trigger; a stale one is discarded, never used."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from _scenarios import MemoryArchive
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from pydantic import Field

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    LLMSummarizer,
    MessageCompactor,
    create_compacting_agent,
)
from langchain_compact._compaction_phases import Compaction, compaction_steps
from langchain_compact._compaction_plan import plan_compaction
from langchain_compact._ops import archive_and_tag, drive, summary_bound
from langchain_compact._prepare import Prepared
from langchain_compact.core import Compactor
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.markers import EVENT_KEY, KIND_CLEARED, get_meta, kind_of, with_meta
from langchain_compact.tokens import approximate_tokens

WINDOW = 4000
RUN = {"configurable": {"thread_id": "t"}, "recursion_limit": 500}


class FactKeeper(BaseChatModel):
    """A summarizer model that keeps every ``RESULT step=K value=V`` line it is shown (as a
    good summarizer would) and records, per call, which steps its input held."""

    calls: list[list[int]] = Field(default_factory=list)
    threads: list[str] = Field(default_factory=list)
    crash_on_call: int = -1

    @property
    def _llm_type(self) -> str:
        return "fact-keeper"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        text = "\n".join(m.text for m in messages)
        facts = list(dict.fromkeys(re.findall(r"RESULT step=(\d+) value=(\d+)", text)))
        self.calls.append([int(k) for k, _ in facts])
        self.threads.append(threading.current_thread().name)
        if len(self.calls) - 1 == self.crash_on_call:
            raise KeyboardInterrupt("the process dies mid-prepare")
        lines = [f"- RESULT step={k} value={v}" for k, v in facts] or ["- nothing yet"]
        return ChatResult(generations=[ChatGeneration(message=AIMessage("\n".join(lines)))])


def _graph(model: FactKeeper, *, prepare: bool | None = None, **kw: Any) -> Any:
    task = DependentTask(steps=30, payload_chars=4_600)  # results of ~1,700 tokens
    agent = create_compacting_agent(
        ContextReadingPolicy(),
        task.tools(),
        config=CompactionConfig(context_window=WINDOW, prepare=prepare),
        summarizer=LLMSummarizer(model),
        checkpointer=InMemorySaver(),
        **kw,
    )
    return agent, task


def _events(agent: Any, task: DependentTask) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events, state = [], {}
    for mode, chunk in agent.stream(
        {"messages": [HumanMessage(task.prompt(), id="task")]},
        RUN,
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            events.append(chunk[EVENT_KEY])
        else:
            state = chunk
    return state, events


async def _aevents(agent: Any, task: DependentTask) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events, state = [], {}
    async for mode, chunk in agent.astream(
        {"messages": [HumanMessage(task.prompt(), id="task")]},
        RUN,
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            events.append(chunk[EVENT_KEY])
        else:
            state = chunk
    return state, events


# -- graph ------------------------------------------------------------------------------------


def test_the_graph_prepares_in_the_model_superstep_and_swaps_it_in_at_the_trigger() -> None:
    model = FactKeeper()
    agent, task = _graph(model)
    state, events = _events(agent, task)

    assert task.check(state["messages"][-1].text).ok
    kinds = [e["event"] for e in events]
    compactions = [e for e in events if e["event"] == "compaction"]
    used = [e for e in compactions if e["prepared"].startswith("used")]
    assert "summary_prepared" in kinds and len(used) >= len(compactions) // 2 > 0
    assert all("(prepared)" in e["summarizer"] for e in used)
    # prepared summaries live in state, never in the messages (cleared by the compaction)
    assert not any("prepared" in str(get_meta(m).get("kind")) for m in state["messages"])
    # the prepare node ran in the same superstep as the model node
    history = list(agent.get_state_history(RUN))
    steps = [{t.name for t in snapshot.tasks} for snapshot in history if snapshot.tasks]
    assert any({"agent", "compact_prepare"} <= names for names in steps)


def test_preparing_keeps_the_same_facts_as_compacting_on_the_spot() -> None:
    with_prep, task = _graph(FactKeeper(), prepare=True)
    without, task2 = _graph(FactKeeper(), prepare=False)
    state_a, _ = _events(with_prep, task)
    state_b, _ = _events(without, task2)
    assert task.check(state_a["messages"][-1].text).ok
    assert task2.check(state_b["messages"][-1].text).ok
    assert state_a["messages"][-1].text == state_b["messages"][-1].text


async def test_the_async_graph_prepares_and_uses_the_summary() -> None:
    model = FactKeeper()
    agent, task = _graph(model)
    state, events = await _aevents(agent, task)
    assert task.check(state["messages"][-1].text).ok
    assert any(e["event"] == "prepared_used" for e in events)


def test_an_extractive_summarizer_adds_no_prepare_node_by_default() -> None:
    agent = create_compacting_agent(
        ContextReadingPolicy(),
        DependentTask(steps=3).tools(),
        config=CompactionConfig(context_window=WINDOW),
        summarizer=ExtractiveSummarizer(),
    )
    assert "compact_prepare" not in agent.get_graph().nodes


# -- stale summaries --------------------------------------------------------------------------


def _history(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Task: run the steps and report.", id="task")]
    for i in range(n):
        call = {"name": "run_step", "args": {"step": i}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(
            ToolMessage(
                f"log ... RESULT step={i} value={100 + i}", tool_call_id=f"c{i}", id=f"r{i}"
            )
        )
    return out


def _core(model: FactKeeper, **cfg: Any) -> Compactor:
    config = CompactionConfig(context_window=WINDOW, keep_last_n=4, **cfg)
    return Compactor(config=config, summarizer=LLMSummarizer(model), archive=MemoryArchive())


def test_a_prepared_summary_covering_a_prefix_is_used_without_a_summarizer_call() -> None:
    model = FactKeeper()
    core = _core(model)
    history = _history(10)
    prepared = core.prepare(history, "t")
    assert prepared is not None and not prepared.failed
    calls = len(model.calls)
    result = core.compact([*history, *_history(12)[21:]], "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("used")
    assert len(model.calls) == calls  # no model call at the trigger, whatever is left over
    text = result.summary.text  # type: ignore[union-attr]
    assert "RESULT step=0 value=100" in text
    if "key lines" in result.prepared:  # the newer messages' facts, extracted locally
        assert "Since then:" in text


def test_the_messages_since_the_prepared_summary_are_folded_in_without_a_model_call() -> None:
    """A trigger some turns after the summary was prepared, with the newer messages too large
    to stay in the tail: their key lines are extracted locally (no model call at the
    trigger, so no pause), after the prepared text."""
    model = FactKeeper()
    config = CompactionConfig(context_window=WINDOW, keep_last_n=4)
    history = _history(12)
    plan = plan_compaction(history, config)
    assert plan is not None
    covers = 10  # the prepared summary read steps 0-4
    prepared = "\n".join(f"- RESULT step={k} value={100 + k}" for k in range(5))
    result = drive(
        compaction_steps(
            Compaction(
                history,
                plan,
                config,
                LLMSummarizer(model),
                thread_id="t",
                tokens_before=approximate_tokens(history),
                prepared_text=prepared,
                prepared_covers=covers,
                prepared_note="used + key lines",
            )
        )
    )
    assert model.calls == []
    text = result.summary.text  # type: ignore[union-attr]
    head, since = text.split("Since then:")
    assert "RESULT step=4 value=104" in head
    kept = {int(k) for k in re.findall(r"RESULT step=(\d+)", since)}
    assert kept == set(range(5, 10))  # steps 10 and 11 are the kept tail


def test_a_prepared_summary_larger_than_the_room_is_condensed_to_its_key_facts() -> None:
    """Written at the full bound before the room at the trigger was known: calls and log
    lines go down to the room, every ``key = value`` fact stays."""
    model = FactKeeper()
    config = CompactionConfig(context_window=WINDOW, keep_last_n=4)
    # A summary's prose takes at most a quarter of the span it replaces (Budget.summary_prose):
    # each result carries 130 log lines, so a quarter of the span (~4,000 tokens) is more
    # than the prepared summary (~940) and only the room, not the span, decides what is
    # condensed.
    history = [
        ToolMessage("log line\n" * 130 + m.text, tool_call_id=m.tool_call_id, id=m.id)
        if isinstance(m, ToolMessage)
        else m
        for m in _history(12)
    ]
    plan = plan_compaction(history, config)
    assert plan is not None
    facts = [f"- RESULT step={k} value={100 + k}" for k in range(10)]
    noise = [
        f'- called run_step({{"step": {k}}}) after a slow warm-up of the cache' for k in range(40)
    ]
    prepared = "\n".join([*facts, *noise])
    assert approximate_tokens(plan.span) > approximate_tokens([HumanMessage(prepared)]) + 80
    kwargs: dict[str, Any] = {
        "thread_id": "t",
        "tokens_before": approximate_tokens(history),
        "prepared_text": prepared,
        "prepared_covers": len(plan.span),
    }
    tight = CompactionConfig(context_window=WINDOW, keep_last_n=4, summary_budget_ratio=0.05)
    summarizer = LLMSummarizer(model)
    result = drive(compaction_steps(Compaction(history, plan, tight, summarizer, **kwargs)))
    text = result.summary.text  # type: ignore[union-attr]
    assert model.calls == []
    assert all(f.removeprefix("- ") in text for f in facts)
    assert text.count("called run_step") < 40
    roomy = drive(compaction_steps(Compaction(history, plan, config, summarizer, **kwargs)))
    assert roomy.summary.text.count("called run_step") == 40  # type: ignore[union-attr]


def test_a_summary_is_prepared_to_the_room_the_trigger_will_leave() -> None:
    """In a window with room the prepared summary gets the full bound; where the kept tail
    will crowd the window it is written tighter, but to no less than half the bound."""
    padded = [
        ToolMessage("log line\n" * 400 + m.text, tool_call_id=m.tool_call_id, id=m.id)
        if isinstance(m, ToolMessage)
        else m
        for m in _history(8)
    ]
    roomy = Compactor(
        config=CompactionConfig(context_window=128_000, keep_last_n=4),
        summarizer=LLMSummarizer(FactKeeper()),
    )
    tight = _core(FactKeeper())
    wide, narrow = roomy.prepare(padded, "t"), tight.prepare(padded, "t")
    assert wide is not None and narrow is not None
    assert wide.bound == summary_bound(roomy.config) == 2_000
    full = summary_bound(tight.config)
    assert full // 2 <= narrow.bound < full


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("edit", "edited"),
        ("remove", "removed"),
        ("settings", "settings"),
        ("boundary", "another compaction"),
    ],
)
def test_a_stale_prepared_summary_is_discarded_and_the_span_summarised_on_the_spot(
    change: str, reason: str
) -> None:
    model = FactKeeper()
    core = _core(model)
    history = _history(10)
    prepared = core.prepare(history, "t")
    assert prepared is not None
    now = [*history, *_history(11)[21:]]  # the turn the model call beside it added
    if change == "edit":  # a checkpoint edited: same id, other content
        now[2] = ToolMessage("RESULT step=0 value=999", tool_call_id="c0", id="r0")
    elif change == "remove":  # a fork that dropped messages
        del now[3:5]
    elif change == "settings":
        core = _core(model, summary_max_tokens=900)
    else:  # prepared before a compaction that happened since
        now = core.compact(now, "t").messages + _history(14)[21:]
    calls = len(model.calls)
    result = core.compact(now, "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("discarded") and reason in result.prepared
    assert len(model.calls) == calls + 1  # summarised on the spot, from what is there now
    if change == "edit":
        assert "value=999" in result.summary.text  # type: ignore[union-attr]


def _edit(message: BaseMessage, **update: Any) -> BaseMessage:
    return message.model_copy(update=update)


def _call(name: str = "run_step", **args: Any) -> list[dict[str, Any]]:
    return [{"name": name, "args": args or {"step": 0}, "id": "c0", "type": "tool_call"}]


#: Edits of a span message (index 1: the first call, 2: its result) that reach the model
#: and used to leave a prepared summary in use (issue 21, item 5).
EDITS = {
    "call_args": (1, {"tool_calls": _call(step=7)}),
    "call_name": (1, {"tool_calls": _call("other_tool")}),
    "call_additional_kwargs": (1, {"additional_kwargs": {"reasoning_content": "changed"}}),
    "result_status": (2, {"status": "error"}),
    "result_name": (2, {"name": "other_tool"}),
    "result_artifact": (2, {"artifact": {"rows": [1, 2, 3]}}),
    "result_additional_kwargs": (2, {"additional_kwargs": {"extra": 1}}),
}


def _prepared_and_next_turn(model: FactKeeper) -> tuple[Compactor, Prepared, list[BaseMessage]]:
    core = _core(model)
    history = _history(10)
    prepared = core.prepare(history, "t")
    assert prepared is not None and not prepared.failed
    return core, prepared, [*history, *_history(11)[21:]]


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_that_reaches_the_model_discards_the_prepared_summary(edit: str) -> None:
    model = FactKeeper()
    core, prepared, now = _prepared_and_next_turn(model)
    index, update = EDITS[edit]
    now[index] = _edit(now[index], **update)
    calls = len(model.calls)
    result = core.compact(now, "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("discarded") and "edited" in result.prepared
    assert len(model.calls) == calls + 1  # summarised on the spot


def test_a_marker_only_change_keeps_the_prepared_summary() -> None:
    """``response_metadata`` (this package's markers, the provider's report) and
    ``usage_metadata`` never reach the model: changing them keeps the summary."""
    model = FactKeeper()
    core, prepared, now = _prepared_and_next_turn(model)
    now[2] = with_meta(now[2], archive_ref="elsewhere")
    now[1] = _edit(now[1], response_metadata={"model_name": "x"})
    result = core.compact(now, "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("used")


def _cleared(messages: list[BaseMessage], index: int) -> list[BaseMessage]:
    """``messages`` with result ``index`` cleared the way every micro-compaction step does
    it (:func:`archive_and_tag` records the placeholder's lineage)."""
    after = list(messages)
    after[index] = with_meta(
        _edit(messages[index], content="[cleared: run_step result]", artifact=None),
        kind=KIND_CLEARED,
    )
    out, _ref = drive(
        archive_and_tag(
            list(messages),
            after,
            archive=None,
            thread_id="t",
            reason="micro-compaction",
            redactor=None,
            changed=[index],
        )
    )
    return out


def test_a_result_cleared_since_keeps_the_prepared_summary_an_edited_one_does_not() -> None:
    model = FactKeeper()
    core, prepared, now = _prepared_and_next_turn(model)
    cleared = _cleared(now, 2)
    assert core.compact(cleared, "t", prepared=prepared.as_dict()).prepared.startswith("used")
    # the placeholder edited afterwards, its "cleared" marker still there
    edited = list(cleared)
    edited[2] = _edit(cleared[2], content="[cleared: run_step result] value=999")
    assert kind_of(edited[2]) == KIND_CLEARED
    result = core.compact(edited, "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("discarded") and "edited" in result.prepared
    # a placeholder of another message does not stand for this one
    forged = list(now)
    forged[2] = _cleared([*now[:2], _edit(now[2], content="RESULT value=1")], 2)[2]
    result = core.compact(forged, "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("discarded")


def test_a_failed_prepare_is_retried_at_the_trigger_the_usual_way() -> None:
    class Flaky(FactKeeper):
        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            if not self.calls:
                self.calls.append([])
                raise RuntimeError("provider overloaded")
            return super()._generate(messages, stop, run_manager, **kw)

    model = Flaky()
    core = _core(model)
    prepared = core.prepare(_history(10), "t")
    assert prepared is not None and "provider overloaded" in prepared.failed
    result = core.compact(_history(10), "t", prepared=prepared.as_dict())
    assert result.prepared.startswith("discarded: preparing failed")
    assert result.summarizer == "LLMSummarizer" and "value=100" in result.summary.text  # type: ignore[union-attr]


def test_garbage_in_the_prepared_state_key_is_ignored() -> None:
    assert Prepared.from_dict({"text": "x"}) is None and Prepared.from_dict("x") is None
    core = _core(FactKeeper())
    result = core.compact(_history(10), "t", prepared={"unexpected": 1})
    assert result.summary is not None and result.prepared == ""


# -- crash mid-prepare --------------------------------------------------------------------


def test_a_crash_mid_prepare_resumes_with_nothing_lost_and_no_duplicate_archive_record() -> None:
    archive = MemoryArchive()
    model = FactKeeper(crash_on_call=0)  # the first summarizer call is the first prepare
    agent, task = _graph(model, archive=archive)
    with pytest.raises(KeyboardInterrupt):
        agent.invoke({"messages": [HumanMessage(task.prompt(), id="task")]}, RUN)
    before = agent.get_state(RUN)
    assert before.next  # the run can resume from its checkpoint
    state = agent.invoke(None, RUN)  # resume: the prepare node runs again
    assert task.check(state["messages"][-1].text).ok
    contents = [tuple(m.id for m in r["messages"]) for r in archive.records]
    assert len(contents) == len(set(contents))  # no record written twice
    assert all(kind_of(m) != "prepared" for m in state["messages"])


# -- middleware -------------------------------------------------------------------------------


def _middleware_agent(model: FactKeeper) -> tuple[Any, DependentTask]:
    from langchain.agents import create_agent

    from langchain_compact.middleware import CompactionMiddleware

    task = DependentTask(steps=30)
    middleware = CompactionMiddleware(
        config=CompactionConfig(context_window=WINDOW), summarizer=LLMSummarizer(model)
    )
    return create_agent(
        model=ContextReadingPolicy(), tools=task.tools(), middleware=[middleware]
    ), task


def test_the_middleware_prepares_during_the_model_call_and_uses_it() -> None:
    model = FactKeeper()
    agent, task = _middleware_agent(model)
    state, events = _events(agent, task)
    assert task.check(state["messages"][-1].text).ok
    assert any(e["event"] == "prepared_used" for e in events)
    kinds = [e["event"] for e in events]
    assert kinds.count("summary_prepared") >= kinds.count("prepared_used")


async def test_the_async_middleware_prepares_and_uses_it() -> None:
    model = FactKeeper()
    agent, task = _middleware_agent(model)
    state, events = await _aevents(agent, task)
    assert task.check(state["messages"][-1].text).ok
    assert any(e["event"] == "prepared_used" for e in events)


# -- LCEL -------------------------------------------------------------------------------------


def _grow(compactor: MessageCompactor, *, turns: int) -> list[list[BaseMessage]]:
    history: list[BaseMessage] = [HumanMessage("Task: run 40 steps, report every value.", id="t")]
    sent = []
    for i in range(turns):
        call = {"name": "run_step", "args": {"step": i}, "id": f"c{i}"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        text = "log line\n" * 120 + f"RESULT step={i} value={500 + i}"
        history.append(ToolMessage(text, tool_call_id=f"c{i}", id=f"r{i}"))
        sent.append(compactor(list(history)))
    return sent


def test_lcel_prepares_in_the_background_and_uses_it_at_the_trigger() -> None:
    model = FactKeeper()
    compactor = MessageCompactor(
        config=CompactionConfig(context_window=WINDOW), summarizer=LLMSummarizer(model)
    )
    sent = _grow(compactor, turns=40)
    summaries = [m for out in sent for m in out if kind_of(m) == "summary"]
    assert compactor.compactions >= 1
    assert any("(prepared)" in str(get_meta(s).get("summarizer")) for s in summaries)


async def test_lcel_async_uses_the_prepared_summary() -> None:
    model = FactKeeper()
    compactor = MessageCompactor(
        config=CompactionConfig(context_window=WINDOW), summarizer=LLMSummarizer(model)
    )
    history: list[BaseMessage] = [HumanMessage("Task: run 40 steps, report every value.", id="t")]
    prepared_used = False
    for i in range(40):
        call = {"name": "run_step", "args": {"step": i}, "id": f"c{i}"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        text = "log line\n" * 120 + f"RESULT step={i} value={500 + i}"
        history.append(ToolMessage(text, tool_call_id=f"c{i}", id=f"r{i}"))
        out = await compactor.acompact(list(history))
        prepared_used |= any(
            "(prepared)" in str(get_meta(m).get("summarizer"))
            for m in out
            if kind_of(m) == "summary"
        )
    assert prepared_used


# -- cache parity ---------------------------------------------------------------------------


def test_a_fork_summarizer_prepares_on_the_exact_prefix_of_the_agent_request() -> None:
    model = FactKeeper()
    seen: list[list[BaseMessage]] = []

    class Spy(FactKeeper):
        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, stop, run_manager, **kw)

    spy = Spy()
    config = CompactionConfig(context_window=WINDOW, keep_last_n=4)
    core = Compactor(config=config, summarizer=LLMSummarizer(spy, fork=True))
    history = _history(10)
    assert core.prepare(history, "t") is not None
    request = seen[-1]
    shared = 0
    for a, b in zip(request, history, strict=False):
        if (a.type, a.content) != (b.type, b.content):
            break
        shared += 1
    # everything but the summary instructions is the agent's own prefix
    assert shared == len(request) - 1 and request[-1].type == "human"
    assert model.calls == []


def test_a_summary_prepared_one_turn_ahead_is_exactly_the_span_of_the_next_trigger() -> None:
    model = FactKeeper()
    core = _core(model)
    history = _history(10)
    prepared = core.prepare(history, "t")
    assert prepared is not None
    calls = len(model.calls)
    result = core.compact([*history, *_history(11)[21:]], "t", prepared=prepared.as_dict())
    assert result.prepared == "used" and len(model.calls) == calls  # a swap, no model call
    assert [m.id for m in result.compacted] == prepared.span_ids


def _big_history(turns: int, chars: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Task: read the files and report.", id="task")]
    for i in range(turns):
        call = {"name": "read", "args": {"i": i}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(ToolMessage("x " * (chars // 2), tool_call_id=f"c{i}", name="read", id=f"r{i}"))
    return out


@pytest.mark.parametrize(
    ("exclude", "due"),
    [
        ((), False),  # clearing the read results will keep the next turn under the trigger
        (("read",), True),  # nothing can be cleared: the next turn ends in a compaction
    ],
)
def test_a_summary_is_prepared_only_when_the_next_turn_will_compact(
    exclude: tuple[str, ...], due: bool
) -> None:
    config = CompactionConfig(context_window=WINDOW, micro_exclude_tools=exclude, prepare=True)
    core = Compactor(config=config, summarizer=LLMSummarizer(FactKeeper()))
    # about 2,850 tokens: past 0.6, one turn from 0.75 ("x " is a token each: 660
    # characters a result, as 1,200 were at the old 3.6 characters a token)
    history = _big_history(8, 660)
    decision = core.decide(history)
    assert decision.action == "continue" and decision.tokens >= (config.prepare_tokens or 0)
    assert core.prepare_due(history, decision) is due
    # far from the trigger nothing is prepared, whatever can be cleared
    early = _big_history(4, 660)
    assert core.prepare_due(early, core.decide(early)) is False


@pytest.mark.parametrize(("exclude", "due"), [(("note",), False), (("note", "read"), True)])
def test_the_next_turn_is_simulated_the_newest_result_read_by_then(
    exclude: tuple[str, ...], due: bool
) -> None:
    """The newest result is unread now, but by the next turn the model has read it, and a
    read result larger than ``large_result_ratio`` of the window is digested: then the next
    turn stays under the trigger and no summary is prepared (one prepared anyway is a
    summarizer call thrown away). Where that result's tool is excluded from clearing the
    next turn compacts, and the summary is prepared."""
    config = CompactionConfig(context_window=WINDOW, micro_exclude_tools=exclude, prepare=True)
    core = Compactor(config=config, summarizer=LLMSummarizer(FactKeeper()))
    history: list[BaseMessage] = [HumanMessage("Task: read the files and report.", id="task")]
    for i in range(6):
        name = "note" if i < 5 else "read"
        call = {"name": name, "args": {"i": i}, "id": f"c{i}"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        # "y " is a token each: 212 a note (as 400 were at the old 3.6 characters a
        # token), so the history is past 0.6 of the window and under the trigger
        text = "y " * 212 if i < 5 else " ".join(f"line{j} value={j * 7}" for j in range(250))
        history.append(ToolMessage(text, tool_call_id=f"c{i}", name=name, id=f"r{i}"))
    decision = core.decide(history)
    newest = core.counter(history[-2:])
    assert decision.action == "continue" and decision.tokens >= (config.prepare_tokens or 0)
    assert newest > config.large_result_ratio * WINDOW  # digested once read
    assert decision.tokens + newest >= (config.trigger_tokens or 0)  # naive: compacts
    assert core.prepare_due(history, decision) is due


@pytest.mark.parametrize("build", [_graph, _middleware_agent], ids=["graph", "middleware"])
def test_a_prepare_that_raises_never_fails_the_run_which_compacts_on_the_spot(
    build: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Compactor, messages: Any, thread_id: str) -> Any:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(Compactor, "prepare", broken)
    agent, task = build(FactKeeper())
    state, events = _events(agent, task)
    assert task.check(state["messages"][-1].text).ok
    compactions = [e for e in events if e["event"] == "compaction"]
    assert compactions and all(e["prepared"] == "" for e in compactions)


def test_a_prepared_summary_is_held_to_the_bound_a_summary_at_the_trigger_is() -> None:
    """Within the slack a summary written at the trigger gets (25% + 20 tokens), a prepared
    one is used, condensed to the room if need be; it used to be discarded when a token
    over the bound, and the trigger wrote another (at 32k, 7 of 13 prepared summaries of
    the long synthetic run were thrown away so)."""
    import dataclasses

    from langchain_compact._prepare import usable_prefix

    model = FactKeeper()
    core = _core(model)
    history = _history(10)
    prepared = core.prepare(history, "t")
    assert prepared is not None
    later = [*history, *_history(11)[21:]]
    plan = plan_compaction(later, core.config)
    assert plan is not None
    bound = summary_bound(core.config)
    checks = {}
    for share in (1.1, 2.0):
        lines: list[str] = []
        while approximate_tokens([HumanMessage("\n".join(lines))]) < bound * share:
            lines.append(f"- RESULT step={len(lines)} value={1000 + len(lines)}")
        record = dataclasses.replace(prepared, text="\n".join(lines))
        checks[share] = usable_prefix(
            record,
            later,
            plan,
            config=core.config,
            summarizer=core.summarizer,
        )
    assert checks[1.1][0] == len(prepared.span_ids)
    assert checks[2.0] == (0, "longer than the summary bound")


def test_a_merge_after_a_prepared_summary_calls_no_model_at_the_trigger() -> None:
    """With preparing on, the compaction at the trigger swaps in the prepared summary; the
    merge of the earlier summaries it may then need joins and condenses them locally
    instead of calling the model there (which would bring the pause back)."""
    from langchain_compact import CompactionNodes

    model = FactKeeper()
    nodes = CompactionNodes(
        config=CompactionConfig(context_window=WINDOW, prepare=True, micro_exclude_tools=("f",)),
        summarizer=LLMSummarizer(model),
    )
    state: dict[str, Any] = {"messages": [HumanMessage("Report every value.", id="task")]}

    def apply(update: dict[str, Any]) -> None:
        for key, value in update.items():
            state[key] = add_messages(state["messages"], value) if key == "messages" else value

    merges = 0
    for t in range(80):
        call = {"name": "f", "args": {"step": t}, "id": f"c{t}"}
        text = f"RESULT step={t} value={100_000 + 7 * t}\n" + "log line alpha beta\n" * 40
        apply({"messages": [AIMessage("", tool_calls=[call], id=f"a{t}")]})
        apply({"messages": [ToolMessage(text, tool_call_id=f"c{t}", name="f", id=f"r{t}")]})
        apply(nodes.micro(state, RUN))
        route = nodes.route(state)
        if isinstance(route, list):  # beside the model call
            apply(nodes.prepare(state, RUN))
            route = "continue"
        if route == "compact":
            calls = len(model.calls)
            apply(nodes.summarize(state, RUN))
            report = state["last_compaction"]
            if report["prepared"] and report["merged_summaries"]:
                merges += 1
                assert len(model.calls) == calls, "a merge called the model at the trigger"
    assert merges >= 1
    text = "\n".join(m.text for m in state["messages"])
    kept = [t for t in range(80) if f"value={100_000 + 7 * t}" in text]
    assert len(kept) >= 60, kept  # the merged summaries keep the values (key facts)
