"""Readback: another rank's shard, the cache dropped and measured, every byte verified."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.engine.records import detail_as
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.fsfacts import local_fs_facts
from ckptgate.workloads.fileplan import dcp_plan, shard_files
from ckptgate.workloads.readback import (
    ReadDetail,
    file_records,
    readback_assignment,
    run_readback,
)
from ckptgate.workloads.write_burst import ShardFile, run_write_burst
from tests.workloads.corruption import flip_byte

RANKS = 3
TRANSFER_BYTES = 64 * 1024
LOCAL = BackendSpec("file")
# uneven sizes, none a whole number of transfers or pages: tails and short reads get exercised
SIZES = (1_000_003, 2_500_000, 777_777)


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Three rank processes for this module; stopped at its end."""
    with RankPool(RANKS) as rank_pool:
        yield rank_pool


@pytest.fixture
def shards(pool: RankPool, directory: Path) -> list[ShardFile]:
    """Three shards written by the write burst (and so left resident in the page cache)."""
    files = [
        ShardFile(10 + i, str(directory / f"__{10 + i}_0.distcp"), size, 4242, TRANSFER_BYTES)
        for i, size in enumerate(SIZES)
    ]
    run_write_burst(pool, LOCAL, files, timeout_s=60)
    return files


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize(("count", "shift"), [(3, 1), (8, 1), (8, 4), (1, 1), (4, 5)])
def test_the_assignment_is_a_permutation_with_no_rank_reading_its_own(
    count: int, shift: int
) -> None:
    order = readback_assignment(count, shift)
    assert sorted(order) == list(range(count))
    if count > 1 and shift % count:
        assert all(order[i] != i for i in range(count))


def test_each_rank_reads_a_shard_another_rank_wrote(
    pool: RankPool, shards: list[ShardFile]
) -> None:
    result = run_readback(pool, LOCAL, shards, timeout_s=60)
    burst = result.burst
    assert burst.kind == "read"
    assert burst.total_bytes == sum(SIZES)
    assert sorted(detail_as(r, ReadDetail).path for r in burst.ranks) == sorted(
        s.path for s in shards
    )
    for record in burst.ranks:
        assert detail_as(record, ReadDetail).written_by_local_rank != record.rank
        assert list(record.phases_s) == ["open", "read", "close"]
        assert record.bytes == next(s.bytes for s in shards if s.global_rank == record.global_rank)
        # a buffered read only reads: its bytes are verified after every rank is done
        assert detail_as(record, ReadDetail).verified == "after the read"
        assert detail_as(record, ReadDetail).verify_s == 0
    verification = result.verification
    assert verification is not None and verification.when == "after the read"
    assert verification.bytes == sum(SIZES) and verification.seconds > 0
    assert verification.resident_fraction is not None
    assert 0 <= verification.resident_fraction <= 1
    assert result.to_json()["verification"]["when"] == "after the read"


def test_a_direct_read_verifies_in_the_read_loop(pool: RankPool, shards: list[ShardFile]) -> None:
    result = run_readback(pool, LOCAL, shards, timeout_s=60, direct=True)
    assert result.verification is not None and result.verification.when == "in the read"
    for record in result.burst.ranks:
        assert detail_as(record, ReadDetail).verified == "in the read"
        assert 0 < detail_as(record, ReadDetail).verify_s <= record.phases_s["read"]


def test_dropped_pages_are_not_resident_and_tmpfs_says_it_is_memory(
    pool: RankPool, shards: list[ShardFile], directory: Path
) -> None:
    result = run_readback(pool, LOCAL, shards, timeout_s=60)
    assert result.resident_before_drop is not None and result.resident_before_drop > 0.99
    if local_fs_facts(str(directory)).memory_backed:
        assert result.memory_backed
        assert result.resident_fraction == 1.0
        assert result.cache_free  # the cache is the storage: reported, not failed
    else:
        assert not result.memory_backed
        assert result.resident_fraction is not None and result.resident_fraction < 0.01
        assert result.cache_free
    json = result.to_json()
    assert {"total_bytes", "span_s", "aggregate_bytes_per_s", "ranks"} <= json.keys()
    assert {"resident_fraction", "memory_backed", "direct"} <= json.keys()


