"""Reading archived originals back, as a sans-IO operation of a compaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_compact._ops import _Outcome

if TYPE_CHECKING:
    from langchain_compact.archive import TranscriptArchive


@dataclass(frozen=True, slots=True)
class _ReadOp:
    """Read one archive record (the originals a micro-compaction replaced)."""

    archive: TranscriptArchive
    ref: str
    thread_id: str

    def run(self) -> _Outcome:
        try:
            return _Outcome(self.archive.read(self.ref, thread_id=self.thread_id))
        except Exception as exc:
            return _Outcome(error=exc)

    async def arun(self) -> _Outcome:
        try:
            return _Outcome(await self.archive.aread(self.ref, thread_id=self.thread_id))
        except Exception as exc:
            return _Outcome(error=exc)
