"""The per-rank file plan: DCP's split of each rank's shard, stamps, and lanes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptgate.engine.datagen import step_bytes
from ckptgate.sizing import rank_file_bytes
from ckptgate.workloads.fileplan import FilePlan, PlannedFile, dcp_plan, lanes, shard_files

TRANSFER_BYTES = 64 * 1024


@example(rank_bytes=0, files=3)  # an empty shard: empty files, still named
@example(rank_bytes=7, files=2)  # remainder to the lowest index
@given(rank_bytes=st.integers(0, 10**13), files=st.integers(1, 64))
def test_a_ranks_files_sum_exactly_and_differ_by_at_most_one_byte(
    rank_bytes: int, files: int
) -> None:
    sizes = rank_file_bytes(rank_bytes, files)
    assert len(sizes) == files and sum(sizes) == rank_bytes
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # extras to the lowest indices


def test_files_per_rank_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="files_per_rank"):
        rank_file_bytes(10, 0)


def test_the_dcp_plan_names_each_ranks_files_as_dcp_does() -> None:
    plan = dcp_plan([3, 5], [10, 7], 2, ranks=8, metadata_bytes=99)
    assert [(f.name, f.bytes, f.global_rank, f.index) for f in plan.files] == [
        ("__3_0.distcp", 5, 3, 0),
        ("__3_1.distcp", 5, 3, 1),
        ("__5_0.distcp", 4, 5, 0),
        ("__5_1.distcp", 3, 5, 1),
    ]
    assert plan.metadata_name == ".metadata" and plan.metadata_bytes == 99
    assert plan.file_count == 5 and plan.total_bytes == 17 + 99
    assert plan.coordinator_rank == 8  # one past the last rank: its stamps are its own


def test_a_ranks_later_files_continue_its_stamps_on_the_grid() -> None:
    plan = dcp_plan([0, 1], [3 * TRANSFER_BYTES + 5, 100], 3, ranks=2, metadata_bytes=0)
    files = shard_files(plan, "/d", 7, TRANSFER_BYTES)
    grid = step_bytes(TRANSFER_BYTES)
    for rank in (0, 1):
        mine = [f for f in files if f.global_rank == rank]
        assert mine[0].stamp_offset == 0
        for before, after in itertools.pairwise(mine):
            assert after.stamp_offset % grid == 0
            # no two files of a rank share a stamp range: every block stays unique
            assert after.stamp_offset >= before.stamp_offset + before.bytes


def _plan(sizes: dict[int, list[int]]) -> FilePlan:
    files = tuple(
        PlannedFile(f"f{r}-{i}", b, r, i) for r, each in sizes.items() for i, b in enumerate(each)
    )
    return FilePlan(files, None, 0, "test", ranks=len(sizes))


def test_one_rank_per_lane_while_there_are_enough_processes() -> None:
    files = shard_files(_plan({0: [5, 5], 1: [3], 2: [9]}), "/d", 1, TRANSFER_BYTES)
    assert [[f.path for f in lane] for lane in lanes(files, 4)] == [
        ["/d/f0-0", "/d/f0-1"],
        ["/d/f1-0"],
        ["/d/f2-0"],
    ]


def test_more_ranks_than_processes_are_dealt_largest_first_every_file_once() -> None:
    sizes = {0: [10], 1: [1], 2: [7], 3: [4], 4: [4]}
    files = shard_files(_plan(sizes), "/d", 1, TRANSFER_BYTES)
    dealt = lanes(files, 2)
    assert len(dealt) == 2
    assert sorted(f.path for lane in dealt for f in lane) == sorted(f.path for f in files)
    loads = sorted(sum(f.bytes for f in lane) for lane in dealt)
    assert loads == [12, 14]  # LPT: 10, 7, then 4 to the 7, 4 to the 10, 1 to the 11
    # a rank's files stay together and in order
    for lane in dealt:
        ranks = [f.global_rank for f in lane]
        assert ranks == sorted(ranks)
