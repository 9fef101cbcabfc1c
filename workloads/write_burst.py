"""The file-per-rank checkpoint write burst (checklist item 5; IOR -F -e).

Every local rank plays one global rank of the profile's shard distribution and writes that
rank's shard as one file, in ``transfer_bytes`` writes of stamped data, fsyncs it, and closes
it. Each rank timestamps the end of open, write, fsync and close on the node's monotonic
clock; the burst's span runs from the common start to the last rank's close.

Memory per rank: the stamper's one transfer buffer (the stamped pool), whatever the shard size.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.engine.datagen import BlockStamper, StampKey
from ckptgate.engine.pool import RankContext, RankPool, StartHook
from ckptgate.engine.records import BurstResult, records_from_results
from ckptgate.storage.fsio import FsSpec, make_durable


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


def write_shard_task(
    ctx: RankContext, *, fs: FsSpec, shard: ShardFile, fsync: bool = True, sink: str = "target"
) -> dict[str, Any]:
    """Rank task: write one shard file from the common start; ``sink="null"`` skips the I/O.

    The null sink runs the same generator loop without a target, which measures the suite's
    own data path: if it is not far faster than the target, the target was not what we timed.
    """
    stamper = BlockStamper(shard.stamp, shard.transfer_bytes)
    step = stamper.step_bytes
    filesystem = fs.filesystem() if sink == "target" else None
    generate_s = 0.0
    start = ctx.start()
    if filesystem is None:
        handle = None
        opened = time.monotonic()
    else:
        handle = filesystem.open(shard.path, "wb")
        opened = time.monotonic()
    offset = 0
    try:
        while offset < shard.bytes:
            before = time.perf_counter()
            view = stamper.fill(offset, min(step, shard.bytes - offset))
            generate_s += time.perf_counter() - before
            if handle is not None:
                handle.write(view)
            offset += len(view)
        written = time.monotonic()
        durable = bool(handle is not None and fsync and make_durable(handle))
        synced = time.monotonic()
    finally:
        if handle is not None:
            handle.close()
    closed = time.monotonic()
    return {
        "local_rank": ctx.local_rank,
        "global_rank": shard.global_rank,
        "bytes": offset,
        "start_mono": start,
        "marks_mono": [("open", opened), ("write", written), ("fsync", synced), ("close", closed)],
        "extra": {
            "generate_s": generate_s,
            "fsynced": durable,
            "peak_rss_bytes": peak_rss_bytes(),
            "path": shard.path,
        },
    }


def run_write_burst(
    pool: RankPool,
    fs: FsSpec,
    shards: Sequence[ShardFile],
    timeout_s: float,
    *,
    fsync: bool = True,
    sink: str = "target",
    before_start: StartHook | None = None,
) -> BurstResult:
    """Write ``shards`` (one per local rank) from a common start; returns the burst's records."""
    kwargs = [{"fs": fs, "shard": s, "fsync": fsync, "sink": sink} for s in shards]
    labels = [f"global rank {s.global_rank} ({s.path})" for s in shards]
    results = pool.run(write_shard_task, kwargs, timeout_s, before_start, labels)
    return BurstResult(
        "write" if sink == "target" else "generate", tuple(records_from_results(results))
    )
