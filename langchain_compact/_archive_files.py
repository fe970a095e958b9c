"""Private: the JSONL archive's files (:class:`langchain_compact.archive.JsonlArchive`).

Real folders of mode 0700 (symbolic links refused), records published exactly once per
content hash even by concurrent writers (an atomic create of a content-addressed name), and
a bounded cache of parsed record files.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
import warnings
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from langchain_compact._archive_records import (
    BoundedCache,
    Record,
    decode,
    is_ref,
    parse_ref,
)
from langchain_compact.errors import ArchiveError, ArchiveWarning, CorruptRecordError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_LINK_NOFOLLOW = os.link in os.supports_follow_symlinks
_SLOT_PREFIX = ".sha256-"
_MAX_GENERATIONS = 8
_NO_LINK_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EMLINK", "EXDEV")
    if hasattr(errno, name)
)


def _symlink_error(path: str | os.PathLike[str], what: str) -> ArchiveError:
    return ArchiveError(
        f"Refusing to use the archive {what} {os.fspath(path)}: it is a symbolic link, and "
        "following it could write or chmod files elsewhere. Remove the link (archive folders "
        "and files are always created by the archive itself)."
    )


def secure_folder(path: Path, *, create: bool) -> None:
    """Check (and with ``create``, make) a real folder of mode 0700; refuse symbolic links.

    The mode is set through a descriptor opened with ``O_NOFOLLOW``, never through a path
    that a planted link could redirect.
    """
    if create:
        with suppress(FileExistsError):
            path.mkdir(mode=0o700)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if create:
            raise
        return
    if stat.S_ISLNK(info.st_mode):
        raise _symlink_error(path, "folder")
    if not stat.S_ISDIR(info.st_mode):
        raise ArchiveError(f"The archive folder {path} exists and is not a folder; remove it.")
    if not create or stat.S_IMODE(info.st_mode) == 0o700:
        return
    if not hasattr(os, "fchmod") or not _NOFOLLOW:  # pragma: no cover - Windows
        os.chmod(path, 0o700)
        return
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        if os.path.islink(path):  # swapped for a link after the check above
            raise _symlink_error(path, "folder") from exc
        raise
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def _write_temp(folder: Path, data: bytes | Iterable[bytes]) -> str:
    """A fully written, fsynced, mode-0600 hidden temp file in ``folder``; returns its path.

    ``data`` is the bytes, or an iterable of the pieces in order (a record is written a
    piece at a time, never joined: a 200 MB result is then not copied again whole)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                for piece in data:
                    handle.write(piece)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)  # mkstemp made it: a regular file, never a link
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _fsync_folder(folder: Path) -> None:
    with suppress(OSError):  # persist renames; not supported everywhere (e.g. Windows)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600.

    A hidden temp file in the same folder is written, fsynced and then ``os.replace``d onto
    ``path``; on any failure the temp file is removed and ``path`` never exists half-written.
    """
    tmp = _write_temp(path.parent, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(path.parent)


def _read_raw(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular archive file, never through a symbolic link."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise _symlink_error(path, "file") from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise CorruptRecordError(f"The archive file {os.fspath(path)} is not a regular file.")
        return handle.read()


class ForeignRecordError(CorruptRecordError):
    """A readable record whose header is not the expected one (another thread's, say)."""


def record_ref(path: str | os.PathLike[str], digest: str, thread_id: str) -> str:
    """The ref of the complete record of ``thread_id`` at ``path`` whose messages hash to
    ``digest`` (sha256 over the canonical message lines, as in ``serialise``).

    Raises:
        CorruptRecordError: the file holds anything else (other messages, another thread,
            a truncated or malformed record).
        FileNotFoundError: there is no such file.
    """
    raw = _read_raw(path)
    bad = f"The archive file {os.fspath(path)} does not hold the record it is named after"
    newline = raw.find(b"\n")
    if newline < 0 or not raw.endswith(b"\n"):
        raise CorruptRecordError(f"{bad} (it is empty or truncated).")
    body = raw[newline + 1 : -1]
    if hashlib.sha256(body).hexdigest() != digest:
        raise CorruptRecordError(f"{bad} (its messages have another content hash).")
    try:
        header = json.loads(decode(raw[:newline]))
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    ref = header.get("ref") if isinstance(header, dict) else None
    count = body.count(b"\n") + 1 if body else 0
    if not (
        isinstance(header, dict)
        and isinstance(ref, str)
        and is_ref(ref)
        and parse_ref(ref) == digest[:16]
        and header.get("thread_id") == thread_id
        and header.get("count") == count
    ):
        raise ForeignRecordError(f"{bad} (line 1 is not its record header).")
    return ref


def slot_path(folder: Path, digest: str, generation: int = 0) -> Path:
    """The content-addressed name of the record holding ``digest`` in ``folder``.

    A hidden hard link to the record's file; generation 1, 2, ... only replace a slot that
    holds something else (a damaged file), never a good one.
    """
    return folder / f"{_SLOT_PREFIX}{digest}{f'.{generation}' if generation else ''}"


def _older_record(folder: Path, digest: str, thread_id: str) -> Path | None:
    """The oldest good record file of ``digest`` without a slot (written before records had
    slots, or moved in by ``compact``'s staging); unreadable ones are skipped with an
    :class:`ArchiveWarning`."""
    short = digest[:16]
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(f"_{short}.jsonl"))
    except FileNotFoundError:
        return None
    for name in names:
        if not is_ref(name[:-6]):
            continue
        path = folder / name
        try:
            if record_ref(path, digest, thread_id) == name[:-6]:
                return path
        except (FileNotFoundError, ForeignRecordError):  # gone, or not this thread's record
            continue
        except CorruptRecordError as exc:
            warnings.warn(f"{exc} It is ignored.", ArchiveWarning, stacklevel=3)
    return None


