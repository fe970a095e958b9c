"""Transcript archive (B8) and recall tool: JsonlArchive and StoreArchive, sync and async."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_compact import _archive_records
from langchain_compact.archive import (
    ArchivedMessage,
    ArchiveError,
    JsonlArchive,
    StoreArchive,
    TranscriptArchive,
    make_recall_tool,
)
from langchain_compact.errors import CompactionError, ConfigError
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, with_meta
from tests._data import all_trajectories, load_trajectory

REPO_ROOT = Path(__file__).resolve().parents[2]
KINDS = ["jsonl", "memory", "sqlite"]


# --- fixtures and helpers ---------------------------------------------------------------


@pytest.fixture(params=KINDS)
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TranscriptArchive]:
    if request.param == "jsonl":
        yield JsonlArchive(tmp_path / "memory")
    elif request.param == "memory":
        yield StoreArchive(InMemoryStore())
    else:
        with SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store:
            store.setup()
            yield StoreArchive(store)


class Api:
    """Calls the sync or the async twin of each archive method, so tests run both."""

    def __init__(self, archive: TranscriptArchive, mode: str) -> None:
        self.archive, self.is_async = archive, mode == "async"

    async def write(self, messages: Sequence[BaseMessage], **kw: Any) -> str:
        kw.setdefault("reason", "test")
        if self.is_async:
            return await self.archive.awrite(messages, **kw)
        return self.archive.write(messages, **kw)

    async def read(self, ref: str, **kw: Any) -> list[BaseMessage]:
        if self.is_async:
            return await self.archive.aread(ref, **kw)
        return self.archive.read(ref, **kw)

    async def search(self, **kw: Any) -> list[ArchivedMessage]:
        if self.is_async:
            return await self.archive.asearch(**kw)
        return self.archive.search(**kw)


@pytest.fixture(params=["sync", "async"])
async def api(request: pytest.FixtureRequest, archive: TranscriptArchive) -> AsyncIterator[Api]:
    yield Api(archive, request.param)


def every_message_type() -> list[BaseMessage]:
    return [
        SystemMessage("You are a careful agent.", id="m-sys"),
        HumanMessage(
            [
                {"type": "text", "text": "Fix the bug 中文 ✓"},
                {"type": "image_url", "image_url": {"url": "data:x"}},
            ],
            id="m-human",
            name="alice",
            additional_kwargs={"source": "ui"},
        ),
        AIMessage(
            "Let me look.",
            id="m-ai",
            tool_calls=[
                {
                    "name": "bash",
                    "args": {"cmd": "ls -la", "n": [1, 2]},
                    "id": "call_1",
                    "type": "tool_call",
                },
                {"name": "open", "args": {"path": "src/a.py"}, "id": "call_2", "type": "tool_call"},
            ],
            invalid_tool_calls=[
                {
                    "name": "bad",
                    "args": "{oops",
                    "id": "call_x",
                    "error": "bad json",
                    "type": "invalid_tool_call",
                }
            ],
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            response_metadata={
                "model_name": "m",
                "langchain_compact": {"kind": "summary", "index": 1},
            },
            additional_kwargs={"refusal": None, "nested": {"a": [1, {"b": True}]}},
        ),
        ToolMessage(
            "total 0\nfile1 file2",
            tool_call_id="call_1",
            name="bash",
            id="m-tool1",
            status="success",
        ),
        ToolMessage(
            "Traceback: KeyError 'x'",
            tool_call_id="call_2",
            name="open",
            id="m-tool2",
            status="error",
            artifact={"raw": [1, 2, 3]},
        ),
        ChatMessage("a critique", role="critic", id="m-chat"),
        FunctionMessage("fn result", name="legacy_fn", id="m-fn"),
        AIMessageChunk("partial", id="m-chunk"),
    ]


def transcript(prefix: str, n: int) -> list[BaseMessage]:
    """A small valid history: n rounds of assistant call + tool result."""
    out: list[BaseMessage] = [HumanMessage(f"{prefix} task", id=f"{prefix}-h")]
    for i in range(n):
        out.append(
            AIMessage(
                f"{prefix} step {i}",
                id=f"{prefix}-a{i}",
                tool_calls=[{"name": "run", "args": {"step": i}, "id": f"{prefix}-c{i}"}],
            )
        )
        out.append(
            ToolMessage(
                f"{prefix} output {i} alpha",
                tool_call_id=f"{prefix}-c{i}",
                name="run",
                id=f"{prefix}-t{i}",
            )
        )
    return out


def files_under(root: Path) -> list[Path]:
    """Every file, except the hidden content-addressed slot names of records (a second hard
    link to a record's own file, see ``test_a_record_has_one_file_under_two_names``)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".sha256-"))


# --- round trip, idempotency, refs ----------------------------------------------------------


async def test_round_trip_keeps_every_message_type_and_field(api: Api) -> None:
    messages = every_message_type()
    ref = await api.write(messages, thread_id="t1", reason="compaction", metadata={"tokens": 123})
    back = await api.read(ref, thread_id="t1")
    assert back == messages
    assert [type(m) for m in back] == [type(m) for m in messages]
    ai = back[2]
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls == messages[2].tool_calls  # type: ignore[attr-defined]
    assert ai.response_metadata["langchain_compact"] == {"kind": "summary", "index": 1}
    assert ai.additional_kwargs == {"refusal": None, "nested": {"a": [1, {"b": True}]}}
    assert isinstance(back[4], ToolMessage) and back[4].status == "error"
    assert back[4].artifact == {"raw": [1, 2, 3]}


async def test_write_is_idempotent(api: Api) -> None:
    messages = transcript("p", 3)
    first = await api.write(messages, thread_id="t1", reason="first")
    again = await api.write([m.model_copy() for m in messages], thread_id="t1", reason="other")
    assert again == first
    assert api.archive.refs(thread_id="t1") == [first]
    # A changed content or id is a new record; another thread gets its own record.
    changed = [*messages[:-1], messages[-1].model_copy(update={"content": "different"})]
    assert await api.write(changed, thread_id="t1") != first
    renamed = [*messages[:-1], messages[-1].model_copy(update={"id": "other-id"})]
    assert await api.write(renamed, thread_id="t1") != first
    assert len(api.archive.refs(thread_id="t1")) == 3
    other = await api.write(messages, thread_id="t2")
    assert api.archive.refs(thread_id="t2") == [other]


async def test_refs_are_oldest_first_and_well_formed(api: Api) -> None:
    refs = [await api.write(transcript(f"r{i}", 1), thread_id="t") for i in range(5)]
    assert api.archive.refs(thread_id="t") == refs
    assert all(_archive_records.is_ref(r) for r in refs)
    assert api.archive.refs(thread_id="never-written") == []


async def test_read_rejects_unknown_and_malformed_refs(api: Api) -> None:
    ref = await api.write(transcript("x", 1), thread_id="t")
    unknown = ref[:-16] + "0" * 16
    with pytest.raises(ArchiveError, match="No archive record"):
        await api.read(unknown, thread_id="t")
    for bad in ["../../etc/passwd", "", "transcript_x", ref + ".jsonl", "/" + ref]:
        with pytest.raises(ArchiveError, match="not an archive ref"):
            await api.read(bad, thread_id="t")


async def test_empty_write_and_metadata_are_allowed(api: Api) -> None:
    ref = await api.write([], thread_id="t", metadata={"when": object()})
    assert await api.read(ref, thread_id="t") == []


def test_archives_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(JsonlArchive(tmp_path), TranscriptArchive)
    assert isinstance(StoreArchive(InMemoryStore()), TranscriptArchive)
    assert issubclass(ArchiveError, CompactionError)


# --- search ------------------------------------------------------------------------------


async def test_search_by_keyword_needs_all_words_case_insensitive(api: Api) -> None:
    await api.write(
        [
            ToolMessage("ERROR in config.py: KeyError", tool_call_id="c1", id="k1"),
            ToolMessage("error error error in setup.py", tool_call_id="c2", id="k2"),
            HumanMessage("nothing here", id="k3"),
        ],
        thread_id="t",
    )
    hits = await api.search(thread_id="t", query="error CONFIG.PY")
    assert [h.message.id for h in hits] == ["k1"]
    # Ranked by occurrences: k2 has three "error"s.
    hits = await api.search(thread_id="t", query="error")
    assert [h.message.id for h in hits] == ["k2", "k1"]
    assert await api.search(thread_id="t", query="error missingword") == []


async def test_search_ties_go_newest_first_and_covers_tool_args(api: Api) -> None:
    await api.write([HumanMessage("alpha one", id="o1")], thread_id="t")
    await api.write([HumanMessage("alpha two", id="o2")], thread_id="t")
    await api.write(
        [
            AIMessage(
                "", id="o3", tool_calls=[{"name": "grep", "args": {"pattern": "alpha"}, "id": "g1"}]
            )
        ],
        thread_id="t",
    )
    hits = await api.search(thread_id="t", query="alpha")
    assert [h.message.id for h in hits] == ["o3", "o2", "o1"]
    refs = api.archive.refs(thread_id="t")
    assert [h.ref for h in hits] == refs[::-1]
    assert all(h.index == 0 for h in hits)


async def test_search_by_tool_call_id_and_message_id(api: Api) -> None:
    messages = transcript("s", 4)
    ref = await api.write(messages, thread_id="t")
    hits = await api.search(thread_id="t", tool_call_id="s-c2")
    assert len(hits) == 1
    assert hits[0] == ArchivedMessage(ref, 6, messages[6])
    hits = await api.search(thread_id="t", message_id="s-a1")
    assert [h.message for h in hits] == [messages[3]]
    assert await api.search(thread_id="t", tool_call_id="nope") == []
    # Criteria combine with AND.
    assert await api.search(thread_id="t", tool_call_id="s-c2", query="output 2") != []
    assert await api.search(thread_id="t", tool_call_id="s-c2", query="output 3") == []


async def test_search_paging_with_limit_and_offset(api: Api) -> None:
    await api.write(transcript("pg", 12), thread_id="t")
    pages = [await api.search(thread_id="t", query="alpha", limit=5, offset=o) for o in (0, 5, 10)]
    assert [len(p) for p in pages] == [5, 5, 2]
    ids = [h.message.id for page in pages for h in page]
    assert len(set(ids)) == 12
    assert ids == [f"pg-t{i}" for i in range(11, -1, -1)]  # equal hits -> newest first
    assert await api.search(thread_id="t", query="alpha", offset=12) == []


async def test_search_rejects_bad_arguments(api: Api) -> None:
    await api.write(transcript("b", 1), thread_id="t")
    for kwargs, match in [
        ({}, "needs a query"),
        ({"query": "   "}, "query is empty"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "offset": -1}, "offset"),
    ]:
        with pytest.raises(ArchiveError, match=match):
            await api.search(thread_id="t", **kwargs)


