"""Checklist items 2, 3 and 4: the profile's own decisions, checked against each other and
against the measured write bandwidth."""

from __future__ import annotations

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks import decisions
from ckptgate.fixtures.provided import Gate
from ckptgate.sizing import Profile, Sizing


def test_interval_from_failure_rate(
    cluster_profile: Profile, requirements: Sizing, gate: Gate
) -> None:
    """Checklist 2: lost work at the chosen interval, Young's optimum, the goodput budget."""
    gate.check(decisions.interval_from_failure_rate(cluster_profile, requirements))


def test_stall_budget(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 3: the stall budget can hold the largest shard at the measured bandwidth."""
    gate.check(decisions.stall_budget(campaign))


def test_sync_vs_async(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 4: the chosen mode is consistent with the measured per-rank bandwidth."""
    gate.check(decisions.sync_vs_async(campaign))
