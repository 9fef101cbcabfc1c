"""A read burst from a null source: one node's own read limit, with no storage behind it.

Each rank reads its lane's bytes from ``NULL_SOURCE_PATH`` (``/dev/zero``) instead of its
files, through the same kind of backend's ``open_read`` and ``read_into`` (``RangeReader``:
the same transfers, the same buffer) from the common start: what this node's read path
delivers, its read calls and the copy into the ranks' buffers, when the storage costs nothing.
It is the read's counterpart of the generator burst into a null sink (``write_burst``,
``sink="null"``), and the scaling sweep's ``NodeLimit`` for the read
(``ckptgate.projection.ceiling``): a node that restores at this rate has reached its own
ceiling, and the storage was not shown its own.

Nothing is verified: the source holds no stamps. A restore read of a page-cached target
verifies after its timed read as well (``readback``), so the figure bounds that read's own
path; where a read verifies inside its loop (O_DIRECT, an object store), the real path costs
more than this, the bound is generous, and a node is called client-limited only nearer its
true limit. Reading ``/dev/zero`` needs no file and writes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankResult,
    records_from_results,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import NULL_BURST_MIN_BYTES, ShardFile, lanes, null_burst_files
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.range_reader import RangeReader
from ckptgate.workloads.write_burst import lane_label

NULL_SOURCE_PATH = "/dev/zero"
"""Where the null-source read reads: endless zeros, from the kernel, on every Linux node."""

NULL_READ_MIN_BYTES = NULL_BURST_MIN_BYTES
"""Each rank reads at least this much (``fileplan.null_burst_files``)."""

NULL_READ_WORDS = (
    "the suite's own read path on one node (read calls from /dev/zero into the buffers)"
)
"""What the null-source read measures, as the projection names a node's read limit."""


def null_read_task(ctx: RankContext, *, options: RunOptions, lane: ShardFile) -> RankResult:
    """Rank task: read ``lane.bytes`` from ``NULL_SOURCE_PATH`` in ``lane``'s transfers
    (open, read, close), from the common start; the bytes read."""
    backend = options.spec.stand_in().open()
    reader = RangeReader(backend, dataclasses.replace(lane, path=NULL_SOURCE_PATH), False, ctx)
    phases = PhaseMarks.start(ctx)
    reader.open()
    phases.mark("open")
    try:
        read = reader.read_verify(0, lane.bytes, verify=False)
        phases.mark("read")
    finally:
        reader.close()
    phases.mark("close")
    ctx.progress(files=1, phase="done")
    return phases.result(lane.global_rank, read, histograms={"read": reader.read_latency})


def run_null_read(
    pool: RankPool, spec: BackendSpec, shards: Sequence[ShardFile], timeout_s: float
) -> BurstResult:
    """The null-source read of this node's ranks: each rank as many bytes as its lane of
    ``shards`` holds (at least ``NULL_READ_MIN_BYTES``), in its transfers."""
    groups = lanes(shards, pool.ranks)
    plan = null_burst_files(groups)
    expect = Expected(
        "null read", rank_bytes=tuple(f.bytes for f in plan), rank_files=(1,) * len(plan)
    )
    results = run_ranks(
        pool,
        null_read_task,
        [{"lane": lane} for lane in plan],
        timeout_s,
        [f"rank {i} reading /dev/zero for {lane_label(g)}" for i, g in enumerate(groups)],
        options=RunOptions(spec),
        expect=expect,
    )
    return BurstResult("null read", tuple(records_from_results(results)))
