"""Read-while-write: readers stop by themselves, and bytes are counted inside the write span."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ckptgate.checks.contention import reader_sampler
from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.engine.records import BurstResult, detail_as
from ckptgate.engine.sampler import NodeProgress, ProgressSampler
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.contention import (
    ReaderDetail,
    ReaderRun,
    dataset_files,
    prepare_dataset,
    run_contended,
    run_readers,
)
from ckptgate.workloads.write_burst import ShardFile, run_write_burst

MiB = 2**20
LOCAL = BackendSpec("file")
RUN_ID = 77


@pytest.fixture(scope="module")
def readers() -> Iterator[RankPool]:
    """Two reader processes for this module; stopped at its end."""
    with RankPool(2) as pool:
        yield pool


@pytest.fixture(scope="module")
def writers() -> Iterator[RankPool]:
    """Two writer processes for this module; stopped at its end."""
    with RankPool(2) as pool:
        yield pool


@pytest.fixture(scope="module")
def dataset(readers: RankPool, tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    """Two 8 MiB dataset files, one per reader (removed with pytest's temporary directory)."""
    directory = tmp_path_factory.mktemp("dataset")
    files = dataset_files(str(directory), 16 * MiB, 2, RUN_ID, 4 * MiB)
    burst = prepare_dataset(readers, LOCAL, files, 60)
    assert burst.total_bytes == 16 * MiB
    return [[f.path] for f in files]


def test_readers_stop_by_themselves_at_the_time_bound(
    readers: RankPool, dataset: list[list[str]]
) -> None:
    started = time.monotonic()
    run = run_readers(readers, LOCAL, dataset, duration_s=0.5, timeout_s=30, read_bytes=MiB)
    assert time.monotonic() - started < 10
    for record in run.burst.ranks:
        # the bound is checked after every read: one read of 1 MiB past it at most
        assert 0.5 <= record.total_s < 1.5
        assert (
            detail_as(record, ReaderDetail).passes >= 1
        )  # 8 MiB per pass: tmpfs or disk, far under 0.5 s
    assert run.total_bytes > 16 * MiB


def test_readers_stop_at_the_bytes_bound(readers: RankPool, dataset: list[list[str]]) -> None:
    run = run_readers(
        readers, LOCAL, dataset, duration_s=60, timeout_s=90, max_bytes=3 * MiB, read_bytes=MiB
    )
    assert [r.bytes for r in run.burst.ranks] == [3 * MiB, 3 * MiB]
    assert run.burst.span_s < 30


def test_a_failing_reader_is_raised_on_the_callers_thread(
    readers: RankPool, writers: RankPool, tmp_path: Path
) -> None:
    missing = [[str(tmp_path / "no-such-file")], [str(tmp_path / "nor-this")]]
    wrote: list[int] = []

    def write() -> BurstResult:  # never reached: the readers fail before their start
        wrote.append(1)
        raise AssertionError("the writers ran although the readers failed")

    with pytest.raises(RankFailure, match="reader 0"):
        run_contended(write, writers, readers, LOCAL, missing, duration_s=2, timeout_s=20)
    assert wrote == []


def test_readers_cover_the_write_burst_and_are_counted_inside_it(
    readers: RankPool, writers: RankPool, dataset: list[list[str]], tmp_path: Path
) -> None:
    shards = [
        ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), 32 * MiB, RUN_ID, 4 * MiB) for g in range(2)
    ]

    def write() -> BurstResult:
        return run_write_burst(writers, LOCAL, shards, 60)

    # The readers' outer bound is far beyond the writers' span even on a busy machine: they
    # stop when the writers are done, so coverage is whole whatever the load.
    run = run_contended(write, writers, readers, LOCAL, dataset, duration_s=120, timeout_s=180)
    assert run.writers.total_bytes == 64 * MiB
    assert run.coverage == 1.0
    assert min(run.readers.starts_mono) <= run.writer_start_mono
    assert max(run.readers.ends_mono) >= run.writer_end_mono
    inside = run.readers.bytes_between(run.writer_start_mono, run.writer_end_mono)
    assert 0 < inside <= run.readers.total_bytes
    assert run.reader_bytes_per_s > 0


def _reader_run(ends: list[float], sizes: list[int], start: float) -> ReaderRun:
    ticks = ((np.asarray(ends), np.asarray(sizes)),)
    return ReaderRun(BurstResult("read", ()), start, ticks, (start,), (ends[-1],))


def test_a_read_straddling_the_window_counts_in_proportion() -> None:
    run = _reader_run([1.0, 2.0, 3.0, 4.0], [100, 100, 100, 100], start=0.0)
    assert run.bytes_between(0.5, 2.5) == pytest.approx(50 + 100 + 50)
    assert run.bytes_between(-5.0, 10.0) == pytest.approx(400)
    assert run.bytes_between(5.0, 6.0) == 0
    assert run.coverage(1.0, 3.0) == 1.0
    assert run.coverage(3.0, 5.0) == pytest.approx(0.5)


def test_the_readers_report_their_bytes_to_a_sampler_and_end(
    readers: RankPool, dataset: list[list[str]]
) -> None:
    # the contention readers' own pool gets a sampler beside the ranks' (checks/contention.py)
    seen: list[NodeProgress] = []
    ranks = ProgressSampler(0, on_sample=seen.append)
    readers.sampler = reader_sampler(ranks)
    try:
        run_readers(readers, LOCAL, dataset, duration_s=60, timeout_s=90, max_bytes=3 * MiB,
                    read_bytes=MiB)  # fmt: skip
    finally:
        readers.sampler = None
    assert seen and {p.phase for p in seen} == {"dataloader readers"}
    assert not seen[-1].running and seen[-1].released
    assert seen[-1].bytes == 6 * MiB and seen[-1].ranks == 2
    # their series is saved with the ranks' (the JSON's bandwidth_series)
    (series,) = [s for s in ranks.series_json() if s["phase"] == "dataloader readers"]
    assert series["done_bytes"][-1] == 6 * MiB and series["node"] == 0
    assert reader_sampler(None) is None
