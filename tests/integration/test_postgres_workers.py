"""Many workers on one PostgreSQL (issue 21, item 8): 4 worker processes share one
PostgresSaver and one PostgresStore; 40 threads; each turn of a thread is run by whichever
worker takes it next from a work queue in the same database (``FOR UPDATE SKIP LOCKED``);
a random worker is killed with SIGKILL every 2 seconds and another started in its place.

Every thread must finish with the same final history and answer as a single-process run of
its task, every original must be archived exactly once (the same records as the
single-process run, none twice, nothing lost), and no checkpoint may hold an invalid
tool-call pairing. The machinery is ``bench/workers.py`` (``python -m bench.workers``
measures runs per second with 1, 2 and 4 workers). No timing assertion: the machine is
shared.

Needs ``LC_POSTGRES_URI`` (``eval "$(bash .ci/postgres.sh)"``); without it the fixtures FAIL.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore

from bench.workers import (
    SEEDS,
    build_graph,
    check_threads,
    run_config,
    run_fleet,
    setup,
    single_process,
    task_for,
    thread_list,
)
from langchain_compact import StoreArchive
from tests.unit.test_persistence import account, archived_messages, ever_seen

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

WORKERS = 4
THREADS = 40
#: 11 turns per thread: clearing and at least two compactions each (the second reads the
#: first's boundary, written by whichever worker ran it).
STEPS = 10
KILL_EVERY = 2.0


def test_four_workers_killed_at_random_finish_every_thread_as_one_process_would(
    postgres_uri: str,
) -> None:
    jobs = thread_list(THREADS)
    setup(postgres_uri, jobs)
    baseline = single_process(postgres_uri, STEPS)
    assert min(b.compactions for b in baseline.values()) >= 2
    assert all(b.ok for b in baseline.values())

    fleet = run_fleet(
        postgres_uri, workers=WORKERS, threads=THREADS, steps=STEPS, kill_every=KILL_EVERY
    )
    print(
        f"\n{WORKERS} workers, {THREADS} threads: {fleet.turns} turns in {fleet.seconds} s, "
        f"{fleet.kills} kills survived, threads by worker processes: {fleet.turn_workers}"
    )
    assert fleet.kills >= 1, "no worker was killed: the run was too short to test a kill"
    # The turns of a thread ran in more than one process.
    assert sum(n for k, n in fleet.turn_workers.items() if int(k) > 1) >= THREADS // 2

    checks = check_threads(postgres_uri, jobs, STEPS, baseline)
    assert checks["problems"] == {}, checks
    assert checks["checkpoints_checked"] > THREADS * STEPS

    # Nothing lost, nothing twice: every message a thread ever held is in its archive or
    # its final history, exactly once, as it was.
    with (
        PostgresSaver.from_conn_string(postgres_uri) as saver,
        PostgresStore.from_conn_string(postgres_uri) as store,
    ):
        graphs = {
            s: build_graph(task_for(s, STEPS), archive=None, checkpointer=saver) for s in SEEDS
        }
        for thread_id, seed in jobs:
            graph = graphs[seed]
            config = run_config(thread_id)
            states = [s.values.get("messages", []) for s in graph.get_state_history(config)]
            final = graph.get_state(config).values["messages"]
            account(
                ever_seen(list(reversed(states))),
                archived_messages(StoreArchive(store), thread_id),
                final,
            )
