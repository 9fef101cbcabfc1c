"""What a DCP rank hands back from one step: a typed record on the node's monotonic clock.

Every timed step starts at a ``torch.distributed`` barrier and stamps ``time.monotonic()``
(CLOCK_MONOTONIC, one clock for every process on the node), so the driver times a step from
the common start (the earliest barrier exit) to the last rank's end. SPEC.md, "How to measure
honestly": the slowest rank sets a synchronous save's time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ckptgate.engine.pool import StampedResult


@dataclass(frozen=True)
class DcpStep(StampedResult):
    """One rank's part in one DCP step; times in seconds on the node's monotonic clock."""

    rank: int
    member: bool = True
    """Whether this rank took part (a load onto fewer ranks leaves the others out)."""
    start_s: float = math.nan
    """When this rank left the step's barrier (the build: when it began)."""
    end_s: float = math.nan
    """When the step's work ended on this rank (an async save: the save completed)."""
    returned_s: float = math.nan
    """An async save: when ``dcp.async_save`` returned (the state staged to CPU memory)."""
    verify_s: float = 0.0
    """A load: the time spent verifying every loaded tensor, after ``end_s``."""
    mismatches: tuple[str, ...] = ()
    """A load: every tensor block that did not hold the expected bytes."""
    local_tensor_bytes: int = 0
    """The build: the bytes of this rank's local tensors."""
    common_start_mono: float | None = field(default=None, compare=False)
    """Stamped by the rank pool (``ckptgate.engine.pool.StampedResult``); DCP's own common
    start is the step's barrier."""

    @property
    def total_s(self) -> float:
        """This rank's own time, from leaving the barrier to its end."""
        return self.end_s - self.start_s

    @property
    def block_s(self) -> float:
        """An async save's blocking part on this rank: barrier to the call's return."""
        return self.returned_s - self.start_s


def span_s(steps: Sequence[DcpStep], *, returned: bool = False) -> float:
    """From the common start (earliest barrier exit) to the last member rank's end (or, with
    ``returned``, to the last ``dcp.async_save`` return: the blocking part)."""
    members = [s for s in steps if s.member]
    ends = [s.returned_s if returned else s.end_s for s in members]
    return max(ends) - min(s.start_s for s in members)


def mismatches(steps: Sequence[DcpStep]) -> list[str]:
    """Every rank's verification mismatches, in rank order."""
    return [m for s in steps for m in s.mismatches]