class NoHardLinks(Exception):
    """The filesystem refuses hard links (some network or FAT filesystems)."""


def _link(source: str | os.PathLike[str], name: Path) -> bool:
    """Create ``name`` as a hard link to ``source``; ``False`` if ``name`` exists.

    ``os.link`` is an atomic create that fails when the name exists: of any number of
    writers, threads or processes, exactly one creates it.
    """
    try:
        if _LINK_NOFOLLOW:
            os.link(source, name, follow_symlinks=False)
        else:  # pragma: no cover - Windows: no links to links there anyway
            os.link(source, name)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno in _NO_LINK_ERRNOS:
            raise NoHardLinks from exc
        raise
    return True


def _publish_ref(folder: Path, slot: Path, ref: str, digest: str, thread_id: str) -> None:
    """Make ``<ref>.jsonl`` (what ``refs`` lists and ``read`` opens) a link to ``slot``."""
    final = folder / f"{ref}.jsonl"
    if _link(slot, final):
        _fsync_folder(folder)
        return
    try:
        same = os.path.samestat(os.lstat(slot), os.lstat(final))
    except FileNotFoundError:
        same = False
    if not same and record_ref(final, digest, thread_id) != ref:  # pragma: no cover
        raise CorruptRecordError(f"The archive file {final} holds another record.")


def existing_record(
    folder: Path, digest: str, thread_id: str, *, source: str | os.PathLike[str] | None = None
) -> str | None:
    """The ref of ``thread_id``'s record of the messages hashing to ``digest`` in ``folder``;
    with ``source`` (a complete, fsynced record file of them), publish it if there is none.

    Correct by construction for any number of concurrent writers: the record's
    content-addressed slot (:func:`slot_path`) is created with one atomic ``os.link`` that
    fails if it exists, so exactly one file ever holds the slot, and every writer returns
    the ref named in that file's header, after making sure ``<ref>.jsonl`` links to it. No
    lock, no claim, nothing ever removed: a writer that dies at any step leaves either
    nothing, or a slot the next writer of the same messages finishes publishing. A slot
    holding anything else (a damaged file) is skipped with an :class:`ArchiveWarning`, and
    the next generation's slot is used.

    Returns:
        The ref, or ``None`` when there is no record and no ``source``.

    Raises:
        NoHardLinks: the filesystem has no hard links (the caller falls back).
    """
    adopted = False
    generation = vanished = 0
    while generation < _MAX_GENERATIONS:
        slot = slot_path(folder, digest, generation)
        if not os.path.lexists(slot):
            candidate: str | os.PathLike[str] | None = source
            if not adopted:  # a record that predates its slot is the one to keep
                adopted = True
                candidate = _older_record(folder, digest, thread_id) or source
            if candidate is None:
                return None
            try:
                _link(candidate, slot)
            except FileNotFoundError:  # the older record was moved away meanwhile
                continue
        try:
            ref = record_ref(slot, digest, thread_id)
        except FileNotFoundError:  # removed by hand meanwhile: look again
            vanished += 1
            if vanished > 100:
                raise
            continue
        except CorruptRecordError as exc:
            warnings.warn(f"{exc} It is ignored.", ArchiveWarning, stacklevel=2)
            generation += 1
            continue
        _publish_ref(folder, slot, ref, digest, thread_id)
        return ref
    raise ArchiveError(
        f"The archive folder {folder} holds {_MAX_GENERATIONS} damaged files named "
        f"{slot_path(folder, digest).name}*; move them away."
    )


