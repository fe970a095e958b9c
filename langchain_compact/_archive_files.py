"""Private: the JSONL archive's files (:class:`langchain_compact.archive.JsonlArchive`).

Real folders of mode 0700 (symbolic links refused), records published once per content hash
even by concurrent writers, and a bounded cache of parsed record files.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import warnings
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
_CLAIM_PREFIX = ".claim-"


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


def _write_temp(folder: Path, data: bytes) -> str:
    """A fully written, fsynced, mode-0600 hidden temp file in ``folder``; returns its path."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
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


def find_record(folder: Path, short: str, thread_id: str) -> str | None:
    """The oldest readable record of ``thread_id`` in ``folder`` whose ref ends in ``short``.

    A file of that name that cannot be read is skipped with an :class:`ArchiveWarning` (a new
    record is then written, so nothing is lost); a symbolic link is refused.
    """
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(f"_{short}.jsonl"))
    except FileNotFoundError:
        return None
    for name in names:
        ref = name[:-6]
        if not is_ref(ref):
            continue
        try:
            header, _ = read_record_file(os.path.join(folder, name))
        except CorruptRecordError as exc:
            warnings.warn(f"{exc} It is ignored.", ArchiveWarning, stacklevel=2)
            continue
        if header.get("ref") == ref and header.get("thread_id") == thread_id:
            return ref
    return None


def _claimed_ref(claim: Path, short: str) -> str | None:
    """The ref a writer's claim file holds, ``None`` if it vanished or is not a claim."""
    try:
        header, _ = read_record_file(str(claim))
    except (CorruptRecordError, FileNotFoundError):
        return None
    ref = header.get("ref")
    return ref if isinstance(ref, str) and is_ref(ref) and ref.endswith(short) else None


def publish_once(folder: Path, ref: str, data: bytes, thread_id: str) -> str:
    """Publish record ``ref`` in ``folder`` unless ``thread_id`` has one with its content hash.

    Safe for concurrent writers, threads or processes: each writes a complete temp file and
    hard-links it to ``.claim-<hash>`` (``os.link`` fails if the name exists, so exactly one
    writer holds the claim). The holder publishes ``<ref>.jsonl`` and removes the claim only
    afterwards; any other writer returns the existing record, or finishes the publication
    of a claim whose writer died. Filesystems without hard links fall back to a plain
    atomic write.

    Returns:
        The ref that holds the content (``ref``, or the one published first).
    """
    short = parse_ref(ref)
    claim = folder / f"{_CLAIM_PREFIX}{short}"
    tmp = _write_temp(folder, data)
    try:
        for _ in range(100):
            try:
                os.link(tmp, claim)
            except FileExistsError:
                found = find_record(folder, short, thread_id)
                owner = found or _claimed_ref(claim, short)
                if owner is None:  # released meanwhile, or junk: clear it and try again
                    with suppress(FileNotFoundError):
                        if _claimed_ref(claim, short) is None:
                            os.unlink(claim)
                    continue
                if found is None:  # the holder died before publishing: finish its work
                    try:
                        os.link(claim, folder / f"{owner}.jsonl")
                    except FileExistsError:
                        pass
                    except FileNotFoundError:  # the holder was alive and released: look again
                        continue
                    _fsync_folder(folder)
                with suppress(FileNotFoundError):  # the record exists: the claim is spent
                    os.unlink(claim)
                return owner
            except OSError:  # no hard links here (some network or FAT filesystems)
                break
            try:  # this writer holds the claim
                found = find_record(folder, short, thread_id)
                if found is None:
                    os.replace(tmp, folder / f"{ref}.jsonl")
                    _fsync_folder(folder)
            finally:  # released once published, or on failure (nothing left behind)
                with suppress(FileNotFoundError):
                    os.unlink(claim)
            return found or ref
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
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise _symlink_error(path, "file") from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise CorruptRecordError(f"The archive file {path} is not a regular file.")
        raw = handle.read()
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
