"""Typed rank results: what a task returns, and the records built from it."""

from __future__ import annotations

import dataclasses
import gc
import pickle
from collections.abc import Iterator

import numpy as np
import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.engine.records import (
    BurstResult,
    RankDetail,
    RankRecord,
    RankResult,
    detail_as,
    merge_nodes,
    records_from_results,
    returned_as,
    run_ranks,
)
from ckptgate.workloads.storm.listing import Listed
from tests.engine import rank_tasks


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Two rank processes for this module; stopped at its end."""
    with RankPool(2) as rank_pool:
        yield rank_pool


def result(**fields: object) -> RankResult:
    base: dict[str, object] = {
        "local_rank": 1,
        "global_rank": 9,
        "bytes": 4096,
        "start_mono": 10.5,
        "marks_mono": (("open", 11.0), ("read", 13.0), ("close", 13.5), ("read", 14.0)),
    }
    return RankResult(**{**base, **fields})  # type: ignore[arg-type]


def test_records_are_relative_to_the_common_start_and_sum_repeated_phases() -> None:
    stamped = result()
    stamped["common_start_mono"] = 10.0  # as engine/pool.py stamps every result
    (record,) = records_from_results([stamped], host="node-a")
    assert (record.rank, record.global_rank, record.host, record.bytes) == (1, 9, "node-a", 4096)
    assert (record.start_s, record.end_s) == (0.5, 4.0)
    assert record.phases_s == {"open": 0.5, "read": 2.5, "close": 0.5}


def test_a_result_without_the_common_start_is_refused() -> None:
    with pytest.raises(ValueError, match="no common start"):
        records_from_results([result()])


def test_the_engines_stamp_is_the_only_mutation() -> None:
    frozen = result()
    with pytest.raises(TypeError, match="frozen"):
        frozen["bytes"] = 0
    assert frozen.bytes == 4096


def test_a_result_pickles_with_its_arrays() -> None:
    original = result(latencies_s={"stat": np.arange(3.0)}, returned=Listed(("a",)))
    copy = pickle.loads(pickle.dumps(original))
    assert copy.marks_mono == original.marks_mono and returned_as(copy, Listed).names == ("a",)
    assert np.array_equal(copy.latencies_s["stat"], original.latencies_s["stat"])


def test_run_ranks_gives_typed_results_with_the_runs_options(pool: RankPool) -> None:
    results = run_ranks(
        pool,
        rank_tasks.typed_phases,
        [{"marker": 1}, {"marker": 2}],
        timeout_s=30,
        options=rank_tasks.PhaseOptions(("open", "write")),
    )
    assert [r.global_rank for r in results] == [100, 101]
    assert [detail_as(r, rank_tasks.MarkerDetail).marker for r in results] == [1, 2]
    assert all(r.common_start_mono == pool.last_start_mono for r in results)
    records = records_from_results(results)
    assert all(list(r.phases_s) == ["open", "write"] for r in records)
    assert all(r.start_s >= 0 for r in records)


def test_run_ranks_refuses_a_task_that_returns_a_dict(pool: RankPool) -> None:
    with pytest.raises(TypeError, match="report_start returned dict, not a RankResult"):
        run_ranks(pool, rank_tasks.report_start, [{}], timeout_s=30)  # type: ignore[arg-type]


def test_the_start_skew_is_first_to_last_release_and_in_the_json() -> None:
    early, late = result(start_mono=10.0002), result(local_rank=2, start_mono=10.0009)
    for stamped in (early, late):
        stamped["common_start_mono"] = 10.0
    burst = BurstResult("write", tuple(records_from_results([early, late], host="node-a")))
    assert burst.start_skew_s == pytest.approx(0.0007)
    assert burst.to_json()["start_skew_s"] == pytest.approx(0.0007)


def test_a_saves_span_ends_with_the_coordinators_commit_but_the_slowest_rank_is_a_rank() -> None:
    """The coordinator's .metadata ends a save by construction: the span counts it, while
    ``slowest`` names the rank that finished last and ``commit`` the coordinator's write."""
    ranks = [
        RankRecord(0, 0, "h", 10, 0.0, 2.0, {"write": 2.0}),
        RankRecord(1, 1, "h", 10, 0.0, 3.0, {"write": 3.0}),
        RankRecord(0, 2, "h", 1, 3.0, 3.5, {"write": 0.5}, coordinator=True),
    ]
    burst = BurstResult("write", tuple(ranks))
    assert burst.span_s == 3.5
    assert burst.slowest is ranks[1]
    assert burst.commit is ranks[2]
    assert BurstResult("write", tuple(ranks[:2])).commit is None
    assert burst.start_skew_s == 0.0  # the commit starts after the ranks: not a release


