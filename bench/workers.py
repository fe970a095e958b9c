"""Many worker processes over one PostgreSQL: throughput, and survival of SIGKILL.

``python -m bench.workers`` (needs ``LC_POSTGRES_URI``: ``eval "$(bash .ci/postgres.sh)"``)
writes ``bench/results/workers.json``.

Every thread is the scripted dependent task (:class:`~langchain_compact.demo.DependentTask`
driven by :class:`~langchain_compact.demo.ContextReadingPolicy`, deterministic ids) in a
``StateGraph`` with ``add_compaction``, checkpointed by one ``PostgresSaver`` and archiving
to one ``PostgresStore`` (``StoreArchive``). The graph is compiled with
``interrupt_after=["tools"]``, so one ``invoke`` runs one turn (clearing and compaction, the
model, the tools) and the next turn may run anywhere. A work queue in the same database
(table ``lc_work``, taken with ``SELECT ... FOR UPDATE SKIP LOCKED``) hands each turn to
whichever worker asks next; the row stays locked for the turn, so a thread never runs in two
workers at once, and a worker killed mid-turn releases it (its transaction dies with its
connection): the next worker resumes the thread from its last checkpoint. ``lc_turns``
records which process ran each turn.

Checks (:func:`check_threads`), against a single-process run of the same tasks: every thread
finishes with the same final history (archive-ref times masked) and the same answer; every
archive record exactly once (the same records as the single-process run, no original
archived twice); no checkpoint with an invalid tool-call pairing.

Nothing a thread needs is kept in a worker: the graph's compaction state (counts, the
prepared summary) is in the checkpoint, archived originals in the store; what a process
memoises (token counts, the scanned history facts) is checked against the messages it is
used for, so a fresh process computes the same thing.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_compact import CompactionConfig, CompactionState, StoreArchive, add_compaction
from langchain_compact._archive_records import thread_key
from langchain_compact.archive import DEFAULT_STORE_NAMESPACE
from langchain_compact.demo import ContextReadingPolicy, DependentTask
from langchain_compact.history import validate_history
from langchain_compact.markers import (
    KIND_CLEARED,
    KIND_STOP,
    KIND_SUMMARY,
    KIND_TRUNCATED,
    get_meta,
    kind_of,
)

RESULTS = Path(__file__).with_name("results") / "workers.json"
#: Task seeds; thread ``i`` runs seed ``SEEDS[i % len(SEEDS)]``.
SEEDS = (11, 12, 13, 14)
#: A window small enough for clearing and a few compactions per thread.
CONFIG = CompactionConfig(context_window=1500, summary_budget_ratio=0.4)
PAYLOAD_CHARS = 600
#: The wall-clock part of an archive ref (the rest is a content hash).
REF_TIME = re.compile(r"transcript_\d{8}T\d{12}Z_")
#: A whole archive ref: a record that archives summaries (a summary merge) holds the refs
#: they quote, write times included, so its content hash differs from run to run too.
REF = re.compile(r"transcript_\d{8}T\d{12}Z_[0-9a-f]+")
MADE_BY_PACKAGE = frozenset({KIND_CLEARED, KIND_TRUNCATED, KIND_SUMMARY, KIND_STOP})


def task_for(seed: int, steps: int) -> DependentTask:
    return DependentTask(steps=steps, payload_chars=PAYLOAD_CHARS, seed=seed)


# ------------------------------------------------------------------------------- the graph


def _reply_id(messages: Sequence[BaseMessage]) -> str:
    """The reply's id from its input, archive-ref times masked: the same in every run."""
    digest = hashlib.sha256()
    for m in messages:
        row = [m.type, m.content, getattr(m, "tool_calls", None)]
        digest.update(REF_TIME.sub("transcript_<t>_", json.dumps(row, default=str)).encode())
    return f"ai-{digest.hexdigest()[:20]}"


def build_graph(task: DependentTask, *, archive: Any, checkpointer: Any) -> Any:
    """The agent <-> tools loop with ``add_compaction``, one turn per ``invoke``."""
    tools = task.tools()
    model = ContextReadingPolicy().bind_tools(tools)
    tool_node = ToolNode(tools)

    def agent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        reply = model.invoke(state["messages"], config)
        return {"messages": [reply.model_copy(update={"id": _reply_id(state["messages"])})]}

    def run_tools(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        out = tool_node.invoke(state, config)
        named = [m.model_copy(update={"id": f"result-{m.tool_call_id}"}) for m in out["messages"]]
        return {"messages": named}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", RunnableLambda(agent, name="agent"))
    builder.add_node("tools", RunnableLambda(run_tools, name="tools"))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, config=CONFIG, archive=archive, tools=tools)
    return builder.compile(checkpointer=checkpointer, interrupt_after=["tools"])


def run_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": 400}


