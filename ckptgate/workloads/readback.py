"""Restart readback that the client cache cannot serve (checklist item 7; IOR -F -C).

After a failure every rank loads its state at once and the job idles until the slowest rank
has it. Each local rank here reads a shard that another rank wrote (all of that rank's files,
one after another): local rank ``i`` reads the files of local rank ``(i + shift) mod n``,
IOR's ``-C`` ("reorder tasks") that shifts readers so no task reads what it wrote itself. On
one node ``shift=1``; the MPI layer passes the node's rank count, so each node reads another
node's files.

Before the common start every rank drops its file's pages (the backend's ``drop_pages``: on
POSIX fsync, then fadvise DONTNEED) and measures the file's residency; a read whose data was
resident is cache-served, and the requirement does not count it, except on a memory-backed
target (tmpfs), where the cache is the storage and the report names it so. With ``direct``
the read uses O_DIRECT where the filesystem allows it and says why where it does not.

Every byte read is checked against what the writer stamped (``ckptgate.engine.datagen``); a mismatch
raises ``DataMismatch`` naming the file and the offset. Where the read goes through this
node's page cache (a buffered read of a POSIX target), the timed read only reads, as a
restore does, and every file is verified after every rank has finished, untimed, from the
pages the timed read left (``verify_after_read``): read(2) copied the application's bytes from
those very pages, so checking them checks what the storage delivered, and the hash's cost
(about a fifth of a tmpfs read's CPU) stays off the restore's critical path. The residency
at that verification is measured and reported: a page evicted in between is read from the
storage again, and the report says how much. Where nothing sits between the storage and the
buffer (O_DIRECT, an object store, a FUSE mount without a cache), the copy in the buffer is the
only one, so it is verified in the read loop, after each transfer, and the read phase includes
it. Either way each rank reports the verification's time as ``verify_s``. Readback is
read-only: files are opened read-only and never removed here.

Memory per rank: the stamper's buffer (``fill``'s expected bytes, hashed once per length and
compared with in place off the grid) and one aligned read buffer, each one transfer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ckptgate.engine.datagen import BlockStamper, DataMismatch
from ckptgate.engine.latency import LatencyHistogram, merge_histograms
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankDetail,
    RankResult,
    detail_as,
    records_from_results,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.operations import Backend, ReadFile
from ckptgate.storage.pagecache import DIRECT_ALIGN_BYTES, aligned_buffer
from ckptgate.workloads.fileplan import ShardFile, lanes
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.write_burst import lane_label, peak_rss_bytes

CACHE_SERVED_FRACTION = 0.01
"""A file counts as cache-served when more than this fraction of its pages was resident before
the read. Not zero: the kernel may keep a page or two (readahead at the tail, a page another
mapping holds), and those do not change a read's time; one percent does not either."""


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


@dataclass(frozen=True)
class ReadDetail(ReadFilesDetail):
    """A readback rank: its lane's first file, whose lane it read, and the lane's page-cache
    and O_DIRECT figures over its files (bytes-weighted residency)."""

    path: str
    written_by_local_rank: int
    resident_before_drop: float | None
    resident_fraction: float | None
    dropped: bool
    direct: bool
    direct_refused: str | None


@dataclass(frozen=True)
class VerifyDetail(RankDetail):
    """An untimed verification rank: the residency of what it checked, and its seconds."""

    path: str
    resident_fraction: float | None
    verify_s: float


