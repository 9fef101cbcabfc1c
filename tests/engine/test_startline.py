"""The common start: one futex wake releases every waiting rank (engine/startline.py)."""

from __future__ import annotations

import multiprocessing as mp
import threading

import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.engine.startline import StartLine, futex_known
from tests.engine import rank_tasks

needs_futex = pytest.mark.skipif(
    not futex_known(),
    reason="no futex system call number known for this architecture: the pipe release runs",
)


@needs_futex
@pytest.mark.parametrize("go", [True, False], ids=["go", "abort"])
def test_every_waiter_sees_the_one_release_and_its_decision(go: bool) -> None:
    line = StartLine(mp.get_context("spawn"))
    seen = line.seen()
    answers: list[bool] = []
    waiting = [threading.Thread(target=lambda: answers.append(line.wait(seen))) for _ in range(4)]
    for thread in waiting:
        thread.start()
    line.release(go)
    for thread in waiting:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in waiting)
    assert answers == [go] * 4


@needs_futex
def test_a_waiter_does_not_leave_before_the_release() -> None:
    line = StartLine(mp.get_context("spawn"))
    seen = line.seen()
    left = threading.Event()

    def wait() -> None:
        line.wait(seen)
        left.set()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    assert not left.wait(timeout=0.3)  # a slow machine only makes this wait longer
    line.release(True)
    assert left.wait(timeout=30)
    thread.join(timeout=30)


@needs_futex
def test_a_release_that_came_before_the_wait_is_not_missed() -> None:
    line = StartLine(mp.get_context("spawn"))
    seen = line.seen()
    line.release(True)
    assert line.wait(seen) is True  # returns at once: the word moved past what it saw


@needs_futex
def test_the_pool_releases_its_ranks_through_the_start_line() -> None:
    with RankPool(3) as pool:
        pool.run(rank_tasks.report_start, [{}] * 3, timeout_s=30)
        line = pool._line
        assert line is not None and line.usable
        before = line.seen()
        results = pool.run(rank_tasks.report_start, [{}] * 3, timeout_s=30)
        assert line.seen() >> 1 == (before >> 1) + 1  # one release for the run's three ranks
        assert line.seen() & 1  # and it said go
        assert all(r["start_mono"] >= r["common_start_mono"] for r in results)


def test_without_a_futex_the_pipe_still_releases_every_rank() -> None:
    with RankPool(3, release="pipe") as pool:
        results = pool.run(rank_tasks.report_start, [{}] * 3, timeout_s=30)
    assert pool._line is not None and not pool._line.usable
    assert sorted(r["local_rank"] for r in results) == [0, 1, 2]
    assert all(r["start_mono"] >= r["common_start_mono"] for r in results)


def test_an_unknown_release_is_refused() -> None:
    with pytest.raises(ValueError, match="release must be one of"):
        RankPool(1, release="carrier pigeon")
