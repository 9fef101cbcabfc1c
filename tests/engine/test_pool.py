"""The rank engine: a common start, reuse of processes, and bounded failure."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ckptgate.engine.pool import FILES_DONE, RankFailure, RankPool, inline_context
from tests.engine import rank_tasks

RANKS = 3


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Three rank processes for this module; stopped at its end."""
    with RankPool(RANKS) as rank_pool:
        yield rank_pool


def test_no_rank_starts_before_the_slowest_is_ready(pool: RankPool) -> None:
    delays = [0.0, 0.05, 0.4]
    results = pool.run(rank_tasks.report_start, [{"delay_s": d} for d in delays], timeout_s=30)
    common = results[0]["common_start_mono"]
    starts = [r["start_mono"] for r in results]
    assert all(start >= common for start in starts)
    # the rank that prepared fastest still waited for the slowest one's preparation
    assert min(starts) - max(starts) > -0.1


def test_rank_processes_are_reused_across_tasks(pool: RankPool) -> None:
    first = pool.run(rank_tasks.report_start, [{}] * RANKS, timeout_s=30)
    second = pool.run(rank_tasks.report_start, [{}] * RANKS, timeout_s=30)
    assert [r["pid"] for r in first] == [r["pid"] for r in second]


def test_a_task_may_use_fewer_ranks_than_the_pool(pool: RankPool) -> None:
    results = pool.run(rank_tasks.report_start, [{}], timeout_s=30)
    assert [r["local_rank"] for r in results] == [0]


@pytest.mark.parametrize("when", ["before", "after"], ids=["before-start", "after-start"])
def test_a_raising_rank_is_named_and_the_pool_survives(pool: RankPool, when: str) -> None:
    labels = ["global rank 7", "global rank 8", "global rank 9"]
    with pytest.raises(RankFailure, match="global rank 8: OSError") as failure:
        pool.run(rank_tasks.fail_on, [{"bad_rank": 1, "when": when}] * RANKS, 30, labels=labels)
    assert failure.value.ranks == (1,)
    assert len(pool.run(rank_tasks.report_start, [{}] * RANKS, timeout_s=30)) == RANKS


def test_a_hung_rank_fails_within_the_timeout_and_is_named(pool: RankPool) -> None:
    started = time.monotonic()
    with pytest.raises(RankFailure, match=r"rank 2: did not finish within 2 s"):
        pool.run(rank_tasks.hang_on, [{"bad_rank": 2}] * RANKS, timeout_s=2)
    assert time.monotonic() - started < 15
    assert len(pool.run(rank_tasks.report_start, [{}] * RANKS, timeout_s=30)) == RANKS


def test_a_dead_rank_is_named(pool: RankPool) -> None:
    with pytest.raises(RankFailure, match=r"rank 0: died") as failure:
        pool.run(rank_tasks.die_on, [{"bad_rank": 0}] * RANKS, timeout_s=30)
    assert failure.value.ranks == (0,)
    assert len(pool.run(rank_tasks.report_start, [{}] * RANKS, timeout_s=30)) == RANKS


def test_a_collective_pool_ends_the_run_at_the_first_failure() -> None:
    """The other ranks wait for the failed one forever (a collective): a collective pool stops
    them when it fails and names it, long before the 600 s deadline names anyone hung."""
    with RankPool(RANKS, collective=True) as collective:
        with pytest.raises(RankFailure, match=r"^1 rank\(s\) failed: rank 1: OSError") as failed:
            collective.run(rank_tasks.fail_then_others_wait, [{"bad_rank": 1}] * RANKS, 600)
        assert failed.value.ranks == (1,)
        assert not failed.value.hung
        # the pool restarted its processes: the next run works
        assert len(collective.run(rank_tasks.report_start, [{}] * RANKS, timeout_s=60)) == RANKS


def test_a_pool_that_is_not_daemonic_lets_a_rank_start_processes() -> None:
    """DCP's process-based async save starts a process in every rank; a daemonic rank
    may not (multiprocessing refuses)."""
    with RankPool(1, daemon=False) as parents:
        assert parents.run(rank_tasks.start_a_child, [{}], 60)[0]["child_exitcode"] == 0
    with RankPool(1) as daemons, pytest.raises(RankFailure, match="daemonic processes"):
        daemons.run(rank_tasks.start_a_child, [{}], 60)


def test_a_collective_pool_that_fails_before_the_start_votes_no() -> None:
    """A rank that fails while preparing ends a collective run before the release: this node
    votes no at the gate, so the other nodes stand down rather than wait for it."""
    votes: list[bool] = []

    def gate(ready: bool, timeout_s: float) -> bool:
        votes.append(ready)
        return ready

    with RankPool(RANKS, gate=gate, collective=True) as collective:
        kwargs = [{"bad_rank": 0, "when": "before"}] * RANKS
        with pytest.raises(RankFailure, match="rank 0: OSError"):
            collective.run(rank_tasks.fail_on, kwargs, 600)
    assert votes == [False]


def test_an_inline_context_is_released_at_once_with_a_real_progress_slot() -> None:
    """``inline_context`` (the loops benchmark's): ``start`` needs no parent, and a per-file
    loop's files-done store goes into shared memory, as in a rank process, not a plain list."""
    ctx = inline_context()
    assert ctx.start() > 0
    done = ctx.files_done()
    done[FILES_DONE] = 7
    assert isinstance(done, memoryview) and done[FILES_DONE] == 7