def run_turn(graph: Any, task: DependentTask, thread_id: str) -> bool:
    """One turn of ``thread_id`` from its checkpoint (the first one starts the task);
    ``True`` when the thread has finished.

    A checkpoint's ``next`` leaves out the tasks whose writes are saved: a worker killed
    after a node's writes and before the superstep's checkpoint leaves ``next == ()`` on a
    run that is not over. So a started thread is always resumed with ``invoke(None)`` (which
    applies those writes and goes on; on a finished thread it does nothing), and only the
    state after a whole ``invoke`` in this process says the thread is done."""
    config = run_config(thread_id)
    if not graph.get_state(config).values:
        graph.invoke({"messages": [HumanMessage(task.prompt(), id="task")]}, config)
    else:
        graph.invoke(None, config)
    return not graph.get_state(config).next


# ------------------------------------------------------------------------------- the queue

QUEUE_DDL = """
CREATE TABLE IF NOT EXISTS lc_work (
    thread_id text PRIMARY KEY,
    seed int NOT NULL,
    turns int NOT NULL DEFAULT 0,
    done boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS lc_turns (
    thread_id text NOT NULL,
    turn int NOT NULL,
    worker text NOT NULL,
    pid int NOT NULL,
    PRIMARY KEY (thread_id, turn)
);
"""


def with_search_path(uri: str, schema: str) -> str:
    """``uri`` with libpq ``options=-c search_path=<schema>``."""
    option = "options=" + quote(f"-c search_path={schema}", safe="")
    parts = urlsplit(uri)
    query = f"{parts.query}&{option}" if parts.query else option
    return urlunsplit(parts._replace(query=query))


