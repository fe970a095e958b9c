"""Issue 10's must-show 3 and 4 for ``bench/pause.py``: summarizer input tokens with and
without preparing on transcript replays, and the dependent task's facts with and without.

Both run through real graphs (``add_compaction`` / ``create_compacting_agent``) and the
middleware, so whatever nodes the installed package wires in (a ``{prefix}_prepare`` node
next to the model node, when it has one) run as they would in an agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

from bench import peers, workloads
from bench._pause_models import PREPARE_SUPPORTED, SleepySummarizer, compaction_config
from bench.metrics import TruthCounter
from langchain_compact.archive import StoreArchive
from langchain_compact.graph import CompactionState, add_compaction, create_compacting_agent
from langchain_compact.markers import EVENT_KEY
from langchain_compact.summarizers import LLMSummarizer

__all__ = ["fidelity", "fork_cache_share", "replay_graph", "replay_tokens", "select_transcripts"]

_PREPARE_EVENTS = ("summary_prepared", "prepared_used", "prepared_discarded", "compaction")


def replay_graph(
    messages: Sequence[BaseMessage],
    truth: TruthCounter,
    *,
    on_agent: Any = None,
    **wiring: Any,
) -> Any:
    """A compiled graph that replays ``messages``: a ``feed`` node appends what arrived
    before each model call (user and tool messages), an ``agent`` node answers with the
    transcript's reply (usage computed from the state it was given, as a provider reports
    it), and ``add_compaction(builder, **wiring)`` sits in front of the agent."""
    points = workloads.call_points(messages)
    cursor = {"next": 0}

    def feed(state: dict[str, Any]) -> dict[str, Any]:
        k = cursor["next"]
        start = 0 if k == 0 else points[k - 1] + 1
        return {"messages": list(messages[start : points[k]])}

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        if on_agent is not None:  # what the model was sent
            on_agent(list(state["messages"]))
        reply = messages[points[cursor["next"]]]
        cursor["next"] += 1
        return {"messages": [peers.with_usage(reply, list(state["messages"]), truth)]}

    def after_agent(state: dict[str, Any]) -> str:
        return "feed" if cursor["next"] < len(points) else END

    builder = StateGraph(CompactionState)
    builder.add_node("feed", feed)
    builder.add_node("agent", agent)
    builder.add_edge(START, "feed")
    builder.add_edge("feed", "agent")
    builder.add_conditional_edges("agent", after_agent, ["feed", END])
    add_compaction(builder, model_node="agent", **wiring)
    return builder.compile()


def _events(stream: Any) -> tuple[dict[str, int], dict[str, int], dict[str, Any]]:
    """Count the custom compaction events of a ``stream_mode=["values", "custom"]`` run;
    also the reasons of discarded prepared summaries, and the final state."""
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    final: dict[str, Any] = {}
    for mode, chunk in stream:
        if mode == "values":
            final = chunk
            continue
        event = chunk.get(EVENT_KEY) if isinstance(chunk, dict) else None
        if not isinstance(event, dict):
            continue
        name = str(event.get("event"))
        counts[name] = counts.get(name, 0) + 1
        if name == "prepared_discarded":
            reason = re.sub(r"\d+", "N", str(event.get("reason", "")))[:80]
            reasons[reason] = reasons.get(reason, 0) + 1
    return counts, reasons, final


def select_transcripts(
    limit: int, window: int, truth: TruthCounter
) -> dict[str, list[BaseMessage]]:
    """The ``limit`` transcripts with the most model calls among those that pass the
    trigger at ``window`` (where compaction, and so preparing, happens at all)."""
    trigger = peers.Budget(window).trigger
    every = workloads.load_transcripts()
    over = {k: v for k, v in every.items() if truth(v) >= trigger}
    ranked = sorted(over, key=lambda k: (-len(workloads.call_points(over[k])), k))
    return {k: over[k] for k in sorted(ranked[:limit])}


def _budget_config(window: int, prepare: bool) -> tuple[Any, Any]:
    """The bench's budget at ``window`` and our config for it (``None`` without the flag)."""
    budget = peers.Budget(window)
    config = compaction_config(
        prepare=prepare,
        context_window=window,
        trigger_ratio=budget.trigger_ratio,
        summary_max_tokens=budget.summary_tokens,
    )
    return budget, config