async def test_search_skips_placeholders_and_returns_each_message_once(api: Api) -> None:
    original = ToolMessage(
        "the full original output " * 20, tool_call_id="c9", id="t9", name="bash"
    )
    first = await api.write([HumanMessage("go", id="h"), original], thread_id="t")
    cleared = with_meta(original.model_copy(update={"content": "[cleared]"}), kind=KIND_CLEARED)
    truncated = with_meta(
        original.model_copy(update={"content": "head...tail"}), kind=KIND_TRUNCATED
    )
    await api.write([HumanMessage("go", id="h"), cleared, truncated], thread_id="t")
    hits = await api.search(thread_id="t", tool_call_id="c9")
    assert [(h.ref, h.message.content) for h in hits] == [(first, original.content)]
    hits = await api.search(thread_id="t", message_id="h")  # archived twice, returned once:
    assert len(hits) == 1 and hits[0].ref == first  # its first archived original


# --- isolation and names -----------------------------------------------------------------


async def test_threads_never_see_each_other(api: Api) -> None:
    ref_a = await api.write(transcript("apple", 2), thread_id="thread-a")
    ref_b = await api.write(transcript("banana", 2), thread_id="thread-b")
    assert api.archive.refs(thread_id="thread-a") == [ref_a]
    assert api.archive.refs(thread_id="thread-b") == [ref_b]
    assert await api.search(thread_id="thread-b", tool_call_id="apple-c0") == []
    assert await api.search(thread_id="thread-b", query="apple") == []
    assert len(await api.search(thread_id="thread-a", query="apple output")) == 2
    with pytest.raises(ArchiveError):
        await api.read(ref_a, thread_id="thread-b")
    # Same content in two threads: two records, each readable only from its own thread.
    same_a = await api.write([HumanMessage("shared", id="s")], thread_id="thread-a")
    same_b = await api.write([HumanMessage("shared", id="s")], thread_id="thread-b")
    assert same_a in api.archive.refs(thread_id="thread-a")
    assert same_b in api.archive.refs(thread_id="thread-b")


