"""Memory that outlives a thread: the pinned task and the newest summary in a ``BaseStore``.

A thread ends (it finished, or compaction stopped it at ``max_compactions``) but what it
learned should not: with ``memory=CompactionMemory(store, namespace=("memory", "{user_id}"))``
passed to ``add_compaction`` / ``create_compacting_agent`` / ``CompactionMiddleware``, every
successful compaction also writes the pinned task and the summaries of the new history to
one item of a namespace you choose (per user or per project, never per thread). One call,
:func:`continue_from_memory`, starts a new thread from it.

On the LangGraph server the platform injects the store at run time: leave ``store=None``
and the memory uses the store of the run that calls it (:class:`RunStore`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore, Op, Result

from langchain_compact.errors import ConfigError
from langchain_compact.history import original_task_index
from langchain_compact.markers import (
    KIND_PINNED_TASK,
    KIND_SUMMARY,
    Boundary,
    kind_of,
    with_meta,
)

__all__ = [
    "AUTH_USER_KEY",
    "DEFAULT_MEMORY_KEY",
    "LOCAL_LABEL",
    "CompactionMemory",
    "MemoryRecord",
    "RunStore",
    "acontinue_from_memory",
    "acontinue_on_server",
    "continue_from_memory",
]

DEFAULT_MEMORY_KEY = "latest"
"""Key of the item a :class:`CompactionMemory` writes in its namespace."""

AUTH_USER_KEY = "langgraph_auth_user_id"
"""The ``configurable`` key where the LangGraph server puts the authenticated user's identity.
Without auth (no ``auth`` in ``langgraph.json``) it is empty and ``langgraph_auth_user`` is
``None``; with auth, ``langgraph_auth_user`` holds the user the auth handler returned."""

LOCAL_LABEL = "~local"
"""The label that stands for a missing value with ``missing="local"`` (no auth: one user).
No run can fill a placeholder with it, so it never meets a real user's namespace."""

#: Keys a memory namespace must not depend on: the memory has to outlive the thread and run.
_PER_THREAD_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "run_id"})
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

logger = logging.getLogger("langchain_compact")
_said_local: set[tuple[str, ...]] = set()


class RunStore(BaseStore):
    """A ``BaseStore`` that forwards to the store of the graph run calling it.

    For graphs deployed on the LangGraph server (``langgraph dev``, the Platform), whose
    store the platform injects at run time: ``StoreArchive(RunStore())`` archives where the
    server keeps its state. Uses ``langgraph.config.get_store()``, so it works inside nodes
    and tools (async runs need Python >= 3.11, like ``get_store`` itself).

    Example:
        >>> from langgraph.graph import START, MessagesState, StateGraph
        >>> from langgraph.store.memory import InMemoryStore
        >>> def node(state: MessagesState) -> dict:
        ...     RunStore().put(("ns",), "k", {"v": 1})
        ...     return {}
        >>> store = InMemoryStore()
        >>> _ = StateGraph(MessagesState).add_node("node", node).add_edge(START, "node")
        >>> _ = _.compile(store=store).invoke({"messages": []})
        >>> store.get(("ns",), "k").value
        {'v': 1}
    """

    @staticmethod
    def current() -> BaseStore:
        """The running graph's store.

        Raises:
            ConfigError: outside a graph run, or when the graph was compiled without a store.
        """
        from langgraph.config import get_store

        try:
            store = get_store()
        except RuntimeError:
            store = None
        if store is None:
            raise ConfigError(
                "RunStore uses the store of the running graph, and there is none here (called "
                "outside a graph run, or the graph was compiled without store=); pass a store "
                "explicitly, e.g. CompactionMemory(InMemoryStore(), ...)."
            )
        return store

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the current run's store."""
        return self.current().batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""
        return await self.current().abatch(ops)


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def _thread_id(config: RunnableConfig | None) -> str:
    return str(_configurable(config).get("thread_id") or "default")


async def _acall(store: BaseStore, method: str, *args: Any, **kwargs: Any) -> Any:
    """``store.a<method>``; a sync-only store (``SqliteStore``) runs in a worker thread."""
    try:
        return await getattr(store, f"a{method}")(*args, **kwargs)
    except NotImplementedError:
        return await asyncio.to_thread(getattr(store, method), *args, **kwargs)


