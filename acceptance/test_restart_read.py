"""Checklist item 7: restart read tested with resharding (IOR -F -C: readers shifted by a rank).

After a failure every rank loads at once and the cluster idles until the slowest rank has its
state. Both tests read the files of the latest write round (``campaign``), read-only:

- readback: each rank reads a shard another rank wrote (another node's, with several nodes),
  after its pages were dropped and their residency measured; a cache-served read fails,
  except on a memory-backed target, which the report names.
- resharded restore: M < N ranks (``run.reshard_fraction``) read contiguous slices that span
  parts of several old files, as a load onto fewer nodes does.

The requirement at this scale is a window, like the write's (``fixtures/plan.py``): every node
of the cluster loads its own shards at once, so this node must read its bytes within
``restart.read_s``: required = bytes read / restart.read_s. Every byte read is verified.
"""

from __future__ import annotations

import dataclasses

import pytest
from ckptgate.cluster.nodes import start_gate
from ckptgate.engine.records import BurstResult
from ckptgate.fixtures.plugin import RunState
from ckptgate.report.gate import GateReport, Item, judge
from ckptgate.sizing import Profile, Sizing, format_bytes, format_seconds
from ckptgate.workloads.campaign import WriteCampaign, timeout_for
from ckptgate.workloads.readback import ReadResult, run_readback, summarize
from ckptgate.workloads.reshard import ReshardResult, run_reshard
from ckptgate.workloads.write_burst import ShardFile


def _timeout_s(profile: Profile) -> float:
    """Ten restart windows, or the floor: a rank slower than that counts as hung."""
    return timeout_for(profile, profile.restart.read_s)


def _direct(run_state: RunState, profile: Profile) -> bool:
    return bool(run_state.direct or profile.run.direct_io)


def _files_to_read(campaign: WriteCampaign) -> tuple[list[ShardFile], int]:
    """The latest round's files this node reads, and the reader shift.

    One node: its own files, each read by the next local rank. Several nodes: the next node's
    files (so this node's cache never held them), read in order.
    """
    campaign.rounds()
    nodes = campaign.nodes
    if nodes.count > 1:
        return list(campaign.latest_by_node[(nodes.index + 1) % nodes.count]), 0
    return list(campaign.latest), 1


def _all_read(campaign: WriteCampaign) -> list[ShardFile]:
    """Every node's files of the latest round: together, the nodes read each exactly once."""
    return campaign.latest_all


def _gathered(burst: BurstResult, local: ReadResult) -> ReadResult:
    """The read as every node saw it: the gathered records, summarised like one node's."""
    return summarize(burst, local.memory_backed)


def _cache_words(result: ReadResult) -> str:
    if result.memory_backed:
        return "memory-backed target: its page cache is the storage, residency not gated"
    if result.resident_fraction is None:
        return "no page cache on this node to measure (object store)"
    words = (
        f"resident {result.resident_fraction * 100:.3g} % before reading "
        f"({(result.resident_before_drop or 0) * 100:.3g} % before the drop)"
    )
    if result.direct:
        words += "; O_DIRECT"
    elif result.direct_refused:
        words += f"; O_DIRECT asked for, not used: {result.direct_refused}"
    return words


def _judge_read(
    *,
    id: str,
    title: str,
    result: ReadResult,
    campaign: WriteCampaign,
    profile: Profile,
    requirements: Sizing,
    what: str,
) -> Item:
    burst = result.burst
    read_s = profile.restart.read_s
    required = burst.total_bytes / read_s
    slowest = burst.slowest
    restart = requirements.requirements["restart_read_bytes_per_s"]
    detail = (
        f"{profile.name}: {restart.formula}; this run: {format_bytes(burst.total_bytes)} / "
        f"{read_s:g} s; {what}; slowest rank {slowest.rank} "
        f"({format_bytes(slowest.bytes)} in {format_seconds(slowest.total_s)}); "
        f"{_cache_words(result)}; {campaign.plan.scale()}"
    )
    item = judge(
        id=id,
        title=title,
        measured=burst.aggregate_bytes_per_s,
        required=required,
        unit="B/s",
        detail=detail,
        scope=campaign.plan.scope(),
    )
    if not result.cache_free:
        item.passed = False
        item.detail += (
            f"; cache-served: {len(result.cache_served)} file(s) were resident in this node's "
            f"page cache, e.g. {result.cache_served[0]}: the storage was not what was read"
        )
    return item


def test_restart_readback(
    campaign: WriteCampaign,
    run_state: RunState,
    cluster_profile: Profile,
    requirements: Sizing,
    gate: GateReport,
) -> None:
    """Checklist 7: every rank reads another rank's shard, uncached, within restart.read_s."""
    shards, shift = _files_to_read(campaign)
    timeout_s = _timeout_s(cluster_profile)
    local: list[ReadResult] = []

    def read() -> BurstResult:
        local.append(
            run_readback(
                campaign.pool,
                campaign.target.fs_spec,
                shards,
                timeout_s,
                shift=shift,
                direct=_direct(run_state, cluster_profile),
                before_start=start_gate(campaign.nodes, timeout_s, "the common read start"),
            )
        )
        return local[0].burst

    result = _gathered(campaign.gather("read", read, timeout_s), local[0])
    gate.section("read", result.to_json())
    item = gate.record(
        _judge_read(
            id="restart-read",
            title="restart read bandwidth",
            result=result,
            campaign=campaign,
            profile=cluster_profile,
            requirements=requirements,
            what=f"{len(shards)} shards, each read by another rank",
        )
    )
    assert result.burst.total_bytes == sum(s.bytes for s in _all_read(campaign))
    assert item.passed, item.message


def test_resharded_restore(
    campaign: WriteCampaign,
    run_state: RunState,
    cluster_profile: Profile,
    requirements: Sizing,
    gate: GateReport,
) -> None:
    """Checklist 7: M < N ranks load slices spanning several old files, within restart.read_s."""
    shards, _ = _files_to_read(campaign)
    if len(shards) < 2:
        pytest.skip("one shard on this node: a load onto fewer ranks needs at least two")
    timeout_s = _timeout_s(cluster_profile)
    local: list[ReshardResult] = []

    def load() -> BurstResult:
        local.append(
            run_reshard(
                campaign.pool,
                campaign.target.fs_spec,
                shards,
                timeout_s,
                fraction=cluster_profile.run.reshard_fraction,
                direct=_direct(run_state, cluster_profile),
                before_start=start_gate(campaign.nodes, timeout_s, "the common read start"),
            )
        )
        return local[0].burst

    burst = campaign.gather("reshard", load, timeout_s)
    # Number the new ranks across nodes (node i's new rank m is i * M + m), as the job would.
    new_ranks = local[0].new_ranks
    burst = dataclasses.replace(
        burst,
        ranks=tuple(
            dataclasses.replace(r, global_rank=r.node * new_ranks + r.global_rank)
            for r in burst.ranks
        ),
    )
    result = dataclasses.replace(local[0], read=_gathered(burst, local[0].read))
    gate.section("reshard", result.to_json())
    files = result.files_per_rank()
    item = gate.record(
        _judge_read(
            id="resharded-restore",
            title="resharded restore bandwidth",
            result=result.read,
            campaign=campaign,
            profile=cluster_profile,
            requirements=requirements,
            what=f"{result.old_ranks} shards loaded by {result.new_ranks} ranks "
            f"(run.reshard_fraction {cluster_profile.run.reshard_fraction:g}), "
            f"{min(files)}-{max(files)} files per new rank",
        )
    )
    assert result.burst.total_bytes == sum(s.bytes for s in _all_read(campaign))
    assert item.passed, item.message