HOSTILE_IDS = [
    "../../etc",
    "/etc/passwd",
    "..",
    ".",
    "",
    "a\x00b",
    "C:\\Windows",
    "a/b",
    "a:b",
    "é中文",
    "x" * 500,
    "a b",
    "a-b",
    "a_b",
    "A",
]


def test_jsonl_thread_ids_stay_inside_and_never_collide(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    archive = JsonlArchive(root)
    for i, thread_id in enumerate(HOSTILE_IDS):
        archive.write([HumanMessage(f"msg {i}", id=f"id{i}")], thread_id=thread_id, reason="r")
    folders = sorted(p for p in root.iterdir())
    assert len(folders) == len(HOSTILE_IDS)  # one folder per id, no collisions
    for folder in folders:
        assert folder.is_dir() and folder.parent == root and not folder.name.startswith(".")
    for path in files_under(tmp_path):
        assert path.resolve().is_relative_to(root.resolve())
    for i, thread_id in enumerate(HOSTILE_IDS):
        [hit] = archive.search(thread_id=thread_id, message_id=f"id{i}")
        assert hit.message.content == f"msg {i}"
        assert len(archive.refs(thread_id=thread_id)) == 1


def test_store_thread_ids_become_safe_namespace_labels() -> None:
    store = InMemoryStore()
    archive = StoreArchive(store, namespace=("app", "archive"))
    for i, thread_id in enumerate(HOSTILE_IDS):
        archive.write([HumanMessage(f"msg {i}", id=f"id{i}")], thread_id=thread_id, reason="r")
    namespaces = store.list_namespaces(prefix=("app", "archive"))
    assert len(namespaces) == len(HOSTILE_IDS)
    assert all(len(ns) == 3 and "." not in ns[2] for ns in namespaces)
    for i, thread_id in enumerate(HOSTILE_IDS):
        assert [h.message.id for h in archive.search(thread_id=thread_id, query="msg")] == [
            f"id{i}"
        ]


@given(st.lists(st.text(max_size=60), min_size=2, max_size=20, unique=True))
def test_thread_keys_are_safe_and_distinct(thread_ids: list[str]) -> None:
    keys = [_archive_records.thread_key(t) for t in thread_ids]
    assert len(set(keys)) == len(keys)
    for key in keys:
        assert (
            key
            and key[0] not in ".-_"
            and all(c.isascii() and (c.isalnum() or c in "-_") for c in key)
        )


def test_thread_id_must_be_a_string(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="thread_id must be a str"):
        JsonlArchive(tmp_path).write([], thread_id=42, reason="r")  # type: ignore[arg-type]


# --- JSONL files: layout, modes, atomicity, bad directories ---------------------------------


def test_jsonl_file_layout_header_and_modes(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        root = tmp_path / "deep" / ".memory"
        archive = JsonlArchive(root)
        messages = transcript("f", 2)
        ref = archive.write(
            messages, thread_id="t", reason="compaction", metadata={"tokens_before": 9}
        )
    finally:
        os.umask(old_umask)
    [path] = files_under(root)
    assert path.name == f"{ref}.jsonl" and path.parent.parent == root
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["ref"] == ref and header["thread_id"] == "t" and header["reason"] == "compaction"
    assert (
        header["metadata"] == {"tokens_before": 9}
        and header["count"] == len(messages) == len(lines) - 1
    )
    assert header["created_at"].endswith("+00:00")
    assert json.loads(lines[1])["type"] == "human"


def test_jsonl_idempotent_write_creates_no_second_file(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    for _ in range(3):
        archive.write(transcript("i", 2), thread_id="t", reason="r")
    assert len(files_under(tmp_path)) == 1


def test_a_record_has_one_file_under_two_names(tmp_path: Path) -> None:
    """A record is published by an atomic create of its content-addressed slot name; its
    ref name is a second hard link to the same file (no copy, no claim file)."""
    archive = JsonlArchive(tmp_path)
    messages = transcript("s", 2)
    ref = archive.write(messages, thread_id="t", reason="r")
    folder = archive.thread_folder("t")
    digest = _archive_records.serialise(messages).digest
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f".sha256-{digest}", f"{ref}.jsonl"]
    assert os.path.samefile(folder / names[0], folder / names[1])
    assert stat.S_IMODE(os.stat(folder / names[1]).st_mode) == 0o600


def test_jsonl_keeps_lone_surrogates_and_unicode(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    messages = [HumanMessage("bad \ud800 surrogate, 中文, emoji 🎉", id="u")]
    ref = archive.write(messages, thread_id="t", reason="r")
    assert archive.read(ref, thread_id="t") == messages


@pytest.mark.parametrize("fail_at", ["fsync", "link"])
def test_crash_during_write_leaves_no_file_and_keeps_earlier_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: str
) -> None:
    archive = JsonlArchive(tmp_path)
    earlier = archive.write(transcript("e", 1), thread_id="t", reason="r")
    before = {p: p.read_bytes() for p in files_under(tmp_path)}

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fail_at, crash)
    with pytest.raises(ArchiveError, match="No space left"):
        archive.write(transcript("n", 3), thread_id="t", reason="r")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in files_under(tmp_path)} == before  # no temp file left
    assert archive.refs(thread_id="t") == [earlier]
    assert archive.read(earlier, thread_id="t") == transcript("e", 1)
    # And the retry after the crash succeeds.
    assert len({earlier, archive.write(transcript("n", 3), thread_id="t", reason="r")}) == 2


