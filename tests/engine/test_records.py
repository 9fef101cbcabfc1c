"""Typed rank results: what a task returns, and the records built from it."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import numpy as np
import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.engine.records import BurstResult, RankResult, records_from_results, run_ranks
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
    original = result(latencies_s={"stat": np.arange(3.0)}, returned={"names": ["a"]})
    copy = pickle.loads(pickle.dumps(original))
    assert copy.marks_mono == original.marks_mono and copy.returned == {"names": ["a"]}
    assert np.array_equal(copy.latencies_s["stat"], original.latencies_s["stat"])


def test_run_ranks_gives_typed_results_with_shared_arguments(pool: RankPool) -> None:
    results = run_ranks(
        pool,
        rank_tasks.typed_phases,
        [{"marker": 1}, {"marker": 2}],
        timeout_s=30,
        shared={"phases": ["open", "write"]},
    )
    assert [r.global_rank for r in results] == [100, 101]
    assert [r.extra["marker"] for r in results] == [1, 2]
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
