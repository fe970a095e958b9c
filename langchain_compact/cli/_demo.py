"""The ``demo`` subcommand's runner: the dependent task, compacted or truncated.

:func:`run_demo` builds the agent (``create_compacting_agent`` for ``compact``; a plain
agent that ``trim_messages`` its input to the same budget for ``truncate``), streams it
and turns the graph's updates into one :class:`DemoTurn` per model call, reported live through
a callback. The caller renders the table, the plot and the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, trim_messages
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import NotRequired

from langchain_compact.cli._common import load_chat_model
from langchain_compact.config import CompactionConfig
from langchain_compact.demo import ContextReadingPolicy, DependentTask, TaskVerdict
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, Saving, kind_of
from langchain_compact.tokens import approximate_tokens, context_tokens

__all__ = ["DEMO_STEPS", "DEMO_WINDOW", "DemoOptions", "DemoResult", "DemoTurn", "run_demo"]

DEMO_STEPS = 50
DEMO_WINDOW = 4_000
"""Small enough that the default 50-step task (about 1,700 tokens of log per step) needs
full compactions and a micro-compaction every turn, large enough to finish."""
DEMO_PAYLOAD_CHARS = 4_600
"""Characters of log in each step's result (about 1,700 o200k tokens, two fifths of the
window)."""

REAL_MODEL_SYSTEM_PROMPT = (
    "You are running a multi-step computation with tools. Follow the user's task exactly: "
    "call run_step once per step, in order, passing the previous step's value. When every "
    "step is done, reply with the final report in the required format and nothing else."
)

Strategy = Literal["compact", "truncate"]


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Settings of one demo run (the CLI's flags)."""

    out_dir: Path
    steps: int = DEMO_STEPS
    window: int = DEMO_WINDOW
    strategy: Strategy = "compact"
    model: str | None = None
    base_url: str | None = None
    seed: int = 7


@dataclass(slots=True)
class DemoTurn:
    """One model call and what happened to the context just before it."""

    number: int
    context_tokens: int
    """Input tokens of the call (the model's usage report; a local estimate without one)."""
    action: str
    """What the model did: ``run_step step K``, ``final report`` or its text."""
    cleared: int = 0
    """Old tool results micro-compaction cleared before this call."""
    truncated: int = 0
    """Oversized tool results micro-compaction cut to head + tail before this call."""
    saved_tokens: int = 0
    """Tokens micro-compaction freed before this call."""
    compaction: dict[str, Any] | None = None
    """The full compaction that ran before this call (index, tokens before/after, ...)."""
    trimmed: int = 0
    """``truncate``: messages cut from the front of the model's input."""
    task_visible: bool = True
    """``truncate``: whether the original task was still in the model's input."""


@dataclass(slots=True)
class DemoResult:
    """Everything the CLI reports after a run."""

    options: DemoOptions
    turns: list[DemoTurn]
    verdict: TaskVerdict
    final_text: str
    trigger: int
    model_label: str
    thread_id: str
    archive_dir: Path | None
    checkpoints: str
    seconds: float
    stop_reason: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def compactions(self) -> list[dict[str, Any]]:
        return [t.compaction for t in self.turns if t.compaction is not None]


class _TruncationState(MessagesState):
    trimmed: NotRequired[int]
    task_visible: NotRequired[bool]


