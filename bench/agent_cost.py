"""``python -m bench.agent_cost``: the middleware's whole cost per turn in a ``create_agent`` loop.

Every system runs the same agent: langchain's ``create_agent`` with a scripted tool-calling
model (:class:`Looper`, the bench's :class:`bench.subagents.Worker` answering from the newest
message only, so the model's own cost does not grow with its input) that calls one tool
``turns`` times (150 by default); each result is 1,000 to 2,000 tokens. Windows 16k and 128k
(trigger ``0.75 x window`` and summary bound ``window / 8`` for every system, as in
:class:`bench.peers.Budget`); every system gets the same instant summary model
(:class:`bench._pause_models.SleepySummarizer` at zero latency). Systems:

* ``none``: ``create_agent`` without middleware;
* ``ours``: ``CompactionMiddleware`` with its default archive (JSONL files, in a temporary
  ``archive_dir``) and ``LLMSummarizer(<summary model>)``;
* ``ours_no_archive``: the same with ``archive=None``;
* ``ours_store``: the same archiving to ``StoreArchive(InMemoryStore())``: in memory, as
  deepagents' ``StateBackend`` keeps what it removes (no file, no fsync);
* ``lc_summarization``: langchain's ``SummarizationMiddleware(model=<summary model>,
  trigger=("tokens", T), keep=("messages", 4))``;
* ``deepagents``: deepagents' summarization middleware as ``create_deep_agent`` builds it
  (:func:`bench.peers.deepagents_agent`: it also writes what it summarizes away to its
  ``StateBackend``);
* on request only (``--systems none empty_before empty_after empty_wrap``): a middleware with
  one hook that does nothing, for what the hook itself costs (``before_model`` and
  ``after_model`` are graph nodes; ``wrap_model_call`` runs inside the model node).

A turn is the time from one model call to the next (the tool, the graph, every hook, the
model's own constant cost): wall (``perf_counter``) and CPU of the whole process
(``process_time``, so work a system moves to another thread counts). The systems are
interleaved: each repetition runs every (window, system) once, in an order rotated per
repetition, after one short untimed warm-up episode of each. Reported: the median per
turn, each system's extra over ``none``, and the ratio of that extra to deepagents'.
Writes ``bench/results/agent_cost.json``.

``--profile SYSTEM`` instead runs one 128k episode of SYSTEM under cProfile and prints the
top functions by cumulative time.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field, SkipValidation

from bench._pause_models import SleepySummarizer
from bench.peers import Budget, deepagents_agent
from bench.subagents import Worker

SYSTEMS = ("none", "ours", "ours_no_archive", "ours_store", "lc_summarization", "deepagents")
#: Middleware that does nothing, to measure what a hook costs LangGraph itself (not run by
#: default: ``--systems none empty_before empty_after empty_wrap``).
EMPTY = ("empty_before", "empty_after", "empty_wrap")
LABELS = {
    "none": "no middleware",
    "ours": "langchain-compact CompactionMiddleware (default archive)",
    "ours_no_archive": "langchain-compact CompactionMiddleware (archive=None)",
    "ours_store": "langchain-compact CompactionMiddleware (StoreArchive(InMemoryStore()))",
    "lc_summarization": "langchain SummarizationMiddleware",
    "deepagents": "deepagents SummarizationMiddleware (StateBackend)",
    "empty_before": "a middleware with an empty before_model (a graph node)",
    "empty_after": "a middleware with an empty after_model (a graph node)",
    "empty_wrap": "a middleware with a wrap_model_call that calls the model",
}
WINDOWS = (16_000, 128_000)
TURNS = 150
OUT = Path(__file__).resolve().parent / "results" / "agent_cost.json"


#: The words of the tool results (a log or a file's listing: words, numbers, line breaks).
WORDS = [
    "the",
    "of",
    "read",
    "file",
    "line",
    "value",
    "status",
    "found",
    "item",
    "record",
    "open",
    "close",
    "config",
    "server",
    "request",
    "returned",
    "error",
    "warning",
    "user",
    "path",
    "module",
    "function",
    "test",
    "passed",
]


def result_text(k: int, episode: str = "") -> str:
    """The ``k``-th tool result of ``episode``: 1,000 to 2,000 o200k tokens of numbered
    lines. The episode is named in the first line, so no episode's results are the texts
    of another's: a count or digest a system cached in an earlier episode (the warm-up's,
    another repetition's) is never a hit, as it is not for an agent's new tool results."""
    target = 1_000 + (k * 617) % 1_001
    lines = [f"result {k} of {episode}:" if episode else f"result {k}:"]
    i = 0
    while len(lines) * 14 < target:  # about 14 tokens a line
        words = " ".join(WORDS[(k * 7 + i * 3 + j) % len(WORDS)] for j in range(8))
        lines.append(f"{i}: {words} = {k * 31 + i}")
        i += 1
    return "\n".join(lines)


def _tokens(messages: Sequence[BaseMessage]) -> int:
    """A cheap stand-in for the provider's input count (four characters a token)."""
    return sum(len(m.text) for m in messages) // 4 + 4 * len(messages)


