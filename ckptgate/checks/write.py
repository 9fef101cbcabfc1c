"""Checklist items 1, 3 and 5 on the write rounds: the checkpoint bytes, the sync stall, the
async persist bandwidth, and the proof that the load generator was not what was timed.

The rounds come from the write campaign (``ckptgate.campaigns.write``). The gate uses the
slowest round, because every checkpoint of a training run must fit its window, not the
average one; the median is reported beside it.
"""

from __future__ import annotations

from contextlib import nullcontext

from ckptgate.campaigns.write import GENERATOR_HEADROOM, GENERATOR_MIN_BYTES, WriteCampaign
from ckptgate.checks.check import Check, row
from ckptgate.engine.records import BurstResult
from ckptgate.report.gate import Item, judge
from ckptgate.sizing import (
    format_bytes,
    format_count,
    format_rate,
    format_seconds,
)
from ckptgate.storage.object_store import ObjectStore


def stall_item(campaign: WriteCampaign, burst: BurstResult, *, id: str, words: str) -> Item:
    """Checklist 3: a save's stall, from the common start to the slowest rank's close,
    against the stall budget (overhead_budget x interval; SPEC.md)."""
    ctx = campaign.ctx
    slowest = burst.slowest
    budget = ctx.sizing.requirements["stall_budget_s"]
    phases = phase_words(slowest.phases_s, ctx.target.store)
    commit = burst.commit
    if commit is not None:
        phases += (
            f"; then the coordinator's .metadata ({format_bytes(commit.bytes)}) in "
            f"{format_seconds(commit.total_s)}"
        )
    return judge(
        id=id,
        measured=burst.span_s,
        required=ctx.sizing.stall_budget_s,
        cluster_required=ctx.sizing.stall_budget_s,
        unit="s",
        better="lower",
        detail=f"{ctx.profile.name}: {budget.formula}; from the common start to the "
        f".metadata's close; slowest rank global {slowest.global_rank} "
        f"({format_bytes(slowest.bytes)}: {phases}); {words}; {ctx.plan.scale()}",
        scope=ctx.plan.scope(),
    )


def phase_words(phases_s: dict[str, float], store: ObjectStore | None) -> str:
    """A rank's phases and their times; on an object store the fsync phase is named for what
    it is (there is none: the object is committed on close), not shown as a time."""
    return ", ".join(
        store.fsync_words if store is not None and name == "fsync" else
        f"{name} {format_seconds(seconds)}"
        for name, seconds in phases_s.items()
    )  # fmt: skip


def persist_item(campaign: WriteCampaign, burst: BurstResult, *, id: str, words: str) -> Item:
    """Checklist 5: the played bytes persist within interval / headroom.

    Every node of the cluster persists at once, so the played nodes must move their own
    bytes in the same window: required = played bytes and the coordinator's .metadata x
    headroom / interval (SPEC.md's async_persist_planned_bytes_per_s, save_bytes / T x
    headroom, at this scale). Between the no-headroom minimum and
    the planned rate the item fails and says so.
    """
    ctx = campaign.ctx
    checkpoint = ctx.profile.checkpoint
    played = campaign.saved_bytes
    minimum = played / checkpoint.interval_s
    planned = ctx.sizing.requirements["async_persist_planned_bytes_per_s"]
    item = judge(
        id=id,
        measured=burst.aggregate_bytes_per_s,
        required=minimum * checkpoint.async_headroom,
        cluster_required=planned.value,
        unit="B/s",
        detail=f"{ctx.profile.name}: {planned.formula}; this run: {format_bytes(played)} / "
        f"{checkpoint.interval_s:g} s x {checkpoint.async_headroom:g} headroom; {words}; "
        f"{ctx.plan.scale()}{_persisted_words(ctx.target.store)}",
        scope=ctx.plan.scope(),
    )
    if not item.passed and burst.aggregate_bytes_per_s >= minimum:
        item.detail += (
            f"; above the no-headroom minimum {format_rate(minimum)}, so saves keep up "
            "only without contention"
        )
    return item


def _persisted_words(store: ObjectStore | None) -> str:
    if store is None:
        return ""
    return f"; persisted means the upload completed on close ({store.fsync_words})"


def _rounds_words(campaign: WriteCampaign) -> str:
    return f"slowest round of {len(campaign.rounds())}"


def sync_stall(campaign: WriteCampaign) -> Item:
    """Checklist 3 and 4: the save's stall (common start to the slowest rank's close) against
    the stall budget: gated in sync mode; in async mode reported as what a sync save would
    cost, so the sync-or-async decision rests on a measurement."""
    item = stall_item(campaign, campaign.worst(), id="sync-stall", words=_rounds_words(campaign))
    if campaign.ctx.profile.checkpoint.mode == "async":
        item.report_only("async profile: reported as the cost of a sync save, not gated")
    return item


