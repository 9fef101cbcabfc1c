"""Rank tasks for the workload tests: the real tasks, watched from inside the rank process."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from ckptgate.engine.datagen import BlockStamper
from ckptgate.engine.pool import RankContext
from ckptgate.engine.records import RankResult, RankReturn
from ckptgate.workloads import write_burst


def write_noting_stamp_pools(ctx: RankContext, **kwargs: Any) -> RankResult:
    """``write_shard_task``, noting when each stamp pool was made (``PoolsMade``, on
    the rank's monotonic clock)."""
    made: list[float] = []

    class Noting(BlockStamper):
        def __init__(self, *args: Any, **named: Any) -> None:
            made.append(time.monotonic())
            super().__init__(*args, **named)

    original = write_burst.BlockStamper
    write_burst.BlockStamper = Noting  # type: ignore[misc]
    try:
        result = write_burst.write_shard_task(ctx, **kwargs)
    finally:
        write_burst.BlockStamper = original  # type: ignore[misc]
    return dataclasses.replace(result, returned=PoolsMade(tuple(made)))


@dataclass(frozen=True)
class PoolsMade(RankReturn):
    """When each of the rank's stamp pools was made (the rank's monotonic clock)."""

    made_mono: tuple[float, ...]
