"""Checkpoint rounds on the target: the write bursts the acceptance tests judge and reuse.

A round writes one checkpoint of this node's shards into ``write/step-<n>/`` of the run
directory, as a training job writes step after step. Before each round the previous round's
files are removed (untimed), so the target holds one checkpoint at a time; the last one stays
for the readback and restore tests.

Timeouts come from the requirement with a generous floor: a burst may take ten times its
budget window, or ``run.timeout_floor_s``, whichever is longer, before its ranks are called
hung.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from ckptgate.cluster.nodes import Nodes, SingleNode, run_everywhere, start_gate
from ckptgate.cluster.plan import NodePlan
from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.engine.records import BurstResult, merge_nodes
from ckptgate.report.gate import Item, judge
from ckptgate.sizing import Profile, Sizing, format_bytes, format_rate, format_seconds
from ckptgate.storage.target import Target
from ckptgate.workloads.write_burst import ShardFile, run_write_burst, shard_file_name

TIMEOUT_WINDOWS = 10.0
"""How many budget windows a burst may take before its ranks count as hung."""


def timeout_for(profile: Profile, window_s: float) -> float:
    """How long a burst may take before its ranks count as hung: ten of its budget windows,
    or ``run.timeout_floor_s``, whichever is longer."""
    return max(profile.run.timeout_floor_s, TIMEOUT_WINDOWS * window_s)


@dataclass
class WriteCampaign:
    """This node's checkpoint rounds on the target (one instance per session)."""

    profile: Profile
    sizing: Sizing
    plan: NodePlan
    target: Target
    pool: RankPool
    run_id: int
    nodes: Nodes = field(default_factory=SingleNode)
    bursts: list[BurstResult] = field(default_factory=list)
    """Every round, each with the records of every node's ranks."""
    generator: BurstResult | None = None
    latest: list[ShardFile] = field(default_factory=list)
    """This node's files of the last round."""
    latest_by_node: list[list[ShardFile]] = field(default_factory=list)
    """Every node's files of the last round, in node order."""
    _step: int = 0

    def start_gate(self, ready: bool) -> bool:
        """Every node's ranks start together, or none do (the engine's start hook)."""
        return start_gate(self.nodes, self.timeout_s, "the common start")(ready)

    def gather(
        self, kind: str, run: Callable[[], BurstResult], timeout_s: float | None = None
    ) -> BurstResult:
        """Run a burst on this node and gather it from every node into one burst.

        Any node's failure fails it on all, named. ``timeout_s`` is the burst's deadline.
        """
        bursts = run_everywhere(
            self.nodes, timeout_s or self.timeout_s, f"the end of the {kind} burst", run
        )
        return merge_nodes(kind, bursts)

    @property
    def timeout_s(self) -> float:
        # The save window: the stall budget (sync) or interval / headroom (async), which is
        # the sizing's create window too (SPEC.md).
        return timeout_for(self.profile, self.sizing.create_window_s)

    @property
    def played_bytes(self) -> int:
        """The bytes every taking-part node's ranks write per checkpoint (by the plans)."""
        if not self.latest_by_node:
            self.rounds()
        return sum(shard.bytes for shards in self.latest_by_node for shard in shards)

    @property
    def latest_all(self) -> list[ShardFile]:
        """Every node's files of the last round."""
        if not self.latest_by_node:
            self.rounds()
        return [shard for shards in self.latest_by_node for shard in shards]

    @property
    def transfer_bytes(self) -> int:
        return self.profile.run.transfer_bytes

    def _shards(self, step: int) -> list[ShardFile]:
        directory = self.target.new_dir("write", f"step-{step}") if step else ""
        return [
            ShardFile(
                global_rank=g,
                path=f"{directory}/{shard_file_name(g)}",
                bytes=b,
                run_id=self.run_id,
                transfer_bytes=self.transfer_bytes,
            )
            for g, b in zip(self.plan.global_ranks, self.plan.shard_bytes, strict=True)
        ]

    def _ensure_write_dir(self) -> None:
        if self._step == 0:
            self.target.new_dir("write")

    def drop_latest(self) -> None:
        """Remove the last checkpoint's files (untimed; as retention would)."""
        if self.latest:
            self.target.remove_files([s.path for s in self.latest])
            self.latest = []

    def prepare_round(self) -> list[ShardFile]:
        """Untimed: remove the previous checkpoint, make the next step's directory, register."""
        self._ensure_write_dir()
        self.drop_latest()
        self._step += 1
        shards = self._shards(self._step)
        self.target.register([s.path for s in shards])
        self.latest = shards
        return shards

    def write_round(self, shards: list[ShardFile] | None = None) -> BurstResult:
        """One checkpoint: the burst (timed from the common start) of prepared shards."""
        shards = shards if shards is not None else self.prepare_round()
        try:
            burst = self._burst(shards, "target")
            self.latest_by_node = self.nodes.allgather(shards, self.timeout_s, "the file lists")
        except RankFailure:
            # The ranks have stopped (or were killed): their partial files go now. On an
            # interrupt they may still be writing; the session's cleanup removes the files
            # once the ranks are stopped.
            self.drop_latest()
            raise
        self.bursts.append(burst)
        return burst

    def _burst(self, shards: list[ShardFile], sink: str) -> BurstResult:
        """Run one burst on this node's ranks and gather it from every node."""
        return self.gather(
            "write" if sink == "target" else "generate",
            lambda: run_write_burst(
                self.pool,
                self.target.fs_spec,
                shards,
                self.timeout_s,
                sink=sink,
                before_start=self.start_gate,
            ),
        )

    def rounds(self) -> list[BurstResult]:
        """The profile's ``run.rounds`` bursts, run once per session on first use."""
        while len(self.bursts) < self.profile.run.rounds:
            self.write_round()
        return self.bursts

    def generator_burst(self) -> BurstResult:
        """The same ranks and bytes through the generator alone, with no target I/O."""
        if self.generator is None:
            self.generator = self._burst(self._shards(0), "null")
        return self.generator

    def worst(self) -> BurstResult:
        """The slowest round: every checkpoint must fit its window, so the gate uses the worst."""
        return max(self.rounds(), key=lambda b: b.span_s)

    def median_span_s(self) -> float:
        return statistics.median(b.span_s for b in self.rounds())

    def judge_stall(self, burst: BurstResult, *, id: str, title: str, words: str) -> Item:
        """Checklist 3: a save's stall, from the common start to the slowest rank's close,
        against the stall budget (overhead_budget x interval; SPEC.md)."""
        slowest = burst.slowest
        budget = self.sizing.requirements["stall_budget_s"]
        phases = ", ".join(f"{k} {format_seconds(v)}" for k, v in slowest.phases_s.items())
        return judge(
            id=id,
            title=title,
            measured=burst.span_s,
            required=self.sizing.stall_budget_s,
            unit="s",
            better="lower",
            detail=f"{self.profile.name}: {budget.formula}; from the common start to the last "
            f"close; slowest rank global {slowest.global_rank} ({format_bytes(slowest.bytes)}: "
            f"{phases}); {words}; {self.plan.scale()}",
            scope=self.plan.scope(),
        )

    def judge_async_persist(self, burst: BurstResult, *, id: str, title: str, words: str) -> Item:
        """Checklist 5: the played bytes persist within interval / headroom.

        Every node of the cluster persists at once, so the played nodes must move their own
        bytes in the same window: required = played bytes x headroom / interval (SPEC.md's
        async_persist_planned_bytes_per_s at this scale). Between the no-headroom minimum and
        the planned rate the item fails and says so.
        """
        checkpoint = self.profile.checkpoint
        played = self.played_bytes
        minimum = played / checkpoint.interval_s
        planned = self.sizing.requirements["async_persist_planned_bytes_per_s"]
        item = judge(
            id=id,
            title=title,
            measured=burst.aggregate_bytes_per_s,
            required=minimum * checkpoint.async_headroom,
            unit="B/s",
            detail=f"{self.profile.name}: {planned.formula}; this run: {format_bytes(played)} / "
            f"{checkpoint.interval_s:g} s x {checkpoint.async_headroom:g} headroom; {words}; "
            f"{self.plan.scale()}",
            scope=self.plan.scope(),
        )
        if not item.passed and burst.aggregate_bytes_per_s >= minimum:
            item.detail += (
                f"; above the no-headroom minimum {format_rate(minimum)}, so saves keep up "
                "only without contention"
            )
        return item
