"""Resharded restore: the plan's properties, and M < N ranks reading verified slices."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.engine.records import detail_as
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.reshard import (
    ReshardDetail,
    ReshardRange,
    default_new_ranks,
    plan_reshard,
    run_reshard,
)
from ckptgate.workloads.write_burst import ShardFile, run_write_burst
from tests.workloads.corruption import flip_byte

LOCAL = BackendSpec("file")
TRANSFER_BYTES = 64 * 1024

sizes_strategy = st.lists(st.integers(0, 10_000), min_size=1, max_size=12)


def old_files(sizes: list[int]) -> list[tuple[int, str, int]]:
    return [(rank, f"/ckpt/__{rank}_0.distcp", size) for rank, size in enumerate(sizes)]


def flatten(sizes: list[int], plan: list[list[ReshardRange]]) -> list[tuple[int, int]]:
    """Each range as [start, end) in the concatenated byte space, in plan order."""
    starts, position = {}, 0
    for _, path, size in old_files(sizes):
        starts[path] = position
        position += size
    return [
        (starts[r.path] + r.offset, starts[r.path] + r.offset + r.length) for p in plan for r in p
    ]


@given(sizes=sizes_strategy, new_ranks=st.integers(1, 16))
@example(sizes=[100, 100, 100, 100], new_ranks=2)  # slices on file boundaries
@example(sizes=[0, 0, 5], new_ranks=3)  # empty files give no range
@example(sizes=[3], new_ranks=5)  # more new ranks than bytes: some slices are empty
def test_ranges_cover_the_whole_space_exactly_once_in_order(
    sizes: list[int], new_ranks: int
) -> None:
    plan = plan_reshard(old_files(sizes), new_ranks)
    assert len(plan) == new_ranks
    spans = flatten(sizes, plan)
    assert all(end > start for start, end in spans)  # no empty range
    position = 0
    for start, end in spans:  # one after another, no gap, no overlap
        assert start == position
        position = end
    assert position == sum(sizes)


@given(sizes=sizes_strategy, new_ranks=st.integers(1, 16))
def test_each_new_rank_gets_one_contiguous_near_equal_slice(
    sizes: list[int], new_ranks: int
) -> None:
    plan = plan_reshard(old_files(sizes), new_ranks)
    lengths = []
    for ranges in plan:
        spans = flatten(sizes, [ranges])
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        assert len({r.path for r in ranges}) == len(ranges)  # each file once per new rank
        lengths.append(sum(r.length for r in ranges))
    assert max(lengths) - min(lengths) <= 1


@given(sizes=st.lists(st.integers(1, 10_000), min_size=2, max_size=12), data=st.data())
def test_slices_larger_than_every_file_span_two_or_more_files(
    sizes: list[int], data: st.DataObject
) -> None:
    total = sum(sizes)
    # the largest M whose smallest slice (total // M) still exceeds the largest file
    limit = max(m for m in range(1, len(sizes) + 1) if total // m > max(sizes) or m == 1)
    new_ranks = data.draw(st.integers(1, limit))
    plan = plan_reshard(old_files(sizes), new_ranks)
    if total // new_ranks > max(sizes):
        assert all(len({r.path for r in ranges}) >= 2 for ranges in plan)


@given(sizes=sizes_strategy, new_ranks=st.integers(1, 16))
def test_ranges_stay_inside_their_files(sizes: list[int], new_ranks: int) -> None:
    size_of = {path: size for _, path, size in old_files(sizes)}
    for ranges in plan_reshard(old_files(sizes), new_ranks):
        for r in ranges:
            assert r.offset >= 0 and r.offset + r.length <= size_of[r.path]


def test_old_files_are_taken_in_global_rank_order() -> None:
    plan = plan_reshard([(1, "b", 10), (0, "a", 10)], 1)
    assert plan == [[ReshardRange("a", 0, 10), ReshardRange("b", 0, 10)]]


@pytest.mark.parametrize(
    ("old", "fraction", "new"), [(8, 0.5, 4), (3, 0.5, 1), (1, 0.5, 1), (4, 0.75, 3), (7, 1.0, 7)]
)
def test_the_default_is_floor_of_the_fraction_and_at_least_one(
    old: int, fraction: float, new: int
) -> None:
    assert default_new_ranks(old, fraction) == new


def test_zero_new_ranks_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one new rank"):
        plan_reshard(old_files([10]), 0)


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Four rank processes for this module; stopped at its end."""
    with RankPool(4) as rank_pool:
        yield rank_pool