def read_shard_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    files: Sequence[ShardFile],
    written_by: int,
) -> RankResult:
    """Rank task: read (and, with ``verify``, verify) another rank's whole lane of files
    from the common start.

    The drops and the residency measurements happen before the barrier, so they cost no read
    time and nothing can bring the pages back between them and the read but the read itself.
    Phases repeat per file (open, read, close); the record sums them and its ``ReadDetail``
    holds each file's path, bytes and page-cache figures.
    """
    verify = options.verify
    backend = options.spec.open()
    readers = [RangeReader(backend, shard, options.direct, ctx) for shard in files]
    reports = [prepare_file(backend, f.path, f.bytes, options.drop_cache, ctx) for f in files]
    if verify:
        for reader in readers:
            reader.expect(0, reader.shard.bytes)
    phases = PhaseMarks.start(ctx)
    read = 0
    for done, (reader, report) in enumerate(zip(readers, list(reports), strict=True)):
        reader.base_bytes = read
        ctx.progress(files=done)
        reader.open()
        phases.mark("open")
        try:
            read += reader.read_verify(0, reader.shard.bytes, verify=verify)
            phases.mark("read")
            reports[done] = dataclasses.replace(
                report, direct=reader.direct, direct_refused=reader.direct_refused
            )
        finally:
            reader.close()
        phases.mark("close")
    ctx.progress(files=len(files), phase="done")
    return phases.result(
        files[0].global_rank,
        read,
        detail=ReadDetail(
            files=tuple(reports),
            verify_s=sum(reader.verify_s for reader in readers),
            verified="in the read" if verify else "after the read",
            peak_rss_bytes=peak_rss_bytes(),
            path=files[0].path,
            written_by_local_rank=written_by,
            **_lane_cache(reports),
        ),
        histograms={"read": merge_histograms(reader.read_latency for reader in readers)},
    )


class VerifyRange(NamedTuple):
    """Bytes ``[offset, offset + length)`` of one written file, verified after a timed read."""

    shard: ShardFile
    offset: int
    length: int


def whole_files(files: Sequence[ShardFile]) -> list[VerifyRange]:
    """Every byte of ``files``, as ranges to verify."""
    return [VerifyRange(f, 0, f.bytes) for f in files]


def verify_ranges_task(
    ctx: RankContext, *, options: RunOptions, ranges: list[VerifyRange]
) -> RankResult:
    """Rank task (untimed): read ``ranges`` again and verify every byte; reports their
    page-cache residency just before (the share of the bytes the verification checks as the
    timed read left them)."""
    backend = options.spec.open()
    readers = [RangeReader(backend, r.shard, direct=False, ctx=ctx) for r in ranges]
    resident = _weighted(
        [
            (r.length, backend.resident_fraction(r.shard.path) if backend.has_page_cache else None)
            for r in ranges
        ]
    )
    # No ``expect`` here: precomputed hashes only pay off inside a timed read; untimed, they
    # would hash every expected transfer once more, where shifting the stamps costs less.
    phases = PhaseMarks.start(ctx)
    verified = 0
    for reader, r in zip(readers, ranges, strict=True):
        reader.base_bytes = verified
        reader.open()
        try:
            verified += reader.read_verify(r.offset, r.length)
        finally:
            reader.close()
    phases.mark("verify")
    detail = VerifyDetail(
        ranges[0].shard.path, resident, sum(reader.verify_s for reader in readers)
    )
    return phases.result(ranges[0].shard.global_rank, verified, detail=detail)


