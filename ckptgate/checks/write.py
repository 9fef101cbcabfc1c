"""Checklist items 1, 3 and 5 on the write rounds: the checkpoint bytes, the sync stall, the
async persist bandwidth, and the proof that the load generator was not what was timed.

A round writes one checkpoint of this node's shards into ``write/step-<n>/`` of the run
directory, as a training job writes step after step. Before each round the previous round's
files are verified (untimed: every byte the run writes is read back at least once; the last
round's bytes by the timed readback) and removed, so the target holds one checkpoint at a time;
the last one stays for the readback and restore checks.

The gate uses the slowest round, because every checkpoint of a training run must fit its
window, not the average one; the median is reported beside it. A failed round is remembered:
every later check that needs the rounds fails at once with that failure, so one ENOSPC is one
failure, not a burst re-run by each test.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckptgate.checks.context import CheckContext
from ckptgate.cluster.nodes import run_everywhere
from ckptgate.engine.pool import RankFailure
from ckptgate.engine.records import BurstResult, merge_nodes
from ckptgate.report.gate import Item, judge
from ckptgate.sizing import (
    dcp_metadata_bytes,
    format_bytes,
    format_count,
    format_rate,
    format_seconds,
)
from ckptgate.storage.object_store import ObjectStore
from ckptgate.workloads.fileplan import (
    FilePlan,
    dcp_plan,
    lanes,
    metadata_file,
    shard_files,
)
from ckptgate.workloads.readback import run_readback
from ckptgate.workloads.replay import node_share, scan_checkpoint
from ckptgate.workloads.write_burst import ShardFile, run_write_burst

GENERATOR_HEADROOM = 2.0
"""The load generator must outrun the target at least this much, or we timed ourselves."""
GENERATOR_MIN_BYTES = 64 * 2**20
"""Each rank's generator-only burst writes at least this much (into a discarding sink)."""
GENERATOR_RUNS = 3
"""Generator-only bursts before the rounds (one more between each two rounds); the best one
vouches for the generator, since it ran at least that fast."""


class CampaignFailed(RuntimeError):
    """An earlier write round failed; the checks that need the rounds fail with its words."""


