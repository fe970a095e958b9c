"""The other wirings of a compacting worker inside another agent (issue 29).

``test_subagents.py`` covers a supervisor graph's node and a ``Send`` target. Here: an agent
wrapped as a tool of another agent, deepagents' ``task`` sub-agents (a declarative
``SubAgent`` with ``CompactionMiddleware`` in its ``middleware`` list, and a
``CompiledSubAgent`` built by ``create_compacting_agent``), and a handoff between agents
with ``Command(goto=..., graph=Command.PARENT)`` as langgraph-supervisor and langgraph-swarm
do it. Checks for each, at 8k and 32k: the parent's final state holds no message the
package made or changed; each worker call sees its current subtask; no call is over the
window (exact o200k count); every original the worker took out of its view is recallable
from its archive. Last, a parent that compacts its own history full of a worker's answers
summarises them like any other content.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pydantic import Field, SkipValidation
from test_subagents import (
    HANDED,
    READS,
    TASK,
    Build,
    Seen,
    Worker,
    _shape,
    check_worker,
    exact,
    graph_worker,
    middleware_worker,
    page,
    reader,
    subtask_text,
    wired_worker,
)

from langchain_compact import (
    CompactionConfig,
    CompactionMiddleware,
    ExtractiveSummarizer,
    StoreArchive,
    create_compacting_agent,
)
from langchain_compact.markers import KIND_SUMMARY, kind_of

SIZES = pytest.mark.parametrize("window", (8_000, 32_000), ids=["8k", "32k"])
BUILDS = pytest.mark.parametrize(
    "build",
    [graph_worker, middleware_worker, wired_worker],
    ids=["graph", "middleware", "add_compaction"],
)


def answered(messages: Sequence[BaseMessage]) -> int:
    """How many subtasks the worker answered, by the answers the parent holds (as the
    worker's own message or as a tool's result)."""
    return sum(1 for m in messages if m.text.startswith("Subtask ") and " done." in m.text)


class Boss(BaseChatModel):
    """The parent's model: one tool call per subtask (``tool`` with ``args(k)``), one at a
    time, then a final answer. Notes every input in ``seen`` and sets the worker's current
    subtask when it hands one out (its count of subtasks handed out, since a compacting
    parent's view no longer holds the early answers)."""

    tool: str
    args: Annotated[Any, SkipValidation()]
    worker: Annotated[Worker, SkipValidation()]
    seen: Annotated[Seen, SkipValidation()]
    subtasks: int = 3
    inputs: Annotated[list[list[BaseMessage]], SkipValidation()] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "subagent-boss"

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
        self.seen.note(messages)
        usage = {"input_tokens": exact(messages), "output_tokens": 10, "total_tokens": 0}
        done = self.worker.current[0] or 0  # one subtask per call, each after the last's answer
        if done < self.subtasks:
            k = done + 1
            self.worker.current[0] = k
            call = {"name": self.tool, "args": self.args(k), "id": f"r{k}"}
            reply = AIMessage("", tool_calls=[call], usage_metadata=usage)
        else:
            reply = AIMessage("All subtasks answered.", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def tracked(model: Worker) -> list[int]:
    """The subtask the parent handed out at each of the worker's calls."""
    current: list[int] = []
    real = model._generate

    def generate(messages: list[BaseMessage], *a: Any, **kw: Any) -> ChatResult:
        current.append(model.current[0] or 0)
        return real(messages, *a, **kw)

    object.__setattr__(model, "_generate", generate)
    return current


def check_parent(final: Sequence[BaseMessage], seen: Seen, subtasks: int) -> None:
    """No message of the parent's final state was made or changed by the package, and the
    parent got every answer."""
    made = [(m.id, kind_of(m)) for m in final if kind_of(m) is not None]
    assert not made, f"the parent holds {len(made)} package-made or marked messages: {made[:5]}"
    changed = [
        m.id for m in final if str(m.id) in seen.by_id and seen.by_id[str(m.id)] != _shape(m)
    ]
    assert not changed, f"{len(changed)} of the parent's messages changed: {changed[:5]}"
    assert answered(final) == subtasks
    assert final[0].content == TASK


def check_answer_only(final: Sequence[BaseMessage], window: int) -> None:
    """The parent got only the worker's answers: none of its reads reached the parent."""
    worker_ids = [m.tool_call_id for m in final if isinstance(m, ToolMessage)]
    assert all(i.startswith("r") for i in worker_ids), worker_ids
    assert not any(page("1.0", window)[:40] in m.text for m in final)


# An agent wrapped as a tool of another agent.


def research_tool(worker: Any) -> Any:
    @tool
    def research(q: str) -> str:
        """Research one subtask with the worker agent; returns its answer."""
        out = worker.invoke({"messages": [HumanMessage(q)]}, {"recursion_limit": 300})
        return str(out["messages"][-1].content)

    return research


@SIZES
@BUILDS
def test_an_agent_as_a_tool_gives_the_parent_only_its_answer(build: Build, window: int) -> None:
    """The worker runs inside the parent's tool node (``checkpoint_ns``
    ``tools:<task>|...``): it compacts privately and the parent gets its answer only."""
    model, seen = Worker(window=window), Seen()
    archive = StoreArchive(InMemoryStore())
    current = tracked(model)
    boss = Boss(tool="research", args=lambda k: {"q": subtask_text(k)}, worker=model, seen=seen)
    parent = create_agent(boss, [research_tool(build(model, archive))])
    out = parent.invoke({"messages": [HumanMessage(TASK, id="task")]}, {"recursion_limit": 100})
    check_parent(out["messages"], seen, 3)
    check_answer_only(out["messages"], window)
    check_worker(model, archive, current, parallel=True)  # a fresh run per subtask


# deepagents' sub-agents, run by its ``task`` tool.


def _task_args(k: int) -> dict[str, str]:
    return {"description": subtask_text(k), "subagent_type": "researcher"}


def declarative_subagent(model: Worker, archive: StoreArchive) -> dict[str, Any]:
    """deepagents' ``SubAgent`` spec: its ``middleware`` list goes after deepagents' own
    stack (filesystem, its summarization, tool-call patching)."""
    config = CompactionConfig(context_window=model.window)
    return {
        "name": "researcher",
        "description": "Researches one subtask.",
        "system_prompt": "You research one subtask.",
        "model": model,
        "tools": [reader(model.window)],
        "middleware": [CompactionMiddleware(config=config, archive=archive)],
    }


def compiled_subagent(model: Worker, archive: StoreArchive) -> dict[str, Any]:
    """deepagents' ``CompiledSubAgent``: any runnable graph, here ``create_compacting_agent``."""
    return {
        "name": "researcher",
        "description": "Researches one subtask.",
        "runnable": graph_worker(model, archive),
    }


@SIZES
@pytest.mark.parametrize(
    "spec", [declarative_subagent, compiled_subagent], ids=["middleware", "graph"]
)
def test_deepagents_task_subagents_compact_to_themselves(spec: Any, window: int) -> None:
    model, seen = Worker(window=window), Seen()
    archive = StoreArchive(InMemoryStore())
    current = tracked(model)
    boss = Boss(tool="task", args=_task_args, worker=model, seen=seen)
    parent = create_deep_agent(model=boss, tools=[], subagents=[spec(model, archive)])  # type: ignore[list-item]
    out = parent.invoke({"messages": [HumanMessage(TASK, id="task")]}, {"recursion_limit": 100})
    check_parent(out["messages"], seen, 3)
    check_answer_only(out["messages"], window)
    check_worker(model, archive, current, parallel=True)  # a fresh run per subtask


# A handoff: the supervisor's tool hands the conversation to the worker with
# ``Command(goto="worker", graph=Command.PARENT)`` (langgraph-supervisor, langgraph-swarm).


def handoff_parent(worker: Any, boss: Boss) -> Any:
    @tool
    def transfer_to_worker(
        task: str,
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> Command:
        """Hand the conversation to the worker with a task."""
        done = ToolMessage(HANDED, tool_call_id=tool_call_id)
        handed = [*state["messages"], done, HumanMessage(task, id=f"s{tool_call_id}")]
        return Command(goto="worker", graph=Command.PARENT, update={"messages": handed})

    builder = StateGraph(MessagesState)
    builder.add_node(
        "supervisor", create_agent(boss, [transfer_to_worker]), destinations=("worker",)
    )
    builder.add_node("worker", worker)
    builder.add_edge(START, "supervisor")
    builder.add_edge("worker", "supervisor")  # back to the supervisor, as the packages do
    builder.add_edge("supervisor", END)
    return builder.compile()


@SIZES
@BUILDS
def test_a_handoff_keeps_the_parents_history(build: Build, window: int) -> None:
    """The worker gets the whole shared history (every earlier subtask's reads in full) and
    compacts it privately; the parent ends with every read result as it was."""
    model, seen = Worker(window=window), Seen()
    archive = StoreArchive(InMemoryStore())
    current = tracked(model)
    args = lambda k: {"task": subtask_text(k)}  # noqa: E731
    boss = Boss(tool="transfer_to_worker", args=args, worker=model, seen=seen)
    parent = handoff_parent(build(model, archive), boss)
    out = parent.invoke({"messages": [HumanMessage(TASK, id="task")]}, {"recursion_limit": 300})
    final = out["messages"]
    check_parent(final, seen, 3)
    reads = [m for m in final if isinstance(m, ToolMessage) and m.tool_call_id.startswith("c")]
    assert len(reads) == 3 * READS
    for m in reads:
        k, n = m.tool_call_id[1:].split("_")
        assert m.content == page(f"{k}.{n}", window), f"result {m.tool_call_id} is not the original"
    check_worker(model, archive, current)


# A parent that compacts its own history, full of the worker's answers.


class LongWorker(Worker):
    """A worker whose answers are long reports (so that the parent's history fills up)."""

    answers: Annotated[list[str], SkipValidation()] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *a: Any, **kw: Any) -> ChatResult:
        result = super()._generate(messages, *a, **kw)
        reply = result.generations[0].message
        if not reply.tool_calls:
            k = str(reply.content).split()[1]
            body = " ".join(f"finding-{k}-{i}" for i in range(700))
            reply.content = f"{reply.content} Report {k}: {body}"
            self.answers.append(str(reply.content))
        return result


class Recording(ExtractiveSummarizer):
    """The extractive summarizer, recording what it is given."""

    def __init__(self) -> None:
        self.spans: list[list[BaseMessage]] = []

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int = 1_000) -> str:
        self.spans.append(list(messages))
        return super().summarize(messages, max_tokens=max_tokens)


def test_a_compacting_parent_summarises_worker_answers_like_any_content() -> None:
    """The supervisor is itself ``create_compacting_agent`` (8k) whose tool runs a compacting
    worker: the parent's history fills with the worker's reports and the parent compacts
    them. What its summarizer is given holds the worker's answers as the parent got them
    (no placeholder or summary of the worker: no summary of a summary), and every answer
    the parent took out of its view is recallable from the parent's archive."""
    window, subtasks = 8_000, 6
    model, seen = LongWorker(window=window), Seen()
    worker_archive = StoreArchive(InMemoryStore())
    current = tracked(model)
    boss = Boss(
        tool="research",
        args=lambda k: {"q": subtask_text(k)},
        worker=model,
        seen=seen,
        subtasks=subtasks,
    )
    summarizer, parent_archive = Recording(), StoreArchive(InMemoryStore())
    worker = graph_worker(model, worker_archive)
    parent = create_compacting_agent(
        boss,
        [research_tool(worker)],
        config=CompactionConfig(context_window=window),
        archive=parent_archive,
        summarizer=summarizer,
        recall_tool=False,
    )
    out = parent.invoke({"messages": [HumanMessage(TASK, id="task")]}, {"recursion_limit": 200})
    assert out["messages"][-1].text == "All subtasks answered."
    assert model.current[0] == subtasks
    # The worker: its own compaction, its subtasks, within its window, recallable.
    check_worker(model, worker_archive, current, parallel=True)
    # The parent did compact, within its window.
    assert max(exact(inp) for inp in boss.inputs) <= window
    assert any(kind_of(m) == KIND_SUMMARY for inp in boss.inputs for m in inp)
    assert summarizer.spans, "the parent never summarised"
    # The parent's summarizer got the parent's own history: none of the worker's messages
    # (its reads, placeholders or summaries: no summary of a summary), and the worker's
    # answers as the parent got them (in full, or as the parent's own cleared placeholder).
    worker_ids = {m.id for _, inp in model.inputs for m in inp}
    given = [m for span in summarizer.spans for m in span]
    assert not [m.id for m in given if m.id in worker_ids], "a worker message was summarised"
    assert not [m for m in given if isinstance(m, ToolMessage) and m.tool_call_id[0] == "c"]
    reports = {f"r{k}": a for k, a in enumerate(model.answers, 1)}
    results = [m for m in given if isinstance(m, ToolMessage)]
    assert results, "no worker answer was summarised"
    for m in results:
        assert kind_of(m) is None or m.tool_call_id in reports, m
        if kind_of(m) is None:
            assert m.text == reports[m.tool_call_id], "an answer changed"
    # Every answer the parent took out of its view is recallable from the parent's archive.
    last = {m.tool_call_id: m for m in boss.inputs[-1] if isinstance(m, ToolMessage)}
    for call_id, report in reports.items():
        if call_id in last and kind_of(last[call_id]) is None:
            continue
        hits = parent_archive.search(thread_id="default", tool_call_id=call_id)
        assert any(h.message.content == report for h in hits), f"answer {call_id} not recallable"
