"""The storm's restore listing: one rank lists the directory, then every file is stat'ed, split
over the ranks (what a restore does first)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.pool import FILES_DONE, RankContext, RankPool
from ckptgate.engine.records import (
    PhaseMarks,
    RankResult,
    RankReturn,
    returned_as,
    run_ranks,
)
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm.files import FilesDetail, join, split
from ckptgate.workloads.storm.loops import NATIVE, spec_loop, stat_files
from ckptgate.workloads.storm.phase import (
    Phase,
    per_file_phase,
    phase_of,
    timed_each,
    timed_native,
)


@dataclass(frozen=True)
class Listed(RankReturn):
    """A listing's names, sorted."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Statted(RankReturn):
    """Each statted path's size, in the chunk's order."""

    sizes_bytes: np.ndarray


def list_task(ctx: RankContext, *, options: RunOptions, directory: str) -> RankResult:
    """Rank task: list ``directory`` once, as a restore's coordinator does; returns the names."""
    backend = options.spec.open()
    phases = PhaseMarks.start(ctx)
    ctx.progress(phase="list", path=directory)
    t0 = time.perf_counter()
    names = backend.listdir(directory)
    t1 = time.perf_counter()
    phases.mark("list")
    return phases.result(
        0,
        0,
        detail=FilesDetail(files=1),
        latencies_s={"list": np.asarray([t1 - t0])},
        returned=Listed(tuple(sorted(names))),
    )


def stat_task(ctx: RankContext, *, options: RunOptions, paths: list[str]) -> RankResult:
    """Rank task: stat each of ``paths`` from the common start, in the spec's storm loop (C
    or Python); returns their sizes."""
    if spec_loop(options.spec) == NATIVE:
        record, sizes = timed_native(
            ctx,
            "stat",
            paths,
            lambda batch, done: stat_files(batch, done=done, files_done_at=FILES_DONE),
        )
    else:
        record, sizes = timed_each(ctx, "stat", paths, options.spec.open().size)
    return dataclasses.replace(record, returned=Statted(np.asarray(sizes, dtype=np.int64)))


@dataclass(frozen=True)
class RestoreListing:
    """What a restore does first: one listing of the directory, then a stat of every file."""

    names: tuple[str, ...]
    sizes: dict[str, int]
    list: Phase
    stat: Phase

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": len(self.names),
            "list": self.list.to_json(),
            "stat": self.stat.to_json(),
        }


def run_restore_listing(
    pool: RankPool,
    spec: BackendSpec,
    directory: str,
    timeout_s: float,
    *,
    part: tuple[int, int] = (0, 1),
) -> RestoreListing:
    """List ``directory`` on one rank, then stat every entry, split over the pool's ranks.

    ``part=(index, count)``: with many nodes, this node stats only its share of the entries.
    """
    listed = run_ranks(
        pool,
        list_task,
        [{"directory": directory}],
        timeout_s,
        [f"local rank 0 (listing {directory})"],
        options=RunOptions(spec),
    )
    names = returned_as(listed[0], Listed).names
    list_phase = phase_of("list", 1, listed)
    if not names:
        raise ValueError(f"restore listing: {directory} is empty")
    index, count = part
    shares = split(list(names), count)
    paths = [join(directory, name) for name in (shares[index] if index < len(shares) else [])]
    stat_phase, chunks, results = per_file_phase(pool, stat_task, "stat", spec, paths, timeout_s)
    sizes: dict[str, int] = {}
    for chunk, result in zip(chunks, results, strict=True):
        sizes.update(
            (p.rsplit("/", 1)[-1], int(s))
            for p, s in zip(chunk, returned_as(result, Statted).sizes_bytes, strict=True)
        )
    return RestoreListing(names, sizes, list_phase, stat_phase)
