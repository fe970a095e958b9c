"""The compaction nodes and routing edges of a LangGraph graph, over one core.

``CompactionNodes`` wraps a :class:`~langchain_compact.core.Compactor` (config, summarizer,
archive, counter, tools); its methods are the LangGraph nodes (``micro``, ``summarize``,
``stop``, ``prepare``; each a ``RunnableLambda`` with a sync and an async body) and the edges
(``route``, ``after_summarize``, plain functions returning ``Literal``). A graph runs the
core's turn stage by stage, each stage a node (so each streams and checkpoints on its own):
every node turns the stage's :class:`~langchain_compact.core.Turn` into a state update, and
every edge asks the core what comes next. No decision is made here.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Optional

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from langchain_compact._defaults import DEFAULT_ARCHIVE, DefaultArchiveFlag, resolve_context_window
from langchain_compact._nested import VIEW_KEY, current_owner, private_owner, view_of, view_record
from langchain_compact.config import CompactionConfig
from langchain_compact.core import Compactor, Turn, thread_id_of
from langchain_compact.errors import CompactionError, ContextOverflowError, is_provider_overflow
from langchain_compact.markers import Action
from langchain_compact.summarizers import Summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

# resolve_context_window is re-exported: its public path was this module.
__all__ = ["CompactionNodes", "resolve_context_window"]

logger = logging.getLogger("langchain_compact")

#: Model inputs the gate let through and the model node has not started on yet, remembered
#: at most (one per run in flight; an entry the node never reaches, after an error, ages out).
GATED_REMEMBERED = 256


class _Calls(NamedTuple):
    """A node's sync and async calls (``invoke(state, config)``, ``ainvoke(state, config)``):
    a runnable's own methods, or a wrapper's functions called without a runnable layer."""

    invoke: Callable[[Any, RunnableConfig], Any]
    ainvoke: Callable[[Any, RunnableConfig], Awaitable[Any]]


class CompactionNodes:
    """Nodes and edges that add compaction to a graph; see :func:`add_compaction`.

    Args:
        config: Settings (``context_window`` must be known; see :func:`resolve_context_window`).
        summarizer: Defaults to :class:`ExtractiveSummarizer` (offline, deterministic).
        archive: Where cleared and compacted originals go before they are replaced; by
            default the run's store when the graph has one, else JSONL files under
            ``config.archive_dir`` (:class:`~langchain_compact.archive.DefaultArchive`);
            ``None``: nothing is archived.
        counter: Local token counter for messages after the usage anchor.
        tools: Tool schemas the model is called with (counted when there is no anchor).
        messages_key: State key of the message list.
        memory: Also keep the pinned task and summaries in a store after each compaction,
            for a new thread to continue from (:mod:`langchain_compact.memory`).
    """

    def __init__(
        self,
        *,
        config: CompactionConfig,
        summarizer: Summarizer | None = None,
        archive: TranscriptArchive | DefaultArchiveFlag | None = DEFAULT_ARCHIVE,
        counter: TokenCounter = approximate_tokens,
        tools: Sequence[Any] | None = None,
        messages_key: str = "messages",
        memory: CompactionMemory | None = None,
    ) -> None:
        self.core = Compactor(
            config=config,
            summarizer=summarizer,
            archive=archive,
            counter=counter,
            tools=tools,
            memory=memory,
        )
        self.key = messages_key
        # The message lists the gate let through, until the model node starts on them
        # (:meth:`entry`): a call that did not come through the gate is compacted there.
        # Inside another graph, the compacted view the gate let through with it.
        self._gated: OrderedDict[Hashable, Sequence[BaseMessage] | None] = OrderedDict()
        self._gated_lock = threading.Lock()

    @property
    def config(self) -> CompactionConfig:
        """The settings in use."""
        return self.core.config

    @property
    def summarizer(self) -> Summarizer:
        """The summarizer full compactions call."""
        return self.core.summarizer

    @property
    def archive(self) -> TranscriptArchive | None:
        """Where originals go before they are replaced."""
        return self.core.archive

    @property
    def memory(self) -> CompactionMemory | None:
        """The cross-thread memory, if any."""
        return self.core.memory

    # ------------------------------------------------------------------ edges

    def _messages(self, state: dict[str, Any]) -> list[BaseMessage]:
        """The state's message list, read only (never copied: a copy per turn is O(history))."""
        try:
            messages = state[self.key]
        except KeyError:
            raise CompactionError(
                f"the graph state has no {self.key!r} key; pass messages_key=<your key> to "
                "add_compaction."
            ) from None
        return messages if isinstance(messages, list) else list(messages)

    def _owner(self, config: RunnableConfig | None) -> str | None:
        """The namespace whose private view this step reads and writes; ``None`` when
        compaction writes the shared list (the top level, or ``share_compaction``)."""
        share = self.config.share_compaction
        return private_owner(config, share) if config is not None else current_owner(share)

    def _view(self, state: Mapping[str, Any], owner: str | None) -> list[BaseMessage]:
        """What compaction and the model read: the state's messages, or inside another
        graph the private view followed by the shared messages added since."""
        messages = self._messages(dict(state) if not isinstance(state, dict) else state)
        view = view_of(messages, state.get(VIEW_KEY), owner)
        return view if isinstance(view, list) else list(view)

    # ``Optional[...]``: the spelling LangGraph's signature check reads as the run's config
    # (under postponed annotations "RunnableConfig | None" is a string it does not accept).
    def route(
        self,
        state: dict[str, Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see above)
    ) -> Action | list[Literal["continue", "prepare"]]:
        """Edge in front of the model: ``"continue"`` to the model, ``"compact"`` when over
        the trigger, ``"stop"`` when a limit is hit (:func:`decide`'s action); past the
        prepare point, ``["continue", "prepare"]``: the model and the prepare node run in
        the same superstep, so the summary is written while the model works. ``config``:
        the run's (LangGraph passes it to an edge), whose thread's facts memo the decision
        reads through; without it the history is read in full."""
        shared = self._messages(state)
        messages = self._view(state, self._owner(None))
        thread = None if config is None else thread_id_of(config)
        decision, prepare = self.core.route(
            messages, state.get("prepared_summary"), thread_id=thread
        )
        if decision.action == "continue":
            self._let_through(shared, messages)
        return ["continue", "prepare"] if prepare else decision.action

    def after_summarize(
        self,
        state: dict[str, Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see route)
    ) -> Literal["continue", "stop"]:
        """Edge after a compaction: go on whenever the next call fits (see
        :meth:`Compactor.after_step`); a failed compaction stops."""
        shared = self._messages(state)
        messages = self._view(state, self._owner(None))
        thread = None if config is None else thread_id_of(config)
        step = self.core.after_step(messages, state.get("transition"), thread_id=thread)
        if step == "continue":
            self._let_through(shared, messages)
        return step

    # ------------------------------------------------------------------ the model's entry

    @staticmethod
    def _mark(messages: Sequence[BaseMessage]) -> Hashable:
        """What identifies a message list the gate let through when the model node reads
        it in the next step: its length and its last message (``add_messages`` gives every
        message an id; the same object otherwise)."""
        if not messages:
            return (0, None)
        last = messages[-1]
        return (len(messages), last.id if last.id else id(last))

    def _let_through(self, shared: Sequence[BaseMessage], view: Sequence[BaseMessage]) -> None:
        with self._gated_lock:
            self._gated[self._mark(shared)] = view if view is not shared else None
            while len(self._gated) > GATED_REMEMBERED:
                self._gated.popitem(last=False)

    def _came_through_gate(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[bool, Sequence[BaseMessage] | None]:
        """Whether the gate let ``messages`` through, and the private view it let through
        with them (``None``: the messages themselves)."""
        key = self._mark(messages)
        with self._gated_lock:
            if key not in self._gated:
                return False, None
            return True, self._gated.pop(key)

    def _entry_state(self, state: Any, owner: str | None) -> tuple[list[BaseMessage] | None, Any]:
        """The messages to compact at the model node's entry (``None`` when the call came
        through the gate, or the input holds no message list: a ``Send`` of another shape),
        and the state the node is called with (inside another graph, its messages are the
        private view)."""
        if not isinstance(state, Mapping) or not isinstance(state.get(self.key), Sequence):
            return None, state
        shared = self._messages(dict(state))
        through, gated = self._came_through_gate(shared)
        view = list(gated) if gated is not None else self._view(state, owner)
        fed = state if view is shared else {**state, self.key: view}
        return (None if through else view), fed

    def _entered(
        self,
        turn: Turn,
        state: Any,
        node: Runnable[Any, Any] | _Calls,
        config: Any,
        owner: str | None,
        shared: Sequence[BaseMessage],
    ) -> Any:
        if turn.outcome == "stopped":  # the model is not called: the stop message is its reply
            return self._update(turn, owner, shared)
        if turn.history is None and not turn.replaced:
            return node.invoke(state, config)
        out = node.invoke(self._retry_state(state, turn), config)
        return self._merged(turn, out, owner, shared)

    def entry(self, node: Runnable[Any, Any] | _Calls, name: str) -> RunnableLambda[Any, Any]:
        """The model node wrapped so that a call that did not come through the gate (the
        routing edge in front of the model) gets the whole turn at its entry: a node
        returning ``Command(goto=<model node>)`` (a human review's reject), a ``Send`` to
        it, an edge added after :func:`add_compaction`. The pairing is checked, old results
        cleared, a due compaction runs (:meth:`Compactor.turn`), then the node is called on
        the result and its update comes after the turn's (as :meth:`guard` merges them). On
        a stop the node is not called: the stop message is the node's update, and the
        node's own edges go on from it (an ``AIMessage`` without tool calls). A call the
        gate let through (remembered by its message list until the node starts on it) goes
        straight to the node: nothing is counted twice."""

        def call(state: Any, config: RunnableConfig) -> Any:
            owner = self._owner(config)
            messages, fed = self._entry_state(state, owner)
            if messages is None:
                return node.invoke(fed, config)
            turn = self.core.turn(messages, thread_id_of(config), run_config=config)
            return self._entered(turn, fed, node, config, owner, state[self.key])

        async def acall(state: Any, config: RunnableConfig) -> Any:
            owner = self._owner(config)
            messages, fed = self._entry_state(state, owner)
            if messages is None:
                return await node.ainvoke(fed, config)
            turn = await self.core.aturn(messages, thread_id_of(config), run_config=config)
            shared = state[self.key]
            if turn.outcome == "stopped":
                return self._update(turn, owner, shared)
            if turn.history is None and not turn.replaced:
                return await node.ainvoke(fed, config)
            retry = self._retry_state(fed, turn)
            return self._merged(turn, await node.ainvoke(retry, config), owner, shared)

        return RunnableLambda(call, afunc=acall, name=name)

    # ------------------------------------------------------------------ the turn's value

    def _update(
        self,
        turn: Turn,
        owner: str | None = None,
        shared: Sequence[BaseMessage] | None = None,
    ) -> dict[str, Any]:
        """A stage's :class:`Turn` as a state update: its keys, and the messages it changed
        (placeholders replace by id; a new history replaces all; a stop message appends).
        Inside another graph (``owner``) the changed list is the private view of
        ``shared`` instead, and the shared list gets only a stop message."""
        update: dict[str, Any] = dict(turn.keys())
        if owner is not None:
            if turn.history is not None or turn.replaced:
                view = turn.history if turn.history is not None else turn.messages
                update[VIEW_KEY] = view_record(view, owner, shared or [])
            if turn.stop is not None:
                update[self.key] = [turn.stop]
            return update
        messages: list[BaseMessage] = (
            [RemoveMessage(id=REMOVE_ALL_MESSAGES), *turn.history]
            if turn.history is not None
            else list(turn.replaced.values())
        )
        if turn.stop is not None:
            messages.append(turn.stop)
        if messages:
            update[self.key] = messages
        return update

    # ------------------------------------------------------------------ micro

    def micro(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: clear old tool results and cut oversized ones, archiving originals first."""
        owner = self._owner(config)
        turn = self.core.clear(self._view(state, owner), thread_id_of(config))
        return self._update(turn, owner, self._messages(state))

    async def amicro(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`micro`."""
        owner = self._owner(config)
        turn = await self.core.aclear(self._view(state, owner), thread_id_of(config))
        return self._update(turn, owner, self._messages(state))

    # ------------------------------------------------------------------ prepare

    def prepare(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node (parallel to the model call): summarise the span a compaction would take
        now and keep it in state for the compaction at the trigger; messages untouched. A
        failure never fails the run: the trigger then compacts on the spot."""
        try:
            messages = self._view(state, self._owner(config))
            record = self.core.prepare(
                messages, thread_id_of(config), state.get("prepared_summary")
            )
        except Exception as exc:
            return self._prepare_failed(exc)
        return {"prepared_summary": record.as_dict() if record is not None else None}

    async def aprepare(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`prepare`."""
        try:
            messages = self._view(state, self._owner(config))
            record = await self.core.aprepare(
                messages, thread_id_of(config), state.get("prepared_summary")
            )
        except Exception as exc:
            return self._prepare_failed(exc)
        return {"prepared_summary": record.as_dict() if record is not None else None}

    @staticmethod
    def _prepare_failed(exc: Exception) -> dict[str, Any]:
        logger.warning("preparing a summary failed (%s); the trigger will compact", exc)
        return {"prepared_summary": None}

    # ------------------------------------------------------------------ summarize

    def summarize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: one full compaction; the history is replaced by head + summary + tail."""
        owner = self._owner(config)
        turn = self.core.compaction(
            self._view(state, owner),
            thread_id_of(config),
            prepared=state.get("prepared_summary"),
            run_config=config,
        )
        return self._update(turn, owner, self._messages(state))

    async def asummarize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`summarize`."""
        owner = self._owner(config)
        turn = await self.core.acompaction(
            self._view(state, owner),
            thread_id_of(config),
            prepared=state.get("prepared_summary"),
            run_config=config,
        )
        return self._update(turn, owner, self._messages(state))

    # ------------------------------------------------------------------ stop

    def stop(self, state: dict[str, Any], config: RunnableConfig | None = None) -> dict[str, Any]:
        """Node: end the run with a message saying what is done, pending, blocked, next."""
        owner = self._owner(config)
        turn = self.core.stopping(
            self._view(state, owner), state.get("transition"), state.get("stop_reason")
        )
        return self._update(turn, owner, self._messages(state))

    # ------------------------------------------------------------------ the provider's refusal

    def guard(self, node: Runnable[Any, Any], name: str) -> RunnableLambda[Any, Any]:
        """The model node wrapped so that a provider's refusal for length (langchain-core's
        ``ContextOverflowError``) is followed by one recovery (:meth:`Compactor.overflow`:
        the whole turn, every reduction in order, under the window the refusal teaches,
        which is recorded on the history so the routing edge judges later calls against
        it) and one retry of the node on the reduced history. The node's update comes back
        after the new history (``RemoveMessage(REMOVE_ALL_MESSAGES)``, the history, then the
        node's messages), with the recovery's state keys. When every reduction is spent,
        this package's ``ContextOverflowError`` (also a langchain-core one) is raised: a
        wrapper cannot send the run to the stop node without changing the edges the node's
        own update leads to."""
        guarded = self.guard_calls(node)
        return RunnableLambda(guarded.invoke, afunc=guarded.ainvoke, name=name)

    def guard_calls(self, node: Runnable[Any, Any]) -> _Calls:
        """:meth:`guard`'s two functions, to be called without a runnable layer of their own
        (:meth:`entry` calls them directly: one traced run and one callback setup fewer per
        model call)."""

        def call(state: Any, config: RunnableConfig) -> Any:
            try:
                return node.invoke(state, config)
            except Exception as exc:
                if not is_provider_overflow(exc) or not isinstance(state, Mapping):
                    raise
                turn = self._overflowed(state, config, exc)
                out = node.invoke(self._retry_state(state, turn), config)
                return self._merged(turn, out, self._owner(config), state[self.key])

        async def acall(state: Any, config: RunnableConfig) -> Any:
            try:
                return await node.ainvoke(state, config)
            except Exception as exc:
                if not is_provider_overflow(exc) or not isinstance(state, Mapping):
                    raise
                turn = await self.core.aoverflow(
                    self._messages(dict(state)), thread_id_of(config), run_config=config
                )
                self._check(turn, exc)
                retry = self._retry_state(state, turn)
                out = await node.ainvoke(retry, config)
                return self._merged(turn, out, self._owner(config), state[self.key])

        return _Calls(call, acall)

    def _overflowed(self, state: Mapping[str, Any], config: RunnableConfig, exc: Exception) -> Turn:
        messages = self._messages(dict(state))
        turn = self.core.overflow(messages, thread_id_of(config), run_config=config)
        self._check(turn, exc)
        return turn

    @staticmethod
    def _check(turn: Turn, exc: Exception) -> None:
        if turn.outcome != "compacted":
            raise ContextOverflowError(turn.reason, messages=list(turn.messages)) from exc

    def _retry_state(self, state: Any, turn: Turn) -> dict[str, Any]:
        return {**state, self.key: list(turn.messages)}

    def _merged(
        self,
        turn: Turn,
        out: Any,
        owner: str | None = None,
        shared: Sequence[BaseMessage] | None = None,
    ) -> Any:
        """The retried node's update after the compaction's: the new history replaces the
        messages (inside another graph: the private view), then the node's messages are
        added."""
        update = self._update(turn, owner, shared)
        if isinstance(out, Command):
            inner = out.update if isinstance(out.update, Mapping) else {}
            merged = self._merge_update(update, dict(inner))
            return Command(graph=out.graph, update=merged, resume=out.resume, goto=out.goto)
        if out is None:
            return update
        if isinstance(out, Mapping):
            return self._merge_update(update, dict(out))
        raise CompactionError(
            f"the model node returned a {type(out).__name__} after the retry; the overflow "
            "retry needs a dict of state updates or a Command."
        )

    def _merge_update(self, update: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
        added = out.pop(self.key, None)
        if added is None:
            added = []
        elif not isinstance(added, list):
            added = [added]
        return {**update, **out, self.key: [*update.get(self.key, []), *added]}

    # ------------------------------------------------------------------ runnables

    def runnables(self) -> dict[str, RunnableLambda[Any, Any]]:
        """The three nodes as sync+async ``RunnableLambda`` objects, by role."""
        return {
            "micro": RunnableLambda(self.micro, afunc=self.amicro, name="compact_micro"),
            "summarize": RunnableLambda(
                self.summarize, afunc=self.asummarize, name="compact_summarize"
            ),
            "stop": RunnableLambda(self.stop, name="compact_stop"),
            "prepare": RunnableLambda(self.prepare, afunc=self.aprepare, name="compact_prepare"),
        }
