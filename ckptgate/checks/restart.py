"""Checklist item 7: restart read tested with resharding (IOR -F -C: readers shifted by a rank).

After a failure every rank loads at once and the cluster idles until the slowest rank has its
state. Both checks read the files of the latest write round, read-only:

- readback: each rank reads a shard another rank wrote (another node's, with several nodes),
  after its pages were dropped and their residency measured; a cache-served read fails,
  except on a memory-backed target, which the report names. So does a read without O_DIRECT
  through a filesystem client that caches file data in memory of its own (GlusterFS's
  io-cache: ``FsFacts.client_cache``), which no residency measurement can see.
- resharded restore: M < N ranks (``run.reshard_fraction``) read contiguous slices that span
  parts of several old files, as a load onto fewer nodes does.

The requirement at this scale is a window, like the write's (``ckptgate.cluster.plan``): every
node of the cluster loads its own shards at once, so this node must read its bytes within
``restart.read_s``: required = bytes read / restart.read_s. Every byte read is verified.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from typing import Any

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks.check import Answered, Check, row
from ckptgate.engine.records import BurstResult
from ckptgate.report.items import Item, judge
from ckptgate.sizing import format_bytes, format_seconds
from ckptgate.storage.object_store import ObjectStore
from ckptgate.workloads.readback import ReadResult, Verification, run_readback, summarize
from ckptgate.workloads.reshard import ReshardResult, run_reshard
from ckptgate.workloads.write_burst import ShardFile


def _files_to_read(campaign: WriteCampaign) -> tuple[list[ShardFile], int]:
    """The latest round's files this node reads, and the reader shift.

    One node: its own files, each read by the next local rank. Several nodes: the next node's
    files (so this node's cache never held them), read in order.
    """
    campaign.rounds()
    nodes = campaign.ctx.nodes
    if nodes.count > 1:
        return list(campaign.latest_next), 0
    return list(campaign.latest), 1


def _cache_words(result: ReadResult, store: ObjectStore | None = None) -> str:
    if store is not None:
        return (
            f"object store ({store.name}): no page cache on this node and fsspec's read cache "
            "off, every read goes to the store: residency not applicable"
        )
    if result.memory_backed:
        return "memory-backed target: its page cache is the storage, residency not gated"
    if result.resident_fraction is None:
        return "no page cache on this node to measure: residency not applicable"
    words = (
        f"resident {result.resident_fraction * 100:.3g} % before reading "
        f"({(result.resident_before_drop or 0) * 100:.3g} % before the drop)"
    )
    if result.direct:
        words += "; O_DIRECT"
    elif result.direct_refused:
        words += f"; O_DIRECT asked for, not used: {result.direct_refused}"
    return words


def client_cache_refusal(client_cache: str | None, result: ReadResult) -> str | None:
    """Why ``result`` may be the filesystem client's own cache's rather than the storage's,
    or None: a client that keeps file data in memory of its own (``client_cache``, from
    ``FsFacts``) serves a buffered read from there with the page cache empty, so residency
    proves nothing; an O_DIRECT read (every file's) bypasses it."""
    if client_cache is None or result.direct:
        return None
    why = f"O_DIRECT refused: {result.direct_refused}; " if result.direct_refused else ""
    return (
        f"client cache: {why}read without O_DIRECT through a client with a data cache of its "
        f"own, which may have served it: {client_cache}: not counted as the storage's"
    )


def _judge_read(campaign: WriteCampaign, id: str, result: ReadResult, what: str) -> Item:
    ctx = campaign.ctx
    burst = result.burst
    read_s = ctx.profile.restart.read_s
    slowest = burst.slowest
    restart = ctx.sizing.requirements["restart_read_bytes_per_s"]
    item = judge(
        id=id,
        measured=burst.aggregate_bytes_per_s,
        required=burst.total_bytes / read_s,
        cluster_required=restart.value,
        unit="B/s",
        detail=(
            f"{ctx.profile.name}: {restart.formula}; this run: "
            f"{format_bytes(burst.total_bytes)} / {read_s:g} s; {what}; slowest rank "
            f"{slowest.rank} ({format_bytes(slowest.bytes)} in "
            f"{format_seconds(slowest.total_s)}); {_cache_words(result, ctx.target.store)}; "
            f"{ctx.plan.scale()}"
        ),
        scope=ctx.plan.scope(),
    )
    if not result.cache_free:
        item.passed = False
        item.detail += (
            f"; cache-served: {len(result.cache_served)} file(s) were resident in this node's "
            f"page cache, e.g. {result.cache_served[0]}: the storage was not what was read"
        )
    refusal = client_cache_refusal(ctx.target.facts.client_cache, result)
    if refusal is not None:
        item.passed = False
        item.detail += f"; {refusal}"
    return item


def _section(campaign: WriteCampaign, section: dict[str, Any]) -> dict[str, Any]:
    """A read's report section, with the client's own data cache named (None: none known)."""
    return {**section, "client_cache": campaign.ctx.target.facts.client_cache}


def _all_read_bytes(campaign: WriteCampaign) -> int:
    """Every node's bytes of the latest round: together, the nodes read each exactly once."""
    return sum(s.bytes for s in campaign.latest_all)


def readback(campaign: WriteCampaign) -> Answered:
    """Checklist 7: every rank reads another rank's shard, uncached, within restart.read_s."""
    ctx = campaign.ctx
    shards, shift = _files_to_read(campaign)
    timeout_s = ctx.restart_timeout_s
    local: list[ReadResult] = []

    def read() -> tuple[BurstResult, Verification | None]:
        local.append(
            run_readback(
                ctx.pool, ctx.target.spec, shards, timeout_s, shift=shift, direct=ctx.direct
            )
        )
        return local[0].burst, local[0].verification

    burst, verification = campaign.gather_read("read", read, timeout_s)
    result = dataclasses.replace(
        summarize(burst, local[0].memory_backed), verification=verification
    )
    item = _judge_read(
        campaign, "restart-read", result, f"{len(shards)} shards, each read by another rank"
    )
    if result.burst.total_bytes != _all_read_bytes(campaign):
        item.passed = False
        item.detail += f"; read {result.burst.total_bytes} B of {_all_read_bytes(campaign)} B"
    return Answered(item, {"read": _section(campaign, result.to_json())})


def resharded(campaign: WriteCampaign) -> Answered | None:
    """Checklist 7: M < N ranks load slices spanning several old files, within restart.read_s.

    None where this node holds a single shard: a load onto fewer ranks needs at least two.
    """
    ctx = campaign.ctx
    shards, _ = _files_to_read(campaign)
    if len(shards) < 2:
        return None
    timeout_s = ctx.restart_timeout_s
    fraction = ctx.profile.run.reshard_fraction
    local: list[ReshardResult] = []

    def load() -> tuple[BurstResult, Verification | None]:
        local.append(
            run_reshard(
                ctx.pool,
                ctx.target.spec,
                shards,
                timeout_s,
                fraction=fraction,
                direct=ctx.direct,
            )
        )
        return local[0].burst, local[0].read.verification

    burst, verification = campaign.gather_read("reshard", load, timeout_s)
    # Number the new ranks across nodes (node i's new rank m is i * M + m), as the job would.
    new_ranks = local[0].new_ranks
    burst = dataclasses.replace(
        burst,
        ranks=tuple(
            dataclasses.replace(r, global_rank=r.node * new_ranks + r.global_rank)
            for r in burst.ranks
        ),
    )
    read = summarize(burst, local[0].read.memory_backed)
    result = dataclasses.replace(
        local[0], read=dataclasses.replace(read, verification=verification)
    )
    files = result.files_per_rank()
    item = _judge_read(
        campaign,
        "resharded-restore",
        result.read,
        f"{result.old_ranks} shards loaded by {result.new_ranks} ranks "
        f"(run.reshard_fraction {fraction:g}), {min(files)}-{max(files)} files per new rank",
    )
    if result.burst.total_bytes != _all_read_bytes(campaign):
        item.passed = False
        item.detail += f"; read {result.burst.total_bytes} B of {_all_read_bytes(campaign)} B"
    return Answered(item, {"reshard": _section(campaign, result.to_json())})


CHECK = Check(
    name="restart",
    place=20,
    measure=lambda run: nullcontext(run.campaign),
    summary="the restart read of the latest round, as written and resharded",
    answers=(
        row("restart", "restart-read", "7", "restart read bandwidth", readback),
        row("restart", "resharded-restore", "7", "resharded restore bandwidth", resharded,
            unless="one shard on this node: a load onto fewer ranks needs at least two"),
    ),
)  # fmt: skip
"""Checklist 7 on the write rounds' latest checkpoint: each row reads and reports its own
section (``read``, ``reshard``)."""
