"""The write campaign: the write rounds that checklist items 1, 3 and 5 (and restart,
contention and decisions) are judged on, run on every node and gathered on node 0.

A round writes one checkpoint of this node's shards into ``write/step-<n>/`` of the run
directory, as a training job writes step after step. Before each round the previous round's
files are verified (untimed: every byte the run writes is read back at least once; the last
round's bytes by the timed readback) and removed, so the target holds one checkpoint at a time;
the last one stays for the readback and restore checks. A failed round is remembered:
every later check that needs the rounds fails at once with that failure, so one ENOSPC is one
failure, not a burst re-run by each test. The judgements are in ``ckptgate.checks.write``.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckptgate.campaigns.context import CheckContext
from ckptgate.cluster.nodes import run_everywhere
from ckptgate.engine.datagen import payload_name
from ckptgate.engine.pool import RankFailure
from ckptgate.engine.records import BurstResult, merge_nodes
from ckptgate.rundir.manifest import Writer
from ckptgate.sizing import (
    dcp_metadata_bytes,
)
from ckptgate.workloads.fileplan import (
    METADATA_NAME,
    NULL_BURST_MIN_BYTES,
    FilePlan,
    commit_files,
    dcp_plan,
    lanes,
    named_plan,
    null_burst_files,
    shard_files,
)
from ckptgate.workloads.readback import Verification, merge_verifications, run_readback
from ckptgate.workloads.replay import node_share, scan_checkpoint
from ckptgate.workloads.write_burst import ShardFile, run_write_burst

GENERATOR_HEADROOM = 2.0
"""The load generator must outrun the target at least this much, or we timed ourselves."""
GENERATOR_MIN_BYTES = NULL_BURST_MIN_BYTES
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
    latest_commit: list[ShardFile] = field(default_factory=list)
    """The last round's coordinator files, ``.metadata`` (node 0, the coordinator, writes
    them after every shard; a replayed tree's in commit order, deepest directory first)."""
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

    def gather_read(
        self,
        kind: str,
        run: Callable[[], tuple[BurstResult, Verification | None]],
        timeout_s: float | None = None,
    ) -> tuple[BurstResult, Verification | None]:
        """``gather`` for a read burst that verifies what it read: every node's burst into
        one, and every node's verification into one (``merge_verifications``)."""
        pairs = run_everywhere(
            self.ctx.nodes, timeout_s or self.timeout_s, f"the end of the {kind} burst", run
        )
        bursts = [burst for burst, _ in pairs]
        return merge_nodes(kind, bursts), merge_verifications([v for _, v in pairs])

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
        return self.played_bytes + sum(f.bytes for f in self.latest_commit)

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
        return shard_files(
            self.file_plan, directory, self.ctx.run_id, self.transfer_bytes, self.payload
        )

    @property
    def payload(self) -> str:
        """What the shards' bytes are (``StampKey.payload``), from the profile's
        ``run.payload`` and its K."""
        profile = self.ctx.profile
        return payload_name(profile.run.payload, profile.model.bytes_per_parameter)

    def replay_counts(self) -> dict[str, Any] | None:
        """A replay's source (its plan's JSON: source, files, bytes) beside what the target
        holds of the last round (every node's files, on node 0), measured there; None when
        nothing is replayed."""
        replay = self.ctx.profile.checkpoint.replay
        if not replay:
            return None
        source = scan_checkpoint(replay)
        written = [*self.latest_all, *self.latest_commit]
        fs = self.ctx.target.fs
        on_target = sum(fs.size(f.path) for f in written)
        return {
            **source.to_json(),
            "target_files": len(written),
            "target_bytes": on_target,
            "reproduced": on_target == source.total_bytes and len(written) == source.file_count,
        }

    def commit_in(self, directory: str) -> list[ShardFile]:
        """The coordinator's files of one checkpoint in ``directory``, in commit order (node 0
        only; ``fileplan.commit_files``)."""
        if self.ctx.nodes.index != 0:
            return []
        return commit_files(self.file_plan, directory, self.ctx.run_id, self.transfer_bytes)

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
        failed = interrupted = False
        try:
            if self.failure is None:
                self.verify(self.latest)
        except RankFailure as error:
            failed = True
            self.failure = f"verifying write round {self._step}: {error}"
            raise RankFailure(self.failure, error.ranks, error.hung, error.abandoned) from None
        except BaseException:  # Ctrl-C or SIGTERM: what the run tells stays the interrupt
            interrupted = True
            raise
        finally:
            try:  # after a failed verify a refused removal is listed: the failure is its own
                self.drop_latest(failing=failed or interrupted)
            except OSError as error:
                if not interrupted:  # interrupted, the files stay registered for the cleanup
                    self.failure = (
                        f"removing write round {self._step}: {type(error).__name__}: {error}"
                    )
                    raise RankFailure(self.failure, []) from None

    def drop_latest(self, *, failing: bool = False) -> None:
        """Remove the last checkpoint's files and its ``.metadata`` (untimed); ``failing``:
        after a failed round, where a refused removal is listed, not raised."""
        if self.latest_commit:
            self.ctx.target.remove_files([f.path for f in self.latest_commit], failing=failing)
            self.latest_commit = []
        if self.latest:
            self.ctx.target.remove_files([s.path for s in self.latest], failing=failing)
            self.latest = []

    def prepare_round(self) -> list[ShardFile]:
        """Untimed: retire the previous checkpoint, make the next step's directory, register.
        A call on the target that fails here (its directory, its registration) fails the
        campaign as this round's preparation, named, so the checks after it say what failed."""
        self._check_failed()
        try:
            return self._prepare_round()
        except OSError as error:
            self.failure = f"preparing write round {self._step}: {type(error).__name__}: {error}"
            raise RankFailure(self.failure, []) from None

    def _prepare_round(self) -> list[ShardFile]:
        target = self.ctx.target
        if self._step == 0:
            target.new_dir("write")
        self._retire_latest()
        if self._step:
            self._generate()  # untimed, between rounds: interleaved with what it vouches for
        self._step += 1
        directory = self.new_checkpoint_dir("write", f"step-{self._step}")
        shards = self.shards_in(directory)
        commit = self.commit_in(directory)
        target.register_shards(shards, writer=Writer.WRITE_BURST)
        if commit:
            target.register_shards(commit, writer=Writer.WRITE_COMMIT)
        self.latest, self.latest_commit = shards, commit
        return shards

    def write_round(self, shards: list[ShardFile] | None = None) -> BurstResult:
        """One checkpoint: the burst (timed from the common start) of prepared shards."""
        shards = shards if shards is not None else self.prepare_round()
        try:
            try:
                burst = self._commit(self._burst(shards, "target"))
            except OSError as error:  # the session's own call on the target (a commit's check)
                raise RankFailure(f"{type(error).__name__}: {error}", []) from None
            self._exchange_file_lists(shards)
        except RankFailure as error:
            # The ranks have stopped (or were killed): their partial files go now. On an
            # interrupt they may still be writing; the session's cleanup removes the files
            # once the ranks are stopped.
            self.failure = f"write round {self._step}: {error}"
            target = self.ctx.target
            left, refused = len(target.left_behind), len(target.removal.failed)
            self.drop_latest(failing=True)  # bounded: a hung target keeps its files, listed
            kept = target.left_behind[left:] + target.removal.failed[refused:]
            if kept:
                why = f"the target hung: {target.hung}" if target.hung else "the target refused"
                self.failure += f"; {len(kept)} file(s) could not be removed ({why})"
            # the round named in what the check says, with the ranks the failure names
            raise RankFailure(self.failure, error.ranks, error.hung, error.abandoned) from None
        self.bursts.append(burst)
        return burst

    def _commit(self, burst: BurstResult) -> BurstResult:
        """The save's end: once every rank's files are closed, the coordinator (node 0's local
        rank 0, alone) writes, fsyncs and closes ``.metadata``, as DCP's coordinator does after
        its gather. Timed as part of the save: its record is placed after the ranks' span
        (the gather between them is not counted: a framework's barrier costs far less), so the
        burst's span ends with it. Then verified at once (untimed): no read pass reads it."""
        commit = self.latest_commit
        ctx = self.ctx

        def write() -> BurstResult | None:
            if not commit:
                return None
            with ctx.pool.alone():  # one coordinator writes them in order, one after another
                written = run_write_burst(
                    ctx.pool,
                    ctx.target.spec,
                    commit,
                    self.timeout_s,
                    phase="commit .metadata",
                )
                read = run_readback(ctx.pool, ctx.target.spec, commit, self.timeout_s, shift=0)
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
        shards = null_burst_files(lanes(self.shards_in(""), self.ctx.pool.ranks))
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
    # a trial's cap holds for the coordinator's file too (405b's is 642 MB)
    metadata_bytes = min(metadata_bytes, cap) if cap else metadata_bytes
    writer = profile.cluster.layout.writer
    if plan.rank_files is not None:
        return named_plan(
            plan.global_ranks,
            plan.rank_files,
            ranks=profile.cluster.gpus,
            metadata_name=None if writer == "dlio" else METADATA_NAME,
            metadata_bytes=metadata_bytes,
            rule=NAMED_RULES[writer],
        )
    return dcp_plan(
        plan.global_ranks,
        plan.shard_bytes,
        profile.checkpoint.files_per_rank,
        ranks=profile.cluster.gpus,
        metadata_bytes=metadata_bytes,
    )


NAMED_RULES = {
    "dcp": "DCP's planner (cluster.layout.writer: dcp): each rank's tensors whole in its "
    "__{rank}_{index}.distcp files by DCP's dedup and size-balanced buckets, plus .metadata",
    "dlio": "DLIO's layout (cluster.layout.writer: dlio): the model from dp rank 0, one "
    "layer_XX-model_YY-model_states.pt per layer and tp rank, one "
    "zero_pp_rank_D_mp_rank_MM_optim_states.pt per rank; no .metadata",
}
"""The file plan's rule in words, per writer that names its files."""
