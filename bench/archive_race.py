"""Race harness: many writers archive the same messages at once, with random delays at
every filesystem (or store) step (issue 21, item 1).

Each trial archives one batch of messages for one thread from many writers at the same
moment, then counts what the archive holds:

* ``threads``: 16 threads of this process on one :class:`JsonlArchive`;
* ``processes``: 4 worker processes of 4 threads each on one :class:`JsonlArchive`
  folder (the workers live across trials; a shared barrier starts them together);
* ``store``: 16 threads on one :class:`StoreArchive` over ``InMemoryStore``.

While writing, ``os.link``, ``os.replace``, ``os.unlink``, ``os.fsync``, ``os.open``,
``os.lstat``, ``os.listdir`` and ``tempfile.mkstemp`` (``store.get`` / ``store.put`` for
the store) sleep a random 0-2 ms before running, half of the time, so every interleaving
of the publication steps gets its chance. A trial counts *duplicates* (records beyond the
first for the batch), *unreadable refs* (a ref a writer got back whose ``read`` raises or
gives other messages), writer errors, distinct refs returned and temp files left behind.

``python -m bench.archive_race --trials 10000`` splits the trials evenly over the three
kinds and writes ``bench/results/archive_race.json``; :func:`run` returns the numbers
(the unit test runs a few hundred trials).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_compact.archive import JsonlArchive, StoreArchive, TranscriptArchive

RESULTS = Path(__file__).resolve().parent / "results" / "archive_race.json"
KINDS = ("threads", "processes", "store")
THREADS = 16
PROCESSES = 4
THREADS_PER_PROCESS = 4
MAX_DELAY = 0.002
THREAD_ID = "race"
_OS_STEPS = ("link", "replace", "unlink", "fsync", "open", "lstat", "listdir")


# --------------------------------------------------------------------------- delays


class Delays:
    """Random sleeps before the wrapped functions run, while :attr:`on` is set."""

    def __init__(self, max_delay: float = MAX_DELAY) -> None:
        self.max_delay = max_delay
        self.on = False
        self._local = threading.local()
        self.seed = 0

    def _rng(self) -> random.Random:
        rng: random.Random | None = getattr(self._local, "rng", None)
        if rng is None:
            rng = self._local.rng = random.Random(f"{self.seed}-{threading.get_ident()}")
        return rng

    def reseed(self, seed: int) -> None:
        """New random streams for every thread (the next trial)."""
        self.seed = seed
        self._local = threading.local()

    def pause(self) -> None:
        if self.on:
            rng = self._rng()
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, self.max_delay))

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def delayed(*args: Any, **kwargs: Any) -> Any:
            self.pause()
            result = fn(*args, **kwargs)
            self.pause()
            return result

        return delayed


@contextmanager
def os_delays(delays: Delays) -> Iterator[None]:
    """Install :class:`Delays` around the filesystem steps of a JSONL write."""
    saved = {name: getattr(os, name) for name in _OS_STEPS}
    saved_mkstemp = tempfile.mkstemp
    try:
        for name, fn in saved.items():
            setattr(os, name, delays.wrap(fn))
        tempfile.mkstemp = delays.wrap(saved_mkstemp)  # type: ignore[assignment]
        yield
    finally:
        for name, fn in saved.items():
            setattr(os, name, fn)
        tempfile.mkstemp = saved_mkstemp  # type: ignore[assignment]


class DelayedStore(InMemoryStore):
    """``InMemoryStore`` whose ``get`` / ``put`` sleep at random (see :class:`Delays`)."""

    def __init__(self, delays: Delays) -> None:
        super().__init__()
        self.delays = delays

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.delays.pause()
        return super().get(*args, **kwargs)

    def put(self, *args: Any, **kwargs: Any) -> None:
        self.delays.pause()
        super().put(*args, **kwargs)
        self.delays.pause()


# --------------------------------------------------------------------------- writers


def batch(trial: int) -> list[BaseMessage]:
    """The messages every writer of trial ``trial`` archives (distinct per trial)."""
    return [
        HumanMessage(f"task of trial {trial}", id=f"h{trial}"),
        AIMessage("", tool_calls=[{"name": "read", "args": {"n": trial}, "id": f"c{trial}"}]),
        ToolMessage(f"result {trial} " + "x" * (trial % 97), tool_call_id=f"c{trial}"),
    ]


def write_all(archive: TranscriptArchive, messages: list[BaseMessage], n: int) -> list[Any]:
    """``n`` threads write ``messages`` at once; their refs, or the errors they raised."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def writer(i: int) -> None:
        try:
            barrier.wait()
            out[i] = archive.write(messages, thread_id=THREAD_ID, reason=f"writer {i}")
        except BaseException as exc:  # counted, never raised
            out[i] = exc

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def _worker(conn: Connection, start: Any, max_delay: float) -> None:
    """A worker process: on each ``(folder, trial, seed)``, wait for the others, write."""
    delays = Delays(max_delay)
    with os_delays(delays):
        while True:
            job = conn.recv()
            if job is None:
                return
            folder, trial, seed = job
            delays.reseed(seed)
            archive = JsonlArchive(folder)
            messages = batch(trial)
            start.wait()
            delays.on = True
            try:
                out = write_all(archive, messages, THREADS_PER_PROCESS)
            finally:
                delays.on = False
            conn.send([r if isinstance(r, str) else f"{type(r).__name__}: {r}" for r in out])


