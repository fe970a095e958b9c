"""Agents inside agents: a compacting worker under a supervisor and in a ``Send`` fan-out.

``python -m bench.subagents`` writes ``bench/results/subagents.json`` and the table of
``docs/benchmarks.md`` ("Agents inside agents"; ``--docs`` rewrites it from the file).

Two wirings, each at an 8,000- and a 32,000-token window:

* ``supervisor``: a supervisor graph adds three subtasks one after another and calls the
  worker as a node sharing ``messages`` after each (so every call after the first is handed
  the whole history, earlier subtasks' results included);
* ``send``: ``Send`` fans two subtasks out to the worker in parallel, each with the project
  task and its own subtask.

The worker is a scripted model: for the newest subtask its input holds, six reads of about a
third of the window each, then an answer (an input without any subtask goes on from the
newest read call it holds); its replies report the exact o200k count of what
it received. Systems (the same budget for all, trigger ``T = 0.75 x window``, summary bound
``window / 8``, the same summarizer model, :class:`bench.peers.ExtractiveSummaryModel`):

* ``ours_graph``: ``create_compacting_agent`` with ``LLMSummarizer(<summarizer>)``;
* ``ours_middleware``: ``create_agent`` with ``CompactionMiddleware`` (same summarizer);
* ``lc_summarization``: ``create_agent`` with langchain's ``SummarizationMiddleware(model=
  <summarizer>, trigger=("tokens", T), keep=("messages", 4))``;
* ``deepagents``: deepagents' summarization middleware as ``create_deep_agent`` builds it
  (:func:`bench.peers.deepagents_agent`, same trigger).

Columns, per run: worker calls; calls that lost their current subtask (the subtask the
supervisor handed out is not in the model's input, verbatim as a message or in a summary);
calls over the window (exact o200k count); parent state changed (messages of the parent's
final state that are not what the supervisor, the worker's model or its tool made, as they
made them: summaries, placeholders, edited messages), and originals the parent lost.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send
from pydantic import Field, SkipValidation

from bench.metrics import TruthCounter
from bench.peers import Budget, deepagents_agent, make_summary_model

SYSTEMS = ("ours_graph", "ours_middleware", "lc_summarization", "deepagents")
LABELS = {
    "ours_graph": "langchain-compact (create_compacting_agent)",
    "ours_middleware": "langchain-compact (CompactionMiddleware)",
    "lc_summarization": "langchain SummarizationMiddleware",
    "deepagents": "deepagents SummarizationMiddleware",
}
WIRINGS = ("supervisor", "send")
WINDOWS = (8_000, 32_000)
SUBTASKS = {"supervisor": 3, "send": 2}
READS = 6
TASK = "Project: several subtasks, one answer each."
OUT = Path(__file__).resolve().parent / "results" / "subagents.json"
COLUMNS = ("calls", "subtask_lost", "over_window", "parent_changed", "parent_lost")


def page(part: str, window: int) -> str:
    """One read's result: about a third of the window, so six reads overflow it."""
    words = 520 * window // 8_000
    return f"page {part}: " + " ".join(f"{part}-w{i}" for i in range(words))


def subtask_text(k: int) -> str:
    return f"Subtask {k}: read parts {k}.0 to {k}.{READS - 1}."


def subtask_in(messages: Sequence[BaseMessage]) -> int | None:
    """The newest subtask whose text the input holds verbatim."""
    text = "\n".join(m.text for m in messages)
    found = [k for k in range(1, 10) if subtask_text(k) in text]
    return max(found) if found else None


