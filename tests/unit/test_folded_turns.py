"""Newer turns at a trigger are written by the model too (issue 30): with preparing on, a
trigger two or more turns after the summary was prepared used to fold the turns since then
in as extracted key lines. The prepared summary is now brought up to date on the turns
between (one call over the newest turn, beside the model call), so the summary the model
reads is model-written; when that call fails, the key lines come back and the compaction
event names them (``extractive_parts``)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph.message import add_messages
from pydantic import Field, SkipValidation

from langchain_compact import CompactionConfig
from langchain_compact._prepare import Prepared, boundary_key
from langchain_compact.graph import CompactionNodes
from langchain_compact.lcel import MessageCompactor
from langchain_compact.markers import KIND_SUMMARY, get_meta, kind_of
from langchain_compact.summarizers import LLMSummarizer

RUN: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 500}
MARK = "MODEL-WRITTEN"
#: Log lines per turn: a turn, a short one (the trigger predicted on the first does not come)
#: and a long one that brings it, two turns after the summary was prepared.
LINES = (40, 5, 300)


class Recorder(BaseChatModel):
    """A summary model that keeps every ``RESULT`` line it is shown, marks what it wrote and
    records each request; refuses them while ``down`` is set."""

    requests: Annotated[list[list[BaseMessage]], SkipValidation()] = Field(default_factory=list)
    down: bool = False

    @property
    def _llm_type(self) -> str:
        return "recorder"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        if self.down:
            raise RuntimeError("the summary model is down")
        text = "\n".join(m.text for m in messages)
        facts = dict.fromkeys(re.findall(r"RESULT step=\d+ value=\d+", text))
        reply = AIMessage(f"- {MARK}\n" + "\n".join(f"- {fact}" for fact in facts))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run(
    model: Recorder, turns: int = 60, *, updates_fail: bool = False
) -> tuple[list[dict[str, Any]], list[Any]]:
    """``turns`` turns through the graph's nodes as the graph runs them (the prepare node
    beside the model call); the compaction reports and the prepared records, in order.
    ``updates_fail``: the model is down whenever the prepare node runs with a summary
    already prepared under the boundary (the update over the newer turns)."""
    nodes = CompactionNodes(
        config=CompactionConfig(context_window=4000, prepare=True, micro_exclude_tools=("f",)),
        summarizer=LLMSummarizer(model),
    )
    state: dict[str, Any] = {"messages": [HumanMessage("Report every value.", id="task")]}

    def apply(update: dict[str, Any]) -> None:
        for key, value in update.items():
            state[key] = add_messages(state["messages"], value) if key == "messages" else value

    reports, records = [], []
    for t in range(turns):
        call = {"name": "f", "args": {"step": t}, "id": f"c{t}"}
        text = f"RESULT step={t} value={100_000 + 7 * t}\n" + "log line alpha beta\n" * LINES[t % 3]
        apply({"messages": [AIMessage("", tool_calls=[call], id=f"a{t}")]})
        apply({"messages": [ToolMessage(text, tool_call_id=f"c{t}", name="f", id=f"r{t}")]})
        apply(nodes.micro(state, RUN))
        route = nodes.route(state)
        if isinstance(route, list):  # the prepare node, beside the model call
            before = Prepared.from_dict(state.get("prepared_summary"))
            model.down = (
                updates_fail
                and before is not None
                and before.boundary == boundary_key(state["messages"])
            )
            apply(nodes.prepare(state, RUN))
            model.down = False
            records.append(Prepared.from_dict(state["prepared_summary"]))
            route = "continue"
        if route == "compact":
            apply(nodes.summarize(state, RUN))
            summary = next(m for m in reversed(state["messages"]) if kind_of(m) == KIND_SUMMARY)
            reports.append({**state["last_compaction"], "summary": summary.text})
    return reports, records


def test_newer_turns_at_a_late_trigger_are_model_written() -> None:
    model = Recorder()
    reports, records = run(model)
    late = [r for r in reports if re.search(r"newer messages$", r["prepared"])]
    assert late, "the run has triggers two turns after the summary was prepared"
    for report in late:
        assert "model summary of 2 newer messages" in report["prepared"], report["prepared"]
        assert "key lines" not in report["prepared"]
        assert "newer turns" not in report["extractive_parts"], report
        assert report["summary_written_by"] == "model"
        # what the model wrote about the newer turns is in the summary the agent reads
        assert "Since then:\n- " + MARK in report["summary"]
    # each update was one request over the newest turn (its call and result), not the span
    updated = [r for r in records if r is not None and r.newer_messages]
    assert updated
    assert any(len(request) == 2 for request in model.requests)


def test_a_failed_update_folds_key_lines_and_the_event_names_them() -> None:
    model = Recorder()
    reports, records = run(model, updates_fail=True)
    late = [r for r in reports if re.search(r"newer messages$", r["prepared"])]
    assert late
    for report in late:
        assert "key lines of 2 newer messages" in report["prepared"], report["prepared"]
        assert "newer turns" in report["extractive_parts"], report
    assert not any(r is not None and r.newer_messages for r in records)
    assert len(model.requests) > len(reports)  # the updates were asked for, and refused


def test_compact_messages_writes_the_newer_turns_with_the_model_too() -> None:
    """The LCEL transformer prepares in a background thread; each call here waits for it
    as a model call lasting longer than the summarizer would."""
    model = Recorder()
    compactor = MessageCompactor(
        config=CompactionConfig(context_window=4000, prepare=True, micro_exclude_tools=("f",)),
        summarizer=LLMSummarizer(model),
    )
    history: list[BaseMessage] = [HumanMessage("Report every value.", id="task")]
    summaries: dict[str, Any] = {}
    for t in range(60):
        call = {"name": "f", "args": {"step": t}, "id": f"c{t}"}
        text = f"RESULT step={t} value={100_000 + 7 * t}\n" + "log line alpha beta\n" * LINES[t % 3]
        history.append(AIMessage("", tool_calls=[call], id=f"a{t}"))
        history.append(ToolMessage(text, tool_call_id=f"c{t}", name="f", id=f"r{t}"))
        out = compactor(list(history))
        for job in list(compactor._preparing.values()):
            job.result()
        summaries.update({str(m.id): m for m in out if kind_of(m) == KIND_SUMMARY})
    written = [str(get_meta(m).get("summarizer")) for m in summaries.values()]
    prepared = [w for w in written if "(prepared)" in w]
    assert prepared, written
    # no prepared summary had key lines folded in (main: "LLMSummarizer (prepared) +
    # ExtractiveSummarizer"), and one holds the model's summary of the newer turns
    assert all(w == "LLMSummarizer (prepared)" for w in prepared), written
    assert any("Since then:\n- " + MARK in m.text for m in summaries.values())
