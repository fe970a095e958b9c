"""The ``compact`` subcommand (and the loading both ``inspect`` and ``compact`` share).

``compact`` changes nothing on disk until everything has worked: archive records are
written into a hidden staging folder inside the archive and moved into place only when the
new history is ready, and the output replaces its file atomically. So a failure at any
step (a summarizer error, a full disk, text that cannot be encoded) leaves the input, the
output file and the archive as they were.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_compact import _archive_files as _f
from langchain_compact import _archive_records as _r
from langchain_compact.archive import JsonlArchive
from langchain_compact.cli._common import CliError, load_chat_model, message_tokens, pick_counter
from langchain_compact.cli._inspect import micro_step
from langchain_compact.cli.transcripts import (
    DEFAULT_MAX_INPUT_BYTES,
    Container,
    Transcript,
    check_output,
    encode_transcript,
    read_transcript,
    write_atomic,
)
from langchain_compact.compaction import compact_history
from langchain_compact.config import CompactionConfig
from langchain_compact.core import with_focus
from langchain_compact.errors import InvalidHistoryError
from langchain_compact.history import HistoryRepair, repair_report, validate_history
from langchain_compact.markers import with_meta
from langchain_compact.summarizers import Summarizer, focused
from langchain_compact.tokens import TokenCounter

__all__ = ["StagedArchive", "load_valid", "run_compact"]

PROG = "langchain-compact"


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True, slots=True)
class Loaded:
    """A transcript ready to use, and the repair that made it valid (if one was needed)."""

    transcript: Transcript
    repair: HistoryRepair | None = None


def load_valid(
    path: str,
    *,
    repair: bool,
    say: Callable[[str], None],
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> Loaded:
    """Read ``path`` and check its tool-call pairing (pending calls at the end are fine).

    With ``repair``, a broken pairing is repaired and every change reported through ``say``
    (one line each, naming the source line); without it, the error names the line and
    suggests ``--repair``.

    Raises:
        CliError: a broken pairing without ``repair``, or nothing left after the repair.
    """
    transcript = read_transcript(path, max_bytes=max_bytes)
    try:
        validate_history(transcript.messages, allow_pending=True)  # a run may end mid-call
    except InvalidHistoryError as exc:
        if not repair:
            where = transcript.where(exc.index)
            raise CliError(
                f"{path}: {where}: {exc} Run again with --repair to fix it automatically."
            ) from None
    else:
        return Loaded(transcript)
    fixed = repair_report(transcript.messages)
    if not fixed.messages:
        raise CliError(
            f"{path}: nothing is left after --repair ({len(transcript.messages)} message(s), "
            f"all of them tool results that answer no call); nothing was written. Add the "
            "AIMessage that made the call(s) in front of them."
        )
    say(
        f"--repair changed the tool-call pairing ({len(transcript.messages)} -> "
        f"{len(fixed.messages)} messages):"
    )
    for change in fixed.changes:
        say(f"  {transcript.where(change.index)}: {change.action}: {change.detail}")
    line_of = {id(m): line for m, line in zip(transcript.messages, transcript.lines, strict=True)}
    line_of_id = {m.id: line for m, line in zip(transcript.messages, transcript.lines, strict=True)}
    lines = [line_of.get(id(m), line_of_id.get(m.id, 0)) for m in fixed.messages]
    return Loaded(
        Transcript(
            messages=fixed.messages,
            fmt=transcript.fmt,
            container=transcript.container,
            lines=lines,
        ),
        fixed,
    )


# --------------------------------------------------------------------------- staging


class StagedArchive(JsonlArchive):
    """A :class:`JsonlArchive` whose writes wait in a hidden folder inside ``target`` until
    :meth:`commit` moves them into place (same refs, same files); :meth:`discard` drops
    them. A write whose messages ``target`` already holds returns the existing ref. Nothing
    is created on disk before the first write.

    A read by ref finds a record staged here, then one staged in ``behind`` (the staging
    of the step before, not committed yet: the full compaction reads the originals the
    micro-compaction cleared moments earlier), then one in ``target``.
    """

    def __init__(self, target: JsonlArchive, *, behind: StagedArchive | None = None) -> None:
        super().__init__(target.directory / ".staging")  # replaced on the first write
        self.target = target
        self.behind = behind
        self.staged: list[tuple[str, str, str]] = []  # (thread id, ref, content hash)
        self._ready = False
        self._made_target = False

    def _get(self, ref: str, thread_id: str) -> _r.Record:
        if any(staged[:2] == (thread_id, ref) for staged in self.staged):
            return super()._get(ref, thread_id)
        if self.behind is not None:
            return self.behind._get(ref, thread_id)
        return self.target._get(ref, thread_id)

    def _fix(self, problem: str | OSError) -> str:
        # The target's message names its folder when the OS error carries no file name.
        return self.target._fix(problem)

    def _ensure(self) -> None:
        if self._ready:
            return
        try:
            self._made_target = not self.target.directory.exists()
            self.target.directory.mkdir(parents=True, mode=0o700, exist_ok=True)
            self.directory = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.target.directory))
        except OSError as exc:
            raise CliError(self._fix(exc)) from None
        self._ready = True

    def write(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str,
        reason: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Stage ``messages`` (or return the ref ``target`` already has for them)."""
        digest = _r.serialise(messages).digest
        existing = self._in_target(thread_id, digest)
        if existing is not None:
            return existing
        self._ensure()
        ref = super().write(messages, thread_id=thread_id, reason=reason, metadata=metadata)
        if (thread_id, ref, digest) not in self.staged:
            self.staged.append((thread_id, ref, digest))
        return ref

    def _in_target(self, thread_id: str, digest: str) -> str | None:
        folder = self.target.thread_folder(thread_id)
        try:
            return _f.existing_record(folder, digest, thread_id)
        except _f.NoHardLinks:
            return None
        except OSError as exc:
            raise CliError(self._fix(exc)) from None

    def adopt(self, other: StagedArchive) -> None:
        """Take over ``other``'s staged records (they are committed with this archive's)."""
        if other.staged:
            self._ensure()
        for thread_id, ref, digest in other.staged:
            name = f"{ref}.jsonl"
            try:
                os.replace(
                    other.thread_folder(thread_id) / name,
                    self.thread_folder(thread_id, create=True) / name,
                )
            except OSError as exc:
                raise CliError(self._fix(exc)) from None
            self.staged.append((thread_id, ref, digest))
        other.staged.clear()

    def commit(self) -> None:
        """Publish every staged record in ``target`` (exactly once, as any write), then
        remove the staging folder."""
        for thread_id, ref, digest in self.staged:
            name = f"{ref}.jsonl"
            staged = self.thread_folder(thread_id) / name
            folder = self.target.thread_folder(thread_id, create=True)
            try:
                try:
                    found = _f.existing_record(folder, digest, thread_id, source=staged)
                except _f.NoHardLinks:
                    found = None
                if found != ref:  # no hard links, or another writer got there first
                    # the new history quotes this ref: it must read, even as a second copy
                    os.replace(staged, folder / name)
            except OSError as exc:
                raise CliError(self._fix(exc)) from None
        self.staged.clear()
        self.discard()

    def discard(self) -> None:
        """Drop whatever is still staged."""
        if self._ready:
            shutil.rmtree(self.directory, ignore_errors=True)
            self._ready = False
            if self._made_target:  # leave no empty archive folder behind
                with suppress(OSError):
                    self.target.directory.rmdir()


