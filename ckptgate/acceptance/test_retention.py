"""Checklist item 8: the retention tier sized: the target's capacity against the retained
bytes of the full cluster (read when the session started, before the run wrote anything)."""

from __future__ import annotations

from ckptgate.checks import retention
from ckptgate.fixtures.provided import Gate
from ckptgate.rundir.target import Target
from ckptgate.sizing import Profile, Sizing


def test_retention_capacity(
    target: Target, cluster_profile: Profile, requirements: Sizing, gate: Gate
) -> None:
    """Free capacity on the target holds the retained checkpoints of the full cluster."""
    gate.check(retention.capacity(target, cluster_profile, requirements))
