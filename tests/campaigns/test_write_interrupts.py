"""An interrupt while a round is retired stays what the run tells, whatever its removal meets.

A Slurm job ended by a node's failure: SIGTERM reached the session while it verified the last
round, the removal after it failed on the target, and that failure replaced the interrupt: the
run said ``RankFailure: removing write round 54`` and ``failed`` instead of ``interrupted``.
"""

from __future__ import annotations

import errno
from typing import Any, cast

import pytest

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.engine.pool import RankFailure


class _Retiring(WriteCampaign):
    """A campaign whose verification raises ``raised`` and whose removal is refused."""

    def __init__(self, raised: BaseException | None) -> None:
        super().__init__(ctx=cast(Any, None))
        self.latest = cast(Any, ["a shard"])
        self.raised = raised
        self.removals: list[bool] = []

    def verify(self, shards: Any) -> None:
        if self.raised is not None:
            raise self.raised

    def drop_latest(self, *, failing: bool = False) -> None:
        self.removals.append(failing)
        raise OSError(errno.EIO, "the target refused")


def test_an_interrupt_during_the_verify_is_not_replaced_by_the_removal() -> None:
    campaign = _Retiring(KeyboardInterrupt("signal 15"))
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        campaign._retire_latest()
    assert campaign.removals == [True]  # tried, as after a failure: a refusal is listed
    assert campaign.failure is None


def test_a_refused_removal_after_a_good_verify_still_fails_the_round() -> None:
    campaign = _Retiring(None)
    with pytest.raises(RankFailure, match="removing write round 0: OSError"):
        campaign._retire_latest()