def _truncating_agent(
    model: BaseChatModel,
    tools: Sequence[Any],
    *,
    budget: int,
    system_prompt: str | None,
    checkpointer: Any,
) -> Any:
    """A plain tool agent whose model sees only the newest messages that fit in ``budget``."""
    bound = model.bind_tools(list(tools))
    prefix: list[BaseMessage] = [SystemMessage(system_prompt)] if system_prompt else []

    def agent(state: _TruncationState) -> dict[str, Any]:
        history = state["messages"]
        kept = trim_messages(
            history,
            max_tokens=budget,
            token_counter=approximate_tokens,
            strategy="last",
            start_on=["human", "ai"],
            include_system=True,
        )
        reply = bound.invoke([*prefix, *kept])
        task_id = history[0].id if history else None
        return {
            "messages": [reply],
            "trimmed": len(history) - len(kept),
            "task_visible": any(m.id == task_id for m in kept),
        }

    builder = StateGraph(_TruncationState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _checkpointer(out_dir: Path) -> tuple[Any, str, Callable[[], None]]:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        from langgraph.checkpoint.memory import InMemorySaver

        return (
            InMemorySaver(),
            "in memory (langgraph-checkpoint-sqlite is not installed; "
            "pip install 'langchain-compact[demo]' to keep them in SQLite)",
            lambda: None,
        )
    import sqlite3

    path = out_dir / "checkpoints.sqlite"
    conn = sqlite3.connect(str(path), check_same_thread=False)
    return SqliteSaver(conn), f"SQLite {path}", conn.close


def _action(message: BaseMessage) -> str:
    if isinstance(message, AIMessage) and message.tool_calls:
        parts = []
        for call in message.tool_calls:
            step = call["args"].get("step") if call["name"] == "run_step" else None
            parts.append(f"{call['name']} step {step}" if step is not None else call["name"])
        return "tool call: " + ", ".join(parts)
    text = " ".join(message.text.split())
    if text.startswith("REPORT"):
        return "stop: final report"
    return "stop: " + (text if len(text) <= 90 else text[:87] + "...")


def _model(options: DemoOptions) -> tuple[BaseChatModel, str, bool]:
    if options.model is None:
        if options.base_url:
            from langchain_compact.cli._common import CliError

            raise CliError("--base-url needs --model NAME (the model name the server serves)")
        # Usage reported with the same estimate compaction uses, so the numbers line up.
        policy = ContextReadingPolicy(token_counter=approximate_tokens)
        return policy, "scripted context-reading policy (offline)", False
    model = load_chat_model(options.model, base_url=options.base_url)
    where = f" at {options.base_url}" if options.base_url else ""
    return model, f"{options.model}{where}", True


class _TurnCollector:
    """Turns the graph's ``updates`` stream into one :class:`DemoTurn` per model call."""

    def __init__(self, on_turn: Callable[[DemoTurn], None] | None, estimate: Callable[[], int]):
        self.on_turn = on_turn
        self.estimate = estimate
        self.turns: list[DemoTurn] = []
        self.stop_reason: str | None = None
        self._pending: dict[str, Any] = {}

    def _micro(self, changed: Sequence[Any]) -> None:
        messages = [m for m in changed if isinstance(m, BaseMessage)]
        kinds = [kind_of(m) for m in messages]
        saved = sum(Saving.of(m).saved_tokens for m in messages)
        for key, value in (
            ("cleared", kinds.count(KIND_CLEARED)),
            ("truncated", kinds.count(KIND_TRUNCATED)),
            ("saved_tokens", saved),
        ):
            self._pending[key] = self._pending.get(key, 0) + value

    def feed(self, node: str, update: Any) -> None:
        if not isinstance(update, dict):
            return
        if node == "compact_micro":
            self._micro(update.get("messages") or [])
        elif node == "compact_summarize" and update.get("last_compaction"):
            self._pending["compaction"] = update["last_compaction"]
        elif node == "compact_stop":
            self.stop_reason = update.get("stop_reason")
        elif node == "agent":
            reply = update["messages"][-1]
            usage = getattr(reply, "usage_metadata", None) or {}
            tokens = usage.get("input_tokens")
            turn = DemoTurn(
                number=len(self.turns) + 1,
                context_tokens=int(tokens if tokens is not None else self.estimate()),
                action=_action(reply),
                trimmed=int(update.get("trimmed", 0)),
                task_visible=bool(update.get("task_visible", True)),
                **self._pending,
            )
            self._pending = {}
            self.turns.append(turn)
            if self.on_turn is not None:
                self.on_turn(turn)


def _header(options: DemoOptions, model_label: str, real: bool, trigger: int) -> list[str]:
    if options.strategy == "compact":
        summaries = "LLMSummarizer(model)" if real else "extractive (no LLM)"
        how = (
            f"micro-compaction before every model call; full compaction at {trigger:,} tokens "
            f"(summaries: {summaries}; originals archived in {options.out_dir / 'archive'})"
        )
    else:
        how = (
            f"plain truncation, no compaction: trim_messages keeps the newest messages "
            f"within {trigger:,} tokens"
        )
    return [
        f"langchain-compact demo: a {options.steps}-step dependent task (seed {options.seed}), "
        f"model: {model_label}",
        f"window {options.window:,} tokens; strategy {options.strategy}: {how}",
    ]


def run_demo(
    options: DemoOptions,
    *,
    on_turn: Callable[[DemoTurn], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> DemoResult:
    """Run the dependent task once; report every model turn to ``on_turn`` as it happens.

    ``say`` receives the header lines (model, settings, where the files go) before the run.
    """
    from langgraph.errors import GraphRecursionError

    from langchain_compact.archive import JsonlArchive
    from langchain_compact.graph import create_compacting_agent
    from langchain_compact.summarizers import ExtractiveSummarizer, LLMSummarizer

    started = time.perf_counter()
    model, model_label, real = _model(options)
    # Results of about 1,700 tokens (o200k), two fifths of the 4,000-token window: each
    # turn's result must be read whole, and two of them do not fit beside the summaries.
    task = DependentTask(steps=options.steps, seed=options.seed, payload_chars=DEMO_PAYLOAD_CHARS)
    tools = task.tools()
    # Summaries are prepared ahead of the trigger even with the offline extractive
    # summarizer, so the demo shows the swap (with an LLM summarizer it is the default).
    config = CompactionConfig(context_window=options.window, prepare=True)
    trigger = config.trigger_tokens or 0
    options.out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    thread_id = f"demo-{options.strategy}-{stamp}"
    system_prompt = REAL_MODEL_SYSTEM_PROMPT if real else None
    archive_dir = options.out_dir / "archive" if options.strategy == "compact" else None
    saver, checkpoints, close = _checkpointer(options.out_dir)
    if say is not None:
        for line in _header(options, model_label, real, trigger):
            say(line)
        say(f"checkpoints: {checkpoints}; thread {thread_id}")
    run_config: Any = {
        "configurable": {"thread_id": thread_id},
        "recursion_limit": 6 * (options.steps + 2) + 20,
    }
    notes: list[str] = []
    try:
        if archive_dir is not None:
            agent = create_compacting_agent(
                model,
                tools,
                config=config,
                summarizer=LLMSummarizer(model) if real else ExtractiveSummarizer(),
                archive=JsonlArchive(archive_dir),
                system_prompt=system_prompt,
                checkpointer=saver,
            )
        else:
            rooms = config.budget  # what the trigger leaves beside the tool schemas
            budget = 0 if rooms is None else rooms.room(approximate_tokens([], tools=tools))
            agent = _truncating_agent(
                model, tools, budget=budget, system_prompt=system_prompt, checkpointer=saver
            )

        def estimate() -> int:  # a model that reports no usage: count the input locally
            messages = agent.get_state(run_config).values["messages"][:-1]
            return context_tokens(messages, tools=tools)

        collector = _TurnCollector(on_turn, estimate)
        inputs = {"messages": [("user", task.prompt())]}
        try:
            for chunk in agent.stream(inputs, run_config, stream_mode="updates"):
                for node, update in chunk.items():
                    collector.feed(node, update)
        except GraphRecursionError:
            notes.append(
                f"the run hit the graph's recursion limit ({run_config['recursion_limit']} "
                "steps) before the model finished"
            )
        messages = agent.get_state(run_config).values.get("messages") or []
    finally:
        close()
    final = messages[-1] if messages else None
    final_text = final.text if isinstance(final, AIMessage) and not final.tool_calls else ""
    return DemoResult(
        options=options,
        turns=collector.turns,
        verdict=task.check(final_text),
        final_text=final_text,
        trigger=trigger,
        model_label=model_label,
        thread_id=thread_id,
        archive_dir=archive_dir,
        checkpoints=checkpoints,
        seconds=time.perf_counter() - started,
        stop_reason=collector.stop_reason,
        notes=notes,
    )
