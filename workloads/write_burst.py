"""The file-per-rank checkpoint write burst (checklist item 5; IOR -F -e).

Every local rank plays one global rank of the profile's shard distribution and writes that
rank's shard as one file, in ``transfer_bytes`` writes of stamped data, fsyncs it, and closes
it. Each rank timestamps the end of open, write, fsync and close on the node's monotonic
clock; the burst's span runs from the common start to the last rank's close.

The loop is written once against the backend's ``Writer`` operations (create, write_all,
fsync, close); the null sink is a ``Writer`` that drops the bytes. The rank reports progress
(``RankContext.progress``) before each operation that may block and after each transfer, so
a hung fsync is named as one (``ckptgate.engine.pool``); a report is a few stores into shared
memory, which a 1 GiB tmpfs burst does not notice (see the commit that added it).

Memory per rank: the stamper's one transfer buffer (the stamped pool), whatever the shard size.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.datagen import BlockStamper, StampKey
from ckptgate.engine.latency import LatencyHistogram
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankResult,
    records_from_results,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec, Writer


@dataclass(frozen=True)
class ShardFile:
    """One file of one checkpoint: who writes it, where, how many bytes, with what stamp."""

    global_rank: int
    path: str
    bytes: int
    run_id: int
    transfer_bytes: int

    @property
    def stamp(self) -> StampKey:
        return StampKey(self.run_id, self.global_rank)


def shard_file_name(global_rank: int, index: int = 0) -> str:
    """PyTorch DCP's FileSystemWriter names: ``__{rank}_{index}.distcp``."""
    return f"__{global_rank}_{index}.distcp"


def peak_rss_bytes() -> int:
    """This process's peak resident set (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


DISCARD_PATH = os.devnull
"""Where the load generator's burst writes: a sink that discards, through the same open and
write calls as the target's burst, so a slow client write path is caught as well."""


def _sink(fs: BackendSpec, shard: ShardFile, sink: str) -> tuple[Writer[Any], str]:
    """The writer and path of a burst: the target's, or the same kind of backend into
    ``DISCARD_PATH`` (a local target's POSIX calls; fsspec's local files for any other)."""
    if sink == "target":
        return fs.open(), shard.path
    spec = fs if fs.is_local else BackendSpec("file", backend="fsspec")
    return spec.open(), DISCARD_PATH


def write_shard_task(
    ctx: RankContext, *, fs: BackendSpec, shard: ShardFile, fsync: bool = True, sink: str = "target"
) -> RankResult:
    """Rank task: write one shard file from the common start; ``sink="null"`` writes the same
    bytes through the same open and write calls into ``DISCARD_PATH`` instead (no fsync: it
    would make nothing durable).

    The null sink measures the suite's own data path, stamping and the client's write calls
    included: if it is not far faster than the target, the target was not what we timed.
    """
    stamper = BlockStamper(shard.stamp, shard.transfer_bytes)
    step = stamper.step_bytes
    writer, path = _sink(fs, shard, sink)
    write_all = writer.write_all
    clock_ns = time.perf_counter_ns
    # Each transfer's two clock reads (before the stamping, before the write) in one list
    # allocated here: the write latencies and the stamping time come out after the loop.
    marks_ns = [0] * (2 * -(-shard.bytes // step) + 1)
    mark = 0
    progress = ctx.progress
    phases = PhaseMarks.start(ctx)
    progress(phase="open", path=shard.path)
    # Not exclusive: a round's paths are new and registered, and the burst has always
    # truncated (a rerun onto the same registered path, as tests do, must still work).
    handle = writer.create(path, exclusive=False)
    phases.mark("open")
    progress(phase="write")
    offset = 0
    try:
        while offset < shard.bytes:
            marks_ns[mark] = clock_ns()
            view = stamper.fill(offset, min(step, shard.bytes - offset))
            marks_ns[mark + 1] = clock_ns()
            mark += 2
            write_all(handle, view)
            offset += len(view)
            progress(bytes=offset)
        marks_ns[mark] = clock_ns()
        phases.mark("write")
        progress(phase="fsync")
        durable = fsync and sink == "target" and writer.fsync(handle)
        phases.mark("fsync")
        progress(phase="close")
    finally:
        writer.close(handle)
    phases.mark("close")
    progress(files=1, phase="done")
    generate_ns, latency = transfer_times(marks_ns[: mark + 1])
    return phases.result(
        shard.global_rank,
        offset,
        extra={
            "generate_s": generate_ns / 1e9,
            "fsynced": durable,
            "peak_rss_bytes": peak_rss_bytes(),
            "path": shard.path,
        },
        histograms={"write": latency},
    )


def transfer_times(marks_ns: Sequence[int]) -> tuple[int, LatencyHistogram]:
    """From a loop's alternating marks (before the stamping, before the transfer, ..., after
    the last transfer): the stamping's total nanoseconds and each transfer's latency.

    A transfer's latency runs from its start to the next transfer's stamping, so it includes
    the progress report's few stores after it."""
    marks = np.asarray(marks_ns, dtype=np.int64)
    histogram = LatencyHistogram()
    if marks.size < 3:
        return 0, histogram
    steps = np.diff(marks)
    histogram.add_ns(steps[1::2])
    return int(steps[0::2].sum()), histogram


def run_write_burst(
    pool: RankPool,
    fs: BackendSpec,
    shards: Sequence[ShardFile],
    timeout_s: float,
    *,
    fsync: bool = True,
    sink: str = "target",
) -> BurstResult:
    """Write ``shards`` (one per local rank) from a common start; returns the burst's records."""
    labels = [f"global rank {s.global_rank} ({s.path})" for s in shards]
    kwargs = [{"shard": s} for s in shards]
    shared = {"fs": fs, "fsync": fsync, "sink": sink}
    expect = Expected(
        "write burst" if sink == "target" else "generate",
        rank_bytes=tuple(s.bytes for s in shards),
        rank_files=(1,) * len(shards),
    )
    results = run_ranks(
        pool, write_shard_task, kwargs, timeout_s, labels, shared=shared, expect=expect
    )
    return BurstResult(
        "write" if sink == "target" else "generate", tuple(records_from_results(results))
    )