@pytest.fixture
def shards(pool: RankPool, tmp_path: Path) -> list[ShardFile]:
    """Four shards of uneven size, none a whole number of pages, written by the write burst."""
    sizes = (700_001, 650_000, 812_345, 300_000)
    files = [
        ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), size, 77, TRANSFER_BYTES)
        for g, size in enumerate(sizes)
    ]
    run_write_burst(pool, LOCAL, files, timeout_s=60)
    return files


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
def test_fewer_ranks_read_and_verify_every_byte_across_files(
    pool: RankPool, shards: list[ShardFile], direct: bool
) -> None:
    result = run_reshard(pool, LOCAL, shards, timeout_s=60, fraction=0.5, direct=direct)
    assert (result.old_ranks, result.new_ranks) == (4, 2)
    assert result.burst.kind == "reshard"
    assert result.burst.total_bytes == sum(s.bytes for s in shards)
    assert all(files >= 2 for files in result.files_per_rank())
    verification = result.read.verification
    assert verification is not None and verification.bytes == result.burst.total_bytes
    # a buffered read only reads; its bytes are verified after it from the pages it left,
    # an O_DIRECT read's in its loop (its buffer is the only copy), as the readback's are
    assert verification.when == ("in the read" if direct else "after the read")
    assert verification.seconds > 0
    for record in result.burst.ranks:
        assert detail_as(record, ReshardDetail).files_touched >= 2
        assert detail_as(record, ReshardDetail).range_count == len(
            detail_as(record, ReshardDetail).ranges
        )
        assert {"open", "read", "close"} == set(record.phases_s)
        if direct:
            assert 0 < detail_as(record, ReshardDetail).verify_s <= record.phases_s["read"]
        else:
            assert detail_as(record, ReshardDetail).verify_s == 0
    assert result.read.cache_free
    json = result.to_json()
    assert json["files_per_new_rank"] == result.files_per_rank()
    assert json["verification"]["when"] == verification.when
    assert {"total_bytes", "span_s", "aggregate_bytes_per_s", "resident_fraction"} <= json.keys()


def test_a_corrupted_byte_in_a_slice_names_file_and_offset(
    pool: RankPool, shards: list[ShardFile]
) -> None:
    victim, offset = shards[2], 812_000  # new rank 2's slice: files 2 and 3
    flip_byte(victim.path, offset, 0xFF)
    with pytest.raises(RankFailure, match="DataMismatch") as failure:
        run_reshard(pool, LOCAL, shards, timeout_s=60, new_ranks=3)
    assert f"{victim.path}: byte at offset {offset} differs" in str(failure.value)


# New rank 1 of 3 takes bytes [820_782, 1_641_564) of the 2_462_346: its range of file 1 (which
# starts at 700_001) begins at 120_781, off the 64 KiB transfer grid and off 8-byte alignment.
@pytest.mark.parametrize(
    ("offset", "direct"),
    [
        (120_780, False),  # the last byte of new rank 0's range
        (120_781, False),  # the first byte of new rank 1's range: the ragged head
        (120_781, True),  # the same through O_DIRECT's aligned read around it
        (131_071, False),  # the head's last byte, just before the grid
        (131_072, False),  # the first byte back on the grid
    ],
    ids=["end-of-slice", "head", "head-direct", "head-last", "on-grid"],
)
def test_a_corrupted_byte_at_a_slice_edge_names_file_and_offset(
    pool: RankPool, shards: list[ShardFile], offset: int, direct: bool
) -> None:
    """The ragged edges of a resharded range are verified byte for byte like the middle."""
    victim = shards[1]
    flip_byte(victim.path, offset, 0x01)
    with pytest.raises(RankFailure, match="DataMismatch") as failure:
        run_reshard(pool, LOCAL, shards, timeout_s=60, new_ranks=3, direct=direct)
    assert f"{victim.path}: byte at offset {offset} differs" in str(failure.value)
