"""Checklist items 2, 3 and 4: the profile's own decisions, checked against each other and
against the measured write bandwidth.

- interval from the failure rate: the chosen interval's lost work, Young's optimum for the
  stall budget, and the goodput loss (lost work + restart + stall, each part named); gated
  where the profile states a ``checkpoint.goodput_budget``.
- stall budget written down: a sync save must hold the largest shard (uncapped) at the
  per-rank write bandwidth measured in the write rounds; in async mode it is what a sync save
  would cost, reported.
- sync vs async decided: an async save must persist the largest shard within interval /
  headroom at the same bandwidth; a sync profile reports what a sync save costs of the
  wall clock against its overhead budget.

The per-rank bandwidth is that of the rank playing the largest shard, in the slowest round:
bytes / its own open-to-close time. Projecting it to the uncapped shard assumes the rate holds
for a larger file, which a run without ``run.shard_bytes_cap`` shows.
"""

from __future__ import annotations

from contextlib import nullcontext

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks.check import Check, Measuring, row
from ckptgate.engine.records import RankRecord, per_second
from ckptgate.report.items import Item, judge
from ckptgate.sizing import Profile, Sizing, format_bytes, format_rate, format_seconds


def _largest_rank(campaign: WriteCampaign) -> RankRecord:
    """The record of the rank that writes the largest shard, in the slowest round."""
    worst = campaign.worst()
    plan = campaign.ctx.plan
    largest = max(
        zip(plan.global_ranks, plan.uncapped_shard_bytes, strict=True), key=lambda gb: gb[1]
    )[0]
    mine = [r for r in worst.ranks if r.global_rank == largest]
    return mine[0] if mine else min(worst.ranks, key=lambda r: r.bytes / max(r.total_s, 1e-12))


def _per_rank(campaign: WriteCampaign) -> tuple[float, float, str]:
    """Measured per-rank bandwidth, the time the largest shard takes at it, and the words."""
    record = _largest_rank(campaign)
    bandwidth = per_second(record.bytes, record.total_s)
    largest = campaign.ctx.sizing.largest_shard_bytes
    needed_s = largest / bandwidth
    words = (
        f"largest shard {format_bytes(largest)} at {format_rate(bandwidth)} per rank "
        f"(global rank {record.global_rank}: {format_bytes(record.bytes)} in "
        f"{format_seconds(record.total_s)}, slowest of {len(campaign.rounds())} rounds)"
    )
    if campaign.ctx.plan.capped:
        words += "; shards capped for a trial run: projected to the uncapped shard"
    return bandwidth, needed_s, words


def interval_from_failure_rate(profile: Profile, sizing: Sizing) -> Item:
    """Checklist 2: lost work at the chosen interval, Young's optimum, the goodput budget."""
    s = sizing
    checkpoint = profile.checkpoint
    young_ratio = s.interval_s / s.optimal_interval_s
    stall_fraction = s.stall_budget_s / s.interval_s
    detail = (
        f"{profile.name}: MTBF {format_seconds(s.mtbf_s)}; interval "
        f"{format_seconds(s.interval_s)} loses {s.lost_work_fraction * 100:.3g} % to failures "
        f"({s.requirements['lost_work_fraction'].formula}), "
        f"{s.restart_loss_fraction * 100:.3g} % to restarts "
        f"({s.requirements['restart_loss_fraction'].formula}) and "
        f"{stall_fraction * 100:.3g} % to stalls (stall budget "
        f"{format_seconds(s.stall_budget_s)}): {s.goodput_loss_fraction * 100:.3g} % in all; "
        f"Young's optimum "
        f"{format_seconds(s.optimal_interval_s)} ({s.requirements['optimal_interval_s'].formula})"
        f", the chosen interval is {young_ratio:.3g}x it"
    )
    if checkpoint.goodput_budget is None:
        return Item(
            id="interval-from-failure-rate",
            required=None,
            measured=s.goodput_loss_fraction,
            unit="fraction",
            passed=None,
            better="lower",
            detail=detail + "; checkpoint.goodput_budget not stated: reported, not gated",
        )
    return judge(
        id="interval-from-failure-rate",
        measured=s.goodput_loss_fraction,
        required=checkpoint.goodput_budget,
        unit="fraction",
        better="lower",
        detail=f"{detail}; lost work + restart + stall against checkpoint.goodput_budget",
    )