class Worker(BaseChatModel):
    """The scripted worker: for the newest subtask in its input, ``reads`` reads then an
    answer. Records every call as ``(subtask in the input, subtask handed out, input
    tokens)`` and every reply it made (by id)."""

    window: int = 8_000
    reads: int = READS
    provider: str = "openai"
    truth: Annotated[Any, SkipValidation()] = None
    calls: Annotated[list[tuple[int | None, int, int]], SkipValidation()] = Field(
        default_factory=list
    )
    handed: Annotated[list[int], SkipValidation()] = Field(default_factory=lambda: [0])
    """The subtask the supervisor handed out last (0: none, as in a fan-out)."""
    done: Annotated[dict[int, int], SkipValidation()] = Field(default_factory=dict)
    replies: Annotated[dict[str, Any], SkipValidation()] = Field(default_factory=dict)
    lock: Annotated[Any, SkipValidation()] = Field(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "bench-subagent-worker"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        seen = subtask_in(messages)
        k = seen if seen is not None else _newest_read(messages)  # goes on from its last read
        tokens = self.truth(messages)
        usage = {"input_tokens": tokens, "output_tokens": 12, "total_tokens": tokens + 12}
        meta = {"model_provider": self.provider}
        with self.lock:
            self.calls.append((seen, self.handed[0], tokens))
            n = self.done.get(k or 0, 0)
            self.done[k or 0] = n + 1
            rid = f"w{len(self.calls)}"
        if k is not None and n < self.reads:
            call = {"name": "read", "args": {"part": f"{k}.{n}"}, "id": f"c{k}_{n}"}
            reply = AIMessage(
                "", tool_calls=[call], usage_metadata=usage, response_metadata=meta, id=rid
            )
        else:
            reply = AIMessage(
                f"Subtask {k} done.", usage_metadata=usage, response_metadata=meta, id=rid
            )
        self.replies[rid] = _shape(reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _newest_read(messages: Sequence[BaseMessage]) -> int | None:
    """The subtask of the newest read call the input holds (what a model that lost its
    subtask can still go on from)."""
    for m in reversed(messages):
        for call in m.tool_calls if isinstance(m, AIMessage) else []:
            part = str(call.get("args", {}).get("part", ""))
            if part.split(".")[0].isdigit():
                return int(part.split(".")[0])
    return None


def _shape(m: BaseMessage) -> tuple[str, Any, Any]:
    calls = [(c["id"], c["args"]) for c in m.tool_calls] if isinstance(m, AIMessage) else None
    return (m.type, m.content, calls)


def worker_agent(system: str, model: Worker, budget: Budget, summary_model: Any) -> Any:
    """The worker of ``system``, built as each package documents it."""
    window = model.window

    @tool
    def read(part: str) -> str:
        """Read one part of the material."""
        return page(part, window)

    if system in ("ours_graph", "ours_middleware"):
        from langchain_compact import (
            CompactionConfig,
            CompactionMiddleware,
            LLMSummarizer,
            create_compacting_agent,
        )

        config = CompactionConfig(
            context_window=budget.window,
            trigger_ratio=budget.trigger_ratio,
            summary_max_tokens=budget.summary_tokens,
        )
        summarizer = LLMSummarizer(summary_model)
        if system == "ours_graph":
            return create_compacting_agent(
                model, [read], config=config, summarizer=summarizer, recall_tool=False
            )
        from langchain.agents import create_agent

        middleware = CompactionMiddleware(config=config, summarizer=summarizer)
        return create_agent(model, [read], middleware=[middleware])
    if system == "lc_summarization":
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware

        lc = SummarizationMiddleware(
            model=summary_model, trigger=("tokens", budget.trigger), keep=("messages", 4)
        )
        return create_agent(model, [read], middleware=[lc])
    if system == "deepagents":
        return deepagents_agent(budget, model, [read], summary_model)
    raise ValueError(f"unknown system {system!r}; choose from {SYSTEMS}")


def _done(messages: Sequence[BaseMessage]) -> int:
    return sum(
        1 for m in messages if isinstance(m, AIMessage) and str(m.content).startswith("Subtask ")
    )


def supervisor_graph(worker: Any, subtasks: int, handed: list[int], made: dict[str, Any]) -> Any:
    def supervise(state: MessagesState) -> dict[str, Any]:
        done = _done(state["messages"])
        if done >= subtasks:
            return {}
        handed[0] = done + 1
        message = HumanMessage(subtask_text(done + 1), id=f"s{done + 1}")
        made[str(message.id)] = _shape(message)
        return {"messages": [message]}

    def route(state: MessagesState) -> str:
        return END if _done(state["messages"]) >= subtasks else "worker"

    builder = StateGraph(MessagesState)
    builder.add_node("supervisor", supervise)
    builder.add_node("worker", worker)
    builder.add_edge(START, "supervisor")
    builder.add_conditional_edges("supervisor", route, ["worker", END])
    builder.add_edge("worker", "supervisor")
    return builder.compile()


def send_graph(worker: Any, subtasks: int, made: dict[str, Any]) -> Any:
    def fan(state: MessagesState) -> list[Send]:
        task = state["messages"][0]
        sends = []
        for k in range(1, subtasks + 1):
            message = HumanMessage(subtask_text(k), id=f"s{k}")
            made[str(message.id)] = _shape(message)
            sends.append(Send("worker", {"messages": [task, message]}))
        return sends

    builder = StateGraph(MessagesState)
    builder.add_node("worker", worker)
    builder.add_conditional_edges(START, fan, ["worker"])
    builder.add_edge("worker", END)
    return builder.compile()


def parent_changes(
    final: Sequence[BaseMessage], made: dict[str, Any], model: Worker
) -> tuple[int, int]:
    """(messages of the parent's final state not as their maker made them, originals the
    parent lost). Makers: the supervisor (its messages by id), the worker's model (its
    replies by id), the read tool (a result is its page, by call id)."""
    changed = 0
    tool_results = set()
    for m in final:
        if isinstance(m, ToolMessage):
            part = m.tool_call_id[1:].replace("_", ".")
            ok = m.tool_call_id.startswith("c") and m.content == page(part, model.window)
            if ok:
                tool_results.add(m.tool_call_id)
        else:
            ok = made.get(str(m.id)) == _shape(m) or model.replies.get(str(m.id)) == _shape(m)
        changed += not ok
    ids = {str(m.id) for m in final}
    lost = sum(1 for i in made if i not in ids)
    lost += sum(1 for i in model.replies if i not in ids)
    expected = {c[0] for shape in model.replies.values() for c in shape[2] or []}  # the reads
    lost += len(expected - tool_results)
    return changed, lost


def run(system: str, wiring: str, window: int, *, reads: int = READS) -> dict[str, Any]:
    """One run of ``system`` in ``wiring`` at ``window``: the table's columns."""
    truth = TruthCounter()
    budget = Budget(window)
    summary_model = make_summary_model(budget, truth)
    model = Worker(window=window, reads=reads, truth=truth)
    worker = worker_agent(system, model, budget, summary_model)
    subtasks = SUBTASKS[wiring]
    handed = model.handed
    made: dict[str, Any] = {}
    start = HumanMessage(TASK, id="task")
    made["task"] = _shape(start)
    if wiring == "supervisor":
        parent = supervisor_graph(worker, subtasks, handed, made)
    else:
        parent = send_graph(worker, subtasks, made)
    out = parent.invoke({"messages": [start]}, {"recursion_limit": 500})
    final = out["messages"]
    # The subtask a call is for: under the supervisor, the one it handed out last; in a
    # fan-out, the one of the call's own Send (each input holds one subtask at most).
    if wiring == "supervisor":
        lost_subtask = sum(1 for k, c, _ in model.calls if k != c)
    else:
        lost_subtask = sum(1 for k, _, _ in model.calls if k is None)
    changed, lost = parent_changes(final, made, model)
    return {
        "system": system,
        "wiring": wiring,
        "window": window,
        "subtasks": subtasks,
        "calls": len(model.calls),
        "subtask_lost": lost_subtask,
        "over_window": sum(1 for _, _, n in model.calls if n > window),
        "max_input_tokens": max(n for _, _, n in model.calls),
        "parent_changed": changed,
        "parent_lost": lost,
        "parent_messages": len(final),
        "summarizer_calls": len(summary_model.log),
        "answered": _done(final),
    }


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table of ``docs/benchmarks.md``."""
    lines = [
        "| wiring | window | system | worker calls | subtask lost | over the window "
        "| parent messages changed or added | worker messages missing from the parent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['wiring']} | {r['window'] // 1000}k | {LABELS[r['system']]} | {r['calls']} "
            f"| {r['subtask_lost']} | {r['over_window']} | {r['parent_changed']} "
            f"| {r['parent_lost']} |"
        )
    return "\n".join(lines)


DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
START_MARK = (
    "<!-- subagents:start (generated from bench/results/subagents.json: bench/subagents.py) -->"
)
END_MARK = "<!-- subagents:end -->"


def docs_section(rows: Sequence[dict[str, Any]]) -> str:
    """The generated part of ``docs/benchmarks.md``'s "Agents inside agents" section."""
    return f"{START_MARK}\n{table(rows)}\n{END_MARK}"


def write_docs(rows: Sequence[dict[str, Any]], path: Path = DOCS) -> None:
    """Rewrite the generated table in ``path`` (between the two marks)."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(START_MARK)
    _, _, tail = rest.partition(END_MARK)
    if not rest:
        raise ValueError(f"{path} has no {START_MARK!r} mark; add the section first")
    path.write_text(head + docs_section(rows) + tail, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.subagents", description=__doc__)
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--wirings", nargs="+", default=list(WIRINGS), choices=WIRINGS)
    parser.add_argument("--reads", type=int, default=READS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--docs", action="store_true", help="only rewrite docs/benchmarks.md from --out"
    )
    args = parser.parse_args(argv)
    if args.docs:
        write_docs(json.loads(args.out.read_text(encoding="utf-8"))["rows"])
        return 0
    rows = [
        run(system, wiring, window, reads=args.reads)
        for wiring in args.wirings
        for window in args.windows
        for system in args.systems
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")
    if args.out == OUT:
        write_docs(rows)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