class CompactionMemory:
    """The newest summary and the pinned task of a thread, kept in a store across threads.

    Args:
        store: Any LangGraph ``BaseStore`` (``InMemoryStore``, ``SqliteStore``,
            ``PostgresStore``); ``None`` uses the store of the running graph
            (:class:`RunStore`; on the LangGraph server, the server's store).
        namespace: Where the item lives. Labels may name keys of the run's ``configurable``
            in braces, filled at run time: ``("memory", "{user_id}")`` gives one memory
            per user. Do not use ``{thread_id}``: the memory must outlive the thread.
        key: The item key inside the namespace.
        missing: What a placeholder whose value the run does not give (absent, ``None`` or
            empty) becomes: ``"raise"`` (default) a :class:`ConfigError` naming the key;
            ``"local"`` the label :data:`LOCAL_LABEL`, said once in the log: one local
            namespace for a deployment without auth, where there is one user. Never a
            namespace made from the missing value itself (``('memory', 'None')``).

    With auth on the LangGraph server (the run's ``configurable`` carries the user in
    ``langgraph_auth_user`` and :data:`AUTH_USER_KEY`), ``{user_id}`` is the authenticated
    user: a run without one raises whatever ``missing`` says, and a ``configurable.user_id``
    naming another user raises, so no client reaches another user's memory by passing one.

    Raises:
        ConfigError: on an empty namespace, a non-string label, a per-thread namespace, or
            a placeholder other than a plain ``{name}`` (no ``!s``, ``:fmt``, ``.attr`` or
            ``[index]``: the check that the namespace does not depend on the thread cannot
            be passed by writing the same key another way).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> memory = CompactionMemory(InMemoryStore(), namespace=("memory", "{user_id}"))
        >>> memory.namespace_for({"configurable": {"user_id": "alice"}})
        ('memory', 'alice')
        >>> memory.get(config={"configurable": {"user_id": "alice"}}) is None
        True
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        *,
        namespace: tuple[str, ...],
        key: str = DEFAULT_MEMORY_KEY,
        missing: Literal["raise", "local"] = "raise",
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise ConfigError(f"store must be a langgraph BaseStore, got {type(store).__name__}.")
        if not isinstance(namespace, tuple) or not namespace:
            raise ConfigError(f"namespace must be a non-empty tuple of str, got {namespace!r}.")
        if not all(isinstance(label, str) and label for label in namespace):
            raise ConfigError(f"namespace labels must be non-empty str, got {namespace!r}.")
        for label in namespace:
            for name in _fields(label):
                if name in _PER_THREAD_KEYS:
                    raise ConfigError(
                        f"a memory namespace must not depend on {{{name}}}: the memory has to "
                        "outlive the thread; use a per-user or per-project label such as "
                        "'{user_id}'."
                    )
        if not isinstance(key, str) or not key:
            raise ConfigError(f"key must be a non-empty str, got {key!r}.")
        if missing not in ("raise", "local"):
            raise ConfigError(f"missing={missing!r} is not allowed: use 'raise' or 'local'.")
        self.store: BaseStore = store if store is not None else RunStore()
        self.namespace = namespace
        self.key = key
        self.missing = missing

    @property
    def advice(self) -> str:
        """The "how to continue" line of the stop message when this memory is configured."""
        return (
            "the pinned task and the latest summary are saved in the store under "
            f"{self.namespace!r}/{self.key!r}; start a new thread from them with one call: "
            "continue_from_memory(graph, memory, config={'configurable': {'thread_id': "
            "<new id>}}) (langchain_compact.memory). Or raise CompactionConfig.max_compactions "
            "or context_window. Archived originals stay available through recall_archived."
        )

    def namespace_for(self, config: RunnableConfig | None = None) -> tuple[str, ...]:
        """The namespace with ``{placeholders}`` filled from ``config["configurable"]``.

        Raises:
            ConfigError: when a placeholder has no value (with ``missing="raise"``, or with
                auth on), when ``user_id`` is not the authenticated user, or when a value
                contains ``.`` or is :data:`LOCAL_LABEL`.
        """
        configurable = _configurable(config)
        auth = bool(configurable.get(AUTH_USER_KEY)) or (
            configurable.get("langgraph_auth_user") is not None
        )
        labels = []
        for label in self.namespace:
            values: dict[str, str] = {}
            for name in _fields(label):
                value = _value(configurable, name, auth)
                if value is None:
                    break
                values[name] = value
            else:
                filled = label.format_map(values)
                if not filled or "." in filled:
                    raise ConfigError(
                        f"memory namespace label {label!r} became {filled!r}; labels must be "
                        "non-empty and contain no '.'."
                    )
                labels.append(filled)
                continue
            labels.append(self._local(label, name, auth))
        return tuple(labels)

    def _local(self, label: str, name: str, auth: bool) -> str:
        """The label for a placeholder the run gives no value for, or the error."""
        if auth:
            raise ConfigError(
                f"memory namespace label {label!r} needs {name!r}, and this server has auth "
                f"on but the run has no authenticated user ({AUTH_USER_KEY} is empty): make "
                "the auth handler (langgraph.json 'auth') return an identity for every "
                "request, or pass it in config={'configurable': {...}}."
            )
        if self.missing != "local":
            raise ConfigError(
                f"memory namespace label {label!r} needs {name!r} in the run's configurable; "
                "pass it in config={'configurable': {...}}, or build the memory with "
                "missing='local' for one local namespace (a deployment without auth)."
            )
        key = (*self.namespace, name)
        if key not in _said_local:
            _said_local.add(key)
            logger.warning(
                "memory namespace label %r: the run gives no %r, so the memory goes to the "
                "local namespace label %r (missing='local'; one namespace for every run "
                "without it). Pass configurable.%s to keep users apart.",
                label,
                name,
                LOCAL_LABEL,
                name,
            )
        return LOCAL_LABEL

    # ------------------------------------------------------------------ put / get

    def put(self, record: MemoryRecord, *, config: RunnableConfig | None = None) -> None:
        """Write ``record`` (replacing the previous one)."""
        self.store.put(self.namespace_for(config), self.key, record.to_value(), index=False)

    async def aput(self, record: MemoryRecord, *, config: RunnableConfig | None = None) -> None:
        """Async :meth:`put`."""
        value = record.to_value()
        await _acall(self.store, "put", self.namespace_for(config), self.key, value, index=False)

    def get(self, *, config: RunnableConfig | None = None) -> MemoryRecord | None:
        """The newest record, or ``None`` when nothing was written yet."""
        item = self.store.get(self.namespace_for(config), self.key)
        return MemoryRecord.from_value(item.value) if item is not None else None

    async def aget(self, *, config: RunnableConfig | None = None) -> MemoryRecord | None:
        """Async :meth:`get`."""
        item = await _acall(self.store, "get", self.namespace_for(config), self.key)
        return MemoryRecord.from_value(item.value) if item is not None else None

    # ------------------------------------------------------------------ from the graph

    def remember(self, messages: Sequence[BaseMessage], *, config: RunnableConfig) -> MemoryRecord:
        """Write the pinned task and summaries of a compacted history; the compaction node
        calls this after each successful compaction."""
        record = MemoryRecord.from_messages(messages, thread_id=_thread_id(config))
        self.put(record, config=config)
        return record

    async def aremember(
        self, messages: Sequence[BaseMessage], *, config: RunnableConfig
    ) -> MemoryRecord:
        """Async :meth:`remember`."""
        record = MemoryRecord.from_messages(messages, thread_id=_thread_id(config))
        await self.aput(record, config=config)
        return record

    def with_store(self, store: BaseStore) -> CompactionMemory:
        """A copy over ``store`` (same namespace, key and ``missing``)."""
        return CompactionMemory(store, namespace=self.namespace, key=self.key, missing=self.missing)


def _fields(label: str) -> list[str]:
    """The placeholder names of ``label``; only plain ``{name}`` placeholders are allowed."""
    try:
        parsed = list(string.Formatter().parse(label))
    except ValueError as exc:
        raise ConfigError(
            f"memory namespace label {label!r} is not a valid template: {exc}."
        ) from None
    names = []
    for _text, name, spec, conversion in parsed:
        if name is None:
            continue
        if not _FIELD.match(name) or spec or conversion:
            raise ConfigError(
                f"memory namespace label {label!r}: placeholders must be a plain {{name}} of "
                "the run's configurable (no conversion, format spec, attribute or index)."
            )
        names.append(name)
    return names


def _value(configurable: Mapping[str, Any], name: str, auth: bool) -> str | None:
    """The value of placeholder ``name`` for this run (``None``: the run gives none).

    With auth on, ``user_id`` is the authenticated user; a different ``user_id`` in the
    configurable is refused (a client must not name another user's namespace)."""
    raw = configurable.get(name)
    if auth and name == "user_id":
        user = configurable.get(AUTH_USER_KEY)
        if raw not in (None, "") and user not in (None, "") and str(raw) != str(user):
            raise ConfigError(
                f"configurable.user_id={raw!r} is not the authenticated user {user!r}; with "
                "auth on, the memory namespace's {user_id} is the authenticated user."
            )
        raw = user
    if raw is None or raw == "":
        return None
    value = str(raw)
    if value == LOCAL_LABEL:
        raise ConfigError(f"{name}={value!r} is reserved for the local namespace; use another.")
    return value


class _Graph(Protocol):
    store: BaseStore | None

    def invoke(self, input: Any, config: RunnableConfig | None = None, /) -> Any: ...

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, /) -> Any: ...


