"""DCP's ranks: W engine rank processes (``ckptgate.engine.pool.RankPool``) joined in one gloo
group on loopback, started once and serving DCP steps.

One way to spawn, bound and name a failing rank: the engine's pool. A DCP rank that raises,
dies or is still running at the step's deadline is a ``RankFailure`` naming it
(``DCP rank 1: died (exit code 3)``); the pool is ``collective``, so the first failure ends
the step at once (the other ranks wait on it in a collective) and restarts the processes, which
join a new group on the next step.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from ckptgate.dcp.records import DcpStep
from ckptgate.dcp.worker import Step, join_task, leave_task, step_task
from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.engine.sampler import Expected, ProgressSampler

JOIN_TIMEOUT_S = 120.0
"""How long the ranks may take to import torch and join the gloo group."""
STEP_TIMEOUT_S = 300.0
"""A step's deadline unless its caller sets one (``DcpConfig.step_timeout_s`` for a run)."""
LEAVE_TIMEOUT_S = 30.0
"""How long the ranks may take to leave the group before the pool stops them regardless."""


class DcpRankFailure(RankFailure):
    """A DCP rank raised, died or missed its deadline; names the rank and the step."""


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DcpRanks:
    """W local DCP ranks on gloo over loopback, started once, serving steps.

    Use as a context manager; ``close()`` stops exactly the processes it started.
    ``sampler``: the session's (``engine.sampler.ProgressSampler``): the steps' bytes reach the
    live line and the bandwidth series as the write burst's do (the steps run one at a time,
    never beside another pool's run).
    """

    def __init__(
        self,
        world_size: int,
        start_timeout_s: float = JOIN_TIMEOUT_S,
        sampler: ProgressSampler | None = None,
    ) -> None:
        self.world_size = world_size
        self.start_timeout_s = start_timeout_s
        self.names = [f"DCP rank {r}" for r in range(world_size)]
        # Not daemonic: process-based async save starts a child process in every rank.
        self.pool = RankPool(world_size, daemon=False, collective=True)
        self.pool.sampler = sampler
        self._joined: list[int] = []
        try:
            self._join()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> DcpRanks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _join(self) -> None:
        """Join every rank process to one gloo group, where these processes have not yet (at
        the start, and after a failure restarted them)."""
        pids = self.pool.pids()
        if pids == self._joined:
            return
        shared = {
            "port": _free_loopback_port(),
            "world_size": self.world_size,
            "torch_threads": max(1, (os.cpu_count() or 1) // self.world_size),
        }
        self._call(join_task, "join", self.start_timeout_s, [shared] * self.world_size)
        self._joined = pids

    def run(
        self,
        step: Step,
        timeout_s: float = STEP_TIMEOUT_S,
        per_rank: Sequence[Mapping[str, Any]] | None = None,
        expect: Expected | None = None,
        **kwargs: Any,
    ) -> list[DcpStep]:
        """Run one step (a ``ckptgate.dcp.worker`` ``step_*`` function) on every rank
        (``kwargs`` for all, ``per_rank[r]`` added for rank r) within ``timeout_s``; return
        the per-rank records in rank order. ``expect``: the live line's phase and each rank's
        bytes (default ``DCP <step>``, totals as the ranks report them)."""
        self._join()
        each = [
            {"step": step, **kwargs, **(per_rank[r] if per_rank else {})}
            for r in range(self.world_size)
        ]
        name = step.__name__.removeprefix("step_")
        return self._call(step_task, name, timeout_s, each, expect)

    def _call(
        self,
        task: Any,
        name: str,
        timeout_s: float,
        kwargs: Sequence[dict[str, Any]],
        expect: Expected | None = None,
    ) -> list[DcpStep]:
        phase = expect or Expected(f"DCP {name}")
        try:
            return self.pool.run(task, kwargs, timeout_s, self.names, expect=phase)
        except RankFailure as failure:
            self._joined = []
            raise DcpRankFailure(
                f"DCP step {name!r}: {failure}", failure.ranks, failure.hung, failure.abandoned
            ) from None

    def close(self) -> None:
        """Leave the gloo group (bounded), then stop the rank processes."""
        try:
            if self._joined:
                self._joined = []
                self.pool.run(
                    leave_task,
                    [{}] * self.world_size,
                    LEAVE_TIMEOUT_S,
                    self.names,
                    expect=Expected("DCP leave"),
                )
        except RankFailure:
            pass  # the pool has stopped them already
        finally:
            self.pool.close()
