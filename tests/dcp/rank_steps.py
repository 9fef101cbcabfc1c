"""DCP steps for the tests: those that fail on purpose, for the driver's failure tests
(module-level, so that the rank processes, spawned, import them by name), and a real save's
files measured."""

from __future__ import annotations

import os
import shutil
import threading

from ckptgate.dcp.ranks import DcpRanks
from ckptgate.dcp.records import DcpStep
from ckptgate.dcp.worker import DcpRankState, step_save


def step_die_on(state: DcpRankState, rank: int) -> DcpStep:
    """``rank`` exits with code 3; every other rank waits for it at a barrier that never
    completes (gloo's own timeout is 30 min: only the pool ends the wait)."""
    import torch.distributed as dist

    if state.rank == rank:
        os._exit(3)
    dist.barrier()
    return DcpStep(state.rank)


def step_hang_on(state: DcpRankState, rank: int) -> DcpStep:
    """``rank`` blocks forever (as in a save on hung storage); the others return at once."""
    if state.rank == rank:
        threading.Event().wait()
    return DcpStep(state.rank)


def step_ready(state: DcpRankState) -> DcpStep:
    """Nothing: a step that returns at once, so that a pool restarted after a failure has
    joined its new group before a step whose deadline is the point is timed."""
    return DcpStep(state.rank)


def saved_files(pool: DcpRanks, path: str, thread_count: int) -> dict[str, int]:
    """One real ``dcp.save`` of the pool's built state into ``path``: every data file's bytes
    by name (``.metadata`` aside); the directory removed after."""
    pool.run(step_save, path=path, thread_count=thread_count)
    try:
        return {
            name: os.path.getsize(os.path.join(path, name))
            for name in os.listdir(path)
            if name.endswith(".distcp")
        }
    finally:
        shutil.rmtree(path)