def _replay_one(
    messages: Sequence[BaseMessage], window: int, *, prepare: bool, truth: TruthCounter
) -> dict[str, Any] | None:
    budget, config = _budget_config(window, prepare)
    if config is None:
        return None
    model = peers.make_summary_model(budget, truth)
    graph = replay_graph(
        messages,
        truth,
        config=config,
        summarizer=LLMSummarizer(model),
        archive=StoreArchive(InMemoryStore()),
    )
    run_config: Any = {"configurable": {"thread_id": "replay"}, "recursion_limit": 2_000}
    counts, reasons, final = _events(
        graph.stream({"messages": []}, run_config, stream_mode=["values", "custom"])
    )
    return {
        "summarizer_calls": len(model.log),
        "summarizer_input_tokens": sum(c[0] for c in model.log),
        "summarizer_output_tokens": sum(c[1] for c in model.log),
        "events": {k: counts.get(k, 0) for k in _PREPARE_EVENTS},
        "discard_reasons": reasons,
        "stopped": final.get("transition") == "stopped",
    }


def replay_tokens(
    *, limit: int = 8, windows: Sequence[int] = (4_000, 8_000), truth: TruthCounter | None = None
) -> dict[str, Any]:
    """Summarizer input tokens (o200k) with and without preparing, summed over ``limit``
    transcripts per window; ratio ``with / without`` (goal: at most 1.15)."""
    truth = truth or TruthCounter()
    out: dict[str, Any] = {"prepare_supported": PREPARE_SUPPORTED, "windows": {}}
    for window in windows:
        transcripts = select_transcripts(limit, window, truth)
        sums: dict[str, dict[str, Any]] = {}
        for label, prepare in (("without", False), ("with", True)):
            agg: dict[str, Any] = {
                "summarizer_calls": 0,
                "summarizer_input_tokens": 0,
                "summarizer_output_tokens": 0,
                "events": dict.fromkeys(_PREPARE_EVENTS, 0),
                "discard_reasons": {},
                "stopped_runs": 0,
            }
            available = True
            for messages in transcripts.values():
                one = _replay_one(messages, window, prepare=prepare, truth=truth)
                if one is None:
                    available = False
                    break
                for key in ("summarizer_calls", "summarizer_input_tokens"):
                    agg[key] += one[key]
                agg["summarizer_output_tokens"] += one["summarizer_output_tokens"]
                for key, value in one["events"].items():
                    agg["events"][key] += value
                for key, value in one["discard_reasons"].items():
                    agg["discard_reasons"][key] = agg["discard_reasons"].get(key, 0) + value
                agg["stopped_runs"] += one["stopped"]
            sums[label] = agg if available else {"not_available": "no prepare flag"}
        without = sums["without"]["summarizer_input_tokens"]
        with_ = sums["with"].get("summarizer_input_tokens")
        ratio = round(with_ / without, 3) if with_ is not None and without else None
        out["windows"][str(window)] = {
            "transcripts": list(transcripts),
            **sums,
            "ratio": ratio,
            "meets_goal": None if ratio is None else ratio <= 1.15,
        }
    return out


# --------------------------------------------------------------------------- cache parity


