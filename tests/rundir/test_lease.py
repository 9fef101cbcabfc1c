"""The lease keeper's helper process: kept fresh, and stopped whatever became of it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from ckptgate.rundir.lease import LeaseKeeper, read_lease

SAFETY_S = 120.0
"""A bound on waiting, so a broken stop fails the test instead of hanging it; never a timing
claim (a working stop returns at once)."""


def _rewritten(keeper: LeaseKeeper) -> None:
    """Wait (bounded) until the helper has rewritten the lease once: it is in its loop."""
    first = (read_lease(keeper.path) or {}).get("time")
    deadline = time.monotonic() + SAFETY_S
    while (read_lease(keeper.path) or {}).get("time") == first:
        assert time.monotonic() < deadline, "the helper never rewrote the lease"
        time.sleep(0.05)


def _stops(keeper: LeaseKeeper) -> bool:
    """Whether ``keeper.stop()`` returned within the safety bound (run in a thread)."""
    stopper = threading.Thread(target=keeper.stop, daemon=True)
    stopper.start()
    stopper.join(SAFETY_S)
    return not stopper.is_alive()


def test_the_helper_keeps_the_lease_fresh_and_stops(tmp_path: Path) -> None:
    keeper = LeaseKeeper(str(tmp_path), 0, period_s=0.1, clock=lambda: 1.0)
    keeper.start()
    _rewritten(keeper)  # the helper writes the real time, not the injected 1.0
    assert _stops(keeper)
    assert keeper._helper is None


def test_a_helper_that_died_in_its_wait_does_not_hang_the_stop(tmp_path: Path) -> None:
    """As Ctrl-C to the process group, or the OOM killer, ends the helper while it sleeps
    between writes. A multiprocessing Event's ``set`` then waited for the dead sleeper to wake
    forever, in the session's cleanup with SIGINT and SIGTERM held (a run that never ended)."""
    keeper = LeaseKeeper(str(tmp_path), 0, period_s=0.2)
    keeper.start()
    _rewritten(keeper)  # it spends nearly all its time asleep between writes
    assert keeper._helper is not None and keeper._helper.pid is not None
    os.kill(keeper._helper.pid, signal.SIGKILL)
    keeper._helper.join(SAFETY_S)
    assert _stops(keeper), "stop() hung on the dead helper"


def test_ctrl_c_to_the_group_leaves_the_helper_to_the_session(tmp_path: Path) -> None:
    keeper = LeaseKeeper(str(tmp_path), 0, period_s=0.2)
    keeper.start()
    _rewritten(keeper)
    assert keeper._helper is not None and keeper._helper.pid is not None
    os.kill(keeper._helper.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends it too
    _rewritten(keeper)  # still keeping the lease fresh
    assert _stops(keeper)
