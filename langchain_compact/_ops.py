"""The I/O of one compaction, as values (sans-IO).

:func:`langchain_compact.compaction.compact_history` is a generator that yields these
operations (an archive write, a summarizer call) and receives their :class:`_Outcome`; the
sync driver calls :meth:`run`, the async one awaits :meth:`arun`. The retry and fallback
policy lives here once, for both.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langchain_compact.config import CompactionConfig
from langchain_compact.errors import CompactionError, SummarizerError
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, get_meta, kind_of
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer, check_summary_text

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

logger = logging.getLogger("langchain_compact")


@dataclass(frozen=True, slots=True)
class _Outcome:
    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class _ArchiveOp:
    archive: TranscriptArchive
    messages: list[BaseMessage]
    thread_id: str
    reason: str
    metadata: dict[str, Any]

    def run(self) -> _Outcome:
        try:
            return _Outcome(
                self.archive.write(
                    self.messages,
                    thread_id=self.thread_id,
                    reason=self.reason,
                    metadata=self.metadata,
                )
            )
        except Exception as exc:
            return _Outcome(error=exc)

    async def arun(self) -> _Outcome:
        try:
            return _Outcome(
                await self.archive.awrite(
                    self.messages,
                    thread_id=self.thread_id,
                    reason=self.reason,
                    metadata=self.metadata,
                )
            )
        except Exception as exc:
            return _Outcome(error=exc)


@dataclass(frozen=True, slots=True)
class _SummarizeOp:
    summarizer: Summarizer
    messages: list[BaseMessage]
    max_tokens: int
    timeout: float | None

    def run(self) -> _Outcome:
        if self.timeout is None:  # no limit: call in this thread, no helper thread needed
            try:
                text = self.summarizer.summarize(self.messages, max_tokens=self.max_tokens)
                return _Outcome(text)
            except Exception as exc:
                return _Outcome(error=exc)
        # A daemon thread, so a summarizer that hangs past its timeout cannot keep the
        # interpreter from exiting (a ThreadPoolExecutor worker is joined at exit). The call
        # runs in a copy of this context, so the model call keeps the graph's callbacks,
        # tracing and tags.
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        context = contextvars.copy_context()

        def call() -> None:
            try:
                result = context.run(
                    self.summarizer.summarize, self.messages, max_tokens=self.max_tokens
                )
            except BaseException as exc:  # handed to the caller, which decides
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=call, name="langchain-compact-summarizer", daemon=True).start()
        try:
            return _Outcome(future.result(timeout=self.timeout))
        except concurrent.futures.TimeoutError:
            return _Outcome(
                error=SummarizerError(f"the summarizer timed out after {self.timeout} s")
            )
        except Exception as exc:
            return _Outcome(error=exc)

    async def arun(self) -> _Outcome:
        try:
            call = self.summarizer.asummarize(self.messages, max_tokens=self.max_tokens)
            return _Outcome(await asyncio.wait_for(call, timeout=self.timeout))
        except asyncio.TimeoutError:
            return _Outcome(
                error=SummarizerError(f"the summarizer timed out after {self.timeout} s")
            )
        except Exception as exc:
            return _Outcome(error=exc)


_Op = _ArchiveOp | _SummarizeOp


def _summary_bound(config: CompactionConfig) -> int:
    """One summary's token bound: ``summary_max_tokens``, capped by the summary budget."""
    if config.context_window is None:
        return config.summary_max_tokens
    budget = int(config.summary_budget_ratio * config.context_window)
    return max(64, min(config.summary_max_tokens, budget))


def _summarize_steps(
    summarizer: Summarizer, messages: list[BaseMessage], config: CompactionConfig, bound: int
) -> Generator[_Op, _Outcome, tuple[str, str, list[str]]]:
    """Primary summarizer with retries, then the extractive fallback; never loses anything."""
    errors: list[str] = []
    chain: list[tuple[Summarizer, int]] = [(summarizer, config.summarizer_retries + 1)]
    if not isinstance(summarizer, ExtractiveSummarizer):
        chain.append((ExtractiveSummarizer(), 1))
    for candidate, attempts in chain:
        # The extractive summarizer is local, linear and deterministic: it runs without the
        # timeout, so a slow machine cannot turn the last resort into "every summarizer failed".
        local = type(candidate) is ExtractiveSummarizer
        timeout = None if local else config.summarizer_timeout
        for _ in range(attempts):
            outcome = yield _SummarizeOp(candidate, messages, bound, timeout)
            try:
                if outcome.error is not None:
                    raise outcome.error
                text = check_summary_text(outcome.value, bound)
            except Exception as exc:
                errors.append(f"{type(candidate).__name__}: {type(exc).__name__}: {exc}")
                logger.warning("summarizer failed (%s); %s", errors[-1], "retrying or falling back")
                continue
            name = type(candidate).__name__
            return text, (name if candidate is summarizer else f"fallback:{name}"), errors
    raise SummarizerError(
        "every summarizer failed, so nothing was compacted and nothing was lost: "
        + "; ".join(errors)
    )


def _archive_step(
    archive: TranscriptArchive | None,
    messages: list[BaseMessage],
    thread_id: str,
    reason: str,
    metadata: dict[str, Any],
) -> Generator[_Op, _Outcome, str | None]:
    todo = [
        m
        for m in messages
        if not (kind_of(m) in (KIND_CLEARED, KIND_TRUNCATED) and get_meta(m).get("archive_ref"))
    ]
    if archive is None or not todo:
        return None
    outcome = yield _ArchiveOp(archive, todo, thread_id, reason, metadata)
    if outcome.error is not None:
        raise CompactionError(
            f"archiving the compacted messages failed ({outcome.error}); nothing was changed. "
            "Fix the archive (path, permissions, store connection) and retry."
        ) from outcome.error
    return str(outcome.value)