def async_persist(campaign: WriteCampaign) -> Item | None:
    """Checklist 5: the played shards persist within interval / headroom (async mode; None in
    sync mode, where the sync stall gates the save)."""
    if campaign.ctx.profile.checkpoint.mode != "async":
        return None
    return persist_item(
        campaign, campaign.worst(), id="async-persist", words=_rounds_words(campaign)
    )


def load_generator(campaign: WriteCampaign) -> Item:
    """The suite's own data path is not what was measured: the same ranks and bytes through
    the same open/write path into a sink that discards must run far faster (SPEC.md: the load
    generator must be faster than the storage)."""
    worst = campaign.worst()
    generator = campaign.generator_burst()
    return judge(
        id="load-generator",
        measured=generator.aggregate_bytes_per_s,
        required=GENERATOR_HEADROOM * worst.aggregate_bytes_per_s,
        unit="B/s",
        detail=f"the same ranks writing at least {GENERATOR_MIN_BYTES // 2**20} MiB each "
        f"through the same write calls into a discarding sink, best of "
        f"{len(campaign.generators)} runs; must be "
        f"{GENERATOR_HEADROOM:g}x the target's write rate, else the suite, not the target, "
        "set the pace",
    )


def checkpoint_bytes(campaign: WriteCampaign) -> Item:
    """Checklist 1: the target holds the bytes the plan says, measured on the target.

    The plan itself is Ψ·K: every global rank's shard adds up to the checkpoint (or, where
    replicas write duplicates, to the bytes written); a run that played fewer ranks, or capped
    shards, holds the played share, and the item says which.
    """
    ctx = campaign.ctx
    sizing, plan = ctx.sizing, ctx.plan
    campaign.rounds()
    if ctx.profile.checkpoint.replay:
        return replayed_bytes(campaign)
    fs = ctx.target.fs
    on_target = sum(fs.size(shard.path) for shard in campaign.latest_all)
    played = campaign.played_bytes
    whole = plan.full_cluster and not plan.capped
    ranks = len({shard.global_rank for shard in campaign.latest_all})
    share = (
        "every rank played at full size: the target holds the whole checkpoint"
        if whole
        else f"the played share ({ranks} of {sizing.gpus} ranks' shards"
        + (", capped for a trial" if plan.capped else "")
        + f") of the {format_bytes(sizing.written_bytes)} checkpoint"
    )
    psi = f"{sizing.parameters:.4g} x {ctx.profile.model.bytes_per_parameter}"
    return Item(
        id="checkpoint-bytes",
        required=played,
        measured=on_target,
        cluster_required=sizing.written_bytes,
        unit="B",
        passed=on_target == played and (not whole or played == sizing.written_bytes),
        detail=f"{ctx.profile.name}: Ψ·K = {psi} = {format_bytes(sizing.checkpoint_bytes)}; "
        f"{share}; {ctx.plan.scale()}",
        better="equal",
        scope=plan.scope(),
    )


def replayed_bytes(campaign: WriteCampaign) -> Item:
    """Checklist 1 for a replay (``checkpoint.replay``): the target holds exactly the source
    tree's files and bytes, its metadata file included, measured on the target."""
    ctx = campaign.ctx
    counts = campaign.replay_counts()
    assert counts is not None  # a replay
    return Item(
        id="checkpoint-bytes",
        required=counts["bytes"],
        measured=counts["target_bytes"],
        cluster_required=counts["bytes"],
        unit="B",
        passed=counts["reproduced"],
        detail=f"{ctx.profile.name}: {counts['rule']}; source {format_count(counts['files'])} "
        f"files, {format_bytes(counts['bytes'])} ({counts['bytes']} B); the target holds "
        f"{format_count(counts['target_files'])} files, {counts['target_bytes']} B; "
        f"{ctx.plan.scale()}",
        better="equal",
        scope="the replayed checkpoint's own files, as its job writes them",
    )


CHECK = Check(
    name="write",
    place=10,
    measure=lambda run: nullcontext(run.campaign),
    sections=lambda campaign: {"write": campaign.section()},
    summary="the write rounds: checkpoint bytes, sync stall, load generator, async persist",
    answers=(
        row("write", "load-generator", "5", "load generator vs target", load_generator),
        row("write", "checkpoint-bytes", "1", "checkpoint bytes", checkpoint_bytes),
        row("write", "sync-stall", "3", "sync save stall", sync_stall),
        row("write", "async-persist", "5", "async persist bandwidth", async_persist,
            unless="checkpoint.mode is sync: the sync stall test gates the save"),
    ),
)  # fmt: skip
"""Checklist 1, 3 and 5 on the campaign's rounds (``acceptance/test_checklist.py`` times the
rounds through pytest-benchmark first; ``campaign.rounds()`` runs any that are missing)."""
