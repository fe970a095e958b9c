"""Transcript archive (B8): keep what compaction removes, and let the model recall it.

Two archives implement :class:`TranscriptArchive`: :class:`JsonlArchive` (one JSONL file per
write, by default in ``.memory/``) and :class:`StoreArchive` (any LangGraph ``BaseStore``,
so Postgres in production). :class:`DefaultArchive`, what every integration archives to when
given no ``archive=``, is the run's store when the graph has one, else those JSONL files.
Writes are idempotent: the same thread and the same messages give the same ref and no second
record, so a crash between archiving and the state update resumes without duplicates (B9).
:func:`make_recall_tool` gives the model a tool to get originals back.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage, messages_from_dict
from langgraph.store.base import BaseStore, Item

from langchain_compact import _archive_files as _f
from langchain_compact import _archive_records as _r
from langchain_compact import _recall
from langchain_compact._archive_records import Record
from langchain_compact._archive_search import hits_to_messages, search_records
from langchain_compact._defaults import (
    DEFAULT_ARCHIVE,
    DEFAULT_ARCHIVE_DIR,
    DefaultArchiveFlag,
    default_archive_dir,
)
from langchain_compact.errors import ArchiveError, ArchiveWarning, ConfigError, CorruptRecordError

if TYPE_CHECKING:  # imported when a tool is built (it pulls in langsmith)
    from langchain_core.tools import BaseTool

__all__ = [
    "DEFAULT_ARCHIVE_DIR",
    "DEFAULT_STORE_NAMESPACE",
    "ArchiveError",
    "ArchiveWarning",
    "ArchivedMessage",
    "DefaultArchive",
    "JsonlArchive",
    "StoreArchive",
    "TranscriptArchive",
    "make_recall_tool",
]

DEFAULT_STORE_NAMESPACE: tuple[str, ...] = ("langchain_compact", "archive")
DEFAULT_RECALL_MAX_CHARS = 4000
DEFAULT_RECALL_TOOL_NAME = "recall_archived"
_STORE_PAGE = 100


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    """A message found in the archive.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_compact import StoreArchive
        >>> archive = StoreArchive(InMemoryStore())
        >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
        ...                     thread_id="t", reason="compaction")
        >>> hit = archive.search(thread_id="t", tool_call_id="call_1")[0]
        >>> hit.ref == ref, hit.index, hit.message.content
        (True, 0, '42')
    """

    ref: str
    """The archive record it came from."""
    index: int
    """Its position inside that record."""
    message: BaseMessage
    """The original message, as it was written."""


@runtime_checkable
class TranscriptArchive(Protocol):
    """Where compaction stores the messages it removes; every call is scoped to a thread.

    ``write`` returns a ref and is idempotent per thread and message content; ``refs`` lists
    oldest first; ``search`` matches keywords (all must appear), or an exact ``tool_call_id``
    or message id. Implemented by :class:`JsonlArchive` and :class:`StoreArchive`.
    """

    def write(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str: ...

    async def awrite(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str: ...

    def read(self, ref: str, *, thread_id: str) -> list[BaseMessage]: ...

    async def aread(self, ref: str, *, thread_id: str) -> list[BaseMessage]: ...

    def refs(self, *, thread_id: str) -> list[str]: ...

    def search(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]: ...

    async def asearch(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]: ...


class _ArchiveBase:
    """Shared read/search logic; subclasses provide ``write``, ``_get`` and ``_load``."""

    def _get(self, ref: str, thread_id: str) -> Record:
        raise NotImplementedError

    def _load(self, thread_id: str) -> Iterable[Record]:
        """The thread's records, newest first."""
        raise NotImplementedError

    async def _aget(self, ref: str, thread_id: str) -> Record:
        return await asyncio.to_thread(self._get, ref, thread_id)

    async def _aload(self, thread_id: str) -> Iterable[Record]:
        return await asyncio.to_thread(lambda: list(self._load(thread_id)))

    def read(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        """Return the messages archived under ``ref`` for ``thread_id``.

        Example:
            >>> from langchain_core.messages import ToolMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_compact import StoreArchive
            >>> archive = StoreArchive(InMemoryStore())
            >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
            ...                     thread_id="t", reason="compaction")
            >>> [m.content for m in archive.read(ref, thread_id="t")]
            ['42']
        """
        return messages_from_dict([dict(m) for m in self._get(ref, thread_id).messages])

    async def aread(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        """Async :meth:`read`."""
        return messages_from_dict([dict(m) for m in (await self._aget(ref, thread_id)).messages])

    def refs(self, *, thread_id: str) -> list[str]:
        """Every ref archived for ``thread_id``, oldest first.

        Example:
            >>> from langchain_core.messages import ToolMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_compact import StoreArchive
            >>> archive = StoreArchive(InMemoryStore())
            >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
            ...                     thread_id="t", reason="compaction")
            >>> archive.refs(thread_id="t") == [ref], archive.refs(thread_id="other")
            (True, [])
        """
        return [record.ref for record in reversed(list(self._load(thread_id)))]

    def search(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]:
        """Find archived messages of ``thread_id``; the criteria given combine with AND.

        ``query`` keywords must all appear (case-insensitive, in content, tool name or tool
        arguments); whole-word hits rank first, then by occurrences, then newest first.
        ``tool_call_id`` finds the tool result of that call; ``message_id`` the message with
        that id. Placeholders left by micro-compaction are skipped, and a message archived
        twice is returned once: as its first archived original (originals are immutable; a
        version cut to fit the window only when no original of it matches).

        Example:
            >>> from langchain_core.messages import ToolMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_compact import StoreArchive
            >>> archive = StoreArchive(InMemoryStore())
            >>> ref = archive.write([ToolMessage("42", tool_call_id="call_1", id="t1")],
            ...                     thread_id="t", reason="compaction")
            >>> [h.message.content for h in archive.search(thread_id="t", query="42")]
            ['42']
        """
        found = search_records(
            self._load(thread_id),
            query=query,
            tool_call_id=tool_call_id,
            message_id=message_id,
            limit=limit,
            offset=offset,
        )
        return [ArchivedMessage(*hit) for hit in hits_to_messages(found)]

    async def asearch(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]:
        """Async :meth:`search`."""
        found = search_records(
            await self._aload(thread_id),
            query=query,
            tool_call_id=tool_call_id,
            message_id=message_id,
            limit=limit,
            offset=offset,
        )
        return [ArchivedMessage(*hit) for hit in hits_to_messages(found)]


class JsonlArchive(_ArchiveBase):
    """Archive to JSONL files: ``<directory>/<thread folder>/transcript_<UTC time>_<hash>.jsonl``.

    Line 1 of each file is a header (``ref``, ``thread_id``, ``reason``, ``created_at``,
    ``metadata``, ``count``), then one ``messages_to_dict`` message per line. Files are written
    atomically with mode 0600, folders get mode 0700. The thread folder is a slug of the
    thread id plus a hash of it, so no thread id leaves ``directory`` or shares another
    thread's folder; a thread folder or record file that is a symbolic link is refused
    (:class:`ArchiveError`), never followed. Identical writes from concurrent threads or
    processes leave exactly one record: each is published by an atomic create of a hidden
    content-addressed name (a hard link, ``.sha256-<hash>``) that fails if it exists. A
    record file that cannot be read (empty, not JSON, truncated) is skipped by searches with
    an :class:`ArchiveWarning`. Async methods run the same sync code in a worker thread.

    Example:
        >>> import tempfile
        >>> from langchain_core.messages import ToolMessage
        >>> archive = JsonlArchive(tempfile.mkdtemp())
        >>> ref = archive.write([ToolMessage("42", tool_call_id="c1")], thread_id="t", reason="r")
        >>> archive.search(thread_id="t", tool_call_id="c1")[0].message.content
        '42'
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        """Use ``directory`` (created on first write, mode 0700); it must not be a file.
        ``None``: :func:`~langchain_compact._defaults.default_archive_dir` (``.memory``, or
        ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``)."""
        folder = default_archive_dir() if directory is None else directory
        self.directory = Path(folder).expanduser().absolute()
        if self.directory.exists() and not self.directory.is_dir():
            raise ArchiveError(self._fix("it exists and is not a folder"))

    def _fix(self, problem: str | OSError) -> str:
        if isinstance(problem, OSError):
            problem = f"{problem.strerror or problem} ({problem.filename or self.directory})"
        return (
            f"Cannot use the transcript archive at {self.directory}: {problem}. Pass "
            "JsonlArchive(directory=...) a writable folder (created if missing) or fix its "
            "permissions."
        )

    def thread_folder(self, thread_id: str, *, create: bool = False) -> Path:
        """The folder of ``thread_id``'s records (a real folder, never a symbolic link; made
        0700 when ``create`` is set and it is written)."""
        path = self.directory / _r.thread_key(thread_id)
        try:
            if create:
                if not self.directory.exists():
                    # exist_ok: concurrent writers may race to create the folder.
                    self.directory.mkdir(parents=True, mode=0o700, exist_ok=True)
                if not self.directory.is_symlink():  # a root linked elsewhere is the user's
                    _f.secure_folder(self.directory, create=True)  # 0700, even if it was not
            _f.secure_folder(path, create=create)
        except OSError as exc:
            raise ArchiveError(self._fix(exc)) from exc
        return path

    def write(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Archive ``messages`` for ``thread_id`` and return the record's ref.

        Writing the same messages (ids and contents) again for the same thread returns the
        first ref and writes nothing; the first write's ``reason`` and ``metadata`` stay.

        Example:
            >>> import tempfile
            >>> from langchain_core.messages import HumanMessage
            >>> archive = JsonlArchive(tempfile.mkdtemp())
            >>> messages = [HumanMessage("hello", id="m1")]
            >>> ref = archive.write(messages, thread_id="t", reason="compaction")
            >>> ref.startswith("transcript_")
            True
            >>> archive.write(messages, thread_id="t", reason="again") == ref  # idempotent
            True
        """
        batch = _r.serialise(messages)
        folder = self.thread_folder(thread_id, create=True)
        try:
            with suppress(_f.NoHardLinks):
                existing = _f.existing_record(folder, batch.digest, thread_id)
                if existing is not None:
                    return existing
            ref = _r.make_ref(_r.new_timestamp()[0], batch.digest)
            header = _r.header(ref, thread_id, reason, metadata, len(batch.lines))
            # Written a piece at a time: a huge result's JSON line is the one copy of it.
            pieces = _r.record_pieces(_r.dumps(header), batch.lines)
            # Concurrent writers of the same messages agree on one record (see publish_once).
            return _f.publish_once(folder, ref, pieces, thread_id, batch.digest)
        except OSError as exc:
            raise ArchiveError(self._fix(exc)) from exc

    async def awrite(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Async :meth:`write` (the same code, run in a worker thread)."""
        return await asyncio.to_thread(
            self.write, messages, thread_id=thread_id, reason=reason, metadata=metadata
        )

    def _get(self, ref: str, thread_id: str) -> Record:
        _r.parse_ref(ref)
        # Read by ref: once per compaction, so not worth a place in the search cache.
        return self._read(str(self.thread_folder(thread_id)), ref, thread_id, keep=False)

    def _read(self, folder: str, ref: str, thread_id: str, *, keep: bool = True) -> Record:
        path = os.path.join(folder, f"{ref}.jsonl")
        try:
            info = os.lstat(path)
            header, record = _f.read_jsonl(path, info.st_size, info.st_mtime_ns, keep=keep)
        except FileNotFoundError:
            raise ArchiveError(f"No archive record {ref!r} for thread {thread_id!r}.") from None
        except OSError as exc:
            raise ArchiveError(self._fix(exc)) from exc
        if header.get("thread_id") != thread_id or header.get("ref") != ref:
            raise CorruptRecordError(
                f"The archive file {path} does not belong to thread {thread_id!r} (its header "
                f"names thread {header.get('thread_id')!r}, ref {header.get('ref')!r})."
            )
        return record

    def refs(self, *, thread_id: str) -> list[str]:
        """Every ref archived for ``thread_id``, oldest first (from the file names)."""
        try:
            names = os.listdir(self.thread_folder(thread_id))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ArchiveError(self._fix(exc)) from exc
        return sorted(n[:-6] for n in names if n.endswith(".jsonl") and _r.is_ref(n[:-6]))

    def _load(self, thread_id: str) -> Iterable[Record]:
        folder = str(self.thread_folder(thread_id))
        for ref in reversed(self.refs(thread_id=thread_id)):
            try:
                record = self._read(folder, ref, thread_id)
            except CorruptRecordError as exc:  # one bad file must not hide every other record
                warnings.warn(
                    f"{exc} Skipped; move it out of {folder} to silence this warning.",
                    ArchiveWarning,
                    stacklevel=3,
                )
                continue
            yield record


class StoreArchive(_ArchiveBase):
    """Archive to a LangGraph ``BaseStore`` (InMemoryStore, SqliteStore, PostgresStore, ...).

    Each record is one item under ``(*namespace, <thread key>)`` keyed by its content hash,
    so a thread only ever lists and reads its own namespace. Async methods use the store's
    ``aput`` / ``aget`` / ``asearch`` (a sync-only store's sync methods in a worker thread).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> StoreArchive(InMemoryStore()).refs(thread_id="t")
        []
    """

    def __init__(
        self, store: BaseStore, *, namespace: tuple[str, ...] = DEFAULT_STORE_NAMESPACE
    ) -> None:
        """Archive into ``store`` under ``namespace`` (labels non-empty, without ``.``)."""
        if not isinstance(store, BaseStore):
            raise ConfigError(f"store must be a langgraph BaseStore, got {type(store).__name__}.")
        labels_ok = all(isinstance(s, str) and s and "." not in s for s in namespace)
        if not isinstance(namespace, tuple) or not namespace or not labels_ok:
            raise ConfigError(
                "namespace must be a non-empty tuple of non-empty str labels without '.', "
                f"got {namespace!r}."
            )
        self.store = store
        self.namespace = namespace
        self._cache = _r.RecordCache()

    def _ns(self, thread_id: str) -> tuple[str, ...]:
        return (*self.namespace, _r.thread_key(thread_id))

    async def _async(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``store.a<method>``; sync-only stores (``SqliteStore``) run in a worker thread."""
        try:
            return await getattr(self.store, f"a{method}")(*args, **kwargs)
        except NotImplementedError:
            return await asyncio.to_thread(getattr(self.store, method), *args, **kwargs)

    @staticmethod
    def _prepare(
        messages: Sequence[BaseMessage],
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None,
    ) -> tuple[str, dict[str, Any]]:
        batch = _r.serialise(messages)
        ref = _r.make_ref(_r.new_timestamp()[0], batch.digest)
        value = _r.header(ref, thread_id, reason, metadata, len(batch.lines))
        return batch.digest[:16], {**value, "messages": batch.dicts}

    def _holder(self, item: Item | None, value: Mapping[str, Any], thread_id: str) -> str | None:
        """The ref of ``item`` when it holds the messages of ``value`` (the record about to
        be put under the same key).

        Every writer of the same messages puts under the same key (their content hash), so
        a concurrent put can only replace the header (ref time, reason): any ref of them
        reads the same messages. An item holding other messages under that key is damage,
        reported rather than overwritten. (Compared as JSON values, not bytes: a store may
        reorder keys or respell numbers.)
        """
        if item is None:
            return None
        if item.value.get("messages") != value["messages"]:
            raise CorruptRecordError(
                f"The archive item {item.key!r} of thread {thread_id!r} in {item.namespace!r} "
                "holds other messages than its key says; move it away."
            )
        return str(item.value["ref"])

    def _record(self, item: Item | None, ref: str, thread_id: str) -> Record:
        if item is None:  # the key is the ref's content hash, within this thread's namespace
            raise ArchiveError(f"No archive record {ref!r} for thread {thread_id!r}.")
        return self._cache.get(item.namespace, str(item.value["ref"]), item.value["messages"])

    def _newest_first(self, items: list[Item]) -> list[Record]:
        items = sorted(items, key=lambda item: str(item.value.get("ref")), reverse=True)
        return [
            self._cache.get(i.namespace, str(i.value["ref"]), i.value["messages"]) for i in items
        ]

    def write(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Archive ``messages`` for ``thread_id``; same contract as :meth:`JsonlArchive.write`.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from langgraph.store.memory import InMemoryStore
            >>> archive = StoreArchive(InMemoryStore())
            >>> messages = [HumanMessage("hello", id="m1")]
            >>> ref = archive.write(messages, thread_id="t", reason="compaction")
            >>> archive.write(messages, thread_id="t", reason="again") == ref  # idempotent
            True
        """
        key, value = self._prepare(messages, thread_id, reason, metadata)
        namespace = self._ns(thread_id)
        if (found := self._holder(self.store.get(namespace, key), value, thread_id)) is not None:
            return found
        self.store.put(namespace, key, value, index=False)
        # A concurrent writer's put may have landed last: answer with what the store holds.
        return self._holder(self.store.get(namespace, key), value, thread_id) or str(value["ref"])

    async def awrite(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Async :meth:`write`."""
        key, value = self._prepare(messages, thread_id, reason, metadata)
        namespace = self._ns(thread_id)
        found = self._holder(await self._async("get", namespace, key), value, thread_id)
        if found is not None:
            return found
        await self._async("put", namespace, key, value, index=False)
        found = self._holder(await self._async("get", namespace, key), value, thread_id)
        return found or str(value["ref"])

    def _get(self, ref: str, thread_id: str) -> Record:
        item = self.store.get(self._ns(thread_id), _r.parse_ref(ref))
        return self._record(item, ref, thread_id)

    async def _aget(self, ref: str, thread_id: str) -> Record:
        item = await self._async("get", self._ns(thread_id), _r.parse_ref(ref))
        return self._record(item, ref, thread_id)

    def _load(self, thread_id: str) -> Iterable[Record]:
        items: list[Item] = []
        while page := self.store.search(self._ns(thread_id), limit=_STORE_PAGE, offset=len(items)):
            items.extend(page)
            if len(page) < _STORE_PAGE:
                break
        return self._newest_first(items)

    async def _aload(self, thread_id: str) -> Iterable[Record]:
        items: list[Item] = []
        namespace = self._ns(thread_id)
        while page := await self._async("search", namespace, limit=_STORE_PAGE, offset=len(items)):
            items.extend(page)
            if len(page) < _STORE_PAGE:
                break
        return self._newest_first(items)


def _run_store() -> BaseStore | None:
    """The store of the LangGraph run this is called from (``compile(store=...)``, the
    server's store), or ``None``: no store, or not inside a run."""
    try:
        from langgraph.config import get_store

        store = get_store()
    except (RuntimeError, KeyError, AttributeError, TypeError):
        return None  # outside a run, an LCEL chain, or Python 3.10 in an async task
    return store if isinstance(store, BaseStore) else None


class DefaultArchive:
    """The archive every integration uses when given no ``archive=``: the run's LangGraph
    store when it has one (:class:`StoreArchive` under :data:`DEFAULT_STORE_NAMESPACE`),
    else JSONL files under ``directory`` (:class:`JsonlArchive`).

    The choice is made on each call, so the recall tool built on the same object reads where
    the compaction wrote: inside a graph compiled with a store (or on a LangGraph server),
    the store; in an LCEL chain, a graph without a store, or a plain ``Compactor``, the
    files. Pass ``archive=None`` to an integration to archive nothing.

    Example:
        >>> import tempfile
        >>> from langchain_core.messages import ToolMessage
        >>> archive = DefaultArchive(tempfile.mkdtemp())  # outside a graph run: the files
        >>> ref = archive.write([ToolMessage("42", tool_call_id="c1")], thread_id="t", reason="r")
        >>> archive.search(thread_id="t", tool_call_id="c1")[0].message.content
        '42'
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        """Files go under ``directory`` (``None``: ``.memory``, or
        ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``), created on the first write only."""
        self.files = JsonlArchive(directory)
        self._stores: tuple[BaseStore, StoreArchive] | None = None

    @property
    def directory(self) -> Path:
        """The folder of the JSONL files (used when the run has no store)."""
        return self.files.directory

    def current(self) -> JsonlArchive | StoreArchive:
        """The archive this call uses: the run's store, else the files."""
        store = _run_store()
        if store is None:
            return self.files
        held = self._stores
        if held is None or held[0] is not store:
            held = (store, StoreArchive(store))
            self._stores = held
        return held[1]

    def write(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """:meth:`TranscriptArchive.write` on :meth:`current`."""
        return self.current().write(messages, thread_id=thread_id, reason=reason, metadata=metadata)

    async def awrite(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Async twin of :meth:`write`."""
        return await self.current().awrite(
            messages, thread_id=thread_id, reason=reason, metadata=metadata
        )

    def read(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        """The messages of record ``ref``."""
        return self.current().read(ref, thread_id=thread_id)

    async def aread(self, ref: str, *, thread_id: str) -> list[BaseMessage]:
        """Async twin of :meth:`read`."""
        return await self.current().aread(ref, thread_id=thread_id)

    def refs(self, *, thread_id: str) -> list[str]:
        """The thread's record refs, oldest first."""
        return self.current().refs(thread_id=thread_id)

    def search(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]:
        """:meth:`TranscriptArchive.search` on :meth:`current`."""
        return self.current().search(
            thread_id=thread_id,
            query=query,
            tool_call_id=tool_call_id,
            message_id=message_id,
            limit=limit,
            offset=offset,
        )

    async def asearch(
        self,
        *,
        thread_id: str,
        query: str | None = None,
        tool_call_id: str | None = None,
        message_id: str | None = None,
        limit: int = 5,
        offset: int = 0,
    ) -> list[ArchivedMessage]:
        """Async twin of :meth:`search`."""
        return await self.current().asearch(
            thread_id=thread_id,
            query=query,
            tool_call_id=tool_call_id,
            message_id=message_id,
            limit=limit,
            offset=offset,
        )


def resolve_archive(
    archive: TranscriptArchive | DefaultArchiveFlag | None, directory: str | None = None
) -> TranscriptArchive | None:
    """An integration's ``archive=`` as an archive: ``"default"`` (the default) is a
    :class:`DefaultArchive` over ``directory``; ``None`` (off) and an archive stay as they are.

    Raises:
        ConfigError: a string other than ``"default"``.
    """
    if isinstance(archive, str):
        if archive != DEFAULT_ARCHIVE:
            raise ConfigError(
                f"archive={archive!r} is not allowed: pass an archive (JsonlArchive, "
                "StoreArchive), 'default' (the run's store, else JSONL files) or None (off)."
            )
        return DefaultArchive(directory)
    return archive


def make_recall_tool(
    archive: TranscriptArchive,
    *,
    max_chars: int = DEFAULT_RECALL_MAX_CHARS,
    name: str = DEFAULT_RECALL_TOOL_NAME,
) -> BaseTool:
    """Build the tool an agent calls to get archived originals back.

    The model passes ``query`` (keywords) or ``tool_call_id``, and ``page``. The thread id is
    read from the tool's injected ``RunnableConfig`` (``config["configurable"]["thread_id"]``),
    never from the model, so a thread only sees its own archive. Inside a LangGraph run
    without a thread id it reads ``"default"``, where the graph's compaction nodes archive
    then; called outside a graph without a thread id it raises :class:`ConfigError` rather
    than guess. Each page is at most ``max_chars`` characters and says how to get the next
    one.

    Args:
        archive: Where compaction archived the messages.
        max_chars: Longest output of one call (at least 500).
        name: The tool name the model sees (letters, digits, ``_``, ``-``; up to 64).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> tool = make_recall_tool(StoreArchive(InMemoryStore()))
        >>> tool.invoke({"tool_call_id": "call_1"}, {"configurable": {"thread_id": "t"}})[:30]
        'No archived message in this co'
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 500:
        raise ConfigError(f"max_chars must be an int >= 500, got {max_chars!r}.")
    if not isinstance(name, str) or not _recall.TOOL_NAME_RE.fullmatch(name):
        raise ConfigError(f"name must match {_recall.TOOL_NAME_RE.pattern}, got {name!r}.")
    return _recall.build_recall_tool(archive, name=name, max_chars=max_chars)
