"""Read-while-write: dataloader readers stream from the target while a checkpoint persists.

During an async save the training job keeps running, and its dataloader keeps reading the
dataset from the same storage. Reader processes (their own ``RankPool``, apart from the
writers') stream a prepared set of dataset files with large sequential reads, as a dataloader
does, and stop by themselves at a time bound (or a bytes bound, whichever comes first). Run
alone they give the readers' bandwidth without contention; run across a write burst they give
both sides' bandwidth under contention.

Every read's end is stamped on the node's monotonic clock, so the bytes read during the
writers' span are counted exactly (a read that straddles an edge counts in proportion), and the
report can say how much of the writers' span the readers covered.

Readback honesty (SPEC.md): before each pass over a file, a reader on a backend with a page
cache drops the file's cached pages (the backend's ``drop_pages``: ``posix_fadvise(DONTNEED)``;
the files are clean, so it can), so a disk-backed target serves the reads itself. On tmpfs the
pages are the storage. Reads go through the backend's ``read_into`` (fsspec's read-ahead cache
off), one loop for every backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankDetail,
    RankResult,
    RankReturn,
    per_second,
    records_from_results,
    returned_as,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import generation_of
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.write_burst import ShardFile, run_write_burst

MiB = 2**20
READ_BYTES = 8 * MiB
"""Read size: a dataloader's large sequential reads (4 to 16 MiB)."""
DATASET_RANK_BASE = 1_000_000
"""Stamp ids of dataset files start here, apart from any checkpoint rank's."""


def dataset_files(
    directory: str, total_bytes: int, readers: int, run_id: int, transfer_bytes: int
) -> list[ShardFile]:
    """One dataset file per reader, ``total_bytes`` split evenly (stamped like shards, with the
    directory's generation: each node's dataset is its own bytes, not a copy a deduplicating
    storage would serve from one)."""
    if readers < 1:
        raise ValueError(f"a dataset needs at least one reader, got {readers}")
    share, extra = divmod(total_bytes, readers)
    generation = generation_of(directory)
    return [
        ShardFile(
            global_rank=DATASET_RANK_BASE + r,
            path=f"{directory.rstrip('/')}/dataset-{r:05d}.bin",
            bytes=share + (1 if r < extra else 0),
            run_id=run_id,
            transfer_bytes=transfer_bytes,
            generation=generation,
        )
        for r in range(readers)
    ]


def prepare_dataset(
    pool: RankPool, spec: BackendSpec, files: Sequence[ShardFile], timeout_s: float
) -> BurstResult:
    """Write the dataset (one file per reader, fsynced) with the readers' own processes."""
    return run_write_burst(pool, spec, files, timeout_s)


@dataclass(frozen=True)
class ReaderDetail(RankDetail):
    """What one dataloader reader reports beyond bytes and phases."""

    passes: int
    """Whole passes over its files."""
    cache_dropped: bool
    """Whether it dropped each file's pages before reading it."""
    reads: int
    """Read calls made."""


@dataclass(frozen=True)
class ReadTicks(RankReturn):
    """Every read of one reader: when it ended (the node's monotonic clock) and its bytes."""

    ends_mono: np.ndarray
    sizes_bytes: np.ndarray