class Workers:
    """``PROCESSES`` long-lived writer processes started together by one barrier."""

    def __init__(self, max_delay: float) -> None:
        ctx = mp.get_context("spawn")
        self.start = ctx.Barrier(PROCESSES)
        self.conns: list[Connection] = []
        self.procs = []
        for _ in range(PROCESSES):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, self.start, max_delay), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def run(self, folder: str, trial: int, seed: int) -> list[Any]:
        for i, conn in enumerate(self.conns):
            conn.send((folder, trial, seed * 100 + i))
        return [r for conn in self.conns for r in conn.recv()]

    def close(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():  # pragma: no cover
                proc.kill()


# --------------------------------------------------------------------------- trials


def check(
    archive: TranscriptArchive, messages: list[BaseMessage], out: list[Any]
) -> dict[str, int]:
    """What one trial left: duplicates, unreadable refs, errors, distinct refs, temp files."""
    refs = [r for r in out if isinstance(r, str) and r.startswith("transcript_")]
    unreadable = 0
    for ref in set(refs):
        try:
            ok = archive.read(ref, thread_id=THREAD_ID) == messages
        except Exception:
            ok = False
        unreadable += refs.count(ref) * (not ok)
    records = archive.refs(thread_id=THREAD_ID)
    leftovers = 0
    if isinstance(archive, JsonlArchive):
        folder = archive.thread_folder(THREAD_ID)
        leftovers = sum(1 for n in os.listdir(folder) if n.startswith(".tmp-"))
    return {
        "duplicates": max(0, len(records) - 1),
        "missing": int(not records),
        "unreadable_refs": unreadable,
        "errors": len(out) - len(refs),
        "distinct_refs": len(set(refs)),
        "temp_files_left": leftovers,
        "writes": len(out),
    }


def run(
    trials: int,
    *,
    kinds: tuple[str, ...] = KINDS,
    max_delay: float = MAX_DELAY,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run ``trials`` trials spread evenly over ``kinds``; totals per kind and overall."""
    keys = ("duplicates", "missing", "unreadable_refs", "errors", "temp_files_left", "writes")
    totals: dict[str, dict[str, Any]] = {
        kind: {"trials": 0, **dict.fromkeys(keys, 0), "trials_with_several_refs": 0}
        for kind in kinds
    }
    examples: list[str] = []
    delays = Delays(max_delay)
    workers = Workers(max_delay) if "processes" in kinds else None
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="archive-race-") as root:
            for trial in range(trials):
                kind = kinds[trial % len(kinds)]
                messages = batch(trial)
                folder = os.path.join(root, str(trial))
                archive: TranscriptArchive
                if kind == "processes":
                    assert workers is not None
                    out = workers.run(folder, trial, seed * 1_000_003 + trial)
                    archive = JsonlArchive(folder)
                else:
                    delays.reseed(seed * 1_000_003 + trial)
                    if kind == "store":
                        archive = StoreArchive(DelayedStore(delays))
                        delays.on = True
                        try:
                            out = write_all(archive, messages, THREADS)
                        finally:
                            delays.on = False
                    else:
                        archive = JsonlArchive(folder)
                        with os_delays(delays):
                            delays.on = True
                            try:
                                out = write_all(archive, messages, THREADS)
                            finally:
                                delays.on = False
                result = check(archive, messages, out)
                total = totals[kind]
                total["trials"] += 1
                for key in keys:
                    total[key] += result[key]
                total["trials_with_several_refs"] += result["distinct_refs"] > 1
                bad = result["duplicates"] + result["unreadable_refs"] + result["errors"]
                if bad and len(examples) < 10:
                    errors = [r for r in out if not str(r).startswith("transcript_")]
                    examples.append(f"trial {trial} ({kind}): {result} {errors[:2]}")
                if progress and (trial + 1) % 500 == 0:
                    progress(f"{trial + 1}/{trials} trials, {time.perf_counter() - started:.0f} s")
    finally:
        if workers is not None:
            workers.close()
    overall = {key: sum(t[key] for t in totals.values()) for key in ("trials", *keys)}
    return {
        "trials": trials,
        "seconds": round(time.perf_counter() - started, 1),
        "max_delay_s": max_delay,
        "writers_per_trial": {
            "threads": THREADS,
            "processes": f"{PROCESSES} processes x {THREADS_PER_PROCESS} threads",
            "store": THREADS,
        },
        "overall": overall,
        "by_kind": totals,
        "examples": examples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.archive_race", description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=MAX_DELAY)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = run(
        args.trials,
        seed=args.seed,
        max_delay=args.max_delay,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    result["python"] = sys.version.split()[0]
    result["platform"] = sys.platform
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["overall"]))
    overall = result["overall"]
    return 1 if overall["duplicates"] or overall["unreadable_refs"] or overall["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
