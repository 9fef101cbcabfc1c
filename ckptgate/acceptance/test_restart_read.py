"""Checklist item 7: restart read tested with resharding (IOR -F -C: readers shifted by a rank).

Both tests read the latest write round's files, read-only: every rank reads another rank's
(another node's) shard after its pages were dropped, then M < N ranks load slices spanning
several old files. Every byte read is verified.
"""

from __future__ import annotations

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks import restart
from ckptgate.fixtures.provided import Gate


def test_restart_readback(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 7: every rank reads another rank's shard, uncached, within restart.read_s."""
    answer = restart.readback(campaign)
    gate.section("read", answer.section)
    gate.check(answer.item)


def test_resharded_restore(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 7: M < N ranks load slices spanning several old files, within restart.read_s."""
    answer = restart.resharded(campaign)
    if answer is not None:
        gate.section("reshard", answer.section)
    gate.check(
        answer.item if answer is not None else None,
        unless="one shard on this node: a load onto fewer ranks needs at least two",
    )
