"""The write burst: each rank's files (one, or files_per_rank), every byte written; the load
generator's burst goes through the same write calls into a sink that discards."""

from __future__ import annotations

from pathlib import Path

from ckptgate.engine.datagen import BLOCK_BYTES
from ckptgate.engine.pool import RankPool
from ckptgate.engine.records import detail_as
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import dcp_plan, shard_files
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.readback import file_records, run_readback
from ckptgate.workloads.write_burst import ShardFile, WriteDetail, run_write_burst
from tests.workloads import recording_tasks
from tests.workloads.proc_io import io_bytes

MiB = 2**20
LOCAL = BackendSpec("file")


def test_the_load_generator_writes_through_the_client_path_into_a_discarding_sink(
    pool: RankPool, tmp_path: Path
) -> None:
    """Its null sink never called write, so a slow client write path went unseen."""
    shards = [ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), 8 * MiB, 7, MiB) for g in (0, 1)]
    before = io_bytes(pool.pids(), "wchar")
    burst = run_write_burst(pool, LOCAL, shards, 60, sink="null")
    after = io_bytes(pool.pids(), "wchar")
    assert burst.total_bytes == 16 * MiB
    assert after - before >= 16 * MiB  # every byte went through write(2)
    assert list(tmp_path.iterdir()) == []  # and nowhere on the target
    assert not any(detail_as(r, WriteDetail).fsynced for r in burst.ranks)


def test_the_target_burst_writes_every_byte_and_fsyncs(pool: RankPool, tmp_path: Path) -> None:
    shards = [ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), 3 * MiB + 5, 7, MiB) for g in (0, 1)]
    burst = run_write_burst(pool, LOCAL, shards, 60)
    assert [Path(s.path).stat().st_size for s in shards] == [3 * MiB + 5] * 2
    assert all(detail_as(r, WriteDetail).fsynced for r in burst.ranks)
    assert [list(r.phases_s) for r in burst.ranks] == [["open", "write", "fsync", "close"]] * 2


def test_each_rank_writes_its_files_per_rank_as_dcp_names_them(
    pool: RankPool, tmp_path: Path
) -> None:
    """checkpoint.files_per_rank=3: each rank's shard as three files, every block unique, and
    the record reports each file."""
    plan = dcp_plan([0, 1], [3 * MiB + 5, 2 * MiB], 3, ranks=2, metadata_bytes=0)
    shards = shard_files(plan, str(tmp_path), 7, MiB)
    burst = run_write_burst(pool, LOCAL, shards, 60)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"__{g}_{i}.distcp" for g in (0, 1) for i in range(3)
    )
    assert [s.bytes for s in shards] == [MiB + 2, MiB + 2, MiB + 1, 699051, 699051, 699050]
    assert all(Path(s.path).stat().st_size == s.bytes for s in shards)
    assert [r.bytes for r in burst.ranks] == [3 * MiB + 5, 2 * MiB]
    for record in burst.ranks:
        mine = [s for s in shards if s.global_rank == record.global_rank]
        assert [f.path for f in detail_as(record, WriteDetail).files] == [s.path for s in mine]
        assert [f.bytes for f in detail_as(record, WriteDetail).files] == [s.bytes for s in mine]
        assert list(record.phases_s) == ["open", "write", "fsync", "close"]  # summed per file
    blocks = [
        Path(s.path).read_bytes()[o : o + BLOCK_BYTES]
        for s in shards
        for o in range(0, s.bytes - BLOCK_BYTES, BLOCK_BYTES)
    ]
    assert len(set(blocks)) == len(blocks)  # no two files of a rank hold the same bytes
    read = run_readback(pool, LOCAL, shards, 60)
    assert read.burst.total_bytes == plan.shard_bytes  # and each verifies as written
    assert len(file_records(read.burst)) == len(shards)


def test_the_stamp_pools_are_made_before_the_common_start(pool: RankPool, tmp_path: Path) -> None:
    """Making a transfer's random pool took 5 ms at 16 MiB, inside the timed burst: it is
    made before the barrier, so the span holds only open, write, fsync and close."""
    shards = [ShardFile(r, f"{tmp_path}/r{r}", 3 * BLOCK_BYTES, 7, BLOCK_BYTES) for r in (0, 1)]
    kwargs = [{"options": RunOptions(LOCAL), "files": [shard]} for shard in shards]
    results = pool.run(recording_tasks.write_noting_stamp_pools, kwargs, 60)
    for result in results:
        made = result.returned.made_mono
        assert len(made) == 1 and made[0] < result.start_mono