@dataclass(frozen=True)
class Verification:
    """How a readback's bytes were verified: in the timed read, or after it from the cache."""

    when: str
    """``in the read`` or ``after the read``."""
    bytes: int
    seconds: float
    """The slowest rank's verification time (inside the read phase when ``in the read``)."""
    resident_fraction: float | None
    """``after the read``: the byte-weighted residency when verified (1.0: every byte checked
    is a byte the timed read delivered); None for ``in the read``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "when": self.when,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "resident_fraction": self.resident_fraction,
        }


def merge_verifications(parts: Sequence[Verification | None]) -> Verification | None:
    """Every node's verification of one read burst as one (bytes summed, the slowest node's
    seconds, residency weighted by bytes); None where no node verified."""
    known = [v for v in parts if v is not None]
    if not known:
        return None
    whens = sorted({v.when for v in known})
    return Verification(
        " / ".join(whens),
        sum(v.bytes for v in known),
        max(v.seconds for v in known),
        _weighted([(v.bytes, v.resident_fraction) for v in known]),
    )


def verify_after_read(
    pool: RankPool,
    spec: BackendSpec,
    ranges_read: Sequence[list[VerifyRange]],
    labels: Sequence[str],
    timeout_s: float,
    *,
    phase: str = "readback",
) -> Verification:
    """Verify every byte of ``ranges_read`` (what each local rank read; ``labels`` name
    them) once the timed ``phase`` is over. Ranks that read nothing verify nothing."""
    busy = [i for i, ranges in enumerate(ranges_read) if ranges]
    kwargs = [{"ranges": ranges_read[i]} for i in busy]
    expect = Expected(
        f"{phase} verification (untimed)",
        rank_bytes=tuple(sum(r.length for r in ranges_read[i]) for i in busy),
        rank_files=tuple(len(ranges_read[i]) for i in busy),
    )
    results = run_ranks(
        pool,
        verify_ranges_task,
        kwargs,
        timeout_s,
        [labels[i] for i in busy],
        options=RunOptions(spec),
        expect=expect,
    )
    details = [detail_as(r, VerifyDetail) for r in results]
    fraction = _weighted(
        [(r.bytes, d.resident_fraction) for r, d in zip(results, details, strict=True)]
    )
    seconds = max(d.verify_s for d in details)
    return Verification("after the read", sum(r.bytes for r in results), seconds, fraction)


def verify_burst(
    pool: RankPool,
    spec: BackendSpec,
    burst: BurstResult,
    after: bool,
    ranges_read: Sequence[list[VerifyRange]],
    labels: Sequence[str],
    timeout_s: float,
    *,
    phase: str,
) -> Verification:
    """How a read burst's bytes were verified: ``after`` it (``verify_after_read``, for a read
    ``verifies_after`` says so), else already in its loop, whose time the ranks report."""
    if after:
        return verify_after_read(pool, spec, ranges_read, labels, timeout_s, phase=phase)
    verify_s = max(detail_as(r, ReadFilesDetail).verify_s for r in burst.ranks)
    return Verification("in the read", burst.total_bytes, verify_s, None)


@dataclass(frozen=True)
class VerifiedRead:
    """One read burst to run: the rank task, each rank's arguments and label, the burst's
    kind (``read``, ``reshard``) and its expected totals (whose phase names the verification
    too)."""

    task: Callable[..., RankResult]
    kwargs: Sequence[dict[str, Any]]
    labels: Sequence[str]
    kind: str
    expect: Expected


def run_verified_read(
    pool: RankPool,
    spec: BackendSpec,
    read: VerifiedRead,
    ranges_read: Sequence[list[VerifyRange]],
    verify_labels: Sequence[str],
    *,
    direct: bool,
    drop_cache: bool,
    timeout_s: float,
    memory_path: str,
) -> ReadResult:
    """A read burst from the common start, then how its bytes were verified: in the read
    loop, or after it from the pages it left (``verifies_after``); the readback and the
    resharded load both run this way."""
    backend = spec.open()
    after = verifies_after(backend, direct)
    options = RunOptions(spec, direct=direct, drop_cache=drop_cache, verify=not after)
    results = run_ranks(
        pool, read.task, read.kwargs, timeout_s, read.labels, options=options, expect=read.expect
    )
    burst = BurstResult(read.kind, tuple(records_from_results(results)))
    summary = summarize(burst, backend.memory_backed(memory_path))
    verification = verify_burst(
        pool, spec, burst, after, ranges_read, verify_labels, timeout_s, phase=read.expect.phase
    )
    return dataclasses.replace(summary, verification=verification)


def verifies_after(backend: Backend[Any], direct: bool) -> bool:
    """Whether a read of ``backend`` is verified after the timed read, from the pages it
    left (a buffered read through this node's page cache), rather than in it (see the
    module docstring)."""
    return backend.has_page_cache and not direct


def _lane_cache(reports: Sequence[FileRead]) -> dict[str, Any]:
    """A lane's page-cache and O_DIRECT figures over its files (bytes-weighted residency):
    ``ReadDetail``'s fields of the same names."""
    return {
        "resident_before_drop": _weighted([(r.bytes, r.resident_before_drop) for r in reports]),
        "resident_fraction": _weighted([(r.bytes, r.resident_fraction) for r in reports]),
        "dropped": all(r.dropped for r in reports),
        "direct": all(r.direct for r in reports),
        "direct_refused": next((r.direct_refused for r in reports if r.direct_refused), None),
    }


