"""Probe benchmark: what a system's compacted context still answers, checked exactly.

``python -m bench.probes`` runs a long scripted agent run (``bench/_probe_script.py``: the
tool calls and results come from a generator, not the model) through each system until it
has compacted ``k`` times, for ``k`` in the checkpoints (1, 5, 10, 20). At each checkpoint
the agent model is asked one probe question per kind on the compacted context (the model
input the system would send, plus the question as a user turn): the value to recall, the
files changed and how, the next step of the plan, the decision and its reason, and the hard
constraints stated once in the task. Answers are checked by substring / regex against the
planted values (no LLM judge). The constraint row at each checkpoint is the retention curve.

Systems (``bench/peers.py`` adapters, one summarizer model shared by all):

* ``ours``: langchain-compact's graph nodes with ``LLMSummarizer(<summarizer>)``;
* ``lc_summarization``: langchain ``SummarizationMiddleware(model=<summarizer>,
  trigger=("tokens", 0.75 x window), keep=("messages", 4))``;
* ``deepagents``: deepagents' ``SummarizationMiddleware`` as ``create_deep_agent`` builds it;
* ``drop_all`` (control, not in the default set): sends only the newest message, so it
  scores 0 and shows the checker can fail.

Models: ``--base-url URL --model NAME`` for any OpenAI-compatible server (``ChatOpenAI``;
``OPENAI_API_KEY`` if set); by default the local llama.cpp server with the shipped
gemma3-270m (``bench/_llama.py``); ``--fake`` for offline models that keep and read every
fact (checks the harness, measures what each system kept). Writes
``bench/results/probes.json`` and the probes block of ``docs/benchmarks.md`` (with the
default output path).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from bench._probe_script import (
    CONSTRAINTS,
    KINDS,
    FactKeepingSummarizer,
    FactReader,
    LoggedChatModel,
    Plant,
    check,
    fact_lines,
    opening,
    probe_input,
    script,
)
from bench.metrics import TruthCounter, message_texts
from bench.peers import (
    ADAPTERS,
    LABELS,
    Adapter,
    Budget,
    Ours,
    OursLCEL,
    Prepared,
    with_usage,
)
from langchain_compact import StoreArchive, compact_messages
from langchain_compact.graph import CompactionNodes
from langchain_compact.markers import get_meta, newest_boundary
from langchain_compact.summarizers import LLMSummarizer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "probes.json"
DOCS = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- probes:start", "<!-- probes:end -->"
SYSTEMS = ("ours", "lc_summarization", "deepagents")
CHECKPOINTS = (1, 5, 10, 20)
SIZES: dict[str, dict[str, Any]] = {
    "full": {"window": 4096, "checkpoints": CHECKPOINTS, "log_chars": 4000, "max_turns": 400},
    # The full checkpoints in the smoke size's window and logs: about half the prompt of
    # every summarizer and probe call, for a slow (shared 2-core) machine.
    "reduced": {"window": 2048, "checkpoints": CHECKPOINTS, "log_chars": 1600, "max_turns": 200},
    # The full checkpoints at half that window and log size again (the local llama.cpp
    # server on a 2-core machine busy with other work: about a minute per request).
    "tiny": {"window": 1024, "checkpoints": CHECKPOINTS, "log_chars": 800, "max_turns": 200},
    "smoke": {"window": 2048, "checkpoints": (1, 2), "log_chars": 1600, "max_turns": 40},
}


class DropAll(Adapter):
    """Control: every call is a "compaction" that drops the whole history."""

    name = "drop_all"

    def prepare(self, new: Sequence[BaseMessage]) -> Prepared:
        self._append(new)
        return Prepared(model_input=[], hook_seconds=0.0, compacted=True)


#: Ours with one of the protections of a summary from a weak model taken away (issue 30:
#: "measure what each adds"): the pinned task (``pin_original_task=False``), the fidelity
#: supplement (its function replaced by one that finds nothing, for that run only). The
#: third, the extractive fallback, is counted instead (``fallback_summaries``: the
#: summaries it wrote, each a compaction that would have failed without it).
ABLATIONS = {
    "ours_no_pin": "langchain-compact without the pinned task",
    "ours_no_supplement": "langchain-compact without the fidelity supplement",
}
LABELS_ALL = {**LABELS, **ABLATIONS, "drop_all": "control: drops the whole history"}


def _adapter(
    name: str, budget: Budget, summary_model: BaseChatModel, timeout: float | None = None
) -> Adapter:
    """The system ``name`` as a user gets it: ours with an archive (the default archives
    what it clears, and the summarizer reads those originals, issue 30), in a store in
    memory here; the peers as :mod:`bench.peers` builds them."""
    if name == "drop_all":
        return DropAll(budget, summary_model)  # type: ignore[arg-type]
    adapter = ADAPTERS["ours" if name in ABLATIONS else name](budget, summary_model)  # type: ignore[arg-type]
    if not isinstance(adapter, Ours | OursLCEL):
        return adapter
    config = adapter.config if isinstance(adapter, Ours) else adapter.runnable_config
    if name == "ours_no_pin":
        config = config.replace(pin_original_task=False)
    if timeout is not None:
        # The peers wait for their summarizer as long as the server takes; ours gives up
        # after ``summarizer_timeout`` (120 s by default) and falls back to extractive,
        # which on a slow local server would measure the machine, not the summaries.
        config = config.replace(summarizer_timeout=timeout)
    summarizer, archive = LLMSummarizer(summary_model), StoreArchive(InMemoryStore())
    if isinstance(adapter, Ours):
        adapter.config = config
        adapter.nodes = CompactionNodes(config=config, summarizer=summarizer, archive=archive)
    else:
        adapter.runnable = compact_messages(config=config, summarizer=summarizer, archive=archive)
    return adapter


@contextlib.contextmanager
def _ablated(name: str) -> Iterator[None]:
    """The fidelity supplement turned off for the run of ``ours_no_supplement`` (both the
    compaction's and a merge's check find nothing missing); nothing for the others."""
    if name != "ours_no_supplement":
        yield
        return
    from langchain_compact import _compaction_phases, summarizers

    saved = (_compaction_phases.fidelity_supplement, summarizers.fidelity_supplement)
    _compaction_phases.fidelity_supplement = summarizers.fidelity_supplement = _nothing_missing  # type: ignore[assignment]
    try:
        yield
    finally:
        _compaction_phases.fidelity_supplement, summarizers.fidelity_supplement = saved


def _nothing_missing(*args: Any, **kwargs: Any) -> str:
    return ""


def _by_fallback(messages: Sequence[BaseMessage]) -> bool:
    """Whether the newest summary of ``messages`` was written by the extractive fallback."""
    boundary, _kept = newest_boundary(messages)
    written = str(get_meta(messages[boundary]).get("summarizer", "")) if boundary >= 0 else ""
    return written.startswith("fallback:") or "+ ExtractiveSummarizer" in written


def context_text(messages: Sequence[BaseMessage]) -> str:
    """Every text of ``messages`` plus their file operations as ``created|edited <path>``
    lines: what the checker reads to tell whether the context still holds an answer."""
    texts = [t for m in messages for t in message_texts(m)]
    return "\n".join([*texts, *fact_lines(messages)])


def run_system(
    name: str,
    *,
    summary_model: BaseChatModel,
    agent: BaseChatModel,
    window: int,
    checkpoints: Sequence[int],
    log_chars: int,
    max_turns: int,
    seed: int = 0,
    summarizer_timeout: float | None = None,
    on_point: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """One scripted run of system ``name``, probed after each checkpoint's compaction
    (``on_point`` gets the run as it stands after each: a stopped run keeps those)."""
    truth = TruthCounter()
    rng = random.Random(seed)
    plant = Plant.draw(rng)
    budget = Budget(window)
    adapter = _adapter(name, budget, summary_model, summarizer_timeout)
    prepared = adapter.prepare(opening())
    turns = script(plant, rng, log_chars=log_chars)
    compactions, turn, peak, fallback = 0, 0, 0, 0
    points: list[dict[str, Any]] = []
    stop = ""
    t0 = time.perf_counter()
    want = sorted(set(checkpoints))

    def record(*, partial: bool) -> dict[str, Any]:
        return {
            "system": name,
            "label": LABELS_ALL[name],
            "checkpoints": list(points),
            "not_reached": list(want),
            "turns": turn,
            "compactions": compactions,
            "summarizer_calls": len(summary_model.log),  # type: ignore[attr-defined]
            "peak_context_tokens": peak,
            "fallback_summaries": fallback if name.startswith("ours") else None,
            "stop_reason": stop,
            "seconds": round(time.perf_counter() - t0, 1),
            "plant": plant.__dict__,
            **({"partial": True} if partial else {}),
        }

    with _ablated(name):
        while want and turn < max_turns:
            reply, arrived = next(turns)
            adapter.observe(with_usage(reply, prepared.model_input, truth))
            prepared = adapter.prepare(arrived)
            turn += 1
            tokens = truth(prepared.model_input)
            peak = max(peak, tokens)
            if prepared.stopped:
                stop = prepared.stop_reason
                break
            if not prepared.compacted:
                continue
            compactions += 1
            fallback += _by_fallback(prepared.model_input)
            if compactions != want[0]:
                continue
            want.pop(0)
            probes: dict[str, Any] = {}
            context = context_text(prepared.model_input)
            for kind in KINDS:
                answer = str(agent.invoke(probe_input(prepared.model_input, kind)).content)
                items = check(kind, answer, plant)
                held = check(kind, context, plant)
                probes[kind] = {
                    "score": sum(items.values()) / len(items),
                    "items": items,
                    "in_context": sum(held.values()) / len(held),
                    "answer": answer[:400],
                }
            point = {"compactions": compactions, "turn": turn, "context_tokens": tokens}
            points.append({**point, "probes": probes})
            if on_point is not None and want:
                on_point(record(partial=True))
    return record(partial=False)


# --------------------------------------------------------------------------- models


@contextlib.contextmanager
def models(args: argparse.Namespace) -> Iterator[tuple[str, Any, Any]]:
    """(model description, summarizer factory, agent model) for the chosen endpoint."""
    if args.fake:
        yield (
            "offline fakes: a summarizer that keeps every fact line it is shown, an agent "
            "model that answers with every fact line of its context",
            lambda: FactKeepingSummarizer(log=[]),
            FactReader(),
        )
        return
    from bench._llama import chat_model, llama_server

    api_key = os.environ.get("OPENAI_API_KEY") or "not-needed"
    with contextlib.ExitStack() as stack:
        if args.base_url:
            server: Any = SimpleNamespace(base_url=args.base_url, model=args.model)
            where = f"{args.model} at an OpenAI-compatible endpoint"
        else:
            server = stack.enter_context(llama_server(threads=args.server_threads))
            where = f"{server.model} (q4_k_m gguf) on the local llama.cpp server"
        summarizer = chat_model(server, max_tokens=args.summary_tokens, api_key=api_key)
        agent = chat_model(server, max_tokens=args.answer_tokens, api_key=api_key)
        yield (
            f"{where}, temperature 0; summaries capped at {args.summary_tokens} tokens, "
            f"answers at {args.answer_tokens}",
            lambda: LoggedChatModel(inner=summarizer, log=[]),
            agent,
        )


# --------------------------------------------------------------------------- report


def _cell(run: dict[str, Any], k: int, kind: str) -> str:
    for point in run["checkpoints"]:
        if point["compactions"] == k:
            probe = point["probes"][kind]
            n = len(probe["items"])
            return f"{sum(probe['items'].values())}/{n} ({round(probe['in_context'] * n)}/{n})"
    return "n/r"


def _mean(run: dict[str, Any], kind: str) -> str:
    points = [p["probes"][kind] for p in run["checkpoints"]]
    if not points:
        return "n/r"
    answered = sum(p["score"] for p in points) / len(points)
    held = sum(p["in_context"] for p in points) / len(points)
    return f"{answered:.2f} ({held:.2f})"


def table(result: dict[str, Any]) -> str:
    """The markdown block of ``docs/benchmarks.md``."""
    ks = result["settings"]["checkpoints"]
    fact_kinds = [k for k in KINDS if k != "constraints"]
    head = ["system", *fact_kinds, *(f"constraints after {k}" for k in ks), "turns", "summaries"]
    head.append("written by the fallback")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in result["runs"]:
        label = run["label"] + (" (stopped early)" if run.get("partial") else "")
        cells = [label, *(_mean(run, kind) for kind in fact_kinds)]
        cells += [_cell(run, k, "constraints") for k in ks]
        cells += [str(run["turns"]), str(run["summarizer_calls"])]
        written = run.get("fallback_summaries")
        cells.append("-" if written is None else f"{written} of {run['compactions']}")
        rows.append("| " + " | ".join(cells) + " |")
    s = result["settings"]
    return (
        f"- **Probes** (`{result['command']}`, writes `bench/results/probes.json`; model: "
        f"{result['model']}; size {s.get('size', 'full')}: {s['window']:,}-token window, "
        "trigger 0.75 x window, "
        f"{s['log_chars']:,}-character log results, seed {s['seed']}, "
        f"{result['seconds']:.0f} s): a scripted run (tool calls and results from a "
        "generator) with a value in a log, two files changed, the next step, a decision and "
        "its reason planted before the first compaction and three hard constraints stated "
        "once in the task; after the 1st, 5th, 10th and 20th compaction the agent model "
        "answers one probe per kind on the compacted context, checked by regex against the "
        "planted values. Fact columns: the share of items stated, averaged over the "
        "checkpoints reached, and in brackets the share the compacted context itself still "
        "holds (the same check on its text); constraint columns: constraints stated of "
        f"{len(CONSTRAINTS)} (n/r: that many compactions not reached in "
        f"{s['max_turns']} turns)."
        + (
            ""
            if result.get("complete", True)
            else " The run was stopped before every system it was asked for had finished: "
            "a row marked stopped early has the checkpoints it reached (n/r: not reached "
            "before the stop)."
        )
        + "\n\n"
        + "\n".join(rows)
        + "\n"
    )


def write_docs(result: dict[str, Any], docs: Path = DOCS) -> None:
    """Replace the probes block of ``docs`` (between its markers) with :func:`table`."""
    text = docs.read_text()
    block = f"{START} (generated from bench/results/probes.json: bench/probes.py) -->\n"
    block += table(result) + END
    if START in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        text = before + block + after
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    docs.write_text(text)


def merge(paths: Sequence[Path], out: Path) -> dict[str, Any]:
    """One result from several runs of the same settings (one process per system, run side
    by side): their runs in order; ``seconds`` is the longest (the wall time)."""
    parts = [json.loads(path.read_text()) for path in paths]
    first = parts[0]
    for part in parts[1:]:
        if (part["settings"], part["model"]) != (first["settings"], first["model"]):
            raise SystemExit(f"cannot merge runs of other settings or models: {paths}")
    result = {
        **first,
        "command": " ; ".join(re.sub(r" --out \S+", "", part["command"]) for part in parts)
        + " (side by side, each with --out), then python -m bench.probes --merge",
        "seconds": max(part["seconds"] for part in parts),
        "runs": [run for part in parts for run in part["runs"]],
        "complete": all(part.get("complete", True) for part in parts),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    if out == RESULTS:
        write_docs(result)
    print(table(result))
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.probes", description=__doc__)
    parser.add_argument("--fake", action="store_true", help="offline fact-keeping models")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: local llama)")
    parser.add_argument("--model", default="gemma3-270m", help="model name at --base-url")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--window", type=int, help="context window (tokens)")
    parser.add_argument("--checkpoints", help="compaction counts to probe at, e.g. 1,5,10,20")
    parser.add_argument("--max-turns", type=int)
    parser.add_argument("--log-chars", type=int)
    parser.add_argument("--summary-tokens", type=int, default=256)
    parser.add_argument("--answer-tokens", type=int, default=48)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--server-threads", type=int, help="threads of the local llama.cpp server (default 2)"
    )
    parser.add_argument(
        "--summarizer-timeout",
        type=float,
        help="seconds ours waits for one summarizer call (default: the server timeout, "
        "LC_SERVER_TIMEOUT or 600, with a server; the package default with --fake)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="write --out (and the docs table) from these results instead of running: one "
        "run per system, e.g. run as parallel processes with --systems NAME each",
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    settings = dict(SIZES[args.size])
    if args.window:
        settings["window"] = args.window
    if args.checkpoints:
        settings["checkpoints"] = tuple(int(k) for k in args.checkpoints.split(","))
    if args.max_turns:
        settings["max_turns"] = args.max_turns
    if args.log_chars:
        settings["log_chars"] = args.log_chars
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in (*ADAPTERS, *ABLATIONS, "drop_all")]
    if unknown:
        known = [*ADAPTERS, *ABLATIONS, "drop_all"]
        parser.error(f"unknown systems {unknown}; choose from {known}")
    t0 = time.perf_counter()
    command = "python -m bench.probes " + " ".join(argv if argv is not None else sys.argv[1:])
    result: dict[str, Any] = {}
    timeout = args.summarizer_timeout
    if timeout is None and not args.fake:
        from bench._llama import SERVER_TIMEOUT

        timeout = SERVER_TIMEOUT
    with models(args) as (description, make_summarizer, agent):
        runs: list[dict[str, Any]] = []

        def save(done: list[dict[str, Any]]) -> dict[str, Any]:
            result = {
                "command": command.strip(),
                "model": description,
                "settings": {
                    **settings,
                    "checkpoints": list(settings["checkpoints"]),
                    "seed": args.seed,
                    "size": args.size,
                    "summarizer_timeout": timeout,
                },
                "seconds": round(time.perf_counter() - t0, 1),
                "runs": done,
                "complete": len(done) == len(systems) and not any(r.get("partial") for r in done),
            }
            # written after every checkpoint, so a long run that is stopped keeps what it
            # measured (a run still going is marked "partial")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
            if args.out == RESULTS:
                write_docs(result)
            return result

        for name in systems:
            summary_model = make_summarizer()
            run = run_system(
                name,
                summary_model=summary_model,
                agent=agent,
                seed=args.seed,
                summarizer_timeout=timeout,
                on_point=lambda partial: save([*runs, partial]),
                **settings,
            )
            print(f"{name}: {run['compactions']} compactions in {run['turns']} turns, "
                  f"{run['seconds']} s", file=sys.stderr)  # fmt: skip
            runs.append(run)
            result = save(runs)
    print(table(result))
    return result


if __name__ == "__main__":
    main()
