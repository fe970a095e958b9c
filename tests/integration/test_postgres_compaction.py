"""Crash and resume on PostgreSQL (B9): PostgresSaver checkpoints, StoreArchive(PostgresStore).

The run dies right after the archive write and before the state update (an archive wrapper
raises a ``BaseException`` once its write has succeeded); a fresh graph over fresh connections
to the same schema resumes it with ``invoke(None, config)``. It must end with the history of
an uninterrupted run of the same task (thread ``baseline`` in the same database), one summary
per compaction index, and the record written before the crash reused, not written again.

Needs ``LC_POSTGRES_URI`` (``eval "$(bash .ci/postgres.sh)"``); without it the fixtures FAIL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.base import BaseStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from langchain_compact import CompactionConfig
from langchain_compact._archive_records import thread_key
from langchain_compact.archive import DEFAULT_STORE_NAMESPACE, StoreArchive
from langchain_compact.demo import DependentTask
from langchain_compact.markers import KIND_SUMMARY, get_meta, kind_of
from tests.unit.test_persistence import (
    Crash,
    CrashAfterWrite,
    account,
    archived_messages,
    build_graph,
    ever_seen,
    run_config,
    snapshot,
    summary_indices,
    task_input,
)

pytestmark = pytest.mark.postgres

#: Micro-compactions and several compactions, no summary merge: summary ids then hash only
#: original messages, so they are the same in two runs whatever the archive's clock says.
TASK = DependentTask(steps=16, payload_chars=1000, seed=11)
CONFIG = CompactionConfig(context_window=2400, summary_budget_ratio=0.5)
CRASH_POINTS = [("micro-compaction", 1), ("compaction", 1), ("compaction", 2)]


def records(store: BaseStore, thread_id: str) -> list[dict[str, Any]]:
    """The raw store items of a thread's archive namespace (not through StoreArchive)."""
    items = store.search((*DEFAULT_STORE_NAMESPACE, thread_key(thread_id)), limit=1000)
    return [{"key": item.key, **item.value} for item in items]


async def arecords(store: BaseStore, thread_id: str) -> list[dict[str, Any]]:
    items = await store.asearch((*DEFAULT_STORE_NAMESPACE, thread_key(thread_id)), limit=1000)
    return [{"key": item.key, **item.value} for item in items]


def check(
    *,
    resumed: dict[str, Any],
    baseline: dict[str, Any],
    checkpoints: Sequence[Sequence[BaseMessage]],
    baseline_checkpoints: Sequence[Sequence[BaseMessage]],
    items: list[dict[str, Any]],
    baseline_items: list[dict[str, Any]],
    archived: list[BaseMessage],
    crash_ref: str | None,
) -> None:
    final = resumed["messages"]
    verdict = TASK.check(final[-1].text)
    assert verdict.ok, verdict.reason
    # Archive refs carry the write time and summaries quote them: masked for the comparison.
    assert snapshot(final, mask_ref_times=True) == snapshot(
        baseline["messages"], mask_ref_times=True
    )
    count = resumed["compaction_count"]
    assert count == baseline["compaction_count"] >= 2
    assert all(get_meta(m).get("merged_from") is None for s in checkpoints for m in s)
    assert summary_indices(final) == list(range(1, count + 1))
    for state in checkpoints:
        at = summary_indices(state)
        assert len(at) == len(set(at)), at
    made = {m.id for s in checkpoints for m in s if kind_of(m) == KIND_SUMMARY}
    assert made == {m.id for s in baseline_checkpoints for m in s if kind_of(m) == KIND_SUMMARY}
    # One record per write of an uninterrupted run; the pre-crash record kept its ref.
    assert len(items) == len(baseline_items)
    assert sorted(i["reason"] for i in items) == sorted(i["reason"] for i in baseline_items)
    assert crash_ref in {i["ref"] for i in items}
    assert crash_ref in {get_meta(m).get("archive_ref") for s in checkpoints for m in s}
    # Nothing lost, nothing twice: every message the thread ever held is in the archive or
    # the final history, exactly once, as it was.
    account(ever_seen(checkpoints), archived, final)