def stall_budget(campaign: WriteCampaign) -> Item:
    """Checklist 3: the stall budget can hold the largest shard at the measured bandwidth."""
    ctx = campaign.ctx
    _, needed_s, words = _per_rank(campaign)
    budget = ctx.sizing.requirements["stall_budget_s"]
    item = judge(
        id="stall-budget",
        measured=needed_s,
        required=ctx.sizing.stall_budget_s,
        cluster_required=ctx.sizing.stall_budget_s,
        unit="s",
        better="lower",
        detail=f"{ctx.profile.name}: {budget.formula}; {words}",
        scope=ctx.plan.scope(),
    )
    if ctx.profile.checkpoint.mode == "async":
        item.report_only(
            "async profile: the blocking stall is the copy to host memory; reported as what a "
            "sync save of the largest shard would stall (the sync save stall row times the "
            "played burst, this row one rank's largest shard)"
        )
    return item


def sync_vs_async(campaign: WriteCampaign) -> Item:
    """Checklist 4: the chosen mode is consistent with the measured per-rank bandwidth."""
    ctx = campaign.ctx
    checkpoint = ctx.profile.checkpoint
    _, needed_s, words = _per_rank(campaign)
    sync_cost = needed_s / checkpoint.interval_s
    cost_words = (
        f"a sync save would stall {format_seconds(needed_s)} per "
        f"{format_seconds(checkpoint.interval_s)} interval, {sync_cost * 100:.3g} % of wall "
        f"clock against the {checkpoint.overhead_budget * 100:.3g} % overhead budget"
    )
    if checkpoint.mode == "async":
        window_s = checkpoint.interval_s / checkpoint.async_headroom
        return judge(
            id="sync-vs-async",
            title="async persist window holds the largest shard",
            measured=needed_s,
            required=window_s,
            cluster_required=window_s,
            unit="s",
            better="lower",
            detail=f"{ctx.profile.name}: async, persist window "
            f"{format_seconds(checkpoint.interval_s)} / {checkpoint.async_headroom:g} headroom; "
            f"{words}; {cost_words}; host staging "
            f"{format_bytes(ctx.sizing.staging_bytes_per_node)} per node",
            scope=ctx.plan.scope(),
        )
    verdict = (
        "async save would hide it"
        if sync_cost > checkpoint.overhead_budget
        else "sync fits its budget"
    )
    return Item(
        id="sync-vs-async",
        required=checkpoint.overhead_budget,
        measured=sync_cost,
        unit="fraction",
        passed=None,
        better="lower",
        detail=f"{ctx.profile.name}: sync; {cost_words}; {words}; {verdict} "
        "(the stall-budget item gates it)",
        scope=ctx.plan.scope(),
    )


def _interval(run: Measuring) -> Item:
    return interval_from_failure_rate(run.profile, run.sizing)


CHECK = Check(
    name="decisions",
    place=50,
    measure=nullcontext,
    summary="the profile's own decisions against each other and the measured bandwidth",
    answers=(
        row("decisions", "interval-from-failure-rate", "2", "interval from failure rate",
            _interval),
        row("decisions", "stall-budget", "3", "stall budget holds the largest shard",
            lambda run: stall_budget(run.campaign)),
        row("decisions", "sync-vs-async", "4", "sync vs async",
            lambda run: sync_vs_async(run.campaign)),
    ),
)  # fmt: skip
"""Checklist 2, 3 and 4: measures nothing of its own (the rows read the profile, its sizing
and the write rounds' per-rank bandwidth)."""
