"""The compaction nodes and routing edges of a LangGraph graph, over one core.

``CompactionNodes`` wraps a :class:`~langchain_compact.core.Compactor` (config, summarizer,
archive, counter, tools); its methods are the LangGraph nodes (``micro``, ``summarize``,
``stop``; each a ``RunnableLambda`` with a sync and an async body) and the edges (``route``,
``after_summarize``, plain functions returning ``Literal``). They only turn the core's
results into state updates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_compact._defaults import resolve_context_window
from langchain_compact.compaction import CompactionResult
from langchain_compact.config import CompactionConfig
from langchain_compact.core import Compactor, MicroStep, thread_id_of
from langchain_compact.errors import CompactionError
from langchain_compact.markers import Action
from langchain_compact.summarizers import Summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

# resolve_context_window is re-exported: its public path was this module.
__all__ = ["CompactionNodes", "resolve_context_window"]

logger = logging.getLogger("langchain_compact")


class CompactionNodes:
    """Nodes and edges that add compaction to a graph; see :func:`add_compaction`.

    Args:
        config: Settings (``context_window`` must be known; see :func:`resolve_context_window`).
        summarizer: Defaults to :class:`ExtractiveSummarizer` (offline, deterministic).
        archive: Where cleared and compacted originals go before they are replaced.
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
        archive: TranscriptArchive | None = None,
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

    def route(self, state: dict[str, Any]) -> Action | list[Literal["continue", "prepare"]]:
        """Edge in front of the model: ``"continue"`` to the model, ``"compact"`` when over
        the trigger, ``"stop"`` when a limit is hit (:func:`decide`'s action); past the
        prepare point, ``["continue", "prepare"]``: the model and the prepare node run in
        the same superstep, so the summary is written while the model works."""
        messages = self._messages(state)
        decision = self.core.decide(messages)
        if self.core.prepare_due(messages, decision, state.get("prepared_summary")):
            return ["continue", "prepare"]
        return decision.action

    def after_summarize(self, state: dict[str, Any]) -> Literal["continue", "stop"]:
        """Edge after a compaction: go on whenever the next call fits (see
        :meth:`Compactor.after_compaction`); a failed compaction stops."""
        transition = state.get("transition")
        if transition not in ("compacted", "nothing_to_compact"):
            return "stop"
        messages = self._messages(state)
        if transition == "nothing_to_compact":  # nothing to gain, but the call may fit
            return (
                "continue" if self.core.count(messages) <= (self.config.fit_tokens or 0) else "stop"
            )
        return self.core.after_compaction(messages)

    # ------------------------------------------------------------------ micro

    def _micro_update(self, step: MicroStep) -> dict[str, Any]:
        if not step.changed:
            return {"transition": "continue"}
        return {self.key: step.changed, "transition": "micro_compacted"}

    def micro(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: clear old tool results and cut oversized ones, archiving originals first."""
        return self._micro_update(self.core.micro(self._messages(state), thread_id_of(config)))

    async def amicro(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`micro`."""
        step = await self.core.amicro(self._messages(state), thread_id_of(config))
        return self._micro_update(step)

    # ------------------------------------------------------------------ prepare

    def prepare(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node (parallel to the model call): summarise the span a compaction would take
        now and keep it in state for the compaction at the trigger; messages untouched. A
        failure never fails the run: the trigger then compacts on the spot."""
        try:
            record = self.core.prepare(self._messages(state), thread_id_of(config))
        except Exception as exc:
            return self._prepare_failed(exc)
        return {"prepared_summary": record.as_dict() if record is not None else None}

    async def aprepare(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`prepare`."""
        try:
            record = await self.core.aprepare(self._messages(state), thread_id_of(config))
        except Exception as exc:
            return self._prepare_failed(exc)
        return {"prepared_summary": record.as_dict() if record is not None else None}

    @staticmethod
    def _prepare_failed(exc: Exception) -> dict[str, Any]:
        logger.warning("preparing a summary failed (%s); the trigger will compact", exc)
        return {"prepared_summary": None}

    # ------------------------------------------------------------------ summarize

    def _summarize_update(self, result: CompactionResult | Exception) -> dict[str, Any]:
        if isinstance(result, Exception):
            logger.error("compaction failed: %s", result)
            return {"transition": "summarizer_failed", "stop_reason": str(result)}
        if result.summary is None:
            return {"transition": "nothing_to_compact", "stop_reason": result.reason}
        report = Compactor.report(result)
        return {
            self.key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages],
            "transition": "compacted",
            "compaction_count": report["index"],
            "last_compaction": report,
            "prepared_summary": None,
        }

    def summarize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: one full compaction; the history is replaced by head + summary + tail."""
        try:
            result = self.core.compact(
                self._messages(state),
                thread_id_of(config),
                prepared=state.get("prepared_summary"),
            )
        except CompactionError as exc:
            return self._summarize_update(exc)
        self.core.remember(result, config)
        return self._summarize_update(result)

    async def asummarize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`summarize`."""
        try:
            result = await self.core.acompact(
                self._messages(state),
                thread_id_of(config),
                prepared=state.get("prepared_summary"),
            )
        except CompactionError as exc:
            return self._summarize_update(exc)
        await self.core.aremember(result, config)
        return self._summarize_update(result)

    # ------------------------------------------------------------------ stop

    def stop(self, state: dict[str, Any]) -> dict[str, Any]:
        """Node: end the run with a message saying what is done, pending, blocked, next."""
        messages = self._messages(state)
        transition = state.get("transition")
        reason = (
            state.get("stop_reason")
            if transition in ("summarizer_failed", "nothing_to_compact")
            else None
        )
        if not reason:
            if transition == "compacted":
                reason = self.core.overflow_reason(messages)
            else:
                reason = self.core.decide(messages).reason
        return {
            self.key: [self.core.stop(messages, reason)],
            "transition": "stopped",
            "stop_reason": reason,
        }

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