@dataclass(frozen=True)
class ReadResult:
    """One readback (or resharded restore) burst, with what the page cache did to it."""

    burst: BurstResult
    resident_fraction: float | None
    """Byte-weighted page-cache residency of the files right before reading, 0..1 (None where
    the target has no page cache on this node to measure)."""
    resident_before_drop: float | None
    """The same, before the pages were dropped: what a naive readback would have read."""
    memory_backed: bool
    direct: bool
    """True when every file was read with O_DIRECT."""
    direct_refused: str | None
    cache_served: tuple[str, ...]
    """Files whose data was resident when the read began (empty on a memory-backed target:
    there the cache is the storage)."""
    verification: Verification | None = None
    """How every byte read was verified (None: a caller that verifies by itself)."""

    @property
    def cache_free(self) -> bool:
        """True when no byte could have come from this node's page cache instead of storage."""
        return not self.cache_served

    def to_json(self) -> dict[str, Any]:
        return {
            **self.burst.to_json(),
            "resident_fraction": self.resident_fraction,
            "resident_before_drop": self.resident_before_drop,
            "memory_backed": self.memory_backed,
            "direct": self.direct,
            "direct_refused": self.direct_refused,
            "cache_served": list(self.cache_served),
            "verification": self.verification.to_json() if self.verification else None,
        }


def _weighted(records: Sequence[tuple[int, float | None]]) -> float | None:
    known = [(b, f) for b, f in records if f is not None]
    total = sum(b for b, _ in known)
    if not known:
        return None
    return sum(b * f for b, f in known) / total if total else 0.0


def file_records(burst: BurstResult) -> list[FileRead]:
    """One ``FileRead`` per file read: each file of a readback rank's lane, or each of the
    files a resharded rank's ranges touched (``ReadFilesDetail.files``)."""
    return [f for record in burst.ranks for f in detail_as(record, ReadFilesDetail).files]


def summarize(burst: BurstResult, backed: bool) -> ReadResult:
    """A ``ReadResult`` from a read burst's records (one node's, or every node's gathered)."""
    files = file_records(burst)
    fraction = _weighted([(f.bytes, f.resident_fraction) for f in files])
    before = _weighted([(f.bytes, f.resident_before_drop) for f in files])
    served = tuple(
        dict.fromkeys(
            f.path
            for f in files
            if not backed and (f.resident_fraction or 0.0) > CACHE_SERVED_FRACTION
        )
    )
    refused = next((f.direct_refused for f in files if f.direct_refused), None)
    return ReadResult(
        burst=burst,
        resident_fraction=fraction,
        resident_before_drop=before,
        memory_backed=backed,
        direct=bool(files) and all(f.direct for f in files),
        direct_refused=refused,
        cache_served=served,
    )


def readback_assignment(count: int, shift: int) -> list[int]:
    """Which shard each local rank reads: rank ``i`` reads shard ``(i + shift) mod count``."""
    return [(i + shift) % count for i in range(count)]


def run_readback(
    pool: RankPool,
    spec: BackendSpec,
    shards: Sequence[ShardFile],
    timeout_s: float,
    *,
    shift: int = 1,
    direct: bool = False,
    drop_cache: bool = True,
) -> ReadResult:
    """Read back ``shards`` (as written: ``lanes`` groups them per rank), each lane by another
    local rank.

    Local rank ``i`` reads lane ``(i + shift) % lanes`` (IOR -C). Records are by reader, with
    ``global_rank`` the (first) rank whose state is restored and its ``ReadDetail`` the
    writer's local rank and each file's path and page-cache figures.
    """
    if not shards:
        raise ValueError("readback needs at least one shard")
    groups = lanes(shards, pool.ranks)
    order = readback_assignment(len(groups), shift)
    kwargs = [{"files": groups[j], "written_by": j} for j in order]
    labels = [f"rank {i} reading {lane_label(groups[j])}" for i, j in enumerate(order)]
    expect = Expected(
        "readback",
        rank_bytes=tuple(sum(f.bytes for f in groups[j]) for j in order),
        rank_files=tuple(len(groups[j]) for j in order),
    )
    return run_verified_read(
        pool,
        spec,
        VerifiedRead(read_shard_task, kwargs, labels, "read", expect),
        [whole_files(groups[j]) for j in order],
        [f"rank {i} verifying {lane_label(groups[j])}" for i, j in enumerate(order)],
        direct=direct,
        drop_cache=drop_cache,
        timeout_s=timeout_s,
        memory_path=shards[0].path,
    )
