"""Archive robustness: bad record files, concurrent identical writes, recall without a
thread, planted symbolic links, whole-word recall ranking and bounded record caches."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _scenarios import ScriptedChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_compact import (
    CompactionConfig,
    ExtractiveSummarizer,
    _archive_files,
    _archive_records,
)
from langchain_compact.archive import (
    ArchiveError,
    ArchiveWarning,
    JsonlArchive,
    StoreArchive,
    make_recall_tool,
)
from langchain_compact.errors import ConfigError, CorruptRecordError
from langchain_compact.graph import create_compacting_agent

REPO_ROOT = Path(__file__).resolve().parents[2]
BAD_REF = "transcript_20200101T000000000000Z_00000000000000aa"
CONFIG = {"configurable": {"thread_id": "t"}}


def folder_of(archive: JsonlArchive, thread_id: str = "t") -> Path:
    return archive.directory / _archive_records.thread_key(thread_id)


def records(thread: str, n: int) -> list[BaseMessage]:
    return [
        ToolMessage(f"{thread} result {i} alpha", tool_call_id=f"{thread}-c{i}", id=f"{thread}-{i}")
        for i in range(n)
    ]


# --- one bad record file --------------------------------------------------------------------

BAD_FILES = {
    "empty": b"",
    "blank lines": b"\n\n",
    "not json": b"this is not json\n",
    "truncated": b'{"ref": "' + BAD_REF.encode() + b'", "count": 2}\n{"type": "tool", "da',
    "header only, count says 2": b'{"ref": "' + BAD_REF.encode() + b'", "count": 2}\n',
    "not a header": b"[1, 2, 3]\n",
    "not utf-8": b"\xff\xfe\xfa\n",
}


@pytest.fixture
def archive_with_bad_file(request: pytest.FixtureRequest, tmp_path: Path) -> JsonlArchive:
    archive = JsonlArchive(tmp_path / "memory")
    archive.write(records("t", 2), thread_id="t", reason="r")
    (folder_of(archive) / f"{BAD_REF}.jsonl").write_bytes(request.param)
    return archive


@pytest.mark.parametrize("archive_with_bad_file", BAD_FILES.values(), ids=BAD_FILES, indirect=True)
async def test_a_bad_record_file_is_skipped_with_a_warning(
    archive_with_bad_file: JsonlArchive,
) -> None:
    archive = archive_with_bad_file
    with pytest.warns(ArchiveWarning, match=BAD_REF):
        hits = archive.search(thread_id="t", query="alpha")
    assert sorted(h.message.id for h in hits) == ["t-0", "t-1"]
    with pytest.warns(ArchiveWarning, match="Skipped"):
        hits = await archive.asearch(thread_id="t", tool_call_id="t-c1")
    assert [h.message.content for h in hits] == ["t result 1 alpha"]
    tool = make_recall_tool(archive)
    with pytest.warns(ArchiveWarning):
        assert "t result 0 alpha" in tool.invoke({"tool_call_id": "t-c0"}, CONFIG)
    # Asking for the bad record itself is a clear error naming the file.
    with pytest.raises(ArchiveError, match="not a valid record") as info:
        archive.read(BAD_REF, thread_id="t")
    assert BAD_REF in str(info.value)


def test_a_record_of_another_thread_is_skipped_with_a_warning(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    ref = archive.write(records("u", 1), thread_id="u", reason="r")
    archive.write(records("t", 1), thread_id="t", reason="r")
    copied = folder_of(archive) / f"{ref}.jsonl"
    copied.write_bytes((folder_of(archive, "u") / f"{ref}.jsonl").read_bytes())
    with pytest.warns(ArchiveWarning, match="does not belong to thread 't'"):
        hits = archive.search(thread_id="t", query="result")
    assert [h.message.id for h in hits] == ["t-0"]


def test_graph_run_recalls_past_a_bad_record_file(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    archive.write(
        [ToolMessage("the deploy key is K-42", tool_call_id="old-1", id="o1")],
        thread_id="t",
        reason="r",
    )
    (folder_of(archive) / f"{BAD_REF}.jsonl").write_bytes(b"")
    model = ScriptedChatModel(
        replies=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "recall_archived", "args": {"query": "deploy key"}, "id": "r"}
                ],
            ),
            AIMessage("done"),
        ]
    )
    agent = create_compacting_agent(
        model,
        [],
        config=CompactionConfig(context_window=100_000),
        archive=archive,
        summarizer=ExtractiveSummarizer(),
    )
    with pytest.warns(ArchiveWarning):
        out = agent.invoke({"messages": [HumanMessage("what was the key?")]}, CONFIG)
    recalled = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(recalled) == 1 and "K-42" in str(recalled[0].content)


def test_a_corrupt_file_with_the_same_content_hash_does_not_swallow_a_write(
    tmp_path: Path,
) -> None:
    archive = JsonlArchive(tmp_path)
    messages = records("t", 2)
    short = _archive_records.serialise(messages).digest[:16]
    folder_of(archive).mkdir(parents=True)
    (folder_of(archive) / f"transcript_20200101T000000000000Z_{short}.jsonl").write_bytes(b"")
    with pytest.warns(ArchiveWarning):
        ref = archive.write(messages, thread_id="t", reason="r")
    assert archive.read(ref, thread_id="t") == messages
    # Nor does a copy of another thread's record with the same content.
    other = archive.write(messages, thread_id="u", reason="r")
    copy = folder_of(archive, "v") / f"{other}.jsonl"
    copy.parent.mkdir()
    copy.write_bytes((folder_of(archive, "u") / f"{other}.jsonl").read_bytes())
    ref = archive.write(messages, thread_id="v", reason="r")
    assert ref != other and archive.read(ref, thread_id="v") == messages


# --- concurrent identical writes ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "store"])
def test_concurrent_identical_writes_from_threads_leave_one_record(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_fsync = os.fsync

    def fsync(fd: int) -> None:  # a slow disk: every writer is inside its write at once
        time.sleep(0.05)
        slow_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    archive = JsonlArchive(tmp_path) if kind == "jsonl" else StoreArchive(InMemoryStore())
    messages = records("t", 3)
    barrier = threading.Barrier(20)
    refs: list[str] = []
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            barrier.wait()
            refs.append(archive.write(messages, thread_id="t", reason="r"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(archive.refs(thread_id="t")) == 1
    assert all(archive.read(ref, thread_id="t") == messages for ref in refs)
    if kind == "jsonl":
        assert len(set(refs)) == 1
        assert record_names(folder_of(archive)) == [f"{refs[0]}.jsonl"]


def test_concurrent_identical_writes_from_processes_leave_one_record(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = textwrap.dedent(
        f"""
        import os, time
        from langchain_core.messages import ToolMessage
        from langchain_compact.archive import JsonlArchive

        slow_fsync = os.fsync
        def fsync(fd):  # a slow disk: every writer is inside its write at the same time
            time.sleep(0.3)
            slow_fsync(fd)
        os.fsync = fsync

        archive = JsonlArchive({str(tmp_path / "memory")!r})
        messages = [ToolMessage(f"t result {{i}}", tool_call_id=f"t-c{{i}}") for i in range(3)]
        print("ready", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
        print(archive.write(messages, thread_id="t", reason="r"), flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
        for _ in range(4)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        go.touch()
        outputs = [proc.communicate(timeout=120)[0].decode().strip() for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(proc.returncode == 0 for proc in procs)
    archive = JsonlArchive(tmp_path / "memory")
    assert len(set(outputs)) == 1 and archive.refs(thread_id="t") == outputs[:1]
    assert record_names(folder_of(archive)) == [f"{outputs[0]}.jsonl"]


def record_names(folder: Path) -> list[str]:
    """Every file in ``folder`` but the records' content-addressed slots (hard links to the
    record files): one name per record, and no temp file left behind."""
    names = sorted(p.name for p in folder.iterdir())
    slots = [n for n in names if n.startswith(".sha256-")]
    records = [n for n in names if not n.startswith(".sha256-")]
    assert len(slots) == len(records), names
    return records


def test_a_write_finishes_the_publication_of_a_writer_that_died(tmp_path: Path) -> None:
    """A writer killed after creating the content-addressed slot, before linking the ref
    name: the next identical write publishes that record instead of adding a second one."""
    archive = JsonlArchive(tmp_path)
    messages = records("t", 2)
    ref = archive.write(messages, thread_id="t", reason="first")
    os.unlink(folder_of(archive) / f"{ref}.jsonl")  # as if the writer died between the links
    assert archive.refs(thread_id="t") == []
    assert archive.write(messages, thread_id="t", reason="again") == ref
    assert archive.refs(thread_id="t") == [ref]
    assert archive.read(ref, thread_id="t") == messages


def test_a_record_written_before_slots_is_adopted_not_duplicated(tmp_path: Path) -> None:
    """Archives written by earlier versions have no slot: the oldest record of the same
    messages becomes the slot, so a resumed write returns its ref."""
    archive = JsonlArchive(tmp_path)
    messages = records("t", 2)
    ref = archive.write(messages, thread_id="t", reason="first")
    digest = _archive_records.serialise(messages).digest
    os.unlink(folder_of(archive) / f".sha256-{digest}")
    assert archive.write(messages, thread_id="t", reason="again") == ref
    assert record_names(folder_of(archive)) == [f"{ref}.jsonl"]


def test_a_damaged_slot_file_does_not_block_writes(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    messages = records("t", 2)
    digest = _archive_records.serialise(messages).digest
    folder_of(archive).mkdir(parents=True)
    (folder_of(archive) / f".sha256-{digest}").write_bytes(b"junk")
    with pytest.warns(ArchiveWarning, match="does not hold the record"):
        ref = archive.write(messages, thread_id="t", reason="r")
        assert archive.write(messages, thread_id="t", reason="again") == ref
    assert archive.read(ref, thread_id="t") == messages
    names = sorted(p.name for p in folder_of(archive).iterdir())
    assert names == [f".sha256-{digest}", f".sha256-{digest}.1", f"{ref}.jsonl"]


def test_a_slot_holding_other_messages_is_never_returned(tmp_path: Path) -> None:
    """A content-addressed name holding other messages (damage, or a planted file) is
    skipped: the ref returned always reads the messages written."""
    archive = JsonlArchive(tmp_path)
    other = archive.write(records("o", 1), thread_id="t", reason="r")
    messages = records("t", 2)
    digest = _archive_records.serialise(messages).digest
    os.link(folder_of(archive) / f"{other}.jsonl", folder_of(archive) / f".sha256-{digest}")
    with pytest.warns(ArchiveWarning, match="another content hash"):
        ref = archive.write(messages, thread_id="t", reason="r")
    assert ref != other and archive.read(ref, thread_id="t") == messages


def test_store_writes_agree_on_one_item_and_every_ref_reads() -> None:
    """Concurrent store writers of the same messages put under one key (the content hash):
    whichever put lands last, each ref any of them got reads the same messages."""
    archive = StoreArchive(InMemoryStore())
    messages = records("t", 2)
    first = archive.write(messages, thread_id="t", reason="r")
    key, value = archive._prepare(messages, "t", "late", None)
    archive.store.put(archive._ns("t"), key, value)  # a racing writer's put lands last
    assert value["ref"] != first and archive.refs(thread_id="t") == [value["ref"]]
    assert archive.read(first, thread_id="t") == archive.read(value["ref"], thread_id="t")
    assert archive.write(messages, thread_id="t", reason="again") == value["ref"]


def test_a_store_item_holding_other_messages_is_reported() -> None:
    archive = StoreArchive(InMemoryStore())
    messages = records("t", 2)
    key, value = archive._prepare(messages, "t", "r", None)
    archive.store.put(archive._ns("t"), key, {**value, "messages": value["messages"][:1]})
    with pytest.raises(CorruptRecordError, match="other messages"):
        archive.write(messages, thread_id="t", reason="r")


# --- recall needs a thread ------------------------------------------------------------------


async def test_recall_without_a_thread_id_refuses_clearly() -> None:
    archive = StoreArchive(InMemoryStore())
    archive.write(records("default", 1), thread_id="default", reason="r")
    tool = make_recall_tool(archive)
    for config in (None, {}, {"configurable": {}}, {"configurable": {"thread_id": ""}}):
        with pytest.raises(ConfigError, match="thread_id") as info:
            tool.invoke({"query": "alpha"}, config)
        assert "configurable" in str(info.value)
        with pytest.raises(ConfigError, match="thread_id"):
            await tool.ainvoke({"query": "alpha"}, config)
    explicit = {"configurable": {"thread_id": "default"}}
    assert "default result 0 alpha" in tool.invoke({"query": "alpha"}, explicit)


def test_recall_in_a_graph_run_without_a_thread_reads_where_the_graph_archived() -> None:
    """A graph without checkpointer has no thread id: its compaction nodes archive under
    "default", and its recall tool (given the run's config) reads there."""
    archive = StoreArchive(InMemoryStore())
    archive.write(
        [ToolMessage("the deploy key is K-42", tool_call_id="old-1", id="o1")],
        thread_id="default",
        reason="r",
    )
    model = ScriptedChatModel(
        replies=[
            AIMessage(
                "",
                tool_calls=[{"name": "recall_archived", "args": {"query": "deploy"}, "id": "r"}],
            ),
            AIMessage("done"),
        ]
    )
    agent = create_compacting_agent(
        model,
        [],
        config=CompactionConfig(context_window=100_000),
        archive=archive,
        summarizer=ExtractiveSummarizer(),
    )
    out = agent.invoke({"messages": [HumanMessage("what was the key?")]})
    [recalled] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "K-42" in str(recalled.content)


# --- planted symbolic links -----------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX links")
def test_a_symlinked_thread_folder_is_refused_and_never_chmodded(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path / "memory")
    archive.write(records("other", 1), thread_id="other", reason="r")  # creates the root
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    os.chmod(target, 0o755)
    os.symlink(target, folder_of(archive))
    with pytest.raises(ArchiveError, match="symbolic link") as info:
        archive.write(records("t", 1), thread_id="t", reason="r")
    assert str(folder_of(archive)) in str(info.value)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755
    assert list(target.iterdir()) == []
    for call in (
        lambda: archive.refs(thread_id="t"),
        lambda: archive.search(thread_id="t", query="x"),
        lambda: archive.read(BAD_REF, thread_id="t"),
    ):
        with pytest.raises(ArchiveError, match="symbolic link"):
            call()


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX links")
def test_a_symlinked_record_file_is_refused(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path / "memory")
    ref = archive.write(records("t", 1), thread_id="t", reason="r")
    real = tmp_path / "real.jsonl"
    os.rename(folder_of(archive) / f"{ref}.jsonl", real)
    os.symlink(real, folder_of(archive) / f"{ref}.jsonl")
    with pytest.raises(ArchiveError, match="symbolic link"):
        archive.read(ref, thread_id="t")
    with pytest.raises(ArchiveError, match="symbolic link"):
        archive.search(thread_id="t", query="alpha")
    with pytest.raises(ArchiveError, match="symbolic link"):
        archive.write(records("t", 1), thread_id="t", reason="r")  # same content hash


# --- recall ranking -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "store"])
def test_whole_word_matches_rank_before_substring_matches(kind: str, tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path) if kind == "jsonl" else StoreArchive(InMemoryStore())
    archive.write([HumanMessage("finished step1 ok", id="exact")], thread_id="t", reason="r")
    archive.write(
        [
            HumanMessage("step11 step11 step11 step11 failed", id="eleven"),
            HumanMessage("step10 and step12 then step13", id="tens"),
        ],
        thread_id="t",
        reason="r",
    )
    hits = archive.search(thread_id="t", query="step1")
    # Exact first; then by occurrences (4 "step1" substrings, then 3).
    assert [h.message.id for h in hits] == ["exact", "eleven", "tens"]
    # Two words: the message with both as whole words wins over substring-only matches.
    archive.write(
        [HumanMessage("Step1 of build: ERRORS everywhere", id="sub"), HumanMessage("x", id="y")],
        thread_id="t",
        reason="r",
    )
    archive.write([HumanMessage("step1 error (build)", id="both")], thread_id="t", reason="r")
    hits = archive.search(thread_id="t", query="STEP1 error")
    assert [h.message.id for h in hits] == ["both", "sub"]


# --- bounded record caches ------------------------------------------------------------------


def test_parsed_record_files_are_cached_within_a_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _archive_files.read_jsonl._cache
    monkeypatch.setattr(cache, "max_bytes", 3 << 20)
    _archive_files.read_jsonl.cache_clear()
    archive = JsonlArchive(tmp_path)
    for i in range(8):
        archive.write(
            [HumanMessage(f"big {i} " + "y" * 500_000, id=f"b{i}")], thread_id="t", reason="r"
        )
    assert len(archive.search(thread_id="t", query="big", limit=10)) == 8
    assert 0 < cache._bytes <= 3 << 20 and len(cache._items) < 8
    _archive_files.read_jsonl.cache_clear()


def test_reading_a_record_by_ref_does_not_fill_the_search_cache(tmp_path: Path) -> None:
    _archive_files.read_jsonl.cache_clear()
    archive = JsonlArchive(tmp_path)
    refs = [
        archive.write(
            [HumanMessage(f"r{i} " + "y" * 50_000, id=f"r{i}")], thread_id="t", reason="r"
        )
        for i in range(5)
    ]
    assert [archive.read(ref, thread_id="t")[0].id for ref in refs] == [f"r{i}" for i in range(5)]
    assert _archive_files.read_jsonl.cached_bytes == 0
    assert len(archive.search(thread_id="t", query="r3")) == 1  # a search keeps what it read
    assert _archive_files.read_jsonl.cached_bytes > 0
    assert archive.read(refs[3], thread_id="t")[0].id == "r3"
    assert _archive_files.read_jsonl.cached_bytes <= _archive_files.READ_CACHE_BYTES
    _archive_files.read_jsonl.cache_clear()


def test_store_record_cache_is_bounded_by_bytes() -> None:
    cache = _archive_records.RecordCache(maxsize=100, max_bytes=2 << 20)
    big: list[dict[str, Any]] = [{"type": "human", "data": {"content": "z" * 400_000}}]
    for i in range(10):
        cache.get(("ns",), f"ref{i}", big)
    assert cache._cache._bytes <= 2 << 20 and len(cache._cache._items) == 2


def test_a_disk_full_error_names_the_archive_folder_not_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from langchain_core.messages import ToolMessage

    from langchain_compact.archive import ArchiveError, JsonlArchive

    archive = JsonlArchive(tmp_path / "memory")

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # no file name, like fsync

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ArchiveError) as info:
        archive.write([ToolMessage("42", tool_call_id="c1")], thread_id="t", reason="r")
    assert "(None)" not in str(info.value) and str(tmp_path / "memory") in str(info.value)


# --- the race harness (bench/archive_race.py; 10,000 trials there) --------------------------


def test_race_harness_finds_no_duplicate_and_no_unreadable_ref() -> None:
    """A few hundred trials of 16 writers (threads; 4 processes x 4 threads; threads on a
    store) archiving the same messages at once, with random 0-2 ms delays at every
    filesystem and store step: one record each time, and every ref a writer got reads."""
    from bench import archive_race

    result = archive_race.run(210)
    overall = result["overall"]
    assert overall["trials"] == 210 and overall["writes"] == 210 * 16
    assert overall["duplicates"] == 0 and overall["missing"] == 0, result["examples"]
    assert overall["unreadable_refs"] == 0 and overall["errors"] == 0, result["examples"]
    assert overall["temp_files_left"] == 0
    for kind in ("threads", "processes"):  # the files: every writer got the same ref
        assert result["by_kind"][kind]["trials_with_several_refs"] == 0


def test_without_hard_links_writes_still_work_and_stay_idempotent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some network or FAT filesystems refuse hard links: the archive falls back to a plain
    atomic write, and a sequential rewrite still finds the first record."""
    import errno

    def no_links(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    archive = JsonlArchive(tmp_path)
    messages = records("t", 2)
    ref = archive.write(messages, thread_id="t", reason="r")
    assert archive.write(messages, thread_id="t", reason="again") == ref
    assert archive.refs(thread_id="t") == [ref] and archive.read(ref, thread_id="t") == messages
    assert [p.name for p in folder_of(archive).iterdir()] == [f"{ref}.jsonl"]


def test_a_staged_record_published_meanwhile_keeps_its_ref_readable(tmp_path: Path) -> None:
    """``compact`` stages records and publishes them at the end: when another writer
    archived the same messages meanwhile, the staged ref (which the new history quotes)
    still reads them."""
    from langchain_compact.cli._compact import StagedArchive

    target = JsonlArchive(tmp_path / "memory")
    stage = StagedArchive(target)
    messages = records("t", 2)
    staged = stage.write(messages, thread_id="t", reason="r")
    other = target.write(messages, thread_id="t", reason="meanwhile")
    stage.commit()
    assert staged != other
    assert target.read(staged, thread_id="t") == target.read(other, thread_id="t") == messages
    # Without a concurrent writer, a staged record is published once, under its own ref.
    stage = StagedArchive(target)
    ref = stage.write(records("u", 1), thread_id="t", reason="r")
    stage.commit()
    assert target.write(records("u", 1), thread_id="t", reason="again") == ref
