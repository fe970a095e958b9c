"""``python -m bench.compare_inputs``: do two commits send the same model inputs?

Replays every transcript at every window through this package (the graph nodes, ``ours``,
and the LCEL chain, ``ours_lcel``, as :mod:`bench` drives them; the middleware,
``ours_middleware``, in a real ``create_agent`` run, :func:`agent_inputs`), with the bench's
extractive summary model and usage reports computed from what was sent, and records, for
every model call, a digest of each message of the model input: its type, id, content, tool
calls and tool-call id. Two recordings are then compared message by message.

Two uses:

- ``python -m bench.compare_inputs record --out FILE``: record with the package of the
  current directory (run it from a checkout's root).
- ``python -m bench.compare_inputs compare REV_A REV_B``: check both commits out into
  temporary worktrees, record each in a subprocess, and print, for each transcript and window
  where they differ, the first call that differs and how many calls differ. The summary goes
  to ``bench/results/compare_inputs.json`` (``--out`` elsewhere). Exit code 0 when every
  input is the same, 1 otherwise.

Options: ``--windows 4000,8000,...`` (default 4000, 8000, 16000, 32000, 128000),
``--limit N`` (the first N transcripts), ``--systems ours,ours_lcel,ours_middleware``.
It needs ``../shared`` beside the checkout (or ``LC_TRAJECTORY_DIR``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

DEFAULT_WINDOWS = (4_000, 8_000, 16_000, 32_000, 128_000)
DEFAULT_SYSTEMS = ("ours", "ours_lcel", "ours_middleware")
RESULTS = Path(__file__).resolve().parent / "results" / "compare_inputs.json"


def message_digest(message: BaseMessage) -> str:
    """A short digest of what a provider receives of ``message`` (and its id)."""
    parts: dict[str, Any] = {
        "type": message.type,
        "id": message.id,
        "content": message.content,
    }
    if isinstance(message, AIMessage):
        parts["tool_calls"] = [(c.get("id"), c["name"], c["args"]) for c in message.tool_calls]
        parts["invalid_tool_calls"] = [
            (c.get("id"), c.get("name"), c.get("args")) for c in message.invalid_tool_calls
        ]
    if isinstance(message, ToolMessage):
        parts["tool_call_id"] = message.tool_call_id
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


def record(
    windows: Sequence[int], systems: Sequence[str], limit: int | None
) -> dict[str, list[list[str]]]:
    """Every model input of every replay, as lists of message digests, keyed
    ``"system|window|transcript"``; a stopped run ends with ``["STOP"]``."""
    from bench import peers, workloads
    from bench.metrics import TruthCounter

    truth = TruthCounter()
    transcripts = workloads.load_transcripts(limit)
    out: dict[str, list[list[str]]] = {}
    for window in windows:
        budget = peers.Budget(window)
        for name in systems:
            for stem, messages in transcripts.items():
                repeatable_clock()
                if name == "ours_middleware":
                    out[f"{name}|{window}|{stem}"] = agent_inputs(messages, budget, truth)
                    continue
                adapter = peers.make(name, budget, truth)
                calls: list[list[str]] = []
                last = 0
                for i in workloads.call_points(messages):
                    res = adapter.prepare(messages[last:i])
                    settle(adapter)
                    if res.stopped:
                        calls.append(["STOP"])
                        break
                    calls.append([message_digest(m) for m in res.model_input])
                    adapter.observe(peers.with_usage(messages[i], res.model_input, truth))
                    last = i + 1
                out[f"{name}|{window}|{stem}"] = calls
    return out


def settle(adapter: Any) -> None:
    """Wait for the summaries an LCEL chain (``ours_lcel``) prepares in the background, as a
    model call that takes longer than preparing does would (the replay's model answers at
    once). Without this the chain's next call finds a job still running or done by the
    timing of the run, and a replay's inputs could differ between two runs of one commit
    (the ponyc replay at 8k did, from call 18, in about one run in five)."""
    func = getattr(getattr(adapter, "runnable", None), "func", None)
    jobs = getattr(getattr(func, "__self__", None), "_preparing", None) or {}
    for job in list(jobs.values()):
        with contextlib.suppress(Exception):  # a failed job is read by the chain's next call
            job.result()


def agent_inputs(messages: Sequence[BaseMessage], budget: Any, truth: Any) -> list[list[str]]:
    """The model inputs of ``CompactionMiddleware`` replaying ``messages`` in a real
    ``create_agent`` run, whichever hooks the commit's middleware has: a scripted model
    answers call ``k`` with the transcript's ``k``-th assistant message (usage computed from
    what it received), every tool call is answered with the transcript's result for its id
    (a fixed text when there is none); when a reply has no tool call the run ends and the
    next one starts with the transcript's messages up to the next assistant message (tool
    results left out: the tools gave them). A stop (the middleware's stop message last)
    ends the replay with ``["STOP"]``."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.checkpoint.memory import InMemorySaver

    from bench import peers, workloads
    from langchain_compact import CompactionConfig, LLMSummarizer
    from langchain_compact.markers import KIND_STOP, kind_of
    from langchain_compact.middleware import CompactionMiddleware

    points = workloads.call_points(messages)
    if not points:  # no assistant message: no model call to replay
        return []
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    calls: list[list[str]] = []

    class Replayer(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "transcript-replay"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, model_input: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
            calls.append([message_digest(m) for m in model_input])
            k = len(calls) - 1
            scripted = messages[points[k]] if k < len(points) else AIMessage("(the end)", id="end")
            reply = peers.with_usage(scripted, model_input, truth)
            return ChatResult(generations=[ChatGeneration(message=reply)])

    class Results(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            call_id = request.tool_call["id"]
            recorded = results.get(call_id)
            if recorded is None:
                return ToolMessage(
                    "(no result)",
                    tool_call_id=call_id,
                    name=request.tool_call["name"],
                    id=f"no-result-{call_id}",
                )
            return recorded

    names = sorted({c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls})
    tools = [
        StructuredTool.from_function(
            func=lambda **kwargs: "",
            name=n,
            description=f"the transcript's {n}",
            args_schema={"type": "object", "properties": {}, "additionalProperties": True},
        )
        for n in names
    ]
    config = CompactionConfig(
        context_window=budget.window,
        trigger_ratio=budget.trigger_ratio,
        summary_max_tokens=budget.summary_tokens,
    )
    summarizer = LLMSummarizer(peers.make_summary_model(budget, truth))
    middleware = CompactionMiddleware(config=config, summarizer=summarizer, archive=None)
    agent = create_agent(
        Replayer(), tools, middleware=[middleware, Results()], checkpointer=InMemorySaver()
    )
    run: Any = {"configurable": {"thread_id": "replay"}, "recursion_limit": 10_000}
    start = 0
    while True:
        new = [m for m in messages[start : points[len(calls)]] if not isinstance(m, ToolMessage)]
        before = len(calls)
        state = agent.invoke({"messages": new}, run)
        if kind_of(state["messages"][-1]) == KIND_STOP:
            calls.append(["STOP"])
            break
        if len(calls) == before or len(calls) >= len(points):
            break  # no model call and no stop, or the transcript's calls are all made
        start = points[len(calls) - 1] + 1
    return calls


def repeatable_clock() -> None:
    """Archive refs from a counter that starts at the same instant for every replay.

    A ref carries the UTC time it was written (``transcript_<stamp>_<hash>``), the summaries
    and placeholders the model reads quote refs, and a later record's hash covers them: with
    the wall clock, the tokens of a replay depend on when it ran, and a count a few tokens
    off can move a compaction by a turn (the LCEL ponyc replay at 8k differed between two
    runs of one commit). With this clock two commits are compared on their behaviour alone;
    the notebook tests start their kernel with it too (``tests/test_notebooks.py``).
    """
    import itertools
    from datetime import datetime, timedelta, timezone

    try:
        from langchain_compact import _archive_records as records
    except ImportError:  # a commit without the module: its own clock
        return
    ticks = itertools.count(1)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def new_timestamp() -> tuple[str, str]:
        now = start + timedelta(microseconds=next(ticks))
        return now.strftime("%Y%m%dT%H%M%S%fZ"), now.isoformat()

    records.new_timestamp = new_timestamp


def compare(a: dict[str, list[list[str]]], b: dict[str, list[list[str]]]) -> dict[str, Any]:
    """Per replay key present in both: the calls that differ (the first one's index and the
    first differing message in it)."""
    differing: dict[str, Any] = {}
    calls = same = 0
    for key in sorted(set(a) & set(b)):
        xa, xb = a[key], b[key]
        diffs = [i for i in range(max(len(xa), len(xb))) if xa[i : i + 1] != xb[i : i + 1]]
        calls += max(len(xa), len(xb))
        same += max(len(xa), len(xb)) - len(diffs)
        if diffs:
            first = diffs[0]
            ma = xa[first] if first < len(xa) else []
            mb = xb[first] if first < len(xb) else []
            at = next(
                (j for j in range(max(len(ma), len(mb))) if ma[j : j + 1] != mb[j : j + 1]), 0
            )
            differing[key] = {
                "calls_differing": len(diffs),
                "calls": [len(xa), len(xb)],
                "first_call": first,
                "first_message": at,
            }
    return {
        "replays": len(set(a) & set(b)),
        "only_in_one": sorted(set(a) ^ set(b)),
        "calls": calls,
        "calls_identical": same,
        "replays_differing": len(differing),
        "differing": differing,
    }


def _record_at(rev: str, root: Path, args: argparse.Namespace, shared: Path) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="compare-inputs-"))
    tree = tmp / "tree"
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(tree), rev], check=True
    )
    try:
        out = tmp / "inputs.json"
        # The recorder of this checkout, run against the other commit's package.
        script = (
            "import sys, json; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]);"
            "from bench_compare_inputs_self import main; sys.exit(main(sys.argv[3:]))"
        )
        shim = tmp / "shim"
        shim.mkdir()
        (shim / "bench_compare_inputs_self.py").write_text(Path(__file__).read_text())
        env = {**os.environ, "LC_TRAJECTORY_DIR": str(shared)}
        cmd = [
            sys.executable,
            "-c",
            script,
            str(tree),
            str(shim),
            "record",
            "--out",
            str(out),
            "--windows",
            ",".join(map(str, args.windows)),
            "--systems",
            ",".join(args.systems),
        ]
        if args.limit is not None:
            cmd += ["--limit", str(args.limit)]
        subprocess.run(cmd, check=True, cwd=tree, env=env)
        return dict(json.loads(out.read_text()))
    finally:
        subprocess.run(
            ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=False
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare_inputs")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("record", "compare"):
        p = sub.add_parser(name)
        p.add_argument(
            "--windows",
            type=lambda s: [int(x) for x in s.split(",")],
            default=list(DEFAULT_WINDOWS),
        )
        p.add_argument("--systems", type=lambda s: s.split(","), default=list(DEFAULT_SYSTEMS))
        p.add_argument("--limit", type=int, default=None)
        p.add_argument("--out", type=Path, default=None)
        if name == "compare":
            p.add_argument("rev_a")
            p.add_argument("rev_b")
    args = parser.parse_args(argv)
    if args.command == "record":
        data = record(args.windows, args.systems, args.limit)
        target = args.out or Path("compare_inputs_record.json")
        target.write_text(json.dumps(data))
        return 0
    root = Path(__file__).resolve().parent.parent
    from bench import workloads

    shared = workloads.TRAJECTORY_DIR
    a = _record_at(args.rev_a, root, args, shared)
    b = _record_at(args.rev_b, root, args, shared)
    result = {"rev_a": args.rev_a, "rev_b": args.rev_b, "windows": args.windows, **compare(a, b)}
    target = args.out or RESULTS
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"{result['calls_identical']} of {result['calls']} model inputs identical; "
        f"{result['replays_differing']} of {result['replays']} replays differ"
    )
    for key, d in list(result["differing"].items())[:40]:
        print(
            f"  {key}: {d['calls_differing']} calls differ, first at call {d['first_call']} "
            f"message {d['first_message']} (calls {d['calls'][0]} vs {d['calls'][1]})"
        )
    return 0 if not result["differing"] and not result["only_in_one"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