def _start(
    graph: _Graph, memory: CompactionMemory, config: RunnableConfig
) -> tuple[CompactionMemory, str]:
    new_thread = _configurable(config).get("thread_id")
    if not new_thread:
        raise ConfigError(
            "continue_from_memory needs the new thread's id: "
            "config={'configurable': {'thread_id': '<new id>', ...}}."
        )
    if isinstance(memory.store, RunStore):
        if graph.store is None:
            raise ConfigError(
                "the memory uses the run's store (store=None) but the graph has none; compile "
                "it with store= or pass CompactionMemory(store, ...)."
            )
        memory = memory.with_store(graph.store)
    return memory, str(new_thread)


def _input(
    record: MemoryRecord | None,
    memory: CompactionMemory,
    config: RunnableConfig,
    new_thread: str,
    messages_key: str,
) -> dict[str, Any]:
    if record is None:
        raise ConfigError(
            f"no memory under {memory.namespace_for(config)!r}/{memory.key!r}: a thread writes "
            "it at its first compaction (with memory= passed to the graph)."
        )
    if record.thread_id == new_thread:
        raise ConfigError(
            f"thread {new_thread!r} wrote this memory; continue in a NEW thread: pass another "
            "thread_id in config['configurable']."
        )
    return {messages_key: record.seed_messages()}