def test_killed_writer_leaves_no_visible_partial_record(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    earlier = archive.write(transcript("k", 1), thread_id="t", reason="r")
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from langchain_core.messages import HumanMessage
        from langchain_compact.archive import JsonlArchive

        def stall(fd):
            print("writing", flush=True)
            time.sleep(60)

        os.fsync = stall  # the data is in the temp file, not yet renamed
        big = [HumanMessage("x" * 100_000, id=str(i)) for i in range(20)]
        JsonlArchive({str(tmp_path)!r}).write(big, thread_id="t", reason="r")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert archive.refs(thread_id="t") == [earlier]
    assert archive.search(thread_id="t", query="xxxx") == []
    visible = [p for p in files_under(tmp_path) if not p.name.startswith(".")]
    assert [p.stem for p in visible] == [earlier]


def test_directory_that_is_a_file_gives_a_clear_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "memory"
    not_a_dir.write_text("oops")
    with pytest.raises(ArchiveError) as info:
        JsonlArchive(not_a_dir)
    assert str(not_a_dir) in str(info.value) and "directory=" in str(info.value)
    below_a_file = JsonlArchive(not_a_dir / "sub")
    with pytest.raises(ArchiveError) as info:
        below_a_file.write(transcript("d", 1), thread_id="t", reason="r")
    assert str(not_a_dir / "sub") in str(info.value) and "writable folder" in str(info.value)


def test_unwritable_directory_gives_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root ignores permission bits (CI runs as root), so the OS refusal is simulated where
    # the archive creates its temporary file.
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(tmp_path / "locked"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(ArchiveError, match="writable folder") as info:
        JsonlArchive(tmp_path / "locked").write(transcript("d", 1), thread_id="t", reason="r")
    assert str(tmp_path / "locked") in str(info.value)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=200), min_size=1, max_size=5))