@pytest.mark.parametrize(("reason", "nth"), CRASH_POINTS)
def test_crash_after_archive_write_resumes_on_postgres(
    postgres_uri: str,
    postgres_saver: PostgresSaver,
    postgres_store: PostgresStore,
    reason: str,
    nth: int,
) -> None:
    tools = TASK.tools()
    archive = StoreArchive(postgres_store)
    graph = build_graph(tools, config=CONFIG, archive=archive, checkpointer=postgres_saver)
    baseline = graph.invoke(task_input(TASK), run_config("baseline"))

    crashing = CrashAfterWrite(archive, reason=reason, nth=nth)
    graph = build_graph(tools, config=CONFIG, archive=crashing, checkpointer=postgres_saver)
    with pytest.raises(Crash):
        graph.invoke(task_input(TASK), run_config("t"))
    assert crashing.crash_ref in {i["ref"] for i in records(postgres_store, "t")}

    # A restarted process: new connections to the same schema, a fresh graph.
    with (
        PostgresSaver.from_conn_string(postgres_uri) as saver,
        PostgresStore.from_conn_string(postgres_uri) as store,
    ):
        fresh = build_graph(tools, config=CONFIG, archive=StoreArchive(store), checkpointer=saver)
        node = "compact_micro" if reason == "micro-compaction" else "compact_summarize"
        assert tuple(fresh.get_state(run_config("t")).next) == (node,)
        resumed = fresh.invoke(None, run_config("t"))
        history = [s.values.get("messages", []) for s in fresh.get_state_history(run_config("t"))]
        base_history = [
            s.values.get("messages", []) for s in fresh.get_state_history(run_config("baseline"))
        ]
        check(
            resumed=resumed,
            baseline=baseline,
            checkpoints=list(reversed(history)),
            baseline_checkpoints=list(reversed(base_history)),
            items=records(store, "t"),
            baseline_items=records(store, "baseline"),
            archived=archived_messages(StoreArchive(store), "t"),
            crash_ref=crashing.crash_ref,
        )


@pytest.mark.parametrize(("reason", "nth"), CRASH_POINTS)
async def test_crash_after_archive_write_resumes_on_postgres_async(
    postgres_uri: str,
    async_postgres_saver: AsyncPostgresSaver,
    async_postgres_store: AsyncPostgresStore,
    reason: str,
    nth: int,
) -> None:
    tools = TASK.tools()
    archive = StoreArchive(async_postgres_store)
    graph = build_graph(tools, config=CONFIG, archive=archive, checkpointer=async_postgres_saver)
    baseline = await graph.ainvoke(task_input(TASK), run_config("baseline"))

    crashing = CrashAfterWrite(archive, reason=reason, nth=nth)
    graph = build_graph(tools, config=CONFIG, archive=crashing, checkpointer=async_postgres_saver)
    with pytest.raises(Crash):
        await graph.ainvoke(task_input(TASK), run_config("t"))
    assert crashing.crash_ref in {i["ref"] for i in await arecords(async_postgres_store, "t")}

    async with (
        AsyncPostgresSaver.from_conn_string(postgres_uri) as saver,
        AsyncPostgresStore.from_conn_string(postgres_uri) as store,
    ):
        fresh = build_graph(tools, config=CONFIG, archive=StoreArchive(store), checkpointer=saver)
        node = "compact_micro" if reason == "micro-compaction" else "compact_summarize"
        assert tuple((await fresh.aget_state(run_config("t"))).next) == (node,)
        resumed = await fresh.ainvoke(None, run_config("t"))
        history = [
            s.values.get("messages", []) async for s in fresh.aget_state_history(run_config("t"))
        ]
        base_history = [
            s.values.get("messages", [])
            async for s in fresh.aget_state_history(run_config("baseline"))
        ]
        archive = StoreArchive(store)
        archived = [
            m
            for ref in [
                i["ref"] for i in sorted(await arecords(store, "t"), key=lambda i: i["ref"])
            ]
            for m in await archive.aread(ref, thread_id="t")
        ]
        check(
            resumed=resumed,
            baseline=baseline,
            checkpoints=list(reversed(history)),
            baseline_checkpoints=list(reversed(base_history)),
            items=await arecords(store, "t"),
            baseline_items=await arecords(store, "baseline"),
            archived=archived,
            crash_ref=crashing.crash_ref,
        )