def read_stream_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    paths: list[str],
    duration_s: float,
    max_bytes: int | None = None,
    read_bytes: int = READ_BYTES,
) -> RankResult:
    """Rank task: read ``paths`` sequentially, over and over, until the parent asks it to stop
    (``RankPool.request_stop``), or a time or bytes bound is reached, whichever comes first."""
    backend = options.spec.open()
    # A missing or empty dataset fails before the start, so no writer burst starts for nothing.
    empty = [p for p in paths if not backend.size(p)]
    if empty or not paths:
        raise ValueError(f"reader {ctx.local_rank}: empty dataset files {empty or paths}")
    view = memoryview(bytearray(read_bytes))
    drop = options.drop_cache and backend.has_page_cache
    read_into = backend.read_into
    ends: list[float] = []
    sizes: list[int] = []
    total = 0
    passes = 0
    phases = PhaseMarks.start(ctx)
    deadline = phases.start_mono + duration_s
    done = False
    progress = ctx.progress
    while not done:
        for path in paths:
            if drop:  # the files are clean (fsynced when prepared), so every page can go
                progress(phase="drop pages", path=path)
                backend.drop_pages(path)
            progress(phase="open", path=path)
            opened = backend.open_read(path)
            progress(phase="read")
            try:
                offset = 0
                while count := read_into(opened, view, offset):
                    offset += count
                    now = time.monotonic()
                    ends.append(now)
                    sizes.append(count)
                    total += count
                    progress(bytes=total)
                    if (
                        now >= deadline
                        or (max_bytes is not None and total >= max_bytes)
                        or ctx.stop_requested()
                    ):
                        done = True
                        break
            finally:
                backend.close(opened.handle)
            if done:
                break
        else:
            passes += 1
    phases.mark("read")
    return phases.result(
        DATASET_RANK_BASE + ctx.local_rank,
        total,
        detail=ReaderDetail(passes=passes, cache_dropped=drop, reads=len(ends)),
        returned=ReadTicks(
            ends_mono=np.asarray(ends, dtype=np.float64),
            sizes_bytes=np.asarray(sizes, dtype=np.int64),
        ),
    )


@dataclass(frozen=True)
class ReaderRun:
    """The readers' records, and every read's end (monotonic) and size, per reader."""

    burst: BurstResult
    start_mono: float
    """The readers' common start on the node's monotonic clock."""
    ticks: tuple[tuple[np.ndarray, np.ndarray], ...]
    starts_mono: tuple[float, ...]
    ends_mono: tuple[float, ...]

    @property
    def total_bytes(self) -> int:
        return self.burst.total_bytes

    @property
    def aggregate_bytes_per_s(self) -> float:
        """All readers' bytes over the common span."""
        return self.burst.aggregate_bytes_per_s

    def bytes_between(self, begin_mono: float, end_mono: float) -> float:
        """Bytes all readers read within ``[begin, end]``; a straddling read counts pro rata."""
        total = 0.0
        for (ends, sizes), start in zip(self.ticks, self.starts_mono, strict=True):
            if ends.size == 0:
                continue
            begins = np.concatenate(([start], ends[:-1]))
            lengths = np.maximum(ends - begins, 1e-12)
            inside = np.clip(np.minimum(ends, end_mono) - np.maximum(begins, begin_mono), 0, None)
            total += float(np.sum(sizes * np.minimum(inside / lengths, 1.0)))
        return total

    def bytes_per_s_between(self, begin_mono: float, end_mono: float) -> float:
        return per_second(self.bytes_between(begin_mono, end_mono), end_mono - begin_mono)

    def coverage(self, begin_mono: float, end_mono: float) -> float:
        """Fraction of ``[begin, end]`` during which every reader was reading."""
        span = end_mono - begin_mono
        if span <= 0:
            return 1.0
        covered = min(
            max(0.0, min(end, end_mono) - max(start, begin_mono))
            for start, end in zip(self.starts_mono, self.ends_mono, strict=True)
        )
        return min(1.0, covered / span)

    def to_json(self) -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "span_s": self.burst.span_s,
            "aggregate_bytes_per_s": self.aggregate_bytes_per_s,
            "ranks": [r.to_json() for r in self.burst.ranks],
        }


