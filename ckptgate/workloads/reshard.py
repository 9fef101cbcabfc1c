"""Resharded restore: a checkpoint written by N ranks loaded by M < N ranks (checklist item 7).

Restarts often land on fewer nodes, and PyTorch Distributed Checkpoint reshards at load time
(SPEC.md, References): each new rank reads the byte ranges of its new shard from whichever
old files hold them. The plan here views the N old files, in global-rank order, as one
concatenated byte space and gives each of the M new ranks one contiguous, equal slice of it
(the first ``total mod M`` slices one byte longer), so a slice larger than any old file spans
parts of two or more files, as a real resharded load does.

``plan_reshard`` is pure arithmetic; ``reshard_task`` reads one new rank's ranges with the
readback's reader (``ckptgate.workloads.readback``: cache dropped before the common start,
residency measured); ``run_reshard`` drives the burst and has every byte compared with its
stamp, as the readback has: after the timed read from the pages it left for a buffered read,
inside it for O_DIRECT and cacheless reads.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ckptgate.engine.latency import merge_histograms
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankResult,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.readback import (
    RangeReader,
    ReadFilesDetail,
    ReadResult,
    VerifiedRead,
    VerifyRange,
    prepare_file,
    run_verified_read,
)
from ckptgate.workloads.write_burst import ShardFile, peak_rss_bytes


class ReshardRange(NamedTuple):
    """Bytes ``[offset, offset + length)`` of one old file, read by one new rank."""

    path: str
    offset: int
    length: int


@dataclass(frozen=True)
class ReshardDetail(ReadFilesDetail):
    """A resharded rank: how many old files and ranges it read, and the ranges."""

    files_touched: int
    range_count: int
    ranges: tuple[ReshardRange, ...]
    """In the JSON each range is ``[path, offset, length]``."""


def default_new_ranks(old_ranks: int, fraction: float) -> int:
    """M = max(1, floor(N x run.reshard_fraction)): the restart lands on fewer ranks."""
    return max(1, math.floor(old_ranks * fraction))


def plan_reshard(
    old_files: Sequence[tuple[int, str, int]], new_ranks: int
) -> list[list[ReshardRange]]:
    """Each new rank's ranges of the old files ``[(global_rank, path, bytes), ...]``.

    The old files are ordered by global rank (stably: a rank's files keep their order) and
    concatenated; new rank ``m`` of ``M`` takes
    the slice ``[m x T // M, (m + 1) x T // M)`` of the ``T`` bytes, cut at file boundaries
    into ranges in file order. Empty files and empty pieces give no range.
    """
    if new_ranks < 1:
        raise ValueError(f"a resharded load needs at least one new rank, got {new_ranks}")
    files = sorted(old_files, key=lambda f: f[0])
    if any(size < 0 for _, _, size in files):
        raise ValueError("file sizes must not be negative")
    total = sum(size for _, _, size in files)
    plan: list[list[ReshardRange]] = []
    index, file_start = 0, 0  # the file that holds the next unread byte, and its start
    for rank in range(new_ranks):
        start, end = rank * total // new_ranks, (rank + 1) * total // new_ranks
        ranges: list[ReshardRange] = []
        position = start
        while position < end:
            _, path, size = files[index]
            if position >= file_start + size:
                file_start += size
                index += 1
                continue
            take = min(end, file_start + size) - position
            ranges.append(ReshardRange(path, position - file_start, take))
            position += take
        plan.append(ranges)
    return plan


def reshard_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    new_rank: int,
    ranges: Sequence[ReshardRange],
    sources: dict[str, ShardFile],
) -> RankResult:
    """Rank task: read (and, with ``verify``, verify) one new rank's ranges from the common
    start.

    Readers (one stamp pool and one buffer per file touched, a few transfers in all) are built
    and the cache dropped before the barrier, so the timed span holds only open, read, close.
    Phases repeat per file; the records sum them.
    """
    verify = options.verify
    backend = options.spec.open()
    readers = [RangeReader(backend, sources[r.path], options.direct, ctx) for r in ranges]
    files = []
    for reader, r in zip(readers, ranges, strict=True):
        # several new ranks may share an old file: each drops and measures what it will read
        files.append(prepare_file(backend, r.path, r.length, options.drop_cache, ctx))
        if verify:
            reader.expect(r.offset, r.length)
    phases = PhaseMarks.start(ctx)
    total = 0
    for done, (reader, r, info) in enumerate(zip(readers, ranges, list(files), strict=True)):
        reader.base_bytes = total
        ctx.progress(files=done)
        reader.open()
        phases.mark("open")
        try:
            total += reader.read_verify(r.offset, r.length, verify=verify)
            phases.mark("read")
            files[done] = dataclasses.replace(
                info, direct=reader.direct, direct_refused=reader.direct_refused
            )
        finally:
            reader.close()
        phases.mark("close")
    if not ranges:  # a new rank with nothing to read: one empty read phase
        phases.marks.append(("read", phases.start_mono))
    return phases.result(
        new_rank,
        total,
        detail=ReshardDetail(
            files=tuple(files),
            verify_s=sum(reader.verify_s for reader in readers),
            verified="in the read" if verify else "after the read",
            peak_rss_bytes=peak_rss_bytes(),
            files_touched=len({r.path for r in ranges}),
            range_count=len(ranges),
            ranges=tuple(ranges),
        ),
        histograms={"read": merge_histograms(reader.read_latency for reader in readers)},
    )


@dataclass(frozen=True)
class ReshardResult:
    """A resharded restore: N old files read by M new ranks."""

    read: ReadResult
    old_ranks: int
    new_ranks: int
    plan: tuple[tuple[ReshardRange, ...], ...]

    @property
    def burst(self) -> BurstResult:
        return self.read.burst

    def files_per_rank(self) -> list[int]:
        return [len({r.path for r in ranges}) for ranges in self.plan]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.read.to_json(),
            "old_ranks": self.old_ranks,
            "new_ranks": self.new_ranks,
            "files_per_new_rank": self.files_per_rank(),
            "ranges_per_new_rank": [len(ranges) for ranges in self.plan],
        }


def run_reshard(
    pool: RankPool,
    spec: BackendSpec,
    shards: Sequence[ShardFile],
    timeout_s: float,
    *,
    new_ranks: int | None = None,
    fraction: float = 0.5,
    direct: bool = False,
    drop_cache: bool = True,
) -> ReshardResult:
    """Load ``shards`` onto ``new_ranks`` (default ``default_new_ranks(N, fraction)``) ranks."""
    if not shards:
        raise ValueError("a resharded load needs at least one old shard")
    count = new_ranks if new_ranks is not None else default_new_ranks(len(shards), fraction)
    ordered = sorted(shards, key=lambda s: (s.global_rank, s.index))  # a rank's files in order
    plan = plan_reshard([(s.global_rank, s.path, s.bytes) for s in ordered], count)
    sources = {s.path: s for s in shards}
    kwargs = [
        {"new_rank": m, "ranges": ranges, "sources": {r.path: sources[r.path] for r in ranges}}
        for m, ranges in enumerate(plan)
    ]
    labels = [f"new rank {m} of {count} ({len(ranges)} ranges)" for m, ranges in enumerate(plan)]
    expect = Expected(
        "reshard",
        rank_bytes=tuple(sum(r.length for r in ranges) for ranges in plan),
        rank_files=tuple(len(ranges) for ranges in plan),
    )
    read = run_verified_read(  # as the readback: see its module for where it verifies
        pool,
        spec,
        VerifiedRead(reshard_task, kwargs, labels, "reshard", expect),
        [[VerifyRange(sources[r.path], r.offset, r.length) for r in ranges] for ranges in plan],
        [f"new rank {m} verifying {len(ranges)} ranges" for m, ranges in enumerate(plan)],
        direct=direct,
        drop_cache=drop_cache,
        timeout_s=timeout_s,
        memory_path=shards[0].path,
    )
    return ReshardResult(read, len(shards), count, tuple(tuple(r) for r in plan))