def continue_from_memory(
    graph: _Graph,
    memory: CompactionMemory,
    *,
    config: RunnableConfig,
    messages_key: str = "messages",
) -> Any:
    """Start a new thread from the memory: invoke ``graph`` with the pinned task and summary.

    Args:
        graph: The compiled graph (the one that wrote the memory, or any with the same state).
        memory: Where the memory is (a memory over the run's store uses ``graph.store``).
        config: The new run's config; ``configurable.thread_id`` must name a new thread, and
            the keys the namespace needs (e.g. ``user_id``) must be there.
        messages_key: State key of the messages.

    Returns:
        The graph's output for the new thread.

    Raises:
        ConfigError: no memory yet, no new thread id, or the memory's own thread.
    """
    memory, new_thread = _start(graph, memory, config)
    record = memory.get(config=config)
    return graph.invoke(_input(record, memory, config, new_thread, messages_key), config)


async def acontinue_from_memory(
    graph: _Graph,
    memory: CompactionMemory,
    *,
    config: RunnableConfig,
    messages_key: str = "messages",
) -> Any:
    """Async :func:`continue_from_memory`."""
    memory, new_thread = _start(graph, memory, config)
    record = await memory.aget(config=config)
    return await graph.ainvoke(_input(record, memory, config, new_thread, messages_key), config)


async def acontinue_on_server(
    client: Any,
    assistant_id: str,
    *,
    namespace: Sequence[str],
    key: str = DEFAULT_MEMORY_KEY,
    config: Mapping[str, Any] | None = None,
) -> tuple[str, Any]:
    """Start a new thread on a LangGraph server from the memory in the server's store.

    Reads the item with ``client.store.get_item``, creates a thread and waits for the run of
    ``assistant_id`` on the seed messages (``client.runs.wait``).

    Args:
        client: A ``langgraph_sdk`` async client (``get_client(url=...)``).
        assistant_id: The graph (or assistant) to run.
        namespace: The memory's namespace with its placeholders filled (``("memory", "alice")``).
        key: The item key.
        config: The run's config (``configurable`` keys your graph needs).

    Returns:
        ``(thread_id, output)`` of the new thread.

    Raises:
        ConfigError: when the server holds no memory there.
    """
    try:
        item = await client.store.get_item(list(namespace), key)
    except Exception as exc:  # langgraph_sdk raises httpx.HTTPStatusError for a missing item
        if getattr(getattr(exc, "response", None), "status_code", None) != 404:
            raise
        item = None
    if not item:
        raise ConfigError(
            f"no memory under {tuple(namespace)!r}/{key!r} on the server: a thread writes it "
            "at its first compaction (with memory= passed to the graph)."
        )
    seed = MemoryRecord.from_value(item["value"]).seed_messages()
    thread = await client.threads.create()
    output = await client.runs.wait(
        thread["thread_id"], assistant_id, input={"messages": seed}, config=dict(config or {})
    )
    return str(thread["thread_id"]), output