def _shared_prefix(a: Sequence[BaseMessage], b: Sequence[BaseMessage]) -> int:
    """Messages ``a`` and ``b`` share at the start (same role and content: what a provider's
    prompt cache matches on)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if (x.type, x.content) != (y.type, y.content):
            break
        n += 1
    return n


def _fork_prefix(
    messages: Sequence[BaseMessage], budget: Any, config: Any, truth: TruthCounter
) -> tuple[int, int]:
    """Tokens of the summarizer requests of one replay that repeat the start of the agent's
    newest request before them, and all their tokens."""
    seen: list[list[BaseMessage]] = []
    requests: list[tuple[int, list[BaseMessage]]] = []
    model = peers.make_summary_model(budget, truth)
    original = type(model)._generate

    def spy(self: Any, msgs: list[BaseMessage], *a: Any, **k: Any) -> Any:
        requests.append((len(seen), list(msgs)))
        return original(self, msgs, *a, **k)

    object.__setattr__(model, "_generate", spy.__get__(model))
    graph = replay_graph(
        messages,
        truth,
        config=config,
        summarizer=LLMSummarizer(model, fork=True),
        archive=StoreArchive(InMemoryStore()),
        on_agent=seen.append,
    )
    graph.invoke(
        {"messages": []}, {"configurable": {"thread_id": "fork"}, "recursion_limit": 2_000}
    )
    shared = total = 0
    for calls_before, request in requests:
        last = seen[calls_before - 1] if calls_before else []
        k = _shared_prefix(request, last)
        shared += truth(request[:k]) if k else 0
        total += truth(request)
    return shared, total


def fork_cache_share(
    *, limit: int = 36, windows: Sequence[int] = (4_000, 8_000), truth: TruthCounter | None = None
) -> dict[str, Any]:
    """With ``LLMSummarizer(model, fork=True)`` (the agent's own model as summarizer): the
    share of summarizer input tokens that repeat the start of the agent's newest request
    (what a provider's prompt cache would serve), with and without preparing."""
    truth = truth or TruthCounter()
    out: dict[str, Any] = {"windows": {}}
    for window in windows:
        transcripts = select_transcripts(limit, window, truth)
        row: dict[str, Any] = {"transcripts": len(transcripts)}
        for label, prepare in (("without", False), ("with", True)):
            budget, config = _budget_config(window, prepare)
            if config is None:
                row[label] = None
                continue
            shared = total = 0
            for messages in transcripts.values():
                got, of = _fork_prefix(messages, budget, config, truth)
                shared, total = shared + got, total + of
            row[label] = round(shared / total, 3) if total else None
        out["windows"][str(window)] = row
    return out


# --------------------------------------------------------------------------- fidelity


def _facts(text: str) -> list[str]:
    return sorted(set(re.findall(r"step \d+ = \d+", text)))


def fidelity(
    *, windows: Sequence[int] = (4_000, 8_000), steps: int = 14, payload_chars: int = 6_000
) -> dict[str, Any]:
    """The dependent task (graph and middleware; the context-reading policy and its
    tool-only variant) with a summarizer that keeps what it is shown, with and without
    preparing: both must finish, with the same reported facts."""
    from langchain.agents import create_agent

    from langchain_compact.demo import (
        ContextReadingPolicy,
        DependentTask,
        ToolOnlyPolicy,
        tool_only_tools,
    )
    from langchain_compact.middleware import CompactionMiddleware

    task = DependentTask(steps=steps, payload_chars=payload_chars)
    rows: list[dict[str, Any]] = []
    for window in windows:
        for via in ("graph", "middleware"):
            for policy_name in ("context_reading", "tool_only"):
                row: dict[str, Any] = {"window": window, "via": via, "policy": policy_name}
                for label, prepare in (("without", False), ("with", True)):
                    config = compaction_config(prepare=prepare, context_window=window)
                    if config is None:
                        row[label] = None
                        continue
                    policy: Any = ContextReadingPolicy()
                    tools = task.tools()
                    if policy_name == "tool_only":
                        policy, tools = ToolOnlyPolicy(inner=policy), tool_only_tools(task)
                    summarizer = LLMSummarizer(SleepySummarizer())
                    archive = StoreArchive(InMemoryStore())
                    if via == "graph":
                        agent: Any = create_compacting_agent(
                            policy,
                            tools,
                            config=config,
                            summarizer=summarizer,
                            archive=archive,
                            recall_tool=False,
                        )
                    else:
                        mw = CompactionMiddleware(
                            config=config, summarizer=summarizer, archive=archive
                        )
                        agent = create_agent(policy, tools, middleware=[mw])
                    run_config: Any = {
                        "configurable": {"thread_id": f"fidelity-{via}"},
                        "recursion_limit": 40 * steps,
                    }
                    counts, _reasons, final = _events(
                        agent.stream(
                            {"messages": [HumanMessage(task.prompt(), id="task")]},
                            run_config,
                            stream_mode=["values", "custom"],
                        )
                    )
                    text = final["messages"][-1].text if final.get("messages") else ""
                    verdict = task.check(text)
                    row[label] = {
                        "finished": verdict.ok,
                        "verdict": verdict.reason,
                        "facts": len(_facts(text)),
                        "compactions": counts.get("compaction", 0),
                        "events": {k: counts.get(k, 0) for k in _PREPARE_EVENTS},
                        "report": _facts(text),
                    }
                with_, without = row.get("with"), row.get("without")
                row["same_facts"] = (
                    None
                    if not with_ or not without
                    else with_["report"] == without["report"]
                    and with_["finished"] == without["finished"]
                )
                rows.append(row)
    return {"steps": steps, "payload_chars": payload_chars, "rows": rows}
