"""The compaction nodes and routing edges, as one object over shared settings.

``CompactionNodes`` holds the config, summarizer, archive and counter; its methods are the
LangGraph nodes (``micro``, ``summarize``, ``stop``; each a ``RunnableLambda`` with a sync
and an async body over the same pure functions) and the edges (``route``,
``after_summarize``, plain functions returning ``Literal``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_compact.compaction import (
    CompactionResult,
    acompact_history,
    compact_history,
    compaction_info,
    decide,
    stop_message,
)
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import CompactionError, CompactionWarning, ConfigError
from langchain_compact.markers import EVENT_KEY, Action, get_meta, with_meta
from langchain_compact.microcompact import micro_compact
from langchain_compact.redaction import maybe_redact
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer
from langchain_compact.tokens import TokenCounter, approximate_tokens, context_tokens

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

__all__ = ["CompactionNodes", "resolve_context_window"]

logger = logging.getLogger("langchain_compact")


def resolve_context_window(
    config: CompactionConfig, model: BaseChatModel | None
) -> CompactionConfig:
    """Fill ``context_window`` from the model's ``profile["max_input_tokens"]`` if unset.

    Raises:
        ConfigError: when neither the config nor the model's profile gives a window.
    """
    _check_summary_role(config, model)
    if config.context_window is not None:
        return config
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if not isinstance(window, int) or window <= 0:
        name = type(model).__name__ if model is not None else "no model"
        raise ConfigError(
            f"context_window is unknown ({name} has no profile['max_input_tokens']); pass "
            "CompactionConfig(context_window=<the model's input window in tokens>)."
        )
    return config.with_window(window)


#: Providers whose chat APIs reject a system message after the first non-system one.
_SYSTEM_FIRST_ONLY = ("anthropic", "google", "gemini", "vertex", "bedrock")


def _check_summary_role(config: CompactionConfig, model: BaseChatModel | None) -> None:
    if config.summary_role != "system" or model is None:
        return
    name = type(model).__name__.lower() + " " + type(model).__module__.lower()
    if any(p in name for p in _SYSTEM_FIRST_ONLY):
        warnings.warn(
            f"summary_role='system' puts a system message in the middle of the history, "
            f"which {type(model).__name__} rejects ('multiple non-consecutive system "
            "messages'); use CompactionConfig(summary_role='human') (the default) with this "
            "model.",
            CompactionWarning,
            stacklevel=3,
        )


def _thread_id(config: RunnableConfig | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or "default")


def _emit(event: dict[str, Any]) -> None:
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()({EVENT_KEY: event})
    except Exception:  # outside a graph run, or custom streaming not requested
        pass


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
        if config.context_window is None:
            raise ConfigError(
                "CompactionNodes needs CompactionConfig(context_window=...); or use "
                "resolve_context_window(config, model) to read it from the model's profile."
            )
        self.config = config
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.archive = archive
        self.counter = counter
        self.tools = list(tools) if tools else None
        self.key = messages_key
        self.memory = memory

    # ------------------------------------------------------------------ edges

    def _messages(self, state: dict[str, Any]) -> list[BaseMessage]:
        try:
            return list(state[self.key])
        except KeyError:
            raise CompactionError(
                f"the graph state has no {self.key!r} key; pass messages_key=<your key> to "
                "add_compaction."
            ) from None

    def route(self, state: dict[str, Any]) -> Action:
        """Edge in front of the model: ``"continue"`` to the model, ``"compact"`` when over
        the trigger, ``"stop"`` when a limit is hit (:func:`decide`'s action)."""
        return decide(
            self._messages(state), config=self.config, counter=self.counter, tools=self.tools
        ).action

    def after_summarize(self, state: dict[str, Any]) -> Literal["continue", "stop"]:
        """Edge after a compaction. Dirty-value protection: the last usage numbers describe
        the old history, so judge the new one by a (calibrated) local estimate. The run goes
        on whenever the next call fits the window minus the reply reserve; still over the
        trigger but fitting is reported (event ``over_trigger``), not a stop, and no new
        compaction runs until the context grows (see ``compaction.effective_trigger``)."""
        transition = state.get("transition")
        if transition not in ("compacted", "nothing_to_compact"):
            return "stop"
        tokens = context_tokens(self._messages(state), counter=self.counter, tools=self.tools)
        fit = self.config.fit_tokens or 0
        if tokens > fit:
            return "stop"
        if transition == "nothing_to_compact":  # nothing to gain, but the call fits
            return "continue"
        trigger = self.config.trigger_tokens or 0
        if tokens >= trigger:
            _emit({"event": "over_trigger", "tokens": tokens, "trigger": trigger, "fit": fit})
            logger.info(
                "after compacting the context is %d tokens, over the trigger of %d but within "
                "the %d that fit: going on",
                tokens,
                trigger,
                fit,
            )
        return "continue"

    # ------------------------------------------------------------------ micro

    def _micro_plan(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], list[BaseMessage]]:
        out = micro_compact(
            messages,
            self.config,
            archived=self.archive is not None,
            counter=self.counter,
            tools=self.tools,
        )
        changed = [i for i, (a, b) in enumerate(zip(messages, out, strict=True)) if a is not b]
        # A result cut to head + tail earlier was archived whole then; don't archive the cut.
        to_archive = [messages[i] for i in changed if not get_meta(messages[i]).get("archive_ref")]
        return maybe_redact(to_archive, self.config.redactor), [out[i] for i in changed]

    def _micro_update(self, changed: list[BaseMessage], ref: str | None) -> dict[str, Any]:
        if not changed:
            return {"transition": "continue"}
        if ref is not None:
            changed = [
                m if get_meta(m).get("archive_ref") else with_meta(m, archive_ref=ref)
                for m in changed
            ]
        saved = sum(int(get_meta(m).get("saved_tokens", 0)) for m in changed)
        _emit(
            {
                "event": "micro_compaction",
                "cleared": len(changed),
                "saved_tokens": saved,
                "archive_ref": ref,
            }
        )
        logger.info(
            "micro-compaction: %d tool results cleared, ~%d tokens saved", len(changed), saved
        )
        return {self.key: changed, "transition": "micro_compacted"}

    def micro(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: clear old tool results and cut oversized ones, archiving originals first."""
        to_archive, changed = self._micro_plan(self._messages(state))
        ref = None
        if to_archive and self.archive is not None:
            ref = self.archive.write(
                to_archive, thread_id=_thread_id(config), reason="micro-compaction"
            )
        return self._micro_update(changed, ref)

    async def amicro(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`micro`."""
        to_archive, changed = self._micro_plan(self._messages(state))
        ref = None
        if to_archive and self.archive is not None:
            ref = await self.archive.awrite(
                to_archive, thread_id=_thread_id(config), reason="micro-compaction"
            )
        return self._micro_update(changed, ref)

    # ------------------------------------------------------------------ summarize

    def _summarize_update(
        self, messages: list[BaseMessage], result: CompactionResult | Exception
    ) -> dict[str, Any]:
        if isinstance(result, Exception):
            logger.error("compaction failed: %s", result)
            return {"transition": "summarizer_failed", "stop_reason": str(result)}
        if result.summary is None:
            return {"transition": "nothing_to_compact", "stop_reason": result.reason}
        count = compaction_info(result.messages).count
        report = {
            "index": count,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "archive_ref": result.archive_ref,
            "summarizer": result.summarizer,
            "compacted_messages": len(result.compacted),
            "merged_summaries": result.merged,
            "errors": list(result.errors),
        }
        _emit({"event": "compaction", **report})
        return {
            self.key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages],
            "transition": "compacted",
            "compaction_count": count,
            "last_compaction": report,
        }

    def _kwargs(self, config: RunnableConfig) -> dict[str, Any]:
        return {
            "summarizer": self.summarizer,
            "config": self.config,
            "archive": self.archive,
            "thread_id": _thread_id(config),
            "counter": self.counter,
            "tools": self.tools,
        }

    def summarize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: one full compaction; the history is replaced by head + summary + tail."""
        messages = self._messages(state)
        try:
            result: CompactionResult | Exception = compact_history(messages, **self._kwargs(config))
        except CompactionError as exc:
            result = exc
        if self.memory is not None and isinstance(result, CompactionResult) and result.summary:
            self.memory.remember(result.messages, config=config)
        return self._summarize_update(messages, result)

    async def asummarize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`summarize`."""
        messages = self._messages(state)
        try:
            result: CompactionResult | Exception = await acompact_history(
                messages, **self._kwargs(config)
            )
        except CompactionError as exc:
            result = exc
        if self.memory is not None and isinstance(result, CompactionResult) and result.summary:
            await self.memory.aremember(result.messages, config=config)
        return self._summarize_update(messages, result)

    # ------------------------------------------------------------------ stop

    def stop(self, state: dict[str, Any]) -> dict[str, Any]:
        """Node: end the run with a message saying what is done, pending, blocked, next."""
        messages = self._messages(state)
        reason = (
            state.get("stop_reason")
            if state.get("transition") in ("summarizer_failed", "nothing_to_compact")
            else None
        )
        if not reason:
            if state.get("transition") == "compacted":
                tokens = context_tokens(messages, counter=self.counter, tools=self.tools)
                reason = (
                    f"the context is still {tokens} tokens after compacting, more than the "
                    f"{self.config.fit_tokens} that fit the window with room for the reply: "
                    "the kept messages alone are too large"
                )
            else:
                reason = decide(
                    messages, config=self.config, counter=self.counter, tools=self.tools
                ).reason
        message = stop_message(messages, reason, advice=self.memory.advice if self.memory else "")
        _emit({"event": "stop", "reason": reason})
        logger.warning("compaction stopped the run: %s", reason)
        return {self.key: [message], "transition": "stopped", "stop_reason": reason}

    # ------------------------------------------------------------------ runnables

    def runnables(self) -> dict[str, RunnableLambda[Any, Any]]:
        """The three nodes as sync+async ``RunnableLambda`` objects, by role."""
        return {
            "micro": RunnableLambda(self.micro, afunc=self.amicro, name="compact_micro"),
            "summarize": RunnableLambda(
                self.summarize, afunc=self.asummarize, name="compact_summarize"
            ),
            "stop": RunnableLambda(self.stop, name="compact_stop"),
        }
