"""The I/O of compaction, as values (sans-IO), and the one archive-then-tag step.

A compaction (:func:`langchain_compact.compaction.compact_history`) and a micro-compaction
step (:func:`archive_and_tag`) are generators that yield these operations (an archive write
or read, a summarizer call) and receive their :class:`Outcome`; :func:`drive` runs them
synchronously (``op.run()``), :func:`adrive` awaits ``op.arun()``. The retry and fallback
policy and the archive rule live here once, for both and for every integration.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.messages import BaseMessage

from langchain_compact._fingerprint import lineage
from langchain_compact.config import CompactionConfig
from langchain_compact.errors import CompactionError, SummarizerError
from langchain_compact.markers import KIND_CLEARED, KIND_TRUNCATED, get_meta, kind_of, with_meta
from langchain_compact.redaction import Redactor, maybe_redact
from langchain_compact.summarizers import ExtractiveSummarizer, Summarizer, check_summary_text

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive

logger = logging.getLogger("langchain_compact")


T = TypeVar("T")


def in_daemon_thread(
    name: str, fn: Callable[..., T], *args: Any, **kwargs: Any
) -> concurrent.futures.Future[T]:
    """Run ``fn(*args, **kwargs)`` in a daemon thread; its result or exception lands in the
    returned future. A daemon thread, so a call that hangs cannot keep the interpreter from
    exiting (a ThreadPoolExecutor worker is joined at exit); in a copy of the caller's
    context, so a model call keeps the graph's callbacks, tracing and tags."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def call() -> None:
        try:
            result = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to whoever reads the future, which decides
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=call, name=name, daemon=True).start()
    return future


@dataclass(frozen=True, slots=True)
class Outcome:
    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class ArchiveOp:
    archive: TranscriptArchive
    messages: list[BaseMessage]
    thread_id: str
    reason: str
    metadata: dict[str, Any]

    def run(self) -> Outcome:
        try:
            return Outcome(
                self.archive.write(
                    self.messages,
                    thread_id=self.thread_id,
                    reason=self.reason,
                    metadata=self.metadata,
                )
            )
        except Exception as exc:
            return Outcome(error=exc)

    async def arun(self) -> Outcome:
        try:
            return Outcome(
                await self.archive.awrite(
                    self.messages,
                    thread_id=self.thread_id,
                    reason=self.reason,
                    metadata=self.metadata,
                )
            )
        except Exception as exc:
            return Outcome(error=exc)


@dataclass(frozen=True, slots=True)
class SummarizeOp:
    summarizer: Summarizer
    messages: list[BaseMessage]
    max_tokens: int
    timeout: float | None

    def run(self) -> Outcome:
        if self.timeout is None:  # no limit: call in this thread, no helper thread needed
            try:
                text = self.summarizer.summarize(self.messages, max_tokens=self.max_tokens)
                return Outcome(text)
            except Exception as exc:
                return Outcome(error=exc)
        future = in_daemon_thread(
            "langchain-compact-summarizer",
            self.summarizer.summarize,
            self.messages,
            max_tokens=self.max_tokens,
        )
        try:
            return Outcome(future.result(timeout=self.timeout))
        except concurrent.futures.TimeoutError:
            return Outcome(
                error=SummarizerError(f"the summarizer timed out after {self.timeout} s")
            )
        except Exception as exc:
            return Outcome(error=exc)

    async def arun(self) -> Outcome:
        try:
            call = self.summarizer.asummarize(self.messages, max_tokens=self.max_tokens)
            return Outcome(await asyncio.wait_for(call, timeout=self.timeout))
        except asyncio.TimeoutError:
            return Outcome(
                error=SummarizerError(f"the summarizer timed out after {self.timeout} s")
            )
        except Exception as exc:
            return Outcome(error=exc)


@dataclass(frozen=True, slots=True)
class ReadOp:
    """Read one archive record (the originals a micro-compaction replaced)."""

    archive: TranscriptArchive
    ref: str
    thread_id: str

    def run(self) -> Outcome:
        try:
            return Outcome(self.archive.read(self.ref, thread_id=self.thread_id))
        except Exception as exc:
            return Outcome(error=exc)

    async def arun(self) -> Outcome:
        try:
            return Outcome(await self.archive.aread(self.ref, thread_id=self.thread_id))
        except Exception as exc:
            return Outcome(error=exc)


@dataclass(frozen=True, slots=True)
class CallOp:
    """Any other I/O a step needs, given as its two forms: ``call()`` where the steps are
    driven synchronously, ``await acall()`` where they are awaited (loading tokenizer files,
    a memory store's write, waiting for a summary prepared in the background). What it
    raises comes back as the outcome's error (:func:`called` raises it again)."""

    call: Callable[[], Any]
    acall: Callable[[], Any]

    def run(self) -> Outcome:
        try:
            return Outcome(self.call())
        except Exception as exc:
            return Outcome(error=exc)

    async def arun(self) -> Outcome:
        try:
            return Outcome(await self.acall())
        except Exception as exc:
            return Outcome(error=exc)