# ------------------------------------------------------------------ the record

_MEMORY_HEADER = (
    "[Memory from an earlier thread ({thread_id}), which compacted its context {count} time(s)"
    " and then ended. The original task is pinned above; what that thread did is summarised"
    " below (its archived originals stay in that thread). Continue the task from here.]\n\n"
)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """What a thread leaves behind: its pinned task and its summaries, as JSON-ready dicts."""

    task: dict[str, Any]
    """The pinned original task (``message_to_dict`` form)."""
    summaries: list[dict[str, Any]]
    """The summaries of the compacted history, oldest first (``message_to_dict`` form)."""
    thread_id: str
    """The thread that wrote it."""
    compaction_count: int
    """Index of the newest summary in that thread."""
    updated_at: str
    """UTC time of the write (ISO 8601)."""

    def to_value(self) -> dict[str, Any]:
        """The store item's value."""
        return {
            "task": self.task,
            "summaries": self.summaries,
            "thread_id": self.thread_id,
            "compaction_count": self.compaction_count,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> MemoryRecord:
        """Read a store item's value (e.g. from ``langgraph_sdk``'s ``client.store.get_item``).

        Raises:
            ConfigError: when ``value`` is not a memory record.
        """
        try:
            return cls(
                task=dict(value["task"]),
                summaries=[dict(s) for s in value["summaries"]],
                thread_id=str(value["thread_id"]),
                compaction_count=int(value["compaction_count"]),
                updated_at=str(value["updated_at"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"not a compaction memory record ({exc!r}); read the item a CompactionMemory "
                "wrote (keys task, summaries, thread_id, compaction_count, updated_at)."
            ) from None

    @classmethod
    def from_messages(cls, messages: Sequence[BaseMessage], *, thread_id: str) -> MemoryRecord:
        """Build the record from a compacted history.

        Raises:
            ConfigError: when the history has no task or no summary.
        """
        summaries = [m for m in messages if kind_of(m) == KIND_SUMMARY]
        pinned = [m for m in messages if kind_of(m) == KIND_PINNED_TASK]
        task_i = original_task_index(messages)
        task = pinned[0] if pinned else (messages[task_i] if task_i >= 0 else None)
        if task is None or not summaries:
            raise ConfigError(
                "memory is written from a compacted history (a pinned task and a summary); "
                "this one has " + ("no summary" if task is not None else "no task") + "."
            )
        if kind_of(task) != KIND_PINNED_TASK:
            task = with_meta(task, kind=KIND_PINNED_TASK)
        return cls(
            task=message_to_dict(task),
            summaries=[message_to_dict(m) for m in summaries],
            thread_id=thread_id,
            compaction_count=_index(summaries),
            updated_at=datetime.now(timezone.utc).isoformat(),
        )

    def seed_messages(self) -> list[BaseMessage]:
        """The first messages of a new thread: the pinned task, then one memory summary.

        The summary is a boundary marker numbered 0, so the new thread starts with its own
        compaction count at 0 and never summarises the memory away (it stays in the head).

        Example:
            >>> from langchain_core.messages import AIMessage
            >>> from langchain_compact import CompactionConfig
            >>> from langchain_compact.compaction import compact_history
            >>> history = [HumanMessage("Task: count to 9", id="t")]
            >>> history += [AIMessage(f"{i}", id=f"a{i}") for i in range(1, 9)]
            >>> done = compact_history(history, config=CompactionConfig(keep_last_n=2))
            >>> seed = MemoryRecord.from_messages(done.messages, thread_id="t1").seed_messages()
            >>> [m.text[:16] for m in seed]
            ['Task: count to 9', '[Memory from an ']
        """
        task, *summaries = messages_from_dict([self.task, *self.summaries])
        header = _MEMORY_HEADER.format(thread_id=self.thread_id, count=self.compaction_count)
        body = header + "\n\n".join(str(s.text) for s in summaries)
        cls = (
            SystemMessage if all(isinstance(s, SystemMessage) for s in summaries) else HumanMessage
        )
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        memory = with_meta(
            cls(body, id=f"lc-compact-memory-{digest}"),
            kind=KIND_SUMMARY,
            index=0,
            kept_ids=[],
            refill_streak=0,
            memory_from=self.thread_id,
            memory_compactions=self.compaction_count,
        )
        return [task, memory]


def _index(summaries: Sequence[BaseMessage]) -> int:
    """The compaction count the newest of ``summaries`` records (their number if none)."""
    index = Boundary.of(summaries[-1]).index
    return len(summaries) if index is None else index
