"""One phase of the storm over every rank (``Phase``), and the per-file loop and split run the
stat, unlink and verify phases share: every operation timed on its own."""

from __future__ import annotations

import time
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.latency import LatencySummary, summarize
from ckptgate.engine.pool import FILES_DONE, RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankResult,
    merge_nodes,
    per_second,
    records_from_results,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm.files import FilesDetail, split
from ckptgate.workloads.storm.loops import PathBatch


def timed_each(
    ctx: RankContext, op: str, paths: Sequence[Any], call: Callable[[Any], Any]
) -> tuple[RankResult, list[Any]]:
    """Apply ``call`` to each path from the common start, reading the clock after each call.

    Returns the rank's result (one mark, every call's latency) and the calls' results. The loop
    does nothing else, so each latency is the operation's own, plus one clock read: the stamps
    and results are appended to lists (a store into a numpy array costs more), and progress is
    the count of files done, one store per file, as in ``create_task`` (a hang is named by the
    chunk's next file: the label names the chunk; an error names its own file).
    """
    clock = time.perf_counter
    stamps: list[float] = []
    results: list[Any] = []
    stamp, keep = stamps.append, results.append
    progress = ctx.progress
    done = ctx.files_done()
    phases = PhaseMarks.start(ctx)
    first = paths[0] if paths else ""
    progress(phase=op, path=first if isinstance(first, str) else first[0])  # a batch: its key
    stamp(clock())
    for n, path in enumerate(paths):
        done[FILES_DONE] = n
        try:  # free unless it raises (Python 3.11): then the error names its file
            keep(call(path))
        except OSError as error:
            if error.filename:
                raise
            named = path if isinstance(path, str) else path[0]  # a batch: its first key
            raise OSError(error.errno, error.strerror, named) from error
        stamp(clock())
    return _timed_result(ctx, phases, op, stamps), results


NativeRun = Callable[[PathBatch, MutableSequence[float]], tuple[np.ndarray, Any]]
"""A C loop over a batch (``ckptgate.workloads.storm.loops``), given the files-done slot: its clock
stamps and what it returned (sizes, or None)."""


def timed_native(
    ctx: RankContext, op: str, paths: Sequence[str], run: NativeRun
) -> tuple[RankResult, Any]:
    """``timed_each`` in C: ``run`` makes every call and reads the clock after each, from the
    common start, storing the files done as the Python loop does; the same record."""
    batch = PathBatch.of(paths)  # encoded before the start: the timed loop only does I/O
    done = ctx.files_done()
    phases = PhaseMarks.start(ctx)
    ctx.progress(phase=op, path=paths[0] if paths else "")
    stamps, returned = run(batch, done)
    return _timed_result(ctx, phases, op, stamps), returned


def _timed_result(
    ctx: RankContext, phases: PhaseMarks, op: str, stamps: Sequence[float] | np.ndarray
) -> RankResult:
    """A per-file loop's record: its mark and every call's latency (the stamps' steps)."""
    calls = len(stamps) - 1
    ctx.progress(files=calls, phase="done")
    phases.mark(op)
    return phases.result(
        -1,
        0,
        detail=FilesDetail(files=calls),
        latencies_s={op: np.diff(np.asarray(stamps, dtype=np.float64))},
    )


@dataclass(frozen=True)
class Phase:
    """One phase of the storm over every rank: its span, its rate, its per-op latencies."""

    name: str
    ops: int
    """Files handled (each file is one create+write+fsync+close, one stat, one unlink)."""
    burst: BurstResult
    raw_s: dict[str, np.ndarray]
    """Every operation's latency in seconds, by operation, over every rank."""

    @property
    def latencies(self) -> dict[str, LatencySummary]:
        return {op: summarize(values) for op, values in self.raw_s.items()}

    @property
    def span_s(self) -> float:
        """Common start to the last rank's end."""
        return self.burst.span_s

    @property
    def rate_per_s(self) -> float:
        """Files per second over the common span."""
        return per_second(self.ops, self.span_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "ops": self.ops,
            "ranks": len(self.burst.ranks),
            "span_s": self.span_s,
            "rate_per_s": self.rate_per_s,
            "latency_s": {op: s.to_json() for op, s in self.latencies.items()},
        }


def combine_phases(phases: Sequence[Phase]) -> Phase:
    """One phase from every node's part of it (the nodes started together)."""
    first = phases[0]
    burst = merge_nodes(first.burst.kind, [p.burst for p in phases])
    raw = {op: np.concatenate([p.raw_s[op] for p in phases]) for op in first.raw_s}
    return Phase(first.name, sum(p.ops for p in phases), burst, raw)


def phase_of(name: str, ops: int, results: list[RankResult]) -> Phase:
    raw = {
        op: np.concatenate([np.asarray(r.latencies_s[op], dtype=np.float64) for r in results])
        for op in results[0].latencies_s
    }
    burst = BurstResult(f"metadata-{name}", tuple(records_from_results(results)))
    return Phase(name, ops, burst, raw)


def per_file_phase(
    pool: RankPool,
    task: Callable[..., RankResult],
    op: str,
    spec: BackendSpec,
    paths: Sequence[str],
    timeout_s: float,
) -> tuple[Phase, list[list[str]], list[RankResult]]:
    """Run a per-file task (stat, unlink) over ``paths`` split across the pool's ranks.

    Returns the phase, and each rank's chunk with its result (for what the task returned).
    """
    chunks, results = split_run(
        pool,
        task,
        paths,
        "paths",
        lambda c: f"{op} of {len(c)} files",
        timeout_s,
        options=RunOptions(spec),
        phase=f"{op} storm",
    )
    return phase_of(op, len(paths), results), chunks, results


def split_run(
    pool: RankPool,
    task: Callable[..., RankResult],
    items: Sequence[Any],
    key: str,
    words: Callable[[list[Any]], str],
    timeout_s: float,
    *,
    options: RunOptions,
    phase: str,
    each: dict[str, Any] | None = None,
) -> tuple[list[list[Any]], list[RankResult]]:
    """Run ``task`` with ``items`` split over the pool's ranks (each rank's chunk as ``key``,
    beside the keyword arguments ``each`` every rank gets), each rank labelled
    ``local rank i (words(chunk))``; returns the chunks and the results."""
    chunks = split(list(items), pool.ranks)
    results = run_ranks(
        pool,
        task,
        [{**(each or {}), key: c} for c in chunks],
        timeout_s,
        [f"local rank {i} ({words(c)})" for i, c in enumerate(chunks)],
        options=options,
        expect=Expected(phase, rank_files=tuple(len(c) for c in chunks)),
    )
    return chunks, results