def called(op: CallOp) -> Generator[Op, Outcome, Any]:
    """Yield ``op`` and return its value; its error is raised here, in the step that asked,
    as a plain call would have raised it."""
    outcome = yield op
    if outcome.error is not None:
        raise outcome.error
    return outcome.value


Op = ArchiveOp | SummarizeOp | ReadOp | CallOp


def drive(steps: Generator[Op, Outcome, T]) -> T:
    """Run a sans-IO step generator to its result, doing each operation synchronously."""
    outcome: Outcome | None = None
    while True:
        try:
            op = steps.send(outcome) if outcome is not None else next(steps)
        except StopIteration as done:
            return cast("T", done.value)
        outcome = op.run()


async def adrive(steps: Generator[Op, Outcome, T]) -> T:
    """Async twin of :func:`drive`: each operation is awaited."""
    outcome: Outcome | None = None
    while True:
        try:
            op = steps.send(outcome) if outcome is not None else next(steps)
        except StopIteration as done:
            return cast("T", done.value)
        outcome = await op.arun()


def summary_bound(config: CompactionConfig) -> int:
    """One summary's token bound: ``summary_max_tokens``, capped by the summary budget
    (:attr:`Budget.summary_bound <langchain_compact.budget.Budget.summary_bound>`)."""
    budget = config.budget
    return config.summary_max_tokens if budget is None else budget.summary_bound


def facts_bound(config: CompactionConfig) -> int:
    """Tokens the fidelity supplement of one compaction may take (the facts its summary
    dropped): :attr:`Budget.facts <langchain_compact.budget.Budget.facts>`, or half the
    summary bound while the window is unknown."""
    budget = config.budget
    return summary_bound(config) // 2 if budget is None else budget.facts


def summarize_steps(
    summarizer: Summarizer, messages: list[BaseMessage], config: CompactionConfig, bound: int
) -> Generator[Op, Outcome, tuple[str, str, list[str]]]:
    """Primary summarizer with retries, then the extractive fallback; never loses anything."""
    errors: list[str] = []
    chain: list[tuple[Summarizer, int]] = [(summarizer, config.summarizer_retries + 1)]
    if not isinstance(summarizer, ExtractiveSummarizer):
        chain.append((ExtractiveSummarizer(), 1))
    for candidate, attempts in chain:
        # The extractive summarizer is local, linear and deterministic: it runs without the
        # timeout, so a slow machine cannot turn the last resort into "every summarizer failed".
        local = type(candidate) is ExtractiveSummarizer or getattr(candidate, "_local", False)
        timeout = None if local else config.summarizer_timeout
        for _ in range(attempts):
            outcome = yield SummarizeOp(candidate, messages, bound, timeout)
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


def is_archived_placeholder(message: BaseMessage) -> bool:
    """A cleared or cut result whose original is in the archive already (never re-archived)."""
    return kind_of(message) in (KIND_CLEARED, KIND_TRUNCATED) and bool(
        get_meta(message).get("archive_ref")
    )


def archive_originals(
    archive: TranscriptArchive | None,
    messages: list[BaseMessage],
    *,
    thread_id: str,
    reason: str,
    redactor: Redactor | None,
    metadata: dict[str, Any] | None = None,
) -> Generator[Op, Outcome, str | None]:
    """Archive ``messages`` (redacted first; placeholders already archived are skipped) and
    return the record's ref, ``None`` when there is no archive or nothing to write.

    Raises:
        CompactionError: the write failed; the caller changes nothing.
    """
    todo = maybe_redact([m for m in messages if not is_archived_placeholder(m)], redactor)
    if archive is None or not todo:
        return None
    outcome = yield ArchiveOp(archive, todo, thread_id, reason, dict(metadata or {}))
    if outcome.error is not None:
        raise CompactionError(
            f"archiving the compacted messages failed ({outcome.error}); nothing was changed. "
            "Fix the archive (path, permissions, store connection) and retry."
        ) from outcome.error
    return str(outcome.value)


def archive_and_tag(
    before: list[BaseMessage],
    after: list[BaseMessage],
    *,
    archive: TranscriptArchive | None,
    thread_id: str,
    reason: str,
    redactor: Redactor | None,
    changed: Sequence[int] | None = None,
) -> Generator[Op, Outcome, tuple[list[BaseMessage], str | None]]:
    """The second half of every micro-compaction step (graph node, middleware, LCEL and a
    compaction's tail slimming): the originals of the messages that changed from ``before``
    to ``after`` (``changed``: their indices, when the caller knows them) are archived
    first, then each changed message without an ``archive_ref`` gets the new one (a result
    cut earlier keeps the ref that holds its original).

    Returns:
        ``after`` with the changed messages tagged, and the ref (``None``: nothing archived).
    """
    if changed is None:
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]
    ref = yield from archive_originals(
        archive, [before[i] for i in changed], thread_id=thread_id, reason=reason, redactor=redactor
    )
    out = list(after)
    for i in changed:
        # The placeholder's lineage: a summary prepared from the original still matches it
        # (and only while it is not edited; langchain_compact._fingerprint).
        fields = lineage(before[i], out[i])
        if ref is not None and not get_meta(out[i]).get("archive_ref"):
            fields["archive_ref"] = ref
        out[i] = with_meta(out[i], **fields)
    return out, ref
