"""The one compaction core that every integration wraps.

:class:`Compactor` holds what a compaction needs (config, summarizer, archive, counter,
tool schemas, optional memory) and does each step once, sync and async over the same
sans-IO body: the micro-compaction step (plan, redact, archive, tag), the decision, a full
compaction, the check after it and the stop message. The LangGraph nodes
(:class:`~langchain_compact.graph.nodes.CompactionNodes`), the ``create_agent`` middleware
(:class:`~langchain_compact.middleware.CompactionMiddleware`) and the LCEL transformer
(:class:`~langchain_compact.lcel.MessageCompactor`) only translate its results into their
own shape (a state update, a hook's return value, a message list). Its steps report what
they did as custom stream events (:data:`~langchain_compact.markers.EVENT_KEY`) when they
run inside a graph, and as log lines on the ``langchain_compact`` logger.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> core = Compactor(config=CompactionConfig(context_window=400, keep_last_n=2))
    >>> history = [HumanMessage("Task: say hi ten times", id="t")]
    >>> history += [AIMessage("hi " * 40, id=f"a{i}") for i in range(10)]
    >>> core.decide(history).action
    'compact'
    >>> result = core.compact(history, thread_id="t1")
    >>> result.messages[0].id, core.after_compaction(result.messages)
    ('t', 'continue')
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage

from langchain_compact._compaction_phases import MIN_SUMMARY_TOKENS
from langchain_compact._compaction_plan import plan_compaction
from langchain_compact._ops import Op, Outcome, adrive, archive_and_tag, drive
from langchain_compact._prepare import (
    Prepared,
    boundary_key,
    prepare_steps,
    prepares,
    repeat_turn,
    usable_prefix,
)
from langchain_compact.compaction import (
    CompactionResult,
    Decision,
    acompact_history,
    compact_history,
    compaction_info,
    decide,
    effective_trigger,
    removed_since_boundary,
    stop_message,
)
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import ConfigError
from langchain_compact.markers import EVENT_KEY, KIND_SUMMARY, get_meta, kind_of
from langchain_compact.microcompact import (
    micro_compact_with_count,
    unread_start,
)
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer
from langchain_compact.tokens import (
    TokenCounter,
    approximate_tokens,
    context_tokens,
    precount_unread,
    preload_precise_counter,
)

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive
    from langchain_compact.memory import CompactionMemory

__all__ = ["Compactor", "MicroStep", "emit"]

logger = logging.getLogger("langchain_compact")

DEFAULT_THREAD_ID = "default"
"""Archive thread of a run whose config has no ``configurable.thread_id``."""


def emit(event: dict[str, Any]) -> None:
    """Send ``event`` as a custom stream event under :data:`EVENT_KEY`, when inside a graph
    run that streams ``"custom"``; a no-op anywhere else."""
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()({EVENT_KEY: event})
    except Exception:  # outside a graph run, or custom streaming not requested
        pass


def thread_id_of(run_config: Any, default: str = DEFAULT_THREAD_ID) -> str:
    """The run's ``configurable.thread_id`` (the archive namespace), else ``default``."""
    configurable = (run_config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or default)


@dataclass(frozen=True, slots=True)
class MicroStep:
    """What one micro-compaction step did."""

    messages: list[BaseMessage]
    """The whole list after the step (changed messages keep their ids)."""
    changed: list[BaseMessage]
    """Only the messages that changed, in order, tagged with their ``archive_ref``."""
    ref: str | None
    """Archive record holding the originals (``None``: nothing archived)."""
    saved_tokens: int
    """Tokens the changed messages freed."""
    tokens: int
    """The context size after the step (the count the decision uses: one per turn)."""


