"""Memory across threads on PostgreSQL (PostgresStore + PostgresSaver), sync and async.

Needs ``LC_POSTGRES_URI``: ``eval "$(bash .ci/postgres.sh)"``. Without it the fixtures FAIL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests import _memory as scenario

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

pytestmark = pytest.mark.postgres


def test_stopped_thread_continues_from_postgres_store(
    postgres_store: PostgresStore, postgres_saver: PostgresSaver
) -> None:
    scenario.run_sync(postgres_store, postgres_saver)


async def test_stopped_thread_continues_from_postgres_store_async(
    async_postgres_store: AsyncPostgresStore, async_postgres_saver: AsyncPostgresSaver
) -> None:
    await scenario.run_async(async_postgres_store, async_postgres_saver)
