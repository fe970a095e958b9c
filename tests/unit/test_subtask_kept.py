"""A sub-agent's current subtask stays verbatim while the sub-agent works on it (issue 29:
"each call sees its current subtask").

A handoff gives the worker the supervisor's history: the supervisor's own task comes first
(the pinned task), the worker's subtask is the newest human message. The worker reads it on
its first call and works on it with tool calls for many more; its compactions keep it whole
after the summary, never folded into one (where the merged summary later clipped it).
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from langchain_compact import CompactionConfig, ExtractiveSummarizer, create_compacting_agent
from langchain_compact._compaction_plan import plan_compaction
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.history import open_request_index
from langchain_compact.markers import KIND_SUMMARY, kind_of


class RecordingPolicy(ContextReadingPolicy):
    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        SEEN.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


SEEN: list[list[BaseMessage]] = []


class Supervisor(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def test_a_handed_subtask_stays_verbatim_in_every_worker_call() -> None:
    SEEN.clear()
    task = DependentTask(steps=20)
    worker = create_compacting_agent(
        RecordingPolicy(),
        task.tools(),
        config=CompactionConfig(context_window=3000),
        summarizer=ExtractiveSummarizer(),  # a scripted model cannot write summaries
    )

    @tool
    def transfer_to_worker(
        request: str,
        state: Annotated[dict, InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> Command:
        """Hand the conversation to the worker with a task."""
        done = ToolMessage("Transferred to worker.", tool_call_id=tool_call_id)
        handed = [*state["messages"], done, HumanMessage(request)]
        return Command(goto="worker", graph=Command.PARENT, update={"messages": handed})

    call = {"name": "transfer_to_worker", "args": {"request": task.prompt()}, "id": "h1"}
    boss = Supervisor(responses=[AIMessage("", tool_calls=[call]), AIMessage("Done.")])
    builder = StateGraph(MessagesState)
    builder.add_node(
        "supervisor", create_agent(boss, [transfer_to_worker]), destinations=("worker",)
    )
    builder.add_node("worker", worker)
    builder.add_edge(START, "supervisor")
    builder.add_edge("worker", "supervisor")
    builder.add_edge("supervisor", END)
    out = builder.compile().invoke(
        {"messages": [HumanMessage("Run the research task.")]}, {"recursion_limit": 200}
    )
    compacted = [s for s in SEEN if any(kind_of(m) == KIND_SUMMARY for m in s)]
    assert compacted, "the worker never compacted"
    for seen in SEEN:
        kept = [m for m in seen if m.text == task.prompt() and kind_of(m) != KIND_SUMMARY]
        assert kept, "a worker call lost its subtask"
    assert any(task.check(m.text).ok for m in out["messages"])


def _worker_history(answered: bool) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [
        HumanMessage("Run the research task.", id="boss"),
        AIMessage("", tool_calls=[{"name": "transfer", "args": {}, "id": "h1"}], id="a0"),
        ToolMessage("Transferred.", tool_call_id="h1", id="t0"),
        HumanMessage("Subtask: hard constraint: begin with REPORT QH-1.", id="sub"),
    ]
    for k in range(1, 9):
        call = {"name": "run_step", "args": {"step": k}, "id": f"c{k}"}
        msgs += [
            AIMessage("", tool_calls=[call], id=f"a{k}"),
            ToolMessage("x" * 400, tool_call_id=f"c{k}", id=f"t{k}"),
        ]
    if answered:
        msgs.append(AIMessage("REPORT QH-1 done.", id="final"))
    return msgs


def test_inside_another_graph_a_read_open_subtask_is_kept_after_the_summary() -> None:
    config = CompactionConfig(context_window=2000, keep_last_n=2)
    msgs = _worker_history(answered=False)
    assert open_request_index(msgs) == 3
    plan = plan_compaction(msgs, config, nested=True)
    assert plan is not None
    assert "sub" not in [m.id for m in plan.span]
    assert plan.tail[0].id == "sub"
    # at the top level, a read request is summarisable (issue 31's rule is for unread ones)
    top = plan_compaction(msgs, config, nested=False)
    assert top is not None and "sub" in [m.id for m in top.span]
    # answered, it is summarisable inside another graph too
    done = _worker_history(answered=True)
    assert open_request_index(done) == -1
    after = plan_compaction(done, config, nested=True)
    assert after is not None and "sub" in [m.id for m in after.span]
