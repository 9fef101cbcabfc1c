"""The null-source read (a node's own read limit for the scaling sweep): every rank's bytes go
through the read calls of the target's kind of backend, from /dev/zero, and touch no file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.null_read import NULL_READ_MIN_BYTES, run_null_read
from ckptgate.workloads.write_burst import ShardFile
from tests.workloads.proc_io import io_bytes

MiB = 2**20
LOCAL = BackendSpec("file")


@pytest.mark.parametrize("spec", [LOCAL, BackendSpec("memory")], ids=["posix", "fsspec-stand-in"])
def test_each_rank_reads_its_lanes_bytes_through_read_calls_and_no_file(
    pool: RankPool, tmp_path: Path, spec: BackendSpec
) -> None:
    """Rank 0's lane is two files of 40 MiB (80 MiB, past the floor), rank 1's one small file
    (read up to ``NULL_READ_MIN_BYTES``); none of them exists, and none is made. A target
    that is not a local filesystem (fsspec's memory here, as S3) reads through fsspec's local
    files."""
    big, small = 40 * MiB + 3, 5 * MiB
    shards = [
        ShardFile(0, str(tmp_path / "__0_0.distcp"), big, 7, MiB),
        ShardFile(0, str(tmp_path / "__0_1.distcp"), big, 7, MiB),
        ShardFile(1, str(tmp_path / "__1_0.distcp"), small, 7, MiB),
    ]
    before = io_bytes(pool.pids(), "rchar")
    burst = run_null_read(pool, spec, shards, 60)
    after = io_bytes(pool.pids(), "rchar")
    assert burst.kind == "null read"
    assert [r.bytes for r in burst.ranks] == [2 * big, NULL_READ_MIN_BYTES]
    assert after - before >= 2 * big + NULL_READ_MIN_BYTES  # every byte through read(2)
    assert list(tmp_path.iterdir()) == []
    assert [list(r.phases_s) for r in burst.ranks] == [["open", "read", "close"]] * 2
    transfers = [r.latency["read"].count for r in burst.ranks]
    assert transfers == [-(-2 * big // MiB), NULL_READ_MIN_BYTES // MiB]  # in the transfers
    assert burst.aggregate_bytes_per_s > 0


def test_a_remote_target_reads_through_fsspecs_local_files_a_local_one_its_own_calls() -> None:
    assert BackendSpec("memory").stand_in() == BackendSpec("file", backend="fsspec")
    assert LOCAL.stand_in() is LOCAL
