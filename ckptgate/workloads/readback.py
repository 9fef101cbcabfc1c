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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.engine.latency import merge_histograms
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankResult,
    detail_as,
    records_from_results,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import ShardFile, lanes
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.range_reader import (
    FileRead,
    RangeReader,
    ReadFilesDetail,
    bytes_weighted,
    prepare_file,
)
from ckptgate.workloads.verification import (
    Verification,
    VerifyDetail,
    VerifyRange,
    merge_verifications,
    verifies_after,
    verify_after_read,
    verify_burst,
    verify_ranges_task,
    whole_files,
)
from ckptgate.workloads.write_burst import lane_label, peak_rss_bytes

__all__ = [
    "CACHE_SERVED_FRACTION",
    "FileRead",
    "RangeReader",
    "ReadDetail",
    "ReadFilesDetail",
    "ReadResult",
    "Verification",
    "VerifiedRead",
    "VerifyDetail",
    "VerifyRange",
    "file_records",
    "merge_verifications",
    "prepare_file",
    "read_shard_task",
    "readback_assignment",
    "run_readback",
    "run_verified_read",
    "summarize",
    "verifies_after",
    "verify_after_read",
    "verify_burst",
    "verify_ranges_task",
    "whole_files",
]
"""The readback's names, and those of the file reader (range_reader) and the verification
(verification) that its callers import from here."""


CACHE_SERVED_FRACTION = 0.01
"""A file counts as cache-served when more than this fraction of its pages was resident before
the read. Not zero: the kernel may keep a page or two (readahead at the tail, a page another
mapping holds), and those do not change a read's time; one percent does not either."""


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


def _lane_cache(reports: Sequence[FileRead]) -> dict[str, Any]:
    """A lane's page-cache and O_DIRECT figures over its files (bytes-weighted residency):
    ``ReadDetail``'s fields of the same names."""
    return {
        "resident_before_drop": bytes_weighted(
            [(r.bytes, r.resident_before_drop) for r in reports]
        ),
        "resident_fraction": bytes_weighted([(r.bytes, r.resident_fraction) for r in reports]),
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


def file_records(burst: BurstResult) -> list[FileRead]:
    """One ``FileRead`` per file read: each file of a readback rank's lane, or each of the
    files a resharded rank's ranges touched (``ReadFilesDetail.files``)."""
    return [f for record in burst.ranks for f in detail_as(record, ReadFilesDetail).files]


def summarize(burst: BurstResult, backed: bool) -> ReadResult:
    """A ``ReadResult`` from a read burst's records (one node's, or every node's gathered)."""
    files = file_records(burst)
    fraction = bytes_weighted([(f.bytes, f.resident_fraction) for f in files])
    before = bytes_weighted([(f.bytes, f.resident_before_drop) for f in files])
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
