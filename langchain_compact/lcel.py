"""`compact_messages`: compaction as a message preprocessor for LCEL chains (B7).

``prompt | compact_messages(config=...) | model``. The transformer is stateless over its
input: each call receives the whole raw history. To summarise a growing history once per
span instead of once per call, every compaction it performs is memoised under a digest of
the raw messages it replaced; the next call replays the longest memoised prefix and only
compacts what is new (a second boundary on top of the first, never a re-summary).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import inspect
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    convert_to_messages,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.store.base import BaseStore

from langchain_compact._archive_records import thread_key
from langchain_compact._defaults import DEFAULT_ARCHIVE, DefaultArchiveFlag, resolve_context_window
from langchain_compact._ops import in_daemon_thread
from langchain_compact._prepare import boundary_key
from langchain_compact.config import CompactionConfig
from langchain_compact.core import (
    DEFAULT_THREAD_ID,
    Compactor,
    Pending,
    Turn,
    TurnContext,
    emit,
    thread_id_of,
)
from langchain_compact.errors import (
    ConfigError,
    ContextOverflowError,
    InvalidHistoryError,
    is_provider_overflow,
)
from langchain_compact.history import last_boundary_index, tool_calls_of
from langchain_compact.markers import with_meta
from langchain_compact.summarizers import Summarizer, resolve_summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, resolve_counter

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

__all__ = ["MEMO_NAMESPACE", "MessageCompactor", "compact_messages", "with_overflow_retry"]

MEMO_NAMESPACE = ("langchain_compact", "lcel_memo")
"""Store namespace of :class:`MessageCompactor`'s memo (``store=``), one item per thread."""
#: Key of a thread's newest memo entry.
_MEMO_KEY = "latest"

logger = logging.getLogger("langchain_compact")


#: Digests a :class:`_Digests` memo holds at most (emptied when full).
_DIGESTS_MAX = 200_000


def _message_digest(message: BaseMessage) -> bytes:
    """What identifies ``message`` in the memo: its type, content, tool-call id and calls."""
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    invalid = message.invalid_tool_calls if isinstance(message, AIMessage) else []
    payload = [message.type, message.content, getattr(message, "tool_call_id", None), calls]
    if invalid:  # a message without malformed calls keeps its digest
        payload.append(invalid)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).digest()


class _Digests:
    """:func:`_message_digest` remembered per message object, owned by one
    :class:`MessageCompactor` (no module-level cache). A growing raw history passes the
    same message objects call after call, so each is serialised and hashed once; the
    entry's weak reference and the content's identity guard against a reused ``id`` and a
    reassigned content."""

    def __init__(self, limit: int = _DIGESTS_MAX) -> None:
        self._limit = limit
        # id(message) -> (weak reference, id of its content, digest)
        self._entries: dict[int, tuple[weakref.ref[BaseMessage], int, bytes]] = {}
        self._lock = threading.Lock()

    def __call__(self, message: BaseMessage) -> bytes:
        entry = self._entries.get(id(message))
        if entry is not None and entry[0]() is message and entry[1] == id(message.content):
            return entry[2]
        digest = _message_digest(message)
        with self._lock:
            if len(self._entries) >= self._limit:
                self._entries.clear()
            self._entries[id(message)] = (weakref.ref(message), id(message.content), digest)
        return digest

    def prefixes(self, messages: Sequence[BaseMessage]) -> list[str]:
        """``out[i]`` identifies ``messages[:i]`` (``out[0]`` is the empty prefix)."""
        out = [""]
        h = hashlib.sha256()
        for m in messages:
            h.update(self(m))
            out.append(h.copy().hexdigest())
        return out