def test_any_text_round_trips_through_jsonl(texts: list[str]) -> None:
    messages: list[BaseMessage] = [HumanMessage(t, id=f"h{i}") for i, t in enumerate(texts)]
    with tempfile.TemporaryDirectory() as tmp:
        archive = JsonlArchive(tmp)
        ref = archive.write(messages, thread_id="t", reason="r")
        assert archive.read(ref, thread_id="t") == messages
        assert archive.write(messages, thread_id="t", reason="r") == ref


def test_store_archive_validates_its_arguments() -> None:
    with pytest.raises(ConfigError, match="BaseStore"):
        StoreArchive({})  # type: ignore[arg-type]
    for bad in [(), ("a.b",), ("",), ["a"]]:
        with pytest.raises(ConfigError, match="namespace"):
            StoreArchive(InMemoryStore(), namespace=bad)  # type: ignore[arg-type]


def test_store_records_live_under_the_thread_namespace() -> None:
    store = InMemoryStore()
    archive = StoreArchive(store)
    ref = archive.write(transcript("n", 1), thread_id="t.1", reason="r", metadata={"a": 1})
    [item] = store.search(("langchain_compact", "archive"))
    assert item.namespace == ("langchain_compact", "archive", _archive_records.thread_key("t.1"))
    assert item.value["ref"] == ref and item.value["thread_id"] == "t.1"
    assert item.value["metadata"] == {"a": 1} and item.value["count"] == 3


