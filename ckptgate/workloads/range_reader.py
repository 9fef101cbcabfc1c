"""Reading one file of a timed read: ``RangeReader`` reads a byte range in transfer-size
chunks and verifies it against what the writer stamped, ``prepare_file`` drops the file's pages
and measures its residency first (``FileRead``), and ``ReadFilesDetail`` is what a read rank
reports of its files. The readback (ckptgate.workloads.readback) and the resharded load
(ckptgate.workloads.reshard) read with these; the module docstring of readback says why the
pages are dropped and when the bytes are verified.
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.datagen import BlockStamper, DataMismatch
from ckptgate.engine.latency import LatencyHistogram
from ckptgate.engine.pool import RankContext
from ckptgate.engine.records import (
    RankDetail,
)
from ckptgate.storage.operations import Backend, ReadFile
from ckptgate.storage.pagecache import DIRECT_ALIGN_BYTES, aligned_buffer
from ckptgate.workloads.fileplan import ShardFile


class RangeReader:
    """Reads ``[offset, offset + length)`` of one file in transfer-size chunks and verifies it,
    through the backend's ``open_read`` and ``read_into`` (O_DIRECT where asked and allowed)."""

    def __init__(
        self,
        backend: Backend[Any],
        shard: ShardFile,
        direct: bool,
        ctx: RankContext | None = None,
    ) -> None:
        self.backend = backend
        self.ctx = ctx
        """Where progress goes (``RankContext.progress``): the bytes read, ``base_bytes`` on."""
        self.base_bytes = 0
        """Bytes this rank read before this range (a resharded rank reads several)."""
        self.shard = shard
        self.stamper = BlockStamper(shard.stamp, shard.transfer_bytes)
        self.step = self.stamper.step_bytes
        self.buffer = aligned_buffer(self.step)
        self.view = memoryview(self.buffer)
        self.array = np.frombuffer(self.buffer, dtype=np.uint8)
        self.want_direct = direct
        self.verify_s = 0.0
        """Time spent verifying, inside ``read_verify`` (so inside the caller's read phase)."""
        self.read_latency = LatencyHistogram()
        """Each transfer's read latency (``read_into``, to the verification's start)."""
        self.opened: ReadFile[Any] | None = None

    @property
    def direct(self) -> bool:
        return bool(self.opened and self.opened.direct)

    @property
    def direct_refused(self) -> str | None:
        return self.opened.refused if self.opened else None

    def expect(self, offset: int, length: int) -> None:
        """Before the timed read: the hashes ``[offset, offset + length)`` should have
        (``BlockStamper.expect``), so the read verifies with one hash per transfer."""
        self.stamper.expect(offset, length, stamp_offset=self.shard.stamp_offset)

    def open(self) -> None:
        if self.ctx is not None:
            self.ctx.progress(phase="open", path=self.shard.path)
        self.opened = self.backend.open_read(self.shard.path, direct=self.want_direct)

    def read_verify(self, offset: int, length: int, *, verify: bool = True) -> int:
        """Read and verify the range (only read it with ``verify=False``); chunks after the
        first lie on the transfer grid."""
        opened = self.opened
        if opened is None:
            raise RuntimeError(f"{self.shard.path}: read before open")
        read_into = self.backend.read_into
        progress = self.ctx.progress if self.ctx is not None else None
        if progress is not None:
            progress(phase="read", path=self.shard.path)
        position, end = offset, offset + length
        align = DIRECT_ALIGN_BYTES
        clock_ns = time.perf_counter_ns
        # Two clock reads per transfer (after the read, after the verification) into one list
        # allocated here; the read latencies and the verification time come out after the loop.
        marks_ns = [0] * (2 * (length // self.step + 2) + 1)
        marks_ns[0] = clock_ns()
        mark = 1
        while position < end:
            take = min(self.step - position % self.step, end - position)
            if opened.direct and (position % align or take % align):
                # O_DIRECT wants aligned offsets and lengths: read the aligned blocks around
                # the range (only a file's tail or a resharded slice's edge gets here)
                start = position - position % align
                span = -(-(position + take - start) // align) * align
                got = read_into(opened, self.view[:span], start)
                skip = position - start
                data = self.array[skip : max(skip, min(got, skip + take))]
            else:
                got = read_into(opened, self.view[:take], position)
                data = self.array[: min(got, take)]
            if len(data) < take:
                raise DataMismatch(
                    f"{self.shard.path}: file ends at offset {position + len(data)}, "
                    f"rank {self.shard.global_rank} wrote {self.shard.bytes} bytes"
                )
            marks_ns[mark] = clock_ns()
            if verify:
                self.stamper.verify(
                    data, position, self.shard.path, stamp_offset=self.shard.stamp_offset
                )
            marks_ns[mark + 1] = clock_ns()
            mark += 2
            position += take
            if progress is not None:
                progress(bytes=self.base_bytes + position - offset)
        steps = np.diff(np.asarray(marks_ns[:mark], dtype=np.int64))
        self.read_latency.add_ns(steps[0::2])
        if verify:
            self.verify_s += int(steps[1::2].sum()) / 1e9
        return length

    def close(self) -> None:
        if self.ctx is not None:
            self.ctx.progress(phase="close")
        if self.opened is not None:
            self.backend.close(self.opened.handle)
        self.opened = None


@dataclass(frozen=True)
class FileRead:
    """One file (or a resharded rank's range of one) as a timed read found it: its page-cache
    residency before and after the drop (fractions 0..1, None where this node has no page cache
    to measure), and whether O_DIRECT was used or why it was refused."""

    path: str
    bytes: int
    resident_before_drop: float | None
    resident_fraction: float | None
    dropped: bool
    direct: bool = False
    direct_refused: str | None = None


def prepare_file(
    backend: Backend[Any],
    path: str,
    nbytes: int,
    drop_cache: bool,
    ctx: RankContext | None = None,
) -> FileRead:
    """Drop ``path``'s pages and measure its residency before and after (``nbytes``: what
    the read will take of it).

    ``resident_before_drop`` and ``resident_fraction`` are None where the backend has no
    page cache of this node to measure: an object store, or a FUSE mount with ``direct_io``,
    where ``resident_fraction`` says None: residency is not applicable there, and nothing
    could come from a cache.
    """
    if ctx is not None:
        ctx.progress(phase="drop pages", path=path)
    if not backend.has_page_cache:
        return FileRead(path, nbytes, None, None, dropped=False)
    before = backend.resident_fraction(path)
    if drop_cache:
        backend.drop_pages(path)
    return FileRead(path, nbytes, before, backend.resident_fraction(path), dropped=drop_cache)


@dataclass(frozen=True)
class ReadFilesDetail(RankDetail):
    """What a timed-read rank (readback or reshard) reports beyond bytes and phases."""

    files: tuple[FileRead, ...]
    verify_s: float
    """Seconds verifying inside the read (0 when verified after it)."""
    verified: str
    """``in the read`` or ``after the read``."""
    peak_rss_bytes: int


def bytes_weighted(records: Sequence[tuple[int, float | None]]) -> float | None:
    """The mean of the known fractions, weighted by their bytes: (sum of bytes x fraction) /
    (sum of bytes) over the records whose fraction is not None; None where none is known, 0.0
    where they hold no bytes."""
    known = [(b, f) for b, f in records if f is not None]
    total = sum(b for b, _ in known)
    if not known:
        return None
    return sum(b * f for b, f in known) / total if total else 0.0
