"""The server example as a newcomer meets it (issues 21 and 23): ``langgraph dev`` without
``--allow-blocking`` on an empty tiktoken cache, runs with no ``configurable``, the client
snippet of docs/server.md as written, and the shipped auth keeping one user out of another's thread,
memory and archive through the server's API.

Two servers per module (``bench/_langgraph_dev.py``): one without auth, archiving into
``JsonlArchive`` files (``LC_ARCHIVE_DIR``); one with the example's ``auth.py``, archiving into
the server's store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import langgraph_sdk
import pytest

from bench._langgraph_dev import EXAMPLE_DIR, EXAMPLE_MODULE, DevServer, langgraph_dev
from langchain_compact.demo import DependentTask
from langchain_compact.memory import LOCAL_LABEL, MemoryRecord

pytestmark = [pytest.mark.langgraph_server, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = {"agent": f"{EXAMPLE_MODULE}:agent", "user_graph": f"{EXAMPLE_MODULE}:user_graph"}
WINDOW = "2500"  # the demo's default task (14 steps) compacts at least once in it
BLOCKING = ("BlockingError", "Blocking call")


def _server(tmp: Path, *, auth: bool, **env: str) -> Iterator[DevServer]:
    cache = tmp / "tiktoken"
    cache.mkdir()  # empty: the server provisions it, off the event loop
    settings = {"TIKTOKEN_CACHE_DIR": str(cache), "LC_CONTEXT_WINDOW": WINDOW, **env}
    settings.pop("LANGGRAPH_ALLOW_BLOCKING", None)
    os.environ.pop("LANGGRAPH_ALLOW_BLOCKING", None)
    with langgraph_dev(
        GRAPHS,
        env=settings,
        jobs=4,
        auth=f"{EXAMPLE_DIR / 'auth.py'}:auth" if auth else None,
    ) as server:
        yield server
    assert any(cache.iterdir()), "the server never filled its tiktoken cache"


@pytest.fixture(scope="module")
def open_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("open-server")


@pytest.fixture(scope="module")
def open_server(open_tmp: Path) -> Iterator[DevServer]:
    yield from _server(open_tmp, auth=False, LC_ARCHIVE_DIR=str(open_tmp / "archive"))


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from _server(tmp_path_factory.mktemp("auth-server"), auth=True, LC_AUTH_TOKENS="")


def client(server: DevServer, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return langgraph_sdk.get_client(url=server.url, headers=headers)


@pytest.fixture
async def alice(auth_server: DevServer) -> AsyncIterator[Any]:
    async with client(auth_server, "demo-alice") as sdk:
        yield sdk


@pytest.fixture
async def bob(auth_server: DevServer) -> AsyncIterator[Any]:
    async with client(auth_server, "demo-bob") as sdk:
        yield sdk


async def run_demo(sdk: Any, graph: str, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    thread = await sdk.threads.create()
    task = DependentTask()
    out = await sdk.runs.wait(
        thread["thread_id"],
        graph,
        input={"messages": [{"role": "user", "content": task.prompt()}]},
        **kwargs,
    )
    return thread["thread_id"], out


@pytest.mark.parametrize("graph", ["agent", "user_graph"])
async def test_a_run_with_no_configurable_works_without_auth(
    open_server: DevServer, open_tmp: Path, graph: str
) -> None:
    async with client(open_server) as sdk:
        thread_id, out = await run_demo(sdk, graph)  # no config at all
        log = open_server.log_tail(2_000_000)
        assert "__error__" not in out, (out, log[-4000:])
        assert not any(word in log for word in BLOCKING), log[-4000:]
        assert DependentTask().check(out["messages"][-1]["content"]).ok
        assert out["compaction_count"] >= 1
        item = await sdk.store.get_item(["memory", LOCAL_LABEL], "latest")
        assert MemoryRecord.from_value(item["value"]).thread_id == thread_id
        missing = await sdk.store.search_items(["memory", "None"])
        assert missing["items"] == []
    said = re.findall(r"the run gives no 'user_id'", log)
    assert len(said) == 1, "the local namespace is said once in the log, not once per run"
    records = list((open_tmp / "archive").rglob("*.jsonl"))
    assert records and any(thread_id in path.read_text() for path in records)


def test_the_docs_client_snippet_runs_as_written(auth_server: DevServer) -> None:
    blocks = re.findall(
        r"^```python server\n(.*?)^```", (ROOT / "docs" / "server.md").read_text(), re.S | re.M
    )
    assert len(blocks) == 1
    done = subprocess.run(
        [sys.executable, "-c", blocks[0]],
        env={**os.environ, "LANGGRAPH_URL": auth_server.url, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr + auth_server.log_tail()
    lines = done.stdout.splitlines()
    assert any(line.startswith("compaction ") for line in lines), done.stdout
    assert lines[-1] == "True" and any(line.startswith("REPORT ") for line in lines), done.stdout


async def test_one_user_cannot_read_anothers_thread_memory_or_archive(
    auth_server: DevServer, alice: Any, bob: Any
) -> None:
    thread_id, out = await run_demo(alice, "agent")  # the user comes from the token
    assert "__error__" not in out and out["compaction_count"] >= 1, out
    mine = await alice.store.get_item(["memory", "alice"], "latest")
    assert MemoryRecord.from_value(mine["value"]).thread_id == thread_id

    for call in (bob.threads.get(thread_id), bob.threads.get_state(thread_id)):
        with pytest.raises(httpx.HTTPStatusError) as info:
            await call
        assert info.value.response.status_code == 404
    for namespace in (["memory", "alice"], ["langchain_compact", "archive"]):
        with pytest.raises(httpx.HTTPStatusError) as info:
            await bob.store.get_item(namespace, "latest")
        assert info.value.response.status_code == 403
        with pytest.raises(httpx.HTTPStatusError) as info:
            await bob.store.search_items([*namespace, "x"])
        assert info.value.response.status_code == 403
    # A search or listing above the user's memory is narrowed to it: nothing of alice's.
    for prefix in ([], ["memory"]):
        found = await bob.store.search_items(prefix, limit=100)
        assert all(item["namespace"][:2] == ["memory", "bob"] for item in found["items"])
    listed = await bob.store.list_namespaces(limit=100)
    assert all(ns[:2] == ["memory", "bob"] for ns in listed["namespaces"])
    assert thread_id not in json.dumps(await bob.threads.search(limit=100))
    with pytest.raises(httpx.HTTPStatusError) as info:
        await alice.store.search_items(["langchain_compact", "archive"])  # recall reads it
    assert info.value.response.status_code == 403
    assistants = await bob.assistants.search(limit=10)
    assert {a["graph_id"] for a in assistants} >= {"agent"}  # readable by every user
    with pytest.raises(httpx.HTTPStatusError) as info:
        await bob.assistants.update(assistants[0]["assistant_id"], config={"tags": ["x"]})
    assert info.value.response.status_code == 403
    async with client(auth_server) as nobody:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await nobody.threads.create()
        assert info.value.response.status_code == 401


async def test_a_run_naming_another_user_is_refused(alice: Any) -> None:
    with pytest.raises(httpx.HTTPStatusError, match="not the authenticated user") as info:
        await run_demo(alice, "agent", config={"configurable": {"user_id": "bob"}})
    assert info.value.response.status_code == 403  # by the auth handler, before the run
    with pytest.raises(httpx.HTTPStatusError) as info:
        await alice.store.get_item(["memory", "bob"], "latest")  # nothing written there
    assert info.value.response.status_code == 403
