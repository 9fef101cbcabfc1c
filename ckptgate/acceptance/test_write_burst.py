"""Checklist items 1, 3, 4 and 5: the checkpoint write burst, file per rank, fsync on close.

Every test reads the same rounds (``campaign``): the profile's ``run.rounds`` checkpoints of
this node's shards, each timed from a common start. The gate uses the slowest round, because
every checkpoint of a training run must fit its window, not the average one.
"""

from __future__ import annotations

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks import write
from ckptgate.fixtures.provided import Gate


def test_write_burst_rounds(benchmark, campaign: WriteCampaign, gate: Gate) -> None:
    """The rounds, run through pytest-benchmark so its JSON and compare work across targets.

    pytest-benchmark times each burst (dispatch to the last rank's result); retiring the
    previous checkpoint (verified, then removed) and making the next directory run untimed in
    its setup. The plugin runs this module first, so these are the profile's rounds.
    """
    missing = campaign.ctx.profile.run.rounds - len(campaign.bursts)
    if missing > 0:
        benchmark.pedantic(
            campaign.write_round,
            setup=lambda: ((campaign.prepare_round(),), {}),
            rounds=missing,
            iterations=1,
            warmup_rounds=0,
        )
    benchmark.extra_info.update(
        total_bytes=campaign.worst().total_bytes,
        worst_aggregate_bytes_per_s=campaign.worst().aggregate_bytes_per_s,
        span_s=[b.span_s for b in campaign.rounds()],
    )
    gate.section("write", campaign.section())


def test_load_generator_outruns_target(campaign: WriteCampaign, gate: Gate) -> None:
    """The suite's own data path is not what was measured."""
    gate.check(write.load_generator(campaign))


def test_checkpoint_bytes_on_target(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 1: the target holds the bytes the plan says, measured on the target."""
    gate.check(write.checkpoint_bytes(campaign))


def test_sync_stall(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 3 and 4: the save's stall against the stall budget (gated in sync mode)."""
    gate.check(write.sync_stall(campaign))


def test_async_persist(campaign: WriteCampaign, gate: Gate) -> None:
    """Checklist 5: the played shards persist within interval / headroom."""
    gate.check(
        write.async_persist(campaign),
        unless="checkpoint.mode is sync: the sync stall test gates the save",
    )