@dataclass
class WriteCampaign:
    """This node's checkpoint rounds on the target (one instance per session)."""

    ctx: CheckContext
    bursts: list[BurstResult] = field(default_factory=list)
    """Every round, each with the records of every node's ranks."""
    generators: list[BurstResult] = field(default_factory=list)
    """The generator-only bursts: one before the rounds, one before each later round."""
    latest: list[ShardFile] = field(default_factory=list)
    """This node's files of the last round."""
    latest_everywhere: list[ShardFile] = field(default_factory=list)
    """The last round's files of every node on node 0 (it judges); this node's elsewhere."""
    latest_next: list[ShardFile] = field(default_factory=list)
    """The next node's files of the last round (this node reads them back)."""
    latest_metadata: ShardFile | None = None
    """The last round's ``.metadata`` (node 0, the coordinator, writes it)."""
    verified_bytes: int = 0
    """Bytes of earlier rounds read back and verified (untimed) before they were removed."""
    failure: str | None = None
    """Why a round failed, once one did."""
    _step: int = 0
    _file_plan: FilePlan | None = None

    def gather(
        self, kind: str, run: Callable[[], BurstResult], timeout_s: float | None = None
    ) -> BurstResult:
        """Run a burst on this node and gather it from every node into one burst.

        Any node's failure fails it on all, named. ``timeout_s`` is the burst's deadline.
        """
        bursts = run_everywhere(
            self.ctx.nodes, timeout_s or self.timeout_s, f"the end of the {kind} burst", run
        )
        return merge_nodes(kind, bursts)

    @property
    def timeout_s(self) -> float:
        return self.ctx.save_timeout_s

    @property
    def played_bytes(self) -> int:
        """The bytes every taking-part node's ranks write per checkpoint (by the plans; on
        node 0, which judges: the other nodes know their own)."""
        return sum(shard.bytes for shard in self.latest_all)

    @property
    def saved_bytes(self) -> int:
        """What one save of the played nodes writes: their shards and the coordinator's
        ``.metadata`` (on node 0, which judges)."""
        metadata = self.latest_metadata.bytes if self.latest_metadata is not None else 0
        return self.played_bytes + metadata

    @property
    def latest_all(self) -> list[ShardFile]:
        """Every node's files of the last round (on node 0; this node's elsewhere)."""
        if not self.latest_everywhere:
            self.rounds()
        return self.latest_everywhere

    @property
    def transfer_bytes(self) -> int:
        return self.ctx.profile.run.transfer_bytes

    @property
    def file_plan(self) -> FilePlan:
        """This node's files per checkpoint (``file_plan``, computed once)."""
        if self._file_plan is None:
            self._file_plan = file_plan(self.ctx)
        return self._file_plan

    def new_checkpoint_dir(self, *parts: str) -> str:
        """Make a checkpoint directory in the run directory (``parts``), with the file plan's
        subdirectories (a replayed tree's, parents first); returns its path."""
        target = self.ctx.target
        directory = target.new_dir(*parts)
        for sub in self.file_plan.subdirectories():
            target.new_dir(*parts, *sub)
        return directory

    def shards_in(self, directory: str) -> list[ShardFile]:
        """This node's shard files of one checkpoint in ``directory`` (by ``file_plan``)."""
        return shard_files(self.file_plan, directory, self.ctx.run_id, self.transfer_bytes)

    def replay_counts(self) -> dict[str, Any] | None:
        """A replay's source (its plan's JSON: source, files, bytes) beside what the target
        holds of the last round (every node's files, on node 0), measured there; None when
        nothing is replayed."""
        replay = self.ctx.profile.checkpoint.replay
        if not replay:
            return None
        source = scan_checkpoint(replay)
        written = list(self.latest_all)
        if self.latest_metadata is not None:
            written.append(self.latest_metadata)
        fs = self.ctx.target.fs
        on_target = sum(fs.size(f.path) for f in written)
        return {
            **source.to_json(),
            "target_files": len(written),
            "target_bytes": on_target,
            "reproduced": on_target == source.total_bytes and len(written) == source.file_count,
        }

    def metadata_in(self, directory: str) -> ShardFile | None:
        """The coordinator's ``.metadata`` of one checkpoint in ``directory`` (node 0 only)."""
        if self.ctx.nodes.index != 0:
            return None
        return metadata_file(self.file_plan, directory, self.ctx.run_id, self.transfer_bytes)

    def verify(self, shards: list[ShardFile]) -> None:
        """Read back and verify every byte of ``shards`` (untimed, this node's files, each
        read by another rank), so that no byte the run writes goes unchecked; a corruption
        fails here, naming the file and the offset."""
        shift = 1 if len(shards) > 1 else 0
        reads = run_everywhere(
            self.ctx.nodes,
            self.timeout_s,
            "the end of a verification",
            lambda: run_readback(
                self.ctx.pool, self.ctx.target.spec, shards, self.timeout_s, shift=shift
            ),
        )
        self.verified_bytes += sum(read.burst.total_bytes for read in reads)

    def _retire_latest(self) -> None:
        """Verify the last checkpoint's files (untimed), then remove them, as retention would."""
        if not self.latest:
            return
        try:
            if self.failure is None:
                self.verify(self.latest)
        except RankFailure as error:
            self.failure = f"verifying write round {self._step}: {error}"
            raise
        finally:
            self.drop_latest()

    def drop_latest(self) -> None:
        """Remove the last checkpoint's files and its ``.metadata`` (untimed)."""
        if self.latest_metadata is not None:
            self.ctx.target.remove_files([self.latest_metadata.path])
            self.latest_metadata = None
        if self.latest:
            self.ctx.target.remove_files([s.path for s in self.latest])
            self.latest = []

    def prepare_round(self) -> list[ShardFile]:
        """Untimed: retire the previous checkpoint, make the next step's directory, register."""
        self._check_failed()
        target = self.ctx.target
        if self._step == 0:
            target.new_dir("write")
        self._retire_latest()
        if self._step:
            self._generate()  # untimed, between rounds: interleaved with what it vouches for
        self._step += 1
        directory = self.new_checkpoint_dir("write", f"step-{self._step}")
        shards = self.shards_in(directory)
        metadata = self.metadata_in(directory)
        target.register_shards(shards + ([metadata] if metadata else []))
        self.latest, self.latest_metadata = shards, metadata
        return shards

    def write_round(self, shards: list[ShardFile] | None = None) -> BurstResult:
        """One checkpoint: the burst (timed from the common start) of prepared shards."""
        shards = shards if shards is not None else self.prepare_round()
        try:
            burst = self._commit(self._burst(shards, "target"))
            self._exchange_file_lists(shards)
        except RankFailure as error:
            # The ranks have stopped (or were killed): their partial files go now. On an
            # interrupt they may still be writing; the session's cleanup removes the files
            # once the ranks are stopped.
            self.failure = f"write round {self._step}: {error}"
            left = len(self.ctx.target.left_behind)
            self.drop_latest()  # bounded: a hung target keeps its files, listed
            kept = self.ctx.target.left_behind[left:]
            if kept:
                self.failure += (
                    f"; {len(kept)} file(s) could not be removed (the target hung: "
                    f"{self.ctx.target.hung})"
                )
                raise RankFailure(self.failure, error.ranks, error.hung, error.abandoned) from None
            raise
        self.bursts.append(burst)
        return burst

    def _commit(self, burst: BurstResult) -> BurstResult:
        """The save's end: once every rank's files are closed, the coordinator (node 0's local
        rank 0, alone) writes, fsyncs and closes ``.metadata``, as DCP's coordinator does after
        its gather. Timed as part of the save: its record is placed after the ranks' span
        (the gather between them is not counted: a framework's barrier costs far less), so the
        burst's span ends with it. Then verified at once (untimed): no read pass reads it."""
        metadata = self.latest_metadata
        ctx = self.ctx

        def write() -> BurstResult | None:
            if metadata is None:
                return None
            with ctx.pool.alone():
                written = run_write_burst(
                    ctx.pool,
                    ctx.target.spec,
                    [metadata],
                    self.timeout_s,
                    phase="commit .metadata",
                )
                read = run_readback(ctx.pool, ctx.target.spec, [metadata], self.timeout_s, shift=0)
            self.verified_bytes += read.burst.total_bytes
            return written

        commits = run_everywhere(ctx.nodes, self.timeout_s, "the coordinator's .metadata", write)
        if not commits or commits[0] is None:
            return burst
        after = burst.span_s
        coordinator = tuple(
            dataclasses.replace(
                r,
                start_s=r.start_s + after,
                end_s=r.end_s + after,
                coordinator=True,
            )
            for r in commits[0].ranks
        )
        return dataclasses.replace(burst, ranks=burst.ranks + coordinator)

    def _exchange_file_lists(self, shards: list[ShardFile]) -> None:
        """Node 0 learns every node's files (to judge); each node learns the next node's (to
        read them back): O(1) per node but node 0."""
        nodes = self.ctx.nodes
        gathered, _ = nodes.gather_decide(shards, lambda _: None, self.timeout_s, "the file lists")
        self.latest_everywhere = [s for files in gathered for s in files] if gathered else shards
        self.latest_next = nodes.shift(shards, self.timeout_s, "the next node's file list")

    def _check_failed(self) -> None:
        if self.failure is not None:
            raise CampaignFailed(f"the write rounds failed earlier: {self.failure}")

    def _burst(self, shards: list[ShardFile], sink: str) -> BurstResult:
        """Run one burst on this node's ranks and gather it from every node."""
        return self.gather(
            "write" if sink == "target" else "generate",
            lambda: run_write_burst(
                self.ctx.pool, self.ctx.target.spec, shards, self.timeout_s, sink=sink
            ),
        )

    def rounds(self) -> list[BurstResult]:
        """The profile's ``run.rounds`` bursts, run once per session on first use."""
        self._check_failed()
        while len(self.bursts) < self.ctx.profile.run.rounds:
            self.write_round()
        return self.bursts

    def generator_burst(self) -> BurstResult:
        """The fastest of the generator-only bursts (the same ranks and bytes through the same
        write calls into a discarding sink), one run before the rounds and one between rounds:
        a busy moment of the machine during one of them does not decide whether the generator
        could keep up (it could, if it ever ran that fast)."""
        if not self.generators:
            self._generate(GENERATOR_RUNS)
        return max(self.generators, key=lambda b: b.aggregate_bytes_per_s)

    def _generate(self, runs: int = 1) -> None:
        """Generator-only bursts of this node's ranks, each at least ``GENERATOR_MIN_BYTES``
        per rank: a burst of a few megabytes (a trial's capped shard) lasts milliseconds, which
        a busy moment of the machine decides, not the generator."""
        shards = [
            dataclasses.replace(
                lane[0], bytes=max(sum(s.bytes for s in lane), GENERATOR_MIN_BYTES), stamp_offset=0
            )
            for lane in lanes(self.shards_in(""), self.ctx.pool.ranks)
        ]
        for _ in range(runs):
            self.generators.append(self._burst(shards, "null"))

    def worst(self) -> BurstResult:
        """The slowest round: every checkpoint must fit its window, so the gate uses the worst."""
        return max(self.rounds(), key=lambda b: b.span_s)

    def median_span_s(self) -> float:
        return statistics.median(b.span_s for b in self.rounds())

    def section(self) -> dict[str, Any]:
        """The report's ``write`` section: the slowest round, every round's span, the rest."""
        worst = self.worst()
        store = self.ctx.target.store
        return {
            **worst.to_json(),
            "rounds": len(self.bursts),
            "round_span_s": [b.span_s for b in self.bursts],
            "median_span_s": self.median_span_s(),
            "statistic": "slowest round (every checkpoint must fit its window)",
            "transfer_bytes": self.transfer_bytes,
            "generator_bytes_per_s": self.generator_burst().aggregate_bytes_per_s,
            "verified_earlier_rounds_bytes": self.verified_bytes,
            "capped": self.ctx.plan.capped,
            "file_plan": self.file_plan.to_json(),
            "replay": self.replay_counts(),
            # on an object store the ranks' "fsync" phase is a flush that makes nothing durable
            "fsync": store.fsync_words if store else "fsync before close",
        }


def file_plan(ctx: CheckContext) -> FilePlan:
    """This node's files per checkpoint: the replayed tree's share (``checkpoint.replay``), or
    the played ranks' shards split by DCP's rule with the coordinator's ``.metadata``
    (``ckptgate.sizing.dcp_metadata_bytes``, capped by ``run.shard_bytes_cap`` in a trial)."""
    profile, plan, nodes = ctx.profile, ctx.plan, ctx.nodes
    if profile.checkpoint.replay:
        return node_share(scan_checkpoint(profile.checkpoint.replay), nodes.index, nodes.count)
    metadata_bytes = dcp_metadata_bytes(profile)
    cap = profile.run.shard_bytes_cap
    return dcp_plan(
        plan.global_ranks,
        plan.shard_bytes,
        profile.checkpoint.files_per_rank,
        ranks=profile.cluster.gpus,
        # a trial's cap holds for the coordinator's file too (405b's is 642 MB)
        metadata_bytes=min(metadata_bytes, cap) if cap else metadata_bytes,
    )


# --- the judges ---------------------------------------------------------------------------------


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