@contextlib.contextmanager
def fresh_schema(server_uri: str) -> Iterator[str]:
    """A URI on a new schema of ``server_uri``'s database, dropped afterwards."""
    import psycopg
    from psycopg import sql

    schema = f"lc_workers_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield with_search_path(server_uri, schema)
    finally:
        with psycopg.connect(server_uri, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def setup(uri: str, threads: Sequence[tuple[str, int]]) -> None:
    """Tables of the saver, the store and the queue; one queue row per thread."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(uri) as saver:
        saver.setup()
    with PostgresStore.from_conn_string(uri) as store:
        store.setup()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(QUEUE_DDL)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO lc_work (thread_id, seed) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                list(threads),
            )


def worker(uri: str, name: str, steps: int) -> int:
    """Take the next turn of any thread until every thread is done; returns turns run."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    ran = 0
    graphs: dict[int, Any] = {}
    with (
        psycopg.connect(uri) as queue,
        PostgresSaver.from_conn_string(uri) as saver,
        PostgresStore.from_conn_string(uri) as store,
    ):
        archive = StoreArchive(store)
        while True:
            with queue.transaction():
                row = queue.execute(
                    "SELECT thread_id, seed, turns FROM lc_work WHERE NOT done "
                    "ORDER BY turns, thread_id FOR UPDATE SKIP LOCKED LIMIT 1"
                ).fetchone()
                if row is None:
                    left = queue.execute("SELECT count(*) FROM lc_work WHERE NOT done").fetchone()
                    if not left or left[0] == 0:
                        return ran
                else:
                    thread_id, seed, turns = row
                    task = task_for(seed, steps)
                    graph = graphs.get(seed)
                    if graph is None:
                        graph = build_graph(task, archive=archive, checkpointer=saver)
                        graphs[seed] = graph
                    finished = run_turn(graph, task, thread_id)
                    queue.execute(
                        "INSERT INTO lc_turns (thread_id, turn, worker, pid) "
                        "VALUES (%s, %s, %s, %s)",
                        (thread_id, turns, name, os.getpid()),
                    )
                    queue.execute(
                        "UPDATE lc_work SET turns = turns + 1, done = %s WHERE thread_id = %s",
                        (finished, thread_id),
                    )
                    ran += 1
                    continue
            time.sleep(0.05)  # every open thread is being run by another worker


# ------------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    """What one run of the fleet did."""

    workers: int
    threads: int
    seconds: float = 0.0
    turns: int = 0
    kills: int = 0
    restarts: int = 0
    turn_workers: dict[str, int] = field(default_factory=dict)
    """Threads by the number of distinct worker processes that ran their turns."""

    @property
    def runs_per_second(self) -> float:
        return round(self.threads / self.seconds, 3) if self.seconds else 0.0

    @property
    def turns_per_second(self) -> float:
        return round(self.turns / self.seconds, 3) if self.seconds else 0.0


def _spawn(uri: str, name: str, steps: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LC_WORKERS_URI": uri}
    cmd = [sys.executable, "-m", "bench.workers", "--worker", name, "--steps", str(steps)]
    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen(cmd, env=env, cwd=root, stdin=subprocess.DEVNULL)


def run_fleet(
    uri: str,
    *,
    workers: int,
    threads: int,
    steps: int,
    kill_every: float | None = None,
    seed: int = 0,
    timeout: float = 600.0,
) -> Fleet:
    """Run ``workers`` worker processes until every thread of the queue is done; with
    ``kill_every``, SIGKILL a random worker (one that has run at least a second) every
    ``kill_every`` seconds and start another in its place."""
    import psycopg

    rng = random.Random(seed)
    fleet = Fleet(workers=workers, threads=threads)
    started = time.monotonic()
    procs: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    serial = 0

    def start() -> None:
        nonlocal serial
        serial += 1
        name = f"w{serial}"
        procs[name] = (_spawn(uri, name, steps), time.monotonic())

    for _ in range(workers):
        start()
    next_kill = started + kill_every if kill_every else float("inf")
    try:
        while procs:
            time.sleep(0.1)
            now = time.monotonic()
            if now - started > timeout:
                raise TimeoutError(f"the fleet did not finish within {timeout:.0f} s")
            for name, (proc, _t) in list(procs.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                del procs[name]
                if rc != 0:
                    raise RuntimeError(f"worker {name} exited with code {rc}")
            if now >= next_kill and procs:
                next_kill = now + (kill_every or 0)
                ripe = [n for n, (_p, t) in procs.items() if now - t >= 1.0]
                if ripe:
                    name = rng.choice(sorted(ripe))
                    proc, _t = procs.pop(name)
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    fleet.kills += 1
                    with psycopg.connect(uri) as conn:
                        row = conn.execute("SELECT count(*) FROM lc_work WHERE NOT done")
                        left = row.fetchone()
                    if left and left[0]:
                        start()
                        fleet.restarts += 1
    finally:
        for proc, _t in procs.values():
            proc.kill()
            proc.wait()
    fleet.seconds = round(time.monotonic() - started, 3)
    with psycopg.connect(uri) as conn:
        fleet.turns = conn.execute("SELECT count(*) FROM lc_turns").fetchone()[0]  # type: ignore[index]
        per_thread = conn.execute(
            "SELECT thread_id, count(DISTINCT pid) FROM lc_turns GROUP BY thread_id"
        ).fetchall()
    spread = collections.Counter(str(n) for _tid, n in per_thread)
    fleet.turn_workers = dict(sorted(spread.items()))
    return fleet


# ------------------------------------------------------------------------------- the checks


def snapshot(messages: Sequence[BaseMessage]) -> list[str]:
    """What two runs of a task must agree on: ids, types, contents, tool calls, markers
    (archive refs masked: they hold write times)."""
    return [
        REF.sub(
            "transcript_<ref>",
            json.dumps(
                [m.id, m.type, m.content, getattr(m, "tool_calls", None), get_meta(m)],
                sort_keys=True,
                default=str,
            ),
        )
        for m in messages
    ]


def records(store: Any, thread_id: str) -> list[dict[str, Any]]:
    items = store.search((*DEFAULT_STORE_NAMESPACE, thread_key(thread_id)), limit=10_000)
    return [{"key": item.key, **item.value} for item in items]


@dataclass
class ThreadFacts:
    """One thread's outcome, for comparing runs."""

    answer: str
    ok: bool
    compactions: int
    snapshot: list[str]
    record_reasons: list[str]
    archived_twice: list[str]
    invalid_checkpoints: int
    checkpoints: int


def thread_facts(graph: Any, store: Any, task: DependentTask, thread_id: str) -> ThreadFacts:
    config = run_config(thread_id)
    final = graph.get_state(config).values
    messages = final.get("messages", [])
    invalid = total = 0
    for snap in graph.get_state_history(config):
        total += 1
        try:
            validate_history(snap.values.get("messages", []), allow_pending=True)
        except ValueError:
            invalid += 1
    items = records(store, thread_id)
    archive = StoreArchive(store)
    seen: collections.Counter[str] = collections.Counter()
    for item in items:
        for m in archive.read(item["ref"], thread_id=thread_id):
            if kind_of(m) not in MADE_BY_PACKAGE and m.id:
                seen[m.id] += 1
    answer = messages[-1].text if messages else ""
    return ThreadFacts(
        answer=answer,
        ok=task.check(answer).ok,
        compactions=int(final.get("compaction_count") or 0),
        snapshot=snapshot(messages),
        record_reasons=sorted(str(i.get("reason")) for i in items),
        archived_twice=sorted(k for k, n in seen.items() if n > 1),
        invalid_checkpoints=invalid,
        checkpoints=total,
    )


def single_process(uri: str, steps: int) -> dict[int, ThreadFacts]:
    """Each task run to the end in this process, one thread per seed (``baseline-<seed>``)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    out: dict[int, ThreadFacts] = {}
    with (
        PostgresSaver.from_conn_string(uri) as saver,
        PostgresStore.from_conn_string(uri) as store,
    ):
        for seed in SEEDS:
            task = task_for(seed, steps)
            graph = build_graph(task, archive=StoreArchive(store), checkpointer=saver)
            thread_id = f"baseline-{seed}"
            while not run_turn(graph, task, thread_id):
                pass
            out[seed] = thread_facts(graph, store, task, thread_id)
    return out


def check_threads(
    uri: str, threads: Sequence[tuple[str, int]], steps: int, baseline: dict[int, ThreadFacts]
) -> dict[str, Any]:
    """Every thread against the single-process run of its task: the violations found."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    problems: dict[str, list[str]] = collections.defaultdict(list)
    checkpoints = 0
    with (
        PostgresSaver.from_conn_string(uri) as saver,
        PostgresStore.from_conn_string(uri) as store,
    ):
        graphs: dict[int, Any] = {}
        for thread_id, seed in threads:
            task = task_for(seed, steps)
            graph = graphs.get(seed) or build_graph(task, archive=None, checkpointer=saver)
            graphs[seed] = graph
            facts = thread_facts(graph, store, task, thread_id)
            base = baseline[seed]
            checkpoints += facts.checkpoints
            if not facts.ok or facts.answer != base.answer:
                problems["different_answer"].append(thread_id)
            if facts.snapshot != base.snapshot or facts.compactions != base.compactions:
                problems["different_history"].append(thread_id)
            if facts.record_reasons != base.record_reasons:
                problems["different_archive_records"].append(thread_id)
            if facts.archived_twice:
                problems["archived_twice"].append(thread_id)
            if facts.invalid_checkpoints:
                problems["invalid_checkpoint"].append(thread_id)
    return {
        "threads": len(threads),
        "checkpoints_checked": checkpoints,
        "compactions_per_thread": sorted({b.compactions for b in baseline.values()}),
        "archive_records_per_thread": sorted({len(b.record_reasons) for b in baseline.values()}),
        "problems": dict(problems),
    }


def thread_list(threads: int) -> list[tuple[str, int]]:
    return [(f"thread-{i:03d}", SEEDS[i % len(SEEDS)]) for i in range(threads)]


def measure(
    server_uri: str,
    *,
    workers: int,
    threads: int,
    steps: int,
    kill_every: float | None,
    baseline: dict[int, ThreadFacts] | None = None,
) -> tuple[Fleet, dict[str, Any]]:
    """One fleet run on a fresh schema, checked against a single-process run."""
    with fresh_schema(server_uri) as uri:
        jobs = thread_list(threads)
        setup(uri, jobs)
        if baseline is None:
            baseline = single_process(uri, steps)
        fleet = run_fleet(uri, workers=workers, threads=threads, steps=steps, kill_every=kill_every)
        return fleet, check_threads(uri, jobs, steps, baseline)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        return out.stdout.strip()
    except OSError:
        return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=10, help="steps of each task (default 10)")
    parser.add_argument("--threads", type=int, default=40)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds between kills")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(os.environ["LC_WORKERS_URI"], args.worker, args.steps)
        return 0
    server_uri = os.environ.get("LC_POSTGRES_URI", "").strip()
    if not server_uri:
        print('LC_POSTGRES_URI is not set: eval "$(bash .ci/postgres.sh)"', file=sys.stderr)
        return 2
    runs: list[dict[str, Any]] = []
    baseline: dict[int, ThreadFacts] | None = None
    plan = [(n, None) for n in args.workers] + [(max(args.workers), args.kill_every)]
    for n, kill_every in plan:
        with fresh_schema(server_uri) as uri:
            jobs = thread_list(args.threads)
            setup(uri, jobs)
            if baseline is None:
                baseline = single_process(uri, args.steps)
            fleet = run_fleet(
                uri, workers=n, threads=args.threads, steps=args.steps, kill_every=kill_every
            )
            checks = check_threads(uri, jobs, args.steps, baseline)
        row = {
            **asdict(fleet),
            "kill_every_seconds": kill_every,
            "runs_per_second": fleet.runs_per_second,
            "turns_per_second": fleet.turns_per_second,
            "checks": checks,
        }
        runs.append(row)
        print(
            f"[workers] {n} worker(s){' with kills' if kill_every else ''}: "
            f"{fleet.runs_per_second} runs/s, {fleet.turns_per_second} turns/s, "
            f"{fleet.kills} kills, problems: {checks['problems'] or 'none'}",
            file=sys.stderr,
            flush=True,
        )
    result = {
        "command": "python -m bench.workers",
        "commit": _commit(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "steps_per_task": args.steps,
        "window": CONFIG.context_window,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"[workers] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