def test_store_listing_pages_past_the_store_page_size() -> None:
    archive = StoreArchive(InMemoryStore())
    refs = [
        archive.write([HumanMessage(f"m{i}", id=f"m{i}")], thread_id="t", reason="r")
        for i in range(230)
    ]
    assert archive.refs(thread_id="t") == refs
    assert [h.message.id for h in archive.search(thread_id="t", message_id="m0")] == ["m0"]


# --- the shared trajectories ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_every_trajectory_tool_result_is_recalled_exactly(kind: str, tmp_path: Path) -> None:
    paths = all_trajectories()
    assert paths, "no trajectories found; set LC_TRAJECTORY_DIR"
    archive: TranscriptArchive = (
        JsonlArchive(tmp_path) if kind == "jsonl" else StoreArchive(InMemoryStore())
    )
    checked = 0
    for path in paths:
        messages = load_trajectory(path)
        chunks = [messages[i : i + 7] for i in range(0, len(messages), 7)]
        refs = [archive.write(chunk, thread_id=path.stem, reason="compaction") for chunk in chunks]
        assert archive.refs(thread_id=path.stem) == refs
        assert [m for ref in refs for m in archive.read(ref, thread_id=path.stem)] == messages
        for message in messages:
            if isinstance(message, ToolMessage):
                [hit] = archive.search(thread_id=path.stem, tool_call_id=message.tool_call_id)
                assert hit.message.content == message.content and hit.message.id == message.id
                checked += 1
    assert checked > 100


def test_recall_tool_returns_a_trajectory_result_verbatim(tmp_path: Path) -> None:
    path = max(all_trajectories(), key=lambda p: p.stat().st_size)
    messages = load_trajectory(path)
    archive = JsonlArchive(tmp_path)
    archive.write(messages, thread_id="run", reason="compaction")
    tool = make_recall_tool(archive, max_chars=1500)
    config = {"configurable": {"thread_id": "run"}}
    for target in [m for m in messages if isinstance(m, ToolMessage)][:5]:
        text = read_all_pages(tool, {"tool_call_id": target.tool_call_id}, config, max_chars=1500)
        assert str(target.content) in text


# --- the recall tool -----------------------------------------------------------------------


FOOTER_START = "\n\n[page "


def read_all_pages(
    tool: Any, args: dict[str, Any], config: dict[str, Any], *, max_chars: int
) -> str:
    """Concatenate every page's body; checks each page's bound and paging line."""
    body, page = "", 1
    while True:
        out = tool.invoke({**args, "page": page}, config)
        assert len(out) <= max_chars
        if FOOTER_START not in out:
            assert page == 1
            return out
        text, footer = out.rsplit(FOOTER_START, 1)
        body += text
        if "the last" in footer:
            return body
        assert f"page={page + 1}" in footer
        page += 1


async def test_recall_tool_uses_the_thread_from_config(archive: TranscriptArchive) -> None:
    archive.write(
        [ToolMessage("secret plan A", tool_call_id="c1", id="x")], thread_id="A", reason="r"
    )
    archive.write(
        [ToolMessage("secret plan B", tool_call_id="c1", id="x")], thread_id="B", reason="r"
    )
    archive.write(
        [ToolMessage("plan default", tool_call_id="c1", id="x")], thread_id="default", reason="r"
    )
    tool = make_recall_tool(archive)
    for thread, expected in [("A", "secret plan A"), ("B", "secret plan B")]:
        config = {"configurable": {"thread_id": thread}}
        assert expected in tool.invoke({"tool_call_id": "c1"}, config)
        assert expected in await tool.ainvoke({"query": "PLAN"}, config)
    assert "secret plan B" not in tool.invoke(
        {"query": "plan"}, {"configurable": {"thread_id": "A"}}
    )
    assert "plan default" in tool.invoke(
        {"tool_call_id": "c1"}, {"configurable": {"thread_id": "default"}}
    )
    assert "No archived message" in tool.invoke(
        {"tool_call_id": "c1"}, {"configurable": {"thread_id": "C"}}
    )