class Compactor:
    """Config, summarizer, archive, counter and tools, and every compaction step over them.

    Args:
        config: Settings; ``context_window`` must be known (see
            :func:`~langchain_compact.graph.nodes.resolve_context_window`).
        summarizer: Defaults to :class:`ExtractiveSummarizer` (offline, deterministic).
        archive: Where cleared and compacted originals go before they are replaced.
        counter: Local token counter for messages after the usage anchor.
        tools: Tool schemas the model is called with (counted when there is no anchor).
        memory: Also keep the pinned task and summaries in a store after each compaction.
        verify_anchor: Let a usage report anchor the count only when it can describe the
            list at hand (LCEL: the replies describe the compacted copy a chain sent, not
            the raw history it is called with).

    Raises:
        ConfigError: when ``config.context_window`` is unknown.
    """

    def __init__(
        self,
        *,
        config: CompactionConfig,
        summarizer: Summarizer | None = None,
        archive: TranscriptArchive | None = None,
        counter: TokenCounter = approximate_tokens,
        tools: Sequence[Any] | None = None,
        memory: CompactionMemory | None = None,
        verify_anchor: bool = False,
    ) -> None:
        if config.context_window is None:
            raise ConfigError(
                "compaction needs CompactionConfig(context_window=...); or pass the chat model "
                "(model=...) to read it from its profile, or use "
                "resolve_context_window(config, model)."
            )
        self.config = config
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.archive = archive
        self.counter = counter
        self.tools = list(tools) if tools else None
        self.memory = memory
        self.verify_anchor = verify_anchor
        # (length, first and last message objects, tokens) of the list the micro step left;
        # the objects themselves, so a hit is checked by identity (an id could be reused)
        self._count: tuple[int, BaseMessage, BaseMessage, int] | None = None
        self.prepares = prepares(config, self.summarizer)
        """Whether summaries are prepared before the trigger (``config.prepare``, else on
        for an LLM summarizer)."""
        preload_precise_counter()  # off the hot path: ready before the first clearing

    # ------------------------------------------------------------------ counting, deciding

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """The usage-anchored context size of ``messages`` (provider tokens where known)."""
        return context_tokens(
            messages, counter=self.counter, tools=self.tools, verify_anchor=self.verify_anchor
        )

    def _remember_count(self, messages: Sequence[BaseMessage], tokens: int) -> None:
        """Keep the count the micro step made, for the decision on the same list (the graph
        runs them as a node and an edge; the middleware and LCEL in one call)."""
        if messages:
            self._count = (len(messages), messages[0], messages[-1], tokens)

    def _counted(self, messages: Sequence[BaseMessage]) -> int | None:
        """The micro step's count when ``messages`` is the list it left (same length, same
        first and last message objects); ``None`` otherwise."""
        kept = self._count
        if kept is None or not messages:
            return None
        n, first, last, tokens = kept
        if n == len(messages) and first is messages[0] and last is messages[-1]:
            return tokens
        return None

    def decide(self, messages: Sequence[BaseMessage], *, tokens: int | None = None) -> Decision:
        """Continue, compact first, or stop (:func:`~langchain_compact.compaction.decide`),
        on the count the micro step left for this list when there is one."""
        if tokens is None:
            tokens = self._counted(messages)
        if tokens is None and self.verify_anchor:
            tokens = self.count(messages)
        return decide(
            messages, config=self.config, counter=self.counter, tools=self.tools, tokens=tokens
        )

    def after_compaction(self, messages: Sequence[BaseMessage]) -> Literal["continue", "stop"]:
        """The check after a compaction (dirty-value protection): the last usage numbers
        describe the old history, so judge the new one by a calibrated local estimate. Go on
        whenever the next call fits the window minus the reply reserve; still over the
        trigger but fitting is reported (event ``over_trigger``), not a stop, and no new
        compaction runs until the context grows (``compaction.effective_trigger``)."""
        tokens = self.count(messages)
        fit = self.config.fit_tokens or 0
        if tokens > fit:
            return "stop"
        trigger = self.config.trigger_tokens or 0
        if tokens >= trigger:
            emit({"event": "over_trigger", "tokens": tokens, "trigger": trigger, "fit": fit})
            logger.info(
                "after compacting the context is %d tokens, over the trigger of %d but within "
                "the %d that fit: going on",
                tokens,
                trigger,
                fit,
            )
        return "continue"

    def overflow_reason(self, messages: Sequence[BaseMessage]) -> str:
        """Why a compacted history cannot go on (for the stop message or the error)."""
        tokens = self.count(messages)
        return (
            f"the context is still {tokens} tokens after compacting, more than the "
            f"{self.config.fit_tokens} that fit the window with room for the reply: the kept "
            "messages alone are too large"
        )

    def stop(self, messages: Sequence[BaseMessage], reason: str) -> AIMessage:
        """The message a run ends with: what is done, pending, blocked, and how to go on."""
        message = stop_message(messages, reason, advice=self.memory.advice if self.memory else "")
        emit({"event": "stop", "reason": reason})
        logger.warning("compaction stopped the run: %s", reason)
        return message

    # ------------------------------------------------------------------ micro-compaction

    def micro_steps(
        self, messages: Sequence[BaseMessage], thread_id: str
    ) -> Generator[Op, Outcome, MicroStep]:
        """The micro-compaction step as a sans-IO generator: plan (clear old read results,
        digest oversized ones, under pressure only), redact, archive the originals, tag."""
        before = messages if isinstance(messages, list) else list(messages)
        precount_unread(before)  # their precise sizes, counted off this thread
        result = micro_compact_with_count(
            before,
            self.config,
            archived=self.archive is not None,
            counter=self.counter,
            tools=self.tools,
            verify_anchor=self.verify_anchor,
            compactable=self._can_compact,
        )
        if not result.changed:
            self._remember_count(before, result.tokens)
            return MicroStep(before, [], None, 0, result.tokens)
        out, ref = yield from archive_and_tag(
            before,
            result.messages,
            archive=self.archive,
            thread_id=thread_id,
            reason="micro-compaction",
            redactor=self.config.redactor,
            changed=result.changed,
        )
        changed = [out[i] for i in result.changed]
        saved = sum(int(get_meta(m).get("saved_tokens", 0)) for m in changed)
        emit(
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
        self._remember_count(out, result.tokens)
        return MicroStep(out, changed, ref, saved, result.tokens)

    def _can_compact(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether a full compaction can make room for ``messages`` without cutting what the
        model has not read: there is a span to summarise, ``max_compactions`` is not
        reached, and the unread results fit beside the system prompt, the task and a
        minimal summary."""
        plan = plan_compaction(messages, self.config)
        cap, fit = self.config.max_compactions, self.config.fit_tokens
        if plan is None or fit is None:
            return False
        if cap is not None and compaction_info(messages).count >= cap:
            return False
        fixed = [m for m in plan.head if kind_of(m) != KIND_SUMMARY]
        unread = messages[unread_start(messages) :]
        return self.counter([*fixed, *unread]) + MIN_SUMMARY_TOKENS <= fit

    def micro(self, messages: Sequence[BaseMessage], thread_id: str) -> MicroStep:
        """Run the micro-compaction step (archive writes done synchronously)."""
        return drive(self.micro_steps(messages, thread_id))

    async def amicro(self, messages: Sequence[BaseMessage], thread_id: str) -> MicroStep:
        """Async twin of :meth:`micro`."""
        return await adrive(self.micro_steps(messages, thread_id))

    # ------------------------------------------------------------------ preparing

    def prepare_due(
        self, messages: Sequence[BaseMessage], decision: Decision, prepared: Any = None
    ) -> bool:
        """Whether to prepare a summary now, concurrently with the model call: preparing is
        on, the call goes ahead (``decision``) with the context past ``prepare_tokens``, and
        no usable (or failed) summary is prepared for this boundary yet."""
        start = self.config.prepare_tokens
        if not self.prepares or decision.action != "continue" or start is None:
            return False
        if decision.tokens < start:
            return False
        if not self._compaction_ahead(messages, decision.tokens):
            return False
        plan = plan_compaction(messages, self.config)
        if plan is None:
            return False
        record = Prepared.from_dict(prepared)
        if record is not None and record.boundary == boundary_key(messages):
            if record.failed:
                return False  # retried at the trigger, the usual way
            covers, _reason = usable_prefix(
                record,
                messages,
                plan,
                config=self.config,
                summarizer=self.summarizer,
            )
            return covers == 0
        return True

    def _compaction_ahead(self, messages: Sequence[BaseMessage], tokens: int) -> bool:
        """Whether the next turn, growing as the newest one did, will likely end in a full
        compaction. The next turn is simulated: the newest turn repeated (its results are
        read by then, so clearing may take them), run through micro-compaction and the
        routing decision exactly as the real one will be. Preparing only then (just in
        time) wastes no summary on a run that clearing keeps under the trigger."""
        cfg = self.config
        start = unread_start(messages)  # the newest turn: its AIMessage and what followed
        newest = start - 1 if start else len(messages)
        turn = list(messages[newest:])
        ahead = tokens + self.counter(turn)
        trigger = effective_trigger(messages, cfg)
        gate = min(cfg.micro_trigger_tokens or trigger, trigger)
        fold = cfg.fold_tokens
        if ahead < gate and (fold is None or removed_since_boundary(messages) < fold):
            return False  # nothing is cleared or compacted on the next turn
        nxt = [*messages, *repeat_turn(turn)]
        cleared = micro_compact_with_count(
            nxt,
            cfg,
            archived=self.archive is not None,
            counter=self.counter,
            tools=self.tools,
            tokens=ahead,
            compactable=self._can_compact,
        )
        after = decide(
            cleared.messages,
            config=cfg,
            counter=self.counter,
            tools=self.tools,
            tokens=cleared.tokens,
        )
        return after.action == "compact"

    def prepare_steps(
        self, messages: Sequence[BaseMessage], thread_id: str
    ) -> Generator[Op, Outcome, Prepared | None]:
        """Summarise the span a compaction would take now, without changing anything."""
        return prepare_steps(
            messages,
            config=self.config,
            summarizer=self.summarizer,
            archive=self.archive,
            thread_id=thread_id,
            counter=self.counter,
            tools=self.tools,
        )

    def _prepared(self, record: Prepared | None, started: float) -> Prepared | None:
        seconds = round(time.perf_counter() - started, 3)
        if record is None:
            return None
        if record.failed:
            emit({"event": "prepare_failed", "reason": record.failed, "seconds": seconds})
            logger.warning("preparing a summary failed (%s); the trigger will retry", record.failed)
        else:
            emit(
                {
                    "event": "summary_prepared",
                    "messages": len(record.span_ids),
                    "seconds": seconds,
                }
            )
            logger.info(
                "summary prepared ahead of the trigger: %d messages in %.2f s",
                len(record.span_ids),
                seconds,
            )
        return record

    def prepare(self, messages: Sequence[BaseMessage], thread_id: str) -> Prepared | None:
        """Run :meth:`prepare_steps` (I/O done synchronously)."""
        started = time.perf_counter()
        return self._prepared(drive(self.prepare_steps(messages, thread_id)), started)

    async def aprepare(self, messages: Sequence[BaseMessage], thread_id: str) -> Prepared | None:
        """Async twin of :meth:`prepare`."""
        started = time.perf_counter()
        return self._prepared(await adrive(self.prepare_steps(messages, thread_id)), started)

    # ------------------------------------------------------------------ full compaction

    def _kwargs(self, thread_id: str, prepared: Any) -> dict[str, Any]:
        return {
            "summarizer": self.summarizer,
            "config": self.config,
            "archive": self.archive,
            "thread_id": thread_id,
            "counter": self.counter,
            "tools": self.tools,
            "prepared": Prepared.from_dict(prepared),
            # A stateless chain compacts a copy: its model's usage describes the copy.
            "calibrate": not self.verify_anchor,
        }

    def compact(
        self, messages: Sequence[BaseMessage], thread_id: str, *, prepared: Any = None
    ) -> CompactionResult:
        """One full compaction (:func:`~langchain_compact.compaction.compact_history`),
        using ``prepared`` (a summary prepared before the trigger) when it still matches."""
        started = time.perf_counter()
        result = compact_history(messages, **self._kwargs(thread_id, prepared))
        self._report(result, time.perf_counter() - started)
        return result

    async def acompact(
        self, messages: Sequence[BaseMessage], thread_id: str, *, prepared: Any = None
    ) -> CompactionResult:
        """Async twin of :meth:`compact`."""
        started = time.perf_counter()
        result = await acompact_history(messages, **self._kwargs(thread_id, prepared))
        self._report(result, time.perf_counter() - started)
        return result

    def remember(self, result: CompactionResult, run_config: Any) -> None:
        """Keep the pinned task and summaries in the memory store, when one is configured."""
        if self.memory is not None and result.summary is not None:
            self.memory.remember(result.messages, config=run_config)

    async def aremember(self, result: CompactionResult, run_config: Any) -> None:
        """Async twin of :meth:`remember`."""
        if self.memory is not None and result.summary is not None:
            await self.memory.aremember(result.messages, config=run_config)

    @staticmethod
    def report(result: CompactionResult) -> dict[str, Any]:
        """The numbers of a compaction, as the ``last_compaction`` state key holds them."""
        summary_meta = get_meta(result.summary) if result.summary is not None else {}
        return {
            "index": int(summary_meta.get("index", 0)),
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "archive_ref": result.archive_ref,
            "summarizer": result.summarizer,
            "compacted_messages": len(result.compacted),
            "merged_summaries": result.merged,
            "errors": list(result.errors),
            "prepared": result.prepared,
            "cause": str(summary_meta.get("cause", "")),
        }

    def _report(self, result: CompactionResult, seconds: float) -> None:
        if result.prepared.startswith("discarded"):
            emit({"event": "prepared_discarded", "reason": result.prepared[len("discarded: ") :]})
            logger.info("prepared summary %s", result.prepared)
        elif result.prepared:
            emit({"event": "prepared_used", "how": result.prepared})
        if result.summary is not None:
            pause = round(seconds, 3)
            emit({"event": "compaction", **self.report(result), "pause_seconds": pause})
            logger.info("compaction took %.3f s (%s)", pause, result.prepared or "on the spot")