def test_a_records_json_holds_its_details_fields_and_the_commit_flag() -> None:
    """The typed detail's fields sit at the record's top level in the JSON, as the free dict's
    keys did, and only the coordinator's commit carries ``coordinator``."""
    rank = RankRecord(0, 0, "h", 10, 0.0, 2.0, {"write": 2.0}, rank_tasks.MarkerDetail(7))
    commit = dataclasses.replace(rank, coordinator=True)
    assert rank.to_json()["marker"] == 7 and "coordinator" not in rank.to_json()
    assert commit.to_json()["coordinator"] is True


@dataclasses.dataclass(frozen=True)
class OtherDetail(RankDetail):
    """Another workload's detail."""


def test_a_record_read_as_another_workloads_detail_is_refused_by_name() -> None:
    record = RankRecord(0, 3, "h", 10, 0.0, 2.0, {}, rank_tasks.MarkerDetail(7))
    assert detail_as(record, rank_tasks.MarkerDetail).marker == 7
    with pytest.raises(TypeError, match="rank 3 carries MarkerDetail, not OtherDetail"):
        detail_as(record, OtherDetail)
    with pytest.raises(TypeError, match="rank 9 carries NoneType, not Listed"):
        returned_as(result(), Listed)  # the task returned nothing to its driver


@dataclasses.dataclass(frozen=True)
class _File:
    path: str
    bytes: int


@dataclasses.dataclass(frozen=True)
class NestedDetail(RankDetail):
    """A detail with every shape a workload's has: nested dataclasses in a tuple, a dict,
    None, a list of lists."""

    files: tuple[_File, ...]
    cache: dict[str, float | None]
    refused: str | None
    ranges: tuple[tuple[str, int, int], ...]


def test_a_details_json_is_what_asdict_makes_with_tuples_as_lists() -> None:
    detail = NestedDetail(
        (_File("a", 1), _File("b", 2)), {"hit": 0.5, "miss": None}, None, (("a", 0, 1),)
    )
    expected = dataclasses.asdict(detail)
    expected["files"] = list(expected["files"])
    expected["ranges"] = [list(r) for r in expected["ranges"]]
    assert detail.to_json() == expected


def test_merging_nodes_tags_each_record_with_its_node_and_changes_no_record() -> None:
    def burst(node_host: str) -> BurstResult:
        return BurstResult(
            "write",
            tuple(
                RankRecord(
                    r, r, node_host, 10, 0.1, 0.2, {"write": 0.1}, rank_tasks.MarkerDetail(r)
                )
                for r in range(2)
            ),
        )

    bursts = [burst("a"), burst("b"), burst("c")]
    merged = merge_nodes("write", bursts)
    expected = [dataclasses.replace(r, node=n) for n, b in enumerate(bursts) for r in b.ranks]
    assert list(merged.ranks) == expected
    assert [r.node for r in merged.ranks] == [0, 0, 1, 1, 2, 2]
    assert all(r.node == 0 for b in bursts for r in b.ranks)  # the nodes' own records unchanged
    assert merged.ranks[2].detail is bursts[1].ranks[0].detail  # a shallow copy, as replace's
    with pytest.raises(dataclasses.FrozenInstanceError):
        merged.ranks[2].node = 5  # type: ignore[misc]


def test_a_bursts_json_of_1024_nodes_runs_no_cyclic_collection() -> None:
    """Node 0 encodes a burst of every node's records (16,384 ranks' at 2,048 nodes) while a
    check builds its report section: with the cyclic collector on, each collection scans every
    live object, so the encoding's work grew faster than N. It is paused for the encoding:
    no collection starts while it runs (counted, not timed)."""
    from ckptgate.benchmarks.coordination import node_burst

    burst = merge_nodes("write", [node_burst(node, 8) for node in range(1024)])
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    assert gc.isenabled(), "the test needs the collector on to see it paused"
    # From a known start: the generations' counts are whatever the tests before left (in a
    # whole fast tier, once, the old generation's threshold came due right as the pause ended,
    # a collection the encoding did not cause); collected now, a collection counted is one the
    # encoding's own objects brought on.
    gc.collect()
    gc.callbacks.append(count)
    try:
        encoded = burst.to_json()
    finally:
        gc.callbacks.remove(count)
    assert len(encoded["ranks"]) == 8192
    # none while it encodes (48, of every generation, before the pause); the young
    # generation's one collection right after it, which scans what the encoding made once,
    # may start before the callback is removed
    assert started in ([], [0])
    assert gc.isenabled()
