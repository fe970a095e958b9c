"""``python -m bench.worker_turn``: the per-turn cost of a compacting worker (issue 29).

A ``create_compacting_agent`` worker (32k window, an in-memory ``StoreArchive``, a scripted
model: 8 reads of ~2,000-token pages per subtask, then an answer) does 6 subtasks, called
``nested``: as a node of a supervisor ``StateGraph(MessagesState)`` that adds each subtask
(the worker keeps a private compaction view there), and ``alone``: invoked on its own list
once per subtask. Prints one JSON line: model calls, and per model call the CPU time on the
calling thread, the process CPU time and the wall time (one warm-up nested run first).
Compare two checkouts by running it from each root in turn (``PYTHONPATH=.``), alternating.
"""

from __future__ import annotations

import json
import time

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore
from pydantic import Field

from langchain_compact import CompactionConfig, StoreArchive, create_compacting_agent

WINDOW, READS, SUBTASKS = 32_000, 8, 6


def page(part):
    return f"page {part}: " + " ".join(f"{part}-w{i}" for i in range(520 * WINDOW // 8_000 // 3))


@tool
def read(part: str) -> str:
    """Read one part of the material."""
    return page(part)


class Worker(BaseChatModel):
    calls: int = 0
    per: dict[int, int] = Field(default_factory=dict)

    @property
    def _llm_type(self):
        return "w"

    def bind_tools(self, tools, **kw):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        self.calls += 1
        text = "\n".join(m.text for m in messages[-40:])
        k = max([j for j in range(1, 10) if f"Subtask {j}:" in text] or [0])
        n = self.per.get(k, 0)
        self.per[k] = n + 1
        if n < READS:
            return ChatResult(
                generations=[
                    ChatGeneration(
                        message=AIMessage(
                            "",
                            tool_calls=[
                                {"name": "read", "args": {"part": f"{k}.{n}"}, "id": f"c{k}_{n}"}
                            ],
                        )
                    )
                ]
            )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"Subtask {k} done."))])


def done(ms):
    return sum(1 for m in ms if isinstance(m, AIMessage) and str(m.content).startswith("Subtask "))


def run(nested: bool):
    model = Worker()
    worker = create_compacting_agent(
        model,
        [read],
        config=CompactionConfig(context_window=WINDOW),
        archive=StoreArchive(InMemoryStore()),
        recall_tool=False,
    )
    if nested:

        def supervise(state):
            d = done(state["messages"])
            return (
                {}
                if d >= SUBTASKS
                else {"messages": [HumanMessage(f"Subtask {d + 1}: read parts.", id=f"s{d + 1}")]}
            )

        b = StateGraph(MessagesState)
        b.add_node("supervisor", supervise)
        b.add_node("worker", worker)
        b.add_edge(START, "supervisor")
        b.add_conditional_edges(
            "supervisor",
            lambda s: END if done(s["messages"]) >= SUBTASKS else "worker",
            ["worker", END],
        )
        b.add_edge("worker", "supervisor")
        g = b.compile()
        t = time.thread_time()
        p = time.process_time()
        w = time.perf_counter()
        g.invoke(
            {"messages": [HumanMessage("Project: several subtasks.", id="task")]},
            {"recursion_limit": 10_000},
        )
    else:
        msgs = [HumanMessage("Project: several subtasks.", id="task")]
        t = time.thread_time()
        p = time.process_time()
        w = time.perf_counter()
        for k in range(1, SUBTASKS + 1):
            msgs = worker.invoke(
                {"messages": [*msgs, HumanMessage(f"Subtask {k}: read parts.", id=f"s{k}")]},
                {"recursion_limit": 10_000},
            )["messages"]
    cpu, wall, proc = time.thread_time() - t, time.perf_counter() - w, time.process_time() - p
    assert all(model.per.get(k) == READS + 1 for k in range(1, SUBTASKS + 1)), model.per
    return {
        "calls": model.calls,
        "cpu_ms_per_call": round(cpu / model.calls * 1e3, 3),
        "process_cpu_ms_per_call": round(proc / model.calls * 1e3, 3),
        "wall_ms_per_call": round(wall / model.calls * 1e3, 3),
    }


def main() -> int:
    run(True)  # warm (tokenizer, imports)
    print(json.dumps({"nested": run(True), "alone": run(False)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