# --------------------------------------------------------------------------- compact


def _config(args: argparse.Namespace) -> CompactionConfig:
    extra = {"keep_last_n": args.keep_last} if args.keep_last else {}
    return CompactionConfig(context_window=args.window, **extra)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def run_compact(args: argparse.Namespace) -> int:
    """``compact FILE -o OUT``: micro-compact, then compact once; write OUT and the archive.

    A full compaction that would not make the history smaller (possible well under the
    trigger, where the summary can outweigh what it replaces) is not applied: the command
    says so and keeps the micro-compacted (or unchanged) history.
    """
    from langchain_compact.summarizers import LLMSummarizer

    def note(line: str) -> None:
        print(f"{PROG}: note: {line}", file=sys.stderr)

    if args.base_url and not args.model:
        raise CliError("--base-url needs --model NAME (the model name the server serves)")
    check_output(args.output)  # before any work: a link, FIFO or device is refused
    summarizer = (
        LLMSummarizer(load_chat_model(args.model, base_url=args.base_url)) if args.model else None
    )
    loaded = load_valid(args.file, repair=args.repair, say=note, max_bytes=args.max_input_bytes)
    transcript = loaded.transcript
    messages = transcript.messages
    config = _config(args)
    counter, label = pick_counter()
    thread_id = args.thread_id or ("stdin" if args.file == "-" else Path(args.file).stem)
    stage = StagedArchive(JsonlArchive(args.archive))
    try:
        report = _compact_staged(
            loaded,
            config,
            summarizer,
            stage,
            thread_id,
            counter,
            focus=getattr(args, "focus", None),
        )
        container: Container = "json" if str(args.output).endswith(".json") else "jsonl"
        final = report.messages
        data, escaped = encode_transcript(final, transcript.fmt, container=container)
        unchanged = final == messages and loaded.repair is None
        in_place = _same_file(args.file, args.output)
        stage.commit()  # the archive first: nothing is replaced before it is archived
        if not (unchanged and in_place):
            try:
                write_atomic(args.output, data)
            except OSError as exc:
                raise CliError(
                    f"{args.output}: cannot write the output: {exc.strerror or exc}; "
                    f"{args.output} was left as it was (the archive records are written)"
                ) from None
    finally:
        stage.discard()
    print(f"{args.file}: {len(messages)} messages, {transcript.fmt} format ({label})")
    for line in report.lines:
        print(line)
    if escaped:
        source = {m.id: transcript.where(i) for i, m in enumerate(messages)}
        where = ", ".join(source.get(final[i].id, f"output message {i + 1}") for i in escaped[:5])
        note(
            f"{len(escaped)} message(s) hold text that is not valid Unicode (lone surrogates; "
            f"first: {where}); they are written as JSON \\u escapes, which read back identically"
        )
    before, after = report.tokens_before, report.tokens_after
    saved = f" ({100 * (before - after) / before:.0f}% less)" if before else ""
    print(f"tokens: {before:,} -> {after:,}{saved}")
    if unchanged and in_place:
        print(f"{args.output}: nothing changed, the file was left as it was")
    else:
        print(f"wrote {args.output}: {len(final)} messages, {transcript.fmt} format")
    where = f"{stage.target.directory}, thread {thread_id!r}"
    refs = report.refs
    print(f"archive: {where}: {', '.join(refs)}" if refs else f"archive: nothing written ({where})")
    return 0