class Looper(Worker):
    """:class:`bench.subagents.Worker`'s scripted model, reduced to a loop: ``reads`` tool
    calls then an answer, decided from the number of calls so far (not from the input, so
    its cost is the same for every system). Its replies carry ``usage_metadata`` (input
    counted by :func:`_tokens`). Logs ``(perf_counter, process_time)`` at each call."""

    clock: Annotated[list[tuple[float, float]], SkipValidation()] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.clock.append((time.perf_counter(), time.process_time()))
        n = len(self.clock) - 1
        tokens = _tokens(messages)
        usage = {"input_tokens": tokens, "output_tokens": 12, "total_tokens": tokens + 12}
        meta = {"model_provider": self.provider}
        if n < self.reads:
            call = {"name": "read", "args": {"part": str(n)}, "id": f"c{n}"}
            reply = AIMessage(
                "", tool_calls=[call], usage_metadata=usage, response_metadata=meta, id=f"a{n}"
            )
        else:
            reply = AIMessage("Done.", usage_metadata=usage, response_metadata=meta, id=f"a{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def build(system: str, model: Looper, budget: Budget, archive_dir: str, episode: str = "") -> Any:
    """The compiled agent of ``system``; its tool returns ``episode``'s results."""
    from langchain.agents import create_agent

    @tool
    def read(part: str) -> str:
        """Read one part of the material."""
        return result_text(int(part), episode)

    summary_model = SleepySummarizer(latency=0.0)
    if system == "none":
        return create_agent(model, [read])
    if system in ("ours", "ours_no_archive", "ours_store"):
        from langchain_compact import CompactionConfig, CompactionMiddleware, LLMSummarizer

        config = CompactionConfig(
            context_window=budget.window,
            trigger_ratio=budget.trigger_ratio,
            summary_max_tokens=budget.summary_tokens,
            archive_dir=archive_dir,
        )
        extra: dict[str, Any] = {}
        if system == "ours_no_archive":
            extra["archive"] = None
        elif system == "ours_store":
            from langgraph.store.memory import InMemoryStore

            from langchain_compact import StoreArchive

            extra["archive"] = StoreArchive(InMemoryStore())
        middleware = CompactionMiddleware(
            config=config, summarizer=LLMSummarizer(summary_model), **extra
        )
        return create_agent(model, [read], middleware=[middleware])
    if system == "lc_summarization":
        from langchain.agents.middleware import SummarizationMiddleware

        lc = SummarizationMiddleware(
            model=summary_model, trigger=("tokens", budget.trigger), keep=("messages", 4)
        )
        return create_agent(model, [read], middleware=[lc])
    if system == "deepagents":
        return deepagents_agent(budget, model, [read], summary_model)
    if system in EMPTY:
        return create_agent(model, [read], middleware=[_empty(system)])
    raise ValueError(f"unknown system {system!r}; choose from {SYSTEMS}")


def _empty(system: str) -> Any:
    """The middleware of ``system``, one of :data:`EMPTY`: one hook that changes nothing."""
    from langchain.agents.middleware import AgentMiddleware

    class EmptyBefore(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> None:
            return None

    class EmptyAfter(AgentMiddleware):
        def after_model(self, state: Any, runtime: Any) -> None:
            return None

    class EmptyWrap(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    kinds = {"empty_before": EmptyBefore, "empty_after": EmptyAfter, "empty_wrap": EmptyWrap}
    return kinds[system]()


def episode(system: str, window: int, turns: int, tag: str) -> dict[str, Any]:
    """One run of ``turns`` tool turns: per-turn wall and CPU seconds."""
    budget = Budget(window)
    model = Looper(window=window, reads=turns)
    with tempfile.TemporaryDirectory() as archive_dir:
        agent = build(system, model, budget, archive_dir, tag)
        config: Any = {"configurable": {"thread_id": tag}, "recursion_limit": 20 * turns + 50}
        gc.collect()
        out = agent.invoke({"messages": [("user", "Read every part, then answer.")]}, config)
    clock = model.clock
    wall = [b[0] - a[0] for a, b in itertools.pairwise(clock)]
    cpu = [b[1] - a[1] for a, b in itertools.pairwise(clock)]
    return {
        "calls": len(clock),
        "final_messages": len(out["messages"]),
        "wall": wall,
        "cpu": cpu,
    }


def run(turns: int, repeats: int, windows: Sequence[int], systems: Sequence[str]) -> dict:
    """The interleaved runs and their medians (milliseconds per turn)."""
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        str(w): {s: {"wall": [], "cpu": []} for s in systems} for w in windows
    }
    calls: dict[str, dict[str, int]] = {str(w): {} for w in windows}
    order = [(w, s) for w in windows for s in systems]
    for w, s in order:  # warm-up: imports, tokenizer files, first-call caches (not timed)
        episode(s, w, 10, f"warm-{s}-{w}")
    for r in range(repeats):
        k = r % len(order)
        for w, s in order[k:] + order[:k]:
            got = episode(s, w, turns, f"{s}-{w}-{r}")
            samples[str(w)][s]["wall"] += got["wall"]
            samples[str(w)][s]["cpu"] += got["cpu"]
            calls[str(w)][s] = got["calls"]
            print(f"[agent_cost] rep {r} {w} {s}: {got['calls']} calls", file=sys.stderr)
    table: dict[str, Any] = {}
    for w in map(str, windows):
        row: dict[str, Any] = {}
        for s in systems:
            sm = samples[w][s]
            row[s] = {
                "wall_ms": round(1e3 * statistics.median(sm["wall"]), 3),
                "cpu_ms": round(1e3 * statistics.median(sm["cpu"]), 3),
                "mean_wall_ms": round(1e3 * statistics.fmean(sm["wall"]), 3),
                "mean_cpu_ms": round(1e3 * statistics.fmean(sm["cpu"]), 3),
                "model_calls": calls[w][s],
            }
        if "none" in row:
            for s in systems:
                for key in ("wall_ms", "cpu_ms", "mean_wall_ms", "mean_cpu_ms"):
                    row[s][f"extra_{key}"] = round(row[s][key] - row["none"][key], 3)
        if "deepagents" in row and "none" in row:
            for s in systems:
                for key in ("wall_ms", "cpu_ms"):
                    deep = row["deepagents"][f"extra_{key}"]
                    mine = row[s][f"extra_{key}"]
                    row[s][f"{key}_extra_over_deepagents"] = round(mine / deep, 2) if deep else None
        table[w] = row
    return {"turns": turns, "repeats": repeats, "per_turn": table}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| window | system | wall ms/turn | CPU ms/turn | extra wall | extra CPU "
        "| extra / deepagents' (wall, CPU) |",
        "|---|---|---|---|---|---|---|",
    ]
    for w, row in result["per_turn"].items():
        for s, r in row.items():
            ratio = (
                f"{r.get('wall_ms_extra_over_deepagents')}, {r.get('cpu_ms_extra_over_deepagents')}"
                if s != "none"
                else ""
            )
            lines.append(
                f"| {int(w) // 1000}k | {LABELS[s]} | {r['wall_ms']} | {r['cpu_ms']} "
                f"| {r.get('extra_wall_ms', '')} | {r.get('extra_cpu_ms', '')} | {ratio} |"
            )
    return "\n".join(lines)


def profile(system: str, turns: int, window: int, top: int) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    episode(system, window, turns, f"profile-{system}")
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def main(argv: Sequence[str] | None = None) -> int:
    from bench.__main__ import environment

    parser = argparse.ArgumentParser(prog="python -m bench.agent_cost", description=__doc__)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--repeats", type=int, default=3, help="episodes per (window, system)")
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS + EMPTY)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--profile", choices=SYSTEMS, help="cProfile one 128k episode")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--precount-min-chars",
        type=int,
        default=None,
        help="tool results this long are counted ahead on a thread (tokens.PRECOUNT_MIN_CHARS)",
    )
    args = parser.parse_args(argv)
    if args.precount_min_chars is not None:
        from langchain_compact import tokens

        tokens.PRECOUNT_MIN_CHARS = args.precount_min_chars
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # peers' deprecation warnings are not ours
        if args.profile:
            profile(args.profile, args.turns, max(args.windows), args.top)
            return 0
        t0 = time.perf_counter()
        result = run(args.turns, args.repeats, args.windows, args.systems)
    result["meta"] = {
        **environment(),
        "seconds": round(time.perf_counter() - t0, 1),
        "interleaved": True,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(markdown(result))
    print(f"[agent_cost] wrote {args.out} in {result['meta']['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
