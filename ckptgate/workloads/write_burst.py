"""The file-per-rank checkpoint write burst (checklist item 5; IOR -F -e).

Every local rank plays one global rank of the profile's shard distribution and writes that
rank's files (``checkpoint.files_per_rank`` of them, or a replayed tree's; the file plan is
``ckptgate.workloads.fileplan``) one after another, each in ``transfer_bytes`` writes of
stamped data, fsynced and closed. Each rank timestamps the end of open, write, fsync and
close on the node's monotonic clock; the burst's span runs from the common start to the last
rank's close.

The loop is written once against the backend's ``Writer`` operations (create, write_all,
fsync, close); the null sink is a ``Writer`` that drops the bytes. The rank reports progress
(``RankContext.progress``) before each operation that may block and after each transfer, so
a hung fsync is named as one (``ckptgate.engine.pool``); a report is a few stores into shared
memory, which a 1 GiB tmpfs burst does not notice (see the commit that added it).

Memory per rank: the stamper's one transfer buffer, whatever the shard size; each transfer's
bytes are generated into it (the keystream, ``ckptgate.engine.keystream``) in the timed span,
as a job serialises its tensors into its write buffers.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.datagen import BlockStamper
from ckptgate.engine.latency import LatencyHistogram, merge_histograms
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankDetail,
    RankResult,
    records_from_results,
    run_ranks,
    to_ns,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.operations import Writer
from ckptgate.workloads.fileplan import ShardFile, lanes, shard_file_name
from ckptgate.workloads.options import RunOptions

__all__ = [
    "DISCARD_PATH",
    "FileWritten",
    "ShardFile",
    "WriteDetail",
    "run_write_burst",
    "shard_file_name",
    "write_shard_task",
]


@dataclass(frozen=True)
class FileWritten:
    """One file of a write lane: what was written and how long its open to close took."""

    path: str
    bytes: int
    index: int
    """The file's index among its rank's files."""
    s: float
    """Seconds from its open to its close (the JSON key is ``s``)."""


@dataclass(frozen=True)
class WriteDetail(RankDetail):
    """What one write-burst rank reports beyond bytes and phases."""

    generate_s: float
    """Seconds spent stamping the data inside the timed span (the suite's own cost)."""
    fsynced: bool
    """Whether any fsync made something durable (False on the null sink, or fsync off)."""
    peak_rss_bytes: int
    path: str
    """The lane's first file."""
    global_ranks: tuple[int, ...]
    files: tuple[FileWritten, ...]


def peak_rss_bytes() -> int:
    """This process's peak resident set (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


DISCARD_PATH = os.devnull
"""Where the load generator's burst writes: a sink that discards, through the same open and
write calls as the target's burst, so a slow client write path is caught as well."""


def _sink(spec: BackendSpec, shard: ShardFile, sink: str) -> tuple[Writer[Any], str]:
    """The writer and path of a burst: the target's, or the same kind of backend into
    ``DISCARD_PATH`` (a local target's POSIX calls; fsspec's local files for any other)."""
    if sink == "target":
        return spec.open(), shard.path
    return spec.stand_in().open(), DISCARD_PATH


def write_shard_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    files: Sequence[ShardFile],
) -> RankResult:
    """Rank task: write a lane of shard files (``ckptgate.workloads.fileplan.lanes``: one
    rank's ``files_per_rank`` files, or a replayed tree's ranks) from the common start, one
    after another, each opened, written, fsynced and closed; ``options.sink="null"`` writes the same
    bytes through the same open and write calls into ``DISCARD_PATH`` instead (no fsync: it
    would make nothing durable). Phases repeat per file; the record sums them and its
    ``WriteDetail`` holds each file's path, bytes and seconds.

    The null sink measures the suite's own data path, stamping and the client's write calls
    included: if it is not far faster than the target, the target was not what we timed.
    """
    # Before the common start: each rank's transfer buffer (made and faulted in) and each
    # file's writer, so the timed span holds open, the generation of each transfer's bytes,
    # write, fsync and close.
    stampers: dict[int, BlockStamper] = {}
    for shard in files:
        if shard.global_rank not in stampers:
            stampers[shard.global_rank] = BlockStamper(shard.stamp, shard.transfer_bytes)
    fsync, sink = options.fsync, options.sink
    sinks = [_sink(options.spec, shard, sink) for shard in files]
    generate_ns = 0
    latencies: list[LatencyHistogram] = []
    durable = False
    written = 0
    reports: list[FileWritten] = []
    clock_ns = time.perf_counter_ns
    progress = ctx.progress
    phases = PhaseMarks.start(ctx)
    for done, (shard, (writer, path)) in enumerate(zip(files, sinks, strict=True)):
        stamper = stampers[shard.global_rank]
        step = stamper.step_bytes
        base = shard.stamp_offset
        write_all = writer.write_all
        # Each transfer's two clock reads (before the stamping, before the write) in one list
        # allocated per file: the write latencies and the stamping time come out after it.
        marks_ns = [0] * (2 * -(-shard.bytes // step) + 1)
        mark = 0
        opened_at = time.monotonic()
        progress(files=done, phase="open", path=shard.path)
        # Not exclusive: a round's paths are new and registered, and the burst has always
        # truncated (a rerun onto the same registered path, as tests do, must still work).
        handle = writer.create(path, exclusive=False)
        phases.mark("open")
        progress(phase="write")
        offset = 0
        try:
            while offset < shard.bytes:
                marks_ns[mark] = clock_ns()
                view = stamper.fill(base + offset, min(step, shard.bytes - offset))
                marks_ns[mark + 1] = clock_ns()
                mark += 2
                write_all(handle, view)
                offset += len(view)
                progress(bytes=written + offset)
            marks_ns[mark] = clock_ns()
            phases.mark("write")
            progress(phase="fsync")
            synced = fsync and sink == "target" and writer.fsync(handle)
            durable = durable or synced
            phases.mark("fsync")
            progress(phase="close")
        except BaseException:
            # On an object store no partial object: the upload is aborted. The failure told is
            # the write's; an abort the store refuses leaves the upload to 'ckptgate clean'.
            with contextlib.suppress(Exception):
                writer.discard(handle)
            raise
        writer.close(handle)
        closed_at = phases.mark("close")
        stamping_ns, latency = transfer_times(marks_ns[: mark + 1])
        generate_ns += stamping_ns
        latencies.append(latency)
        written += offset
        reports.append(FileWritten(shard.path, offset, shard.index, to_ns(closed_at - opened_at)))
    progress(files=len(files), phase="done")
    return phases.result(
        files[0].global_rank,
        written,
        detail=WriteDetail(
            generate_s=generate_ns / 1e9,
            fsynced=durable,
            peak_rss_bytes=peak_rss_bytes(),
            path=files[0].path,
            global_ranks=tuple(sorted({f.global_rank for f in files})),
            files=tuple(reports),
        ),
        histograms={"write": merge_histograms(latencies)},
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
    spec: BackendSpec,
    shards: Sequence[ShardFile],
    timeout_s: float,
    *,
    fsync: bool = True,
    sink: str = "target",
    phase: str | None = None,
) -> BurstResult:
    """Write ``shards`` from a common start, each lane of files (``lanes``: one rank's files
    per local rank while the pool has enough) by one local rank; returns the burst's records.
    ``phase`` names it in the live line and the bandwidth series (default: ``write burst``, or
    ``generate`` into the sink)."""
    groups = lanes(shards, pool.ranks)
    labels = [lane_label(lane) for lane in groups]
    kwargs = [{"files": lane} for lane in groups]
    options = RunOptions(spec, fsync=fsync, sink=sink)
    expect = Expected(
        phase or ("write burst" if sink == "target" else "generate"),
        rank_bytes=tuple(sum(f.bytes for f in lane) for lane in groups),
        rank_files=tuple(len(lane) for lane in groups),
    )
    results = run_ranks(
        pool, write_shard_task, kwargs, timeout_s, labels, options=options, expect=expect
    )
    return BurstResult(
        "write" if sink == "target" else "generate", tuple(records_from_results(results))
    )


def lane_label(lane: Sequence[ShardFile]) -> str:
    """A lane in failure messages: its rank(s) and its first file."""
    ranks = sorted({f.global_rank for f in lane})
    who = f"global rank {ranks[0]}" if len(ranks) == 1 else f"global ranks {ranks[0]}-{ranks[-1]}"
    more = f" and {len(lane) - 1} more file(s)" if len(lane) > 1 else ""
    return f"{who} ({lane[0].path}{more})"