def test_recall_tool_schema_has_no_thread_argument() -> None:
    tool = make_recall_tool(StoreArchive(InMemoryStore()))
    assert tool.name == "recall_archived"
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {
        "query",
        "tool_call_id",
        "message_id",
        "page",
    }
    assert "tool_call_id" in tool.description and "page" in tool.description


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_recall_tool_pages_are_bounded_and_complete(mode: str) -> None:
    archive = StoreArchive(InMemoryStore())
    big = "".join(f"line {i:05d} of the build log\n" for i in range(600))
    archive.write(
        [ToolMessage(big, tool_call_id="c-big", name="build", id="b")], thread_id="t", reason="r"
    )
    tool = make_recall_tool(archive, max_chars=1000, name="recall")
    config = {"configurable": {"thread_id": "t"}}

    async def call(page: int) -> str:
        args = {"tool_call_id": "c-big", "page": page}
        return await tool.ainvoke(args, config) if mode == "async" else tool.invoke(args, config)

    first = await call(1)
    assert len(first) <= 1000 and "call recall again with the same arguments and page=2" in first
    body, page = "", 1
    while True:
        out = await call(page)
        assert len(out) <= 1000
        text, footer = out.rsplit(FOOTER_START, 1)
        body += text
        if "the last" in footer:
            break
        page += 1
    assert big.rstrip("\n") in body and page > 20
    beyond = await call(page + 1)
    assert f"only {page} page(s)" in beyond


async def test_recall_tool_answers_clearly_when_nothing_matches() -> None:
    tool = make_recall_tool(StoreArchive(InMemoryStore()))
    config = {"configurable": {"thread_id": "t"}}
    assert "No archived message" in tool.invoke({"query": "missing words"}, config)
    assert "Pass `query`" in tool.invoke({}, config)
    assert "Pass `query`" in await tool.ainvoke({"query": "  ", "tool_call_id": ""}, config)


def test_recall_tool_from_a_tool_call_gives_a_tool_message(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    archive.write(transcript("tc", 2), thread_id="t", reason="r")
    tool = make_recall_tool(archive)
    call = {
        "name": tool.name,
        "args": {"query": "tc output 1"},
        "id": "recall-1",
        "type": "tool_call",
    }
    result = tool.invoke(call, {"configurable": {"thread_id": "t"}})
    assert isinstance(result, ToolMessage) and result.tool_call_id == "recall-1"
    assert "tc output 1 alpha" in result.content and "tool_call_id=tc-c1" in result.content
    bad = tool.invoke(
        {**call, "args": {"query": "x", "page": 0}}, {"configurable": {"thread_id": "t"}}
    )
    assert isinstance(bad, ToolMessage) and "error" in str(bad.content).lower()


def test_make_recall_tool_validates_its_options() -> None:
    archive = StoreArchive(InMemoryStore())
    for bad in [0, 499, True, "4000"]:
        with pytest.raises(ConfigError, match="max_chars"):
            make_recall_tool(archive, max_chars=bad)  # type: ignore[arg-type]
    for name in ["", "has space", "x" * 65]:
        with pytest.raises(ConfigError, match="name"):
            make_recall_tool(archive, name=name)


def test_archived_message_is_public_where_it_is_defined() -> None:
    """The hit type lives in ``archive`` itself (repr, pickling), with no ``__module__`` rewrite."""
    import pickle

    from langchain_compact import archive as archive_module

    assert ArchivedMessage.__module__ == "langchain_compact.archive"
    hit = ArchivedMessage("transcript_x", 3, HumanMessage("hi", id="m1"))
    assert pickle.loads(pickle.dumps(hit)) == hit
    assert "__module__" not in Path(archive_module.__file__).read_text(encoding="utf-8")


def test_the_default_archive_folder_is_defined_once() -> None:
    """``config`` takes ``DEFAULT_ARCHIVE_DIR`` from ``archive`` instead of repeating it."""
    import ast

    from langchain_compact import config

    tree = ast.parse(Path(config.__file__).read_text(encoding="utf-8"))
    assigned = [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    assert "DEFAULT_ARCHIVE_DIR" not in assigned
    # the default folder, unless LANGCHAIN_COMPACT_ARCHIVE_DIR moves it (conftest does)
    assert config.CompactionConfig().archive_dir == config.default_archive_dir()
    assert config.DEFAULT_ARCHIVE_DIR == ".memory"