def test_without_the_drop_a_disk_readback_is_reported_cache_served(
    pool: RankPool, shards: list[ShardFile], directory: Path
) -> None:
    result = run_readback(pool, LOCAL, shards, timeout_s=60, drop_cache=False)
    if local_fs_facts(str(directory)).memory_backed:
        assert result.cache_free
    else:
        assert not result.cache_free
        assert sorted(result.cache_served) == sorted(s.path for s in shards)


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
def test_a_corrupted_byte_fails_the_readback_naming_file_and_offset(
    pool: RankPool, shards: list[ShardFile], direct: bool
) -> None:
    victim, offset = shards[1], 1_234_567
    flip_byte(victim.path, offset, 0x40)  # the corruption between write and read
    with pytest.raises(RankFailure, match="DataMismatch") as failure:
        run_readback(pool, LOCAL, shards, timeout_s=60, direct=direct)
    assert f"{victim.path}: byte at offset {offset} differs" in str(failure.value)


def test_readback_is_read_only(pool: RankPool, shards: list[ShardFile]) -> None:
    before = {s.path: (os.stat(s.path).st_mtime_ns, digest(s.path)) for s in shards}
    run_readback(pool, LOCAL, shards, timeout_s=60, direct=True)
    run_readback(pool, LOCAL, shards, timeout_s=60)
    assert {s.path: (os.stat(s.path).st_mtime_ns, digest(s.path)) for s in shards} == before


def test_direct_readback_uses_o_direct_or_says_why_not(
    pool: RankPool, shards: list[ShardFile]
) -> None:
    result = run_readback(pool, LOCAL, shards, timeout_s=60, direct=True)
    assert result.burst.total_bytes == sum(SIZES)
    assert result.direct or result.direct_refused
    assert all(detail_as(r, ReadDetail).direct == result.direct for r in result.burst.ranks)


def test_a_missing_shard_names_the_rank_and_the_file(
    pool: RankPool, shards: list[ShardFile]
) -> None:
    gone = shards[2]
    os.unlink(gone.path)
    with pytest.raises(RankFailure, match=f"global rank {gone.global_rank}") as failure:
        run_readback(pool, LOCAL, shards, timeout_s=60)
    assert gone.path in str(failure.value)


@pytest.fixture
def split_shards(pool: RankPool, directory: Path) -> list[ShardFile]:
    """Three ranks' shards written as two files each (checkpoint.files_per_rank=2)."""
    plan = dcp_plan([10, 11, 12], list(SIZES), 2, ranks=13, metadata_bytes=0)
    files = shard_files(plan, str(directory), 4242, TRANSFER_BYTES)
    run_write_burst(pool, LOCAL, files, timeout_s=60)
    return files


def test_each_rank_reads_all_of_another_ranks_files(
    pool: RankPool, split_shards: list[ShardFile]
) -> None:
    result = run_readback(pool, LOCAL, split_shards, timeout_s=60)
    assert result.burst.total_bytes == sum(SIZES)
    for record in result.burst.ranks:
        mine = [s.path for s in split_shards if s.global_rank == record.global_rank]
        assert [f.path for f in detail_as(record, ReadDetail).files] == mine
        assert detail_as(record, ReadDetail).written_by_local_rank != record.rank
    assert sorted(f.path for f in file_records(result.burst)) == sorted(
        s.path for s in split_shards
    )


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
def test_a_corrupted_byte_in_a_later_file_names_that_file_and_its_own_offset(
    pool: RankPool, split_shards: list[ShardFile], direct: bool
) -> None:
    """A rank's second file continues its stamps: the failure still names the file offset."""
    victim, offset = split_shards[3], 654_321  # rank 11's second file, stamps from 1.25 MB on
    assert victim.stamp_offset > 0
    flip_byte(victim.path, offset, 0x40)
    with pytest.raises(RankFailure, match="DataMismatch") as failure:
        run_readback(pool, LOCAL, split_shards, timeout_s=60, direct=direct)
    assert f"{victim.path}: byte at offset {offset} differs" in str(failure.value)


def test_every_nodes_verification_merges_into_one_record() -> None:
    from ckptgate.workloads.readback import Verification, merge_verifications

    merged = merge_verifications(
        [
            Verification("after the read", 300, 0.5, 1.0),
            None,
            Verification("after the read", 100, 2.0, 0.0),
        ]
    )
    assert merged == Verification("after the read", 400, 2.0, 0.75)
    assert merge_verifications([None, None]) is None
