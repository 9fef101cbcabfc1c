"""Liveness: a stalled rank is named by its progress, and ranks die with their parent."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from ckptgate.engine.pool import (
    FILES_DONE,
    ProgressSlot,
    RankContext,
    RankFailure,
    RankPool,
    _Watch,
)
from tests.engine import rank_tasks

SAFETY_S = 60.0

# A parent that starts a pool, prints the rank pids and waits to be killed.
PARENT = textwrap.dedent(
    """
    import json, sys, time
    from ckptgate.engine.pool import RankPool
    pool = RankPool(2)
    print(json.dumps(pool.pids()), flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ranks_stop_when_their_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pids = json.loads(parent.stdout.readline())
    assert all(_alive(pid) for pid in pids)
    parent.kill()  # kill -9: no cleanup runs in the parent
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + SAFETY_S  # a safety net: PDEATHSIG acts at once
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


@contextlib.contextmanager
def _clock_moves_once(now: list[float], reported: Callable[[], bool]) -> Iterator[None]:
    """While the block runs, move the pool's clock 31 s past the stall limit each time it
    looks (every 0.3 s) and ``reported`` holds: the clock moves only once the rank's report
    is in (read from its slot, as the pool reads it), so the outcome cannot depend on the
    machine's speed. Bounded by ``SAFETY_S``."""
    stop_at = time.monotonic() + SAFETY_S
    done = threading.Event()

    def tick() -> None:
        while time.monotonic() < stop_at and not done.is_set():
            time.sleep(0.3)
            if reported():
                now[0] += 31.0

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join(timeout=SAFETY_S)


def test_a_rank_without_progress_is_named_with_its_phase_and_file() -> None:
    now = [0.0]
    with RankPool(2, stall_timeout_s=30, clock=lambda: now[0]) as pool:
        labels = ["global rank 4 (/x/a)", "global rank 5 (/x/b)"]
        # rank 1 reports, then blocks for good; the clock moves only once it has reported
        kwargs = [{"bad_rank": 1}] * 2
        pool.pids()  # started, so the test can watch rank 1's slot
        slot = pool._members[1].slot
        with (
            pytest.raises(RankFailure) as failure,
            _clock_moves_once(now, lambda: slot.describe()[0] == "fsync"),
        ):
            pool.run(rank_tasks.stall_after_progress, kwargs, 3600, labels)
        message = str(failure.value)
        assert "global rank 5 (/x/b): no progress for 30 s in fsync on /x/b" in message
        assert "(last 1.05 MB written)" in message
        assert failure.value.hung == (1,)
        assert os.getpid() not in failure.value.ranks


def test_a_files_count_stored_alone_keeps_a_rank_from_counting_as_stalled() -> None:
    """The stall watch sees a per-file loop's one store (``RankContext.files_done``)."""
    pool = RankPool(1, stall_timeout_s=30)  # never started: only its watch is used
    slot = ProgressSlot(multiprocessing.get_context("spawn"))
    member = cast(Any, SimpleNamespace(slot=slot))
    watch = _Watch(slot.counter, 0.0)
    done = RankContext(0, 1, cast(Any, None), slot).files_done()
    for n, now in enumerate((10.0, 20.0, 30.0, 40.0), start=1):
        done[FILES_DONE] = n  # the count moves, nothing else does
        assert pool._stalled([member], [watch], [0], set(), True, now) == {}
    stalled = pool._stalled([member], [watch], [0], set(), True, 70.0)  # 30 s after the last
    assert stalled == {0: "no progress for 30 s in its task (last 4 files done)"}


def test_a_hang_after_a_files_count_is_named_with_the_files_done() -> None:
    """A per-file loop stores only its files count: a hang after it is named with it."""
    now = [0.0]
    with RankPool(2, stall_timeout_s=30, clock=lambda: now[0]) as pool:
        pool.pids()
        slot = pool._members[1].slot
        with (
            pytest.raises(RankFailure) as failure,
            _clock_moves_once(now, lambda: slot.describe()[2] == "5 files done"),
        ):
            pool.run(rank_tasks.count_files_then_hang, [{"files": 5, "bad_rank": 1}] * 2, 3600)
        assert "rank 1: no progress for 30 s in stat on /x/b (last 5 files done)" in str(
            failure.value
        )
        assert failure.value.hung == (1,)