def publish_once(
    folder: Path, ref: str, data: bytes | Iterable[bytes], thread_id: str, digest: str
) -> str:
    """Publish record ``ref`` (the bytes ``data``, or its pieces in order, whose messages
    hash to ``digest``) in
    ``folder`` unless ``thread_id`` already has a record of those messages.

    The record is written to a unique temp file and fsynced, then published by
    :func:`existing_record` (an atomic create of its content-addressed name). Filesystems
    without hard links fall back to a plain atomic write (exactly-once is then not
    guaranteed under concurrent writers).

    Returns:
        The ref that holds the content (``ref``, or the one published first).
    """
    tmp = _write_temp(folder, data)
    try:
        try:
            found = existing_record(folder, digest, thread_id, source=tmp)
        except NoHardLinks:  # best effort: the oldest record of these messages, if any
            older = _older_record(folder, digest, thread_id)
            found = None if older is None else older.name[:-6]
        if found is not None:
            return found
        os.replace(tmp, folder / f"{ref}.jsonl")
        _fsync_folder(folder)
        return ref
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)


def read_record_file(path: str) -> tuple[dict[str, Any], Record]:
    """Parse an archive file into ``(header, record)``, never following a symbolic link.

    Raises:
        CorruptRecordError: the file is empty, not JSON, truncated or malformed.
        ArchiveError: the file is a symbolic link.
        OSError: the file cannot be read.
    """
    raw = _read_raw(path)
    bad = f"The archive file {path} is not a valid record"
    try:
        # split on "\n" only: JSON keeps U+2028, U+0085 etc. raw; splitlines() breaks on them
        lines = [json.loads(line) for line in decode(raw).split("\n") if line]
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptRecordError(f"{bad} ({exc}).") from None
    if not lines:
        raise CorruptRecordError(f"{bad} (it is empty).")
    header, messages = lines[0], lines[1:]
    if not isinstance(header, dict) or not isinstance(header.get("ref"), str):
        raise CorruptRecordError(f"{bad} (line 1 is not a record header).")
    if header.get("count", len(messages)) != len(messages):
        raise CorruptRecordError(
            f"{bad} (the header announces {header.get('count')} messages, it holds "
            f"{len(messages)}: truncated?)."
        )
    for message in messages:
        if not (isinstance(message, dict) and isinstance(message.get("data"), dict)):
            raise CorruptRecordError(f"{bad} (a line is not a serialised message).")
    return header, Record(header["ref"], messages)


class _JsonlReader:
    """:func:`read_record_file` cached by path, size and mtime (a replaced file is read
    again): an LRU of at most 512 files and ``READ_CACHE_BYTES`` (estimated as twice the
    file size: the parsed record and its search text), so memory stays flat over a run.

    Only searches (recall) fill it: they read every record of a thread, again on each
    query. A record read by its ref (the originals a compaction summarizes) is read once,
    so it is served from the cache when there, and not added.
    """

    def __init__(self) -> None:
        self._cache = BoundedCache(max_entries=512, max_bytes=READ_CACHE_BYTES)

    def __call__(
        self, path: str, size: int, mtime_ns: int, *, keep: bool = True
    ) -> tuple[dict[str, Any], Record]:
        key = (path, size, mtime_ns)
        cached = self._cache.get(key)
        if cached is None:
            cached = read_record_file(path)
            if keep:
                self._cache.put(key, cached, 2 * size)
        return cached

    @property
    def cached_bytes(self) -> int:
        """The estimated bytes cached now."""
        return self._cache.cached_bytes

    def cache_clear(self) -> None:
        """Forget every parsed file."""
        self._cache.cache_clear()


#: Bound of :data:`read_jsonl`'s cache, in estimated bytes.
READ_CACHE_BYTES = 16 << 20
read_jsonl = _JsonlReader()