def run_readers(
    pool: RankPool,
    spec: BackendSpec,
    paths_per_reader: Sequence[Sequence[str]],
    duration_s: float,
    timeout_s: float,
    *,
    max_bytes: int | None = None,
    read_bytes: int = READ_BYTES,
) -> ReaderRun:
    """Stream from a common start until ``duration_s`` (or ``max_bytes`` per reader)."""
    if timeout_s <= duration_s:
        raise ValueError(f"timeout {timeout_s} s must exceed the readers' bound {duration_s} s")
    bounds = {"duration_s": duration_s, "max_bytes": max_bytes, "read_bytes": read_bytes}
    kwargs = [{"paths": list(paths), **bounds} for paths in paths_per_reader]
    labels = [f"reader {i} ({paths[0]})" for i, paths in enumerate(paths_per_reader)]
    expect = Expected("dataloader readers")  # they read until told: no total, no ETA
    results = run_ranks(
        pool, read_stream_task, kwargs, timeout_s, labels, options=RunOptions(spec), expect=expect
    )
    records = records_from_results(results)  # refuses a result without the common start
    common = cast(float, results[0].common_start_mono)
    ticks = tuple(
        (returned_as(r, ReadTicks).ends_mono, returned_as(r, ReadTicks).sizes_bytes)
        for r in results
    )
    starts = tuple(r.start_mono for r in results)
    ends = tuple(r.marks_mono[-1][1] for r in results)
    return ReaderRun(BurstResult("read", tuple(records)), common, ticks, starts, ends)


@dataclass(frozen=True)
class ContendedRun:
    """One write burst with readers streaming across it."""

    writers: BurstResult
    readers: ReaderRun
    writer_start_mono: float

    @property
    def writer_end_mono(self) -> float:
        return self.writer_start_mono + self.writers.span_s

    @property
    def reader_bytes_per_s(self) -> float:
        """The readers' aggregate bandwidth during the writers' span."""
        return self.readers.bytes_per_s_between(self.writer_start_mono, self.writer_end_mono)

    @property
    def coverage(self) -> float:
        """Fraction of the writers' span during which every reader was reading."""
        return self.readers.coverage(self.writer_start_mono, self.writer_end_mono)


WriteFn = Callable[[], BurstResult]
"""Runs one write burst on ``writer_pool``."""


def run_contended(
    write: WriteFn,
    writer_pool: RankPool,
    reader_pool: RankPool,
    spec: BackendSpec,
    paths_per_reader: Sequence[Sequence[str]],
    duration_s: float,
    timeout_s: float,
    *,
    warmup_s: float = 0.5,
    read_bytes: int = READ_BYTES,
) -> ContendedRun:
    """Start the readers, let them stream ``warmup_s``, then run ``write`` while they read.

    The readers run in their own processes, driven from a thread of this process; the write
    burst runs on this thread meanwhile, and once it ends the readers are told to stop, so
    they cover the writers' whole span however long it takes (``duration_s`` is their outer
    bound). Both are
    bounded: the readers by ``timeout_s``, the writers by their own timeout. The writers start
    only once the readers' pool has cast its start vote (its gate across nodes, if any, is
    done), so the two never run collectives at once; the writers' start is their pool's
    ``last_start_mono``.
    """
    if duration_s <= warmup_s:
        raise ValueError(f"readers' bound {duration_s} s must exceed the warm-up {warmup_s} s")
    outcome: dict[str, Any] = {}

    def readers() -> None:
        try:
            outcome["run"] = run_readers(
                reader_pool, spec, paths_per_reader, duration_s, timeout_s, read_bytes=read_bytes
            )
        except BaseException as error:  # re-raised on the calling thread
            outcome["error"] = error

    reader_pool.released.clear()
    thread = threading.Thread(target=readers, name="ckptgate-readers", daemon=True)
    thread.start()
    writers = None
    try:
        while not reader_pool.released.wait(0.1) and thread.is_alive():
            pass
        if reader_pool.released.is_set() and reader_pool.last_go:
            time.sleep(warmup_s)
            writers = write()
    finally:
        reader_pool.request_stop()  # the writers are done (or failed): the readers end too
        thread.join(timeout_s + 5.0)
    if "error" in outcome:
        raise outcome["error"]
    if thread.is_alive() or "run" not in outcome or writers is None:
        raise RuntimeError(f"readers did not finish within {timeout_s:.0f} s")
    return ContendedRun(writers, outcome["run"], cast(float, writer_pool.last_start_mono))