def _same_place(kept: BaseMessage, raw: BaseMessage) -> bool:
    """Whether a message of a compaction's kept tail stands where ``raw`` stands in the raw
    list (the same message, or a placeholder of it: same type, id and tool-call ids)."""
    if kept.type != raw.type or kept.id != raw.id:
        return False
    if getattr(kept, "tool_call_id", None) != getattr(raw, "tool_call_id", None):
        return False
    return [c.id for c in tool_calls_of(kept)] == [c.id for c in tool_calls_of(raw)]


class MessageCompactor:
    """The stateful core behind :func:`compact_messages` (its memo of compactions).

    Call it (or :meth:`acompact`) with a message list; use :meth:`as_runnable` in a chain.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> compactor = MessageCompactor(config=CompactionConfig(context_window=400, keep_last_n=2))
        >>> history = [HumanMessage("Task: say hi ten times", id="t")]
        >>> history += [AIMessage("hi " * 40, id=f"a{i}") for i in range(10)]
        >>> out = compactor(history)
        >>> len(out) < len(history), out[0].content == history[0].content
        (True, True)
    """

    def __init__(
        self,
        *,
        config: CompactionConfig | None = None,
        summarizer: Summarizer | None = None,
        archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
        thread_id: str = DEFAULT_THREAD_ID,
        model: BaseChatModel | None = None,
        counter: TokenCounter = approximate_tokens,
        tools: Sequence[Any] | None = None,
        max_memo: int = 256,
        on_overflow: Literal["raise", "pass"] = "raise",
        store: BaseStore | None = None,
        summary_model: BaseChatModel | None = None,
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise ConfigError(f"store must be a langgraph BaseStore, got {type(store).__name__}.")
        if on_overflow not in ("raise", "pass"):
            raise ConfigError(f"on_overflow={on_overflow!r} is not allowed: use 'raise' or 'pass'.")
        check_options(
            config=config,
            summarizer=summarizer,
            archive=None if isinstance(archive, str) else archive,
            counter=counter,
            tools=tools,
            thread_id=thread_id,
        )
        self.on_overflow = on_overflow
        # A chain's replies describe the compacted copy the chain sent, not the raw list it
        # is called with: a usage report anchors only when it can describe the list at hand.
        self.core = Compactor(
            config=resolve_context_window(config or CompactionConfig(), model),
            summarizer=resolve_summarizer(summarizer, model, summary_model),
            archive=archive,
            counter=resolve_counter(counter, model),
            tools=tools,
            verify_anchor="strict",
            calibrate=False,
        )
        self.thread_id = thread_id
        self.store = store
        """Where the memo is kept too, per thread (``None``: this process only)."""
        self.max_memo = max_memo
        # digest of the raw prefix -> compacted replacement of that prefix
        self._memo: OrderedDict[str, list[BaseMessage]] = OrderedDict()
        # digest of a raw message -> the cleared / cut version this compactor made of it
        self._cleared: dict[str, BaseMessage] = {}
        self._lock = threading.Lock()
        self._digest = _Digests()  # each raw message's digest, computed once
        self.compactions = 0
        # (thread, boundary) -> the summary being prepared in the background
        self._preparing: OrderedDict[tuple[str, str], concurrent.futures.Future[Any]] = (
            OrderedDict()
        )
        # thread -> the window a provider's refusal taught it (the raw history a chain is
        # called with carries no boundary to keep it on)
        self._windows: dict[str, int] = {}

    @property
    def config(self) -> CompactionConfig:
        """The settings in use (``context_window`` resolved)."""
        return self.core.config

    @property
    def archive(self) -> TranscriptArchive | None:
        """Where originals go before they are replaced."""
        return self.core.archive

    # ------------------------------------------------------------------ pure parts

    @staticmethod
    def _coerce(messages: Any) -> list[BaseMessage]:
        if isinstance(messages, PromptValue):
            return messages.to_messages()
        if isinstance(messages, (str, bytes, BaseMessage, Mapping)) or not isinstance(
            messages, Iterable
        ):
            raise InvalidHistoryError(
                f"compact_messages takes a list of messages (or a prompt value), not a "
                f"{type(messages).__name__}; wrap a single message in a list: [message]."
            )
        items = list(messages)
        try:
            return list(convert_to_messages(items))
        except (ValueError, TypeError, NotImplementedError) as exc:
            for i, item in enumerate(items):  # name the message that cannot be converted
                try:
                    convert_to_messages([item])
                except (ValueError, TypeError, NotImplementedError):
                    raise InvalidHistoryError(
                        f"messages[{i}] is not a message langchain can read "
                        f"({type(item).__name__}: {str(item)[:80]}); pass BaseMessage objects, "
                        "(role, content) tuples or dicts with 'role' and 'content'.",
                        index=i,
                    ) from exc
            raise

    def _thread(self, config: RunnableConfig | None) -> str:
        """The run's ``configurable.thread_id`` (so recall finds what this run archived),
        else the compactor's ``thread_id``."""
        return thread_id_of(config, self.thread_id)

    def _replay(
        self, raw: list[BaseMessage], stored: Any = None
    ) -> tuple[list[BaseMessage], list[str]]:
        digests = self._digest.prefixes(raw)
        local = 0
        with self._lock:
            for cut in range(len(raw), 0, -1):
                if digests[cut] in self._memo:
                    local = cut
                    break
        if isinstance(stored, Mapping) and isinstance(stored.get("digest"), str):
            # Another process (or an earlier life of this one) may have compacted further.
            at = {d: i for i, d in enumerate(digests)}.get(stored["digest"], 0)
            if at > local:
                self._remember(stored["digest"], messages_from_dict(stored["messages"]))
                local = at
        if local:
            with self._lock:
                replacement = self._memo[digests[local]]
                self._memo.move_to_end(digests[local])
            return [*replacement, *raw[local:]], digests
        return list(raw), digests

    def _remember(self, digest: str, replacement: list[BaseMessage]) -> None:
        with self._lock:
            self._memo[digest] = replacement
            self._memo.move_to_end(digest)
            while len(self._memo) > self.max_memo:
                self._memo.popitem(last=False)

    def _namespace(self, thread_id: str) -> tuple[str, ...]:
        return (*MEMO_NAMESPACE, thread_key(thread_id))

    def _stored(self, thread_id: str) -> Any:
        """The thread's newest memo entry in the store (``None``: no store or none)."""
        if self.store is None:
            return None
        item = self.store.get(self._namespace(thread_id), _MEMO_KEY)
        return item.value if item is not None else None

    async def _astored(self, thread_id: str) -> Any:
        if self.store is None:
            return None
        item = await self.store.aget(self._namespace(thread_id), _MEMO_KEY)
        return item.value if item is not None else None

    def _entry(self, saved: list[tuple[str, list[BaseMessage]]]) -> dict[str, Any] | None:
        if self.store is None or not saved:
            return None
        digest, replacement = saved[-1]
        return {"digest": digest, "messages": messages_to_dict(replacement)}

    def _persist(self, thread_id: str, saved: list[tuple[str, list[BaseMessage]]]) -> None:
        """Keep the memo entry a call made in the store, for the thread's next call in any
        process (a chain served by several workers)."""
        entry = self._entry(saved)
        if self.store is not None and entry is not None:
            self.store.put(self._namespace(thread_id), _MEMO_KEY, entry, index=False)

    async def _apersist(self, thread_id: str, saved: list[tuple[str, list[BaseMessage]]]) -> None:
        entry = self._entry(saved)
        if self.store is not None and entry is not None:
            await self.store.aput(self._namespace(thread_id), _MEMO_KEY, entry, index=False)

    def _input(
        self, messages: Any, stored: Any = None
    ) -> tuple[list[BaseMessage], list[str], list[str], list[BaseMessage]]:
        """The raw list, its prefix digests, the digest of each message the turn starts from
        (as replayed, before clearing) and that list: the memo replayed, and every result
        this compactor cleared or cut in an earlier call cleared again (clearing is
        monotonic, as in graph state: the raw input still has it whole, and its original is
        archived already)."""
        raw = self._coerce(messages)
        replayed, digests = self._replay(raw, stored)
        keys = [self._digest(m).hex() for m in replayed]
        with self._lock:
            before = [self._cleared.get(k, m) for k, m in zip(keys, replayed, strict=True)]
        return raw, digests, keys, before

    def _output(
        self,
        raw: list[BaseMessage],
        digests: list[str],
        keys: list[str],
        turn: Turn,
        saved: list[tuple[str, list[BaseMessage]]],
    ) -> list[BaseMessage]:
        """The :class:`Turn` as the list to send on: remember what it cleared and the
        compaction it ran (memoised under the digest of the raw prefix it replaced, and
        added to ``saved`` for the store); a stop raises (or passes the history on,
        ``on_overflow="pass"``)."""
        with self._lock:
            for i, after in turn.replaced.items():
                self._cleared[keys[i]] = with_meta(after, usage_anchor=None)
        if turn.error is not None:
            raise turn.error
        if turn.result is not None:
            self.compactions += 1
        if turn.repair is not None and turn.history is not None:
            # The repaired (maybe compacted) list replaces the whole raw list: its tail is
            # not the raw tail, so it is memoised under the digest of all of ``raw``, and the
            # next call with the grown history is repaired (and archived) once, not again.
            saved.append((digests[len(raw)], list(turn.history)))
        elif turn.history is not None:
            history = turn.history
            tail_len = len(history) - last_boundary_index(history) - 1
            cut = len(raw) - tail_len
            kept = history[len(history) - tail_len :]
            if cut < 0 or not all(map(_same_place, kept, raw[max(cut, 0) :])):
                # The kept tail is not the raw tail (a repair replayed from the memo moved
                # it): the whole compacted list stands for the whole raw list.
                cut, tail_len = len(raw), 0
            else:
                with self._lock:
                    # The compaction's own changes to the tail it kept (read results
                    # cleared, observations digested, arguments stubbed): the raw input has
                    # them whole.
                    for key, after in zip(keys[len(keys) - tail_len :], kept, strict=True):
                        if self._digest(after).hex() != key:
                            self._cleared[key] = with_meta(after, usage_anchor=None)
            saved.append((digests[cut], history[: len(history) - tail_len]))
        for digest, replacement in saved:
            self._remember(digest, replacement)
        if turn.outcome == "stopped":
            self._overflow(turn.reason, turn.messages)
        return turn.messages

    # ------------------------------------------------------------------ preparing

    def _pending(self, msgs: list[BaseMessage], thread_id: str, *, wait: bool) -> Pending | None:
        """The summary being prepared for ``msgs``' boundary in this thread, if any (the
        turn waits for it only when it compacts: ``wait`` sync, else async)."""
        key = (thread_id, boundary_key(msgs))
        with self._lock:
            running = self._preparing.get(key)
        if running is None:
            return None
        take = self._take_prepared if wait else self._atake_prepared
        if not running.done():
            return Pending(take=lambda: take(msgs, thread_id), running=True)
        ready = running.result() if running.exception() is None else None
        return Pending(take=lambda: take(msgs, thread_id), ready=ready)

    def _start_preparing(
        self, msgs: list[BaseMessage], thread_id: str, pending: Pending | None = None
    ) -> None:
        """Past the prepare point, start summarising in a daemon thread (a future keyed by
        thread and boundary; the record ``pending`` holds, if any, is brought up to date);
        nothing waits for it before the trigger. A failure is read at the trigger, which
        then compacts on the spot."""
        key = (thread_id, boundary_key(msgs))
        before = pending.ready if pending is not None else None
        future = in_daemon_thread(
            "langchain-compact-prepare", self.core.prepare, msgs, thread_id, before
        )
        with self._lock:
            self._preparing[key] = future
            self._preparing.move_to_end(key)
            while len(self._preparing) > self.max_memo:
                self._preparing.popitem(last=False)

    def _take_prepared(self, msgs: list[BaseMessage], thread_id: str) -> Any:
        with self._lock:
            future = self._preparing.pop((thread_id, boundary_key(msgs)), None)
        if future is None:
            return None
        try:
            return future.result()  # waits only if it is still being written
        except Exception as exc:
            logger.warning("preparing a summary failed (%s); compacting on the spot", exc)
            return None

    async def _atake_prepared(self, msgs: list[BaseMessage], thread_id: str) -> Any:
        with self._lock:
            future = self._preparing.pop((thread_id, boundary_key(msgs)), None)
        if future is None:
            return None
        try:
            return await asyncio.wrap_future(future)
        except Exception as exc:
            logger.warning("preparing a summary failed (%s); compacting on the spot", exc)
            return None

    def _overflow(self, reason: str, msgs: list[BaseMessage]) -> None:
        """A chain cannot be stopped: raise (default) or log and pass the history on."""
        if self.on_overflow == "raise":
            raise ContextOverflowError(reason, messages=list(msgs))
        logger.warning("compact_messages: %s; passing the history on (on_overflow='pass')", reason)

    # ------------------------------------------------------------------ calls

    def __call__(self, messages: Any, config: RunnableConfig | None = None) -> list[BaseMessage]:
        thread_id = self._thread(config)
        raw, digests, keys, before = self._input(messages, self._stored(thread_id))
        pending = self._pending(before, thread_id, wait=True)
        ctx = self._context(thread_id)
        turn = self.core.turn(before, thread_id, prepared=pending, write_stop=False, ctx=ctx)
        saved: list[tuple[str, list[BaseMessage]]] = []
        try:
            out = self._output(raw, digests, keys, turn, saved)
        finally:
            self._persist(thread_id, saved)
        if turn.prepare:
            self._start_preparing(turn.messages, thread_id, pending)
        return out

    async def acompact(
        self, messages: Any, config: RunnableConfig | None = None
    ) -> list[BaseMessage]:
        """Async twin of calling the compactor."""
        await self.core.aready()
        thread_id = self._thread(config)
        raw, digests, keys, before = self._input(messages, await self._astored(thread_id))
        pending = self._pending(before, thread_id, wait=False)
        ctx = self._context(thread_id)
        turn = await self.core.aturn(before, thread_id, prepared=pending, write_stop=False, ctx=ctx)
        saved: list[tuple[str, list[BaseMessage]]] = []
        try:
            out = self._output(raw, digests, keys, turn, saved)
        finally:
            await self._apersist(thread_id, saved)
        if turn.prepare:
            self._start_preparing(turn.messages, thread_id, pending)
        return out

    def compact_now(
        self, messages: Any, config: RunnableConfig | None = None, *, focus: str | None = None
    ) -> list[BaseMessage]:
        """Compact ``messages`` now, whatever the trigger says, with ``focus`` kept first in
        the summary (:meth:`Compactor.compact_now`; refused by the same limits, then the
        list comes back as a call would give it). Memoised like a triggered compaction: the
        next call with the grown raw history replays it."""
        thread_id = self._thread(config)
        raw, digests, keys, before = self._input(messages, self._stored(thread_id))
        ctx = self._context(thread_id)
        turn = self.core.compact_now(before, thread_id, focus=focus, write_stop=False, ctx=ctx)
        saved: list[tuple[str, list[BaseMessage]]] = []
        try:
            return self._output(raw, digests, keys, turn, saved)
        finally:
            self._persist(thread_id, saved)

    async def acompact_now(
        self, messages: Any, config: RunnableConfig | None = None, *, focus: str | None = None
    ) -> list[BaseMessage]:
        """Async twin of :meth:`compact_now`."""
        await self.core.aready()
        thread_id = self._thread(config)
        raw, digests, keys, before = self._input(messages, await self._astored(thread_id))
        ctx = self._context(thread_id)
        turn = await self.core.acompact_now(
            before, thread_id, focus=focus, write_stop=False, ctx=ctx
        )
        saved: list[tuple[str, list[BaseMessage]]] = []
        try:
            return self._output(raw, digests, keys, turn, saved)
        finally:
            await self._apersist(thread_id, saved)

    def as_runnable(self) -> Runnable[Any, list[BaseMessage]]:
        """This compactor as a ``Runnable`` (sync and async)."""
        return RunnableLambda(self.__call__, afunc=self.acompact, name="compact_messages")

    # ------------------------------------------------------------------ the provider's refusal

    def _context(self, thread_id: str) -> TurnContext:
        """The context a call on ``thread_id`` runs under: the thread's facts memo
        (:meth:`Compactor.context`) and the window a refusal taught it, if any."""
        return self.core.context(thread_id).narrowed(self.learned_window(thread_id))

    def learned_window(self, thread_id: str) -> int | None:
        """The window a provider's refusal taught ``thread_id`` (``None``: none yet)."""
        with self._lock:
            return self._windows.get(thread_id)

    def learn(self, sent: Sequence[BaseMessage], config: RunnableConfig | None = None) -> int:
        """The provider refused ``sent`` (what this compactor handed the model) for its
        length: it counts that input at its window or more, so later calls in the run's
        thread are compacted against a window no larger than the count of ``sent``
        (:meth:`Compactor.overflow_window`). Returns the window learned."""
        thread_id = self._thread(config)
        known = self.learned_window(thread_id)
        window = self.core.overflow_window(list(sent), self.core.context(thread_id).narrowed(known))
        with self._lock:
            self._windows[thread_id] = min(window, self._windows.get(thread_id, window))
            window = self._windows[thread_id]
        emit(
            {
                "event": "provider_overflow",
                "window": window,
                "configured": self.config.context_window,
            }
        )
        logger.warning(
            "the provider refused a call for its length: thread %r now compacts to a window "
            "of %d tokens",
            thread_id,
            window,
        )
        return window

    @staticmethod
    @contextmanager
    def _recovering(window: int, refusal: Exception) -> Iterator[None]:
        """The turn run again after a refusal: a stop says the refusal stands."""
        try:
            yield
        except ContextOverflowError as stop:
            reason = Compactor.spent(window, stop.reason)
            raise ContextOverflowError(reason, messages=stop.messages) from refusal

    def _retried(
        self, sent: list[BaseMessage], again: list[BaseMessage], window: int, refusal: Exception
    ) -> list[BaseMessage]:
        """``again`` (the turn run under the learned window) to retry with; when it reduced
        nothing, the refusal stands (``on_overflow="pass"`` sends it anyway)."""
        if self.on_overflow == "raise" and again == sent:
            raise ContextOverflowError(Compactor.spent(window), messages=list(again)) from refusal
        return again

    def wrap(self, model: Runnable[Any, Any]) -> Runnable[Any, Any]:
        """``compact | model`` as one Runnable that survives the provider's refusal for
        length: the history is compacted (this compactor's call) and sent to ``model``;
        when ``model`` raises langchain-core's ``ContextOverflowError``, the window it
        teaches is learned for the thread (:meth:`learn`), the whole turn runs again under
        it (every reduction a turn has, in order) and the call is retried once. A second
        refusal raises, and so does a history that every reduction leaves as it was or
        whose smallest context cannot fit the learned window (this package's
        ``ContextOverflowError``, a langchain-core one too)."""

        def call(messages: Any, config: RunnableConfig | None = None) -> Any:
            sent = self(messages, config)
            try:
                return model.invoke(sent, config)
            except Exception as exc:
                if not is_provider_overflow(exc):
                    raise
                window = self.learn(sent, config)
                with self._recovering(window, exc):
                    again = self(messages, config)
                return model.invoke(self._retried(sent, again, window, exc), config)

        async def acall(messages: Any, config: RunnableConfig | None = None) -> Any:
            sent = await self.acompact(messages, config)
            try:
                return await model.ainvoke(sent, config)
            except Exception as exc:
                if not is_provider_overflow(exc):
                    raise
                window = self.learn(sent, config)
                with self._recovering(window, exc):
                    again = await self.acompact(messages, config)
                return await model.ainvoke(self._retried(sent, again, window, exc), config)

        return RunnableLambda(call, afunc=acall, name="compact_and_call")


_COMPACTOR_OPTIONS = frozenset(inspect.signature(MessageCompactor.__init__).parameters) - {"self"}


@overload
def compact_messages(messages: None = None, **opts: Any) -> Runnable[Any, list[BaseMessage]]: ...
@overload
def compact_messages(
    messages: Sequence[BaseMessage] | PromptValue, **opts: Any
) -> list[BaseMessage]: ...


def compact_messages(
    messages: Sequence[BaseMessage] | PromptValue | None = None,
    *,
    config: CompactionConfig | None = None,
    summarizer: Summarizer | None = None,
    archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
    thread_id: str = DEFAULT_THREAD_ID,
    model: BaseChatModel | None = None,
    counter: TokenCounter = approximate_tokens,
    tools: Sequence[Any] | None = None,
    max_memo: int = 256,
    on_overflow: Literal["raise", "pass"] = "raise",
    summary_model: BaseChatModel | None = None,
    **unknown: Any,
) -> list[BaseMessage] | Runnable[Any, list[BaseMessage]]:
    """Compact a message list, or build a Runnable that does, for LCEL chains.

    With ``messages``: returns the compacted list (one-shot; nothing is memoised across
    calls). Without: returns a Runnable that keeps a memo of its compactions, so a chain
    called with an ever-growing history summarises each span once.

    Args:
        messages: The history to compact now; ``None``: return a Runnable instead.
        config: Settings; ``context_window`` defaults to ``model``'s profile.
        summarizer: Wins when given. Otherwise, with ``model`` (or ``summary_model``), an
            :class:`~langchain_compact.summarizers.LLMSummarizer` over that model (one model
            call per compaction, prepared in the background past the prepare point);
            without a model, the extractive summarizer (offline, deterministic), which is
            also the fallback when the model fails.
        archive: Where removed originals go; by default JSONL files under
            ``config.archive_dir`` (``.memory``, or ``$LANGCHAIN_COMPACT_ARCHIVE_DIR``;
            :class:`~langchain_compact.archive.DefaultArchive`). ``None``: nothing archived.
        thread_id: The archive's thread when the run's config names none.
        model: The chat model: its profile gives the context window, and it writes the
            summaries unless ``summary_model`` or ``summarizer`` is given.
        counter: Local token counter for messages after the newest usage report.
        tools: The tools bound to the model (their schemas count toward the context).
        max_memo: Compactions the Runnable remembers (a growing history is summarised
            once per span).
        on_overflow: When the run would have to stop (the smallest context cannot fit
            the window, or a limit such as ``max_compactions`` is reached; a chain cannot be
            stopped): ``"raise"`` (default) raises
            :class:`~langchain_compact.errors.ContextOverflowError`; ``"pass"`` logs a
            warning and passes the history on.
        summary_model: The chat model that writes the summaries instead of ``model``.

    Example:
        >>> from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
        >>> prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history")])
        >>> chain = prompt | compact_messages(config=CompactionConfig(context_window=8000))
        >>> [m.type for m in chain.invoke({"history": [("user", "hi")]})]
        ['human']
    """
    check_known(unknown, _COMPACTOR_OPTIONS, "compact_messages")
    compactor = MessageCompactor(
        config=config,
        summarizer=summarizer,
        archive=archive,
        thread_id=thread_id,
        model=model,
        counter=counter,
        tools=tools,
        max_memo=max_memo,
        on_overflow=on_overflow,
        summary_model=summary_model,
    )
    if messages is None:
        return compactor.as_runnable()
    return compactor(messages)


def with_overflow_retry(
    model: Runnable[Any, Any], compactor: MessageCompactor | None = None, **opts: Any
) -> Runnable[Any, Any]:
    """``model`` behind a compactor, retried once on the provider's refusal for length:
    ``prompt | with_overflow_retry(model, config=...)`` instead of
    ``prompt | compact_messages(config=...) | model``. ``compactor`` (or one built from
    ``opts``, the options of :class:`MessageCompactor`) compacts every call; a refusal
    (langchain-core's ``ContextOverflowError``) teaches the thread a smaller window, and
    the call is compacted against it and retried (:meth:`MessageCompactor.wrap`).

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> chain = with_overflow_retry(
        ...     FakeListChatModel(responses=["ok"]), config=CompactionConfig(context_window=8000))
        >>> chain.invoke([("user", "hi")]).content
        'ok'
    """
    if compactor is not None and opts:
        raise ConfigError("with_overflow_retry takes a compactor or its options, not both.")
    check_known(opts, _COMPACTOR_OPTIONS, "with_overflow_retry")
    return (compactor or MessageCompactor(**opts)).wrap(model)


# ------------------------------------------------------------------ checking the options
#
# The type checks of the components an entry point is given, so a wrong value is a
# ConfigError naming the option, never a bare TypeError or AttributeError from deep inside a
# compaction.


def check_known(opts: Mapping[str, Any], known: Collection[str], where: str) -> None:
    """Refuse an option ``where`` does not take, naming the ones it does."""
    unknown = sorted(set(opts) - set(known))
    if unknown:
        raise ConfigError(
            f"{where} got unknown option(s) {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(sorted(known))}."
        )


def check_options(
    *,
    config: Any = None,
    summarizer: Any = None,
    archive: Any = None,
    counter: Any = None,
    tools: Any = None,
    thread_id: Any = None,
) -> None:
    """Check each component that is given (``None``: not given, not checked).

    Raises:
        ConfigError: a value of the wrong type; the message names the option.
    """
    if config is not None and not isinstance(config, CompactionConfig):
        raise ConfigError(f"config must be a CompactionConfig, got {type(config).__name__}.")
    if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
        raise ConfigError(
            f"summarizer must be a Summarizer (an object with summarize(messages, *, "
            f"max_tokens) -> str), got {type(summarizer).__name__}; e.g. "
            "LLMSummarizer(model) or ExtractiveSummarizer()."
        )
    if archive is not None and not callable(getattr(archive, "write", None)):
        raise ConfigError(
            f"archive must be a TranscriptArchive (JsonlArchive, StoreArchive), got "
            f"{type(archive).__name__}."
        )
    if tools is not None and (isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence)):
        raise ConfigError(f"tools must be a list of tools, got {type(tools).__name__}.")
    if thread_id is not None and not isinstance(thread_id, str):
        raise ConfigError(f"thread_id must be a str, got {type(thread_id).__name__}.")
    if counter is not None:
        _check_counter(counter)


def _check_counter(counter: Any) -> None:
    """A token counter: callable on messages, returning an int."""
    if not callable(counter):
        raise ConfigError(f"counter must be a callable messages -> int, got {counter!r}.")
    probe = counter([HumanMessage("probe")])
    if isinstance(probe, bool) or not isinstance(probe, int):
        raise ConfigError(
            f"counter must return an int token count, it returned "
            f"{type(probe).__name__} ({probe!r:.40}); e.g. approximate_tokens or "
            "TiktokenCounter()."
        )