@dataclass(frozen=True, slots=True)
class _Report:
    messages: list[BaseMessage]
    lines: list[str]
    tokens_before: int
    tokens_after: int
    refs: list[str]


def _compact_staged(
    loaded: Loaded,
    config: CompactionConfig,
    summarizer: Summarizer | None,
    stage: StagedArchive,
    thread_id: str,
    counter: TokenCounter,
    *,
    focus: str | None = None,
) -> _Report:
    """Repair archive, micro-compaction, full compaction, all written to ``stage`` only;
    ``focus``: what the summary keeps first (``compact --focus``)."""
    messages = loaded.transcript.messages
    refs: list[str] = []
    lines: list[str] = []
    if loaded.repair is not None and loaded.repair.removed:
        ref = stage.write(loaded.repair.removed, thread_id=thread_id, reason="repair")
        refs.append(ref)
        lines.append(
            f"  repair: {len(loaded.repair.changes)} change(s); the "
            f"{len(loaded.repair.removed)} original message(s) it dropped or rewrote are "
            f"archived as {ref}"
        )
    micro = micro_step(messages, config, counter)
    changed = sorted(micro.cleared + micro.truncated)
    if changed:
        ref = stage.write(
            [messages[i] for i in changed], thread_id=thread_id, reason="micro-compaction"
        )
        refs.append(ref)
        for i in changed:
            micro.messages[i] = with_meta(micro.messages[i], archive_ref=ref)
    before = sum(message_tokens(counter, messages))
    after_micro = sum(message_tokens(counter, micro.messages))
    lines.append(
        f"  micro-compaction: {len(micro.cleared)} old tool results cleared, "
        f"{len(micro.truncated)} oversized ones cut: {before:,} -> {after_micro:,} tokens"
    )
    # Kept apart (dropped if the result does not shrink); reads what ``stage`` holds.
    full = StagedArchive(stage.target, behind=stage)
    try:
        result = compact_history(
            micro.messages,
            summarizer=None if summarizer is None else focused(summarizer, focus),
            config=config,
            archive=full,
            thread_id=thread_id,
            counter=counter,
        )
        result = with_focus(result, focus)
        validate_history(result.messages, allow_pending=True)  # a pending call stays pending
        after = sum(message_tokens(counter, result.messages))
        final = result.messages
        if result.summary is None:
            lines.append(f"  full compaction: nothing to compact ({result.reason})")
        elif after >= after_micro:
            lines.append(
                f"  full compaction: not applied: its summary of {len(result.compacted)} "
                f"messages would not make the history smaller ({after_micro:,} -> {after:,} "
                "tokens); kept the history without it"
            )
            final, after = micro.messages, after_micro
        else:
            trigger = config.trigger_tokens or 0
            forced = (
                f" (forced: under the {trigger:,}-token trigger)" if after_micro < trigger else ""
            )
            lines.append(
                f"  full compaction{forced}: {len(result.compacted)} messages summarised by "
                f"{result.summarizer}: {after_micro:,} -> {after:,} tokens"
            )
            stage.adopt(full)  # its records are committed with the rest
            refs += [r for r in (result.archive_ref,) if r]
    finally:
        full.discard()
    return _Report(final, lines, before, after, refs)
