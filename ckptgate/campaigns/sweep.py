"""The scaling sweep: the write burst, the restart read and the create storm at node counts
1, 2, 4, ... k of the one MPI world (and at several ranks per node where asked), each point
repeated, every byte verified; then the projection to the profile's node count.

One allocation serves the whole sweep: a point on n nodes runs on the first n
(``ckptgate.cluster.nodes.on_first``: their own view, their own collectives) while the others
wait at a bounded barrier. The load is weak scaling, as a training cluster grows: every rank
writes its own shard (the same file plan as the write rounds), reads another's, and creates
its share of the create storm (the main storm's files per rank), so the aggregate rates at n
nodes are what n nodes of this cluster would ask of the target.

Every point is a real run: the write burst is fsynced and closed, the read is of another
node's files (another rank's on one node) with their pages dropped and every byte verified,
the storm's files are read back and verified; then the point's files are removed, so the
target holds one point at a time. The points feed ``ckptgate.projection.projected``, whose
words are never ``qualified``: the run's verdict stands.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ckptgate.campaigns.context import CheckContext
from ckptgate.campaigns.write import WriteCampaign
from ckptgate.cluster.nodes import Nodes, on_first, pool_gate, run_everywhere
from ckptgate.engine.pool import RankPool
from ckptgate.engine.records import BurstResult, merge_nodes
from ckptgate.projection.ceiling import GROWTH, NodeLimit
from ckptgate.projection.projected import Projection, project
from ckptgate.projection.ranks import MEANING as RANKS_MEANING
from ckptgate.projection.ranks import ranks_curves
from ckptgate.projection.usl import mean_interval
from ckptgate.rundir.manifest import Writer
from ckptgate.sizing import Requirement, format_count, storm_file_count
from ckptgate.workloads.fileplan import ShardFile, lanes
from ckptgate.workloads.null_read import NULL_READ_WORDS, run_null_read
from ckptgate.workloads.readback import run_readback
from ckptgate.workloads.storm import (
    combine_phases,
    register_storm,
    run_metadata_storm,
    split,
    storm_files,
    verify_storm,
)
from ckptgate.workloads.write_burst import run_write_burst

SWEEP_MODES = ("none", "nodes")
AUTO_RANKS = "auto"
"""``--sweep-ranks auto``: ranks per node 1, 2, 4 ... up to the node's rank processes, at each
node count until a doubling raises no metric (``SweepPlan.until_flat``)."""
DEFAULT_REPEATS = 3
"""Repeats per point: the bootstrap's intervals need at least two; three show the spread."""


class SweepError(ValueError):
    """A sweep option that this run cannot honour; the message names the option."""


def doubling(count: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``count``, and ``count`` itself (the largest point is the run)."""
    counts = [1 << i for i in range(max(count, 1).bit_length()) if 1 << i <= count]
    if counts[-1] != count:
        counts.append(count)
    return tuple(counts)


@dataclass(frozen=True)
class SweepPlan:
    """The points a sweep measures: every node count at every ranks per node, repeated."""

    node_counts: tuple[int, ...]
    ranks_per_node: tuple[int, ...]
    repeats: int
    run_ranks: int
    """The run's own ranks per node: the projection fits the points at this count."""
    until_flat: bool = False
    """At each node count, measure the ranks per node in order and stop where a doubling of
    them raised no metric's aggregate by ``GROWTH`` (``more_streams_helped``): the storage or
    the node gives no more to more streams there. The run's own count is measured always."""

    def words(self, cluster_nodes: int) -> str:
        counts = ", ".join(format_count(n) for n in self.node_counts)
        ranks = ", ".join(str(r) for r in self.ranks_per_node)
        until = (
            f" (each node count until a doubling of ranks raises no metric by {GROWTH:.0%})"
            if self.until_flat
            else ""
        )
        return (
            f"{counts} of {format_count(cluster_nodes)} nodes at {ranks} rank(s) per node"
            f"{until}, {self.repeats} repeat(s) each"
        )

    def runs(self) -> int:
        """Point repeats the plan measures at most: node counts x ranks per node x repeats
        (``until_flat`` may stop a node count's ranks sooner)."""
        return len(self.node_counts) * len(self.ranks_per_node) * self.repeats

    def time_words(self, point_s: float, budget_s: float | None) -> str:
        """How long the plan takes, said before it starts (``point_s``: one repeat of one
        point at the profile's required rates, ``sweep_point_s``)."""
        budget = f" (--sweep-budget-s {budget_s:g})" if budget_s is not None else ""
        most = "at most " if self.until_flat else ""
        return (
            f"{most}{self.runs()} point repeats, about "
            f"{format_count(round(self.runs() * point_s))} s "
            f"if the storage meets the profile's rates at every point{budget}; a slower "
            "storage takes longer, each repeat bounded by its deadlines"
        )


def sweep_point_s(create_window_s: float, restart_read_s: float) -> float:
    """One repeat of one point at the profile's required rates: its write burst and create
    storm each within the save window (the sizing's create window), its read and the storm's
    verification each within ``restart.read_s`` (SPEC.md's windows; ``CheckContext``)."""
    return 2 * create_window_s + 2 * restart_read_s


def within_budget(plan: SweepPlan, point_s: float, budget_s: float | None) -> SweepPlan:
    """``plan`` cut to fit ``budget_s`` seconds (None: as it is): first the node counts
    thinned to four, evenly spaced in log2 (1 and the run's count always kept), then fewer
    repeats, then the counts down to two. ``SweepError`` naming the option where even that does not
    fit."""
    if budget_s is None:
        return plan
    if budget_s <= 0:
        raise SweepError(f"--sweep-budget-s {budget_s:g}: allowed: a number of seconds above 0")
    every, repeats = plan.node_counts, plan.repeats
    kept = len(every)

    def cost() -> float:
        return kept * len(plan.ranks_per_node) * repeats * point_s

    while cost() > budget_s:
        if kept > 4:
            kept -= 1
        elif repeats > 1:
            repeats -= 1
        elif kept > 2:
            kept -= 1
        else:
            raise SweepError(
                f"--sweep-budget-s {budget_s:g}: the smallest sweep ({every[0]} and "
                f"{every[-1]} nodes, {len(plan.ranks_per_node)} rank count(s), one repeat) "
                f"takes about {cost():.0f} s at the profile's required rates; allowed: at "
                "least that, or no budget"
            )
    counts = _spread(every, kept)
    return dataclasses.replace(plan, node_counts=tuple(counts), repeats=repeats)


def _spread(counts: Sequence[int], kept: int) -> list[int]:
    """``kept`` of the doubling ``counts``, evenly spaced in log2 (the first and last kept)."""
    if kept >= len(counts) or kept < 2:
        return list(counts) if kept >= len(counts) else [counts[-1]]
    last = len(counts) - 1
    return [counts[round(i * last / (kept - 1))] for i in range(kept)]


def plan_sweep(
    mode: str, ranks: Sequence[int] | str, repeats: int, node_count: int, pool_ranks: int
) -> SweepPlan | None:
    """The sweep the options ask for on this run (None: no sweep). ``--sweep=nodes`` sweeps
    the node counts, ``--sweep-ranks`` alone the ranks per node on every node (``auto``:
    1, 2, 4 ... up to the node's ranks, until they stop helping: ``SweepPlan.until_flat``);
    the run's own ranks per node are always among the ranks (the projection fits the points
    there). Raises ``SweepError`` naming the option."""
    if mode not in SWEEP_MODES:
        raise SweepError(f"--sweep {mode}: allowed: {', '.join(SWEEP_MODES)}")
    if repeats < 1:
        raise SweepError(f"--sweep-repeats {repeats}: must be at least 1")
    if isinstance(ranks, str):
        if ranks != AUTO_RANKS:
            raise SweepError(f"--sweep-ranks {ranks}: allowed: {AUTO_RANKS} or rank counts")
        counts = doubling(node_count) if mode == "nodes" else (node_count,)
        return SweepPlan(counts, doubling(pool_ranks), repeats, pool_ranks, until_flat=True)
    wrong = [r for r in ranks if not 1 <= r <= pool_ranks]
    if wrong:
        raise SweepError(
            f"--sweep-ranks {','.join(map(str, ranks))}: {wrong[0]} is not within 1 to this "
            f"node's {pool_ranks} rank processes (--ranks or cluster.gpus_per_node)"
        )
    if mode == "none" and not ranks:
        return None
    counts = doubling(node_count) if mode == "nodes" else (node_count,)
    return SweepPlan(counts, tuple(sorted({*ranks, pool_ranks})), repeats, pool_ranks)


@dataclass(frozen=True)
class SweepPoint:
    """One repeat of one point: what the first ``nodes`` nodes' ``ranks_per_node`` ranks did."""

    nodes: int
    ranks_per_node: int
    repeat: int
    write_bytes: int
    write_bytes_per_s: float
    read_bytes: int
    read_bytes_per_s: float
    created_files: int
    create_per_s: float
    verified_bytes: int
    """Bytes read back and checked: the read's and the storm's."""


METRIC_FIELDS = {"write": "write_bytes_per_s", "read": "read_bytes_per_s", "create": "create_per_s"}
"""Each projected metric (``ckptgate.projection.projected.METRICS``) and its point field."""


def more_streams_helped(points: Sequence[SweepPoint], nodes: int, ranks: int) -> bool:
    """Whether ``ranks`` per node at ``nodes`` nodes raised any metric's mean aggregate by
    ``GROWTH`` at least over the largest fewer ranks per node measured there (True where there
    is none to compare: the first count). ``ckptgate.projection.ceiling``'s growth: a doubling
    that raises the aggregate by less no longer scales."""
    at_nodes = [p for p in points if p.nodes == nodes]
    fewer = [p.ranks_per_node for p in at_nodes if p.ranks_per_node < ranks]
    if not fewer:
        return True
    before = [p for p in at_nodes if p.ranks_per_node == max(fewer)]
    now = [p for p in at_nodes if p.ranks_per_node == ranks]
    for name in METRIC_FIELDS.values():
        old = statistics.fmean(getattr(p, name) for p in before)
        new = statistics.fmean(getattr(p, name) for p in now)
        if new >= (1.0 + GROWTH) * old:
            return True
    return False


@dataclass
class SweepResult:
    """Every point of a sweep (on node 0), the plan, and the projection."""

    plan: SweepPlan
    cluster_nodes: int
    points: list[SweepPoint] = field(default_factory=list)
    projection: Projection | None = None
    no_projection: str = ""
    """Why there is none (every node of the profile took part: the run's verdict speaks)."""
    skipped: list[tuple[int, int]] = field(default_factory=list)
    """(node count, ranks per node) left out by ``SweepPlan.until_flat``: fewer ranks per
    node gave as much."""
    node_limits: dict[str, NodeLimit] = field(default_factory=dict)
    """A node's own measured limit per metric (``ScalingSweep.node_limits``): what says
    whether the trial's largest point was limited by its clients."""

    def series(self, ranks_per_node: int | None = None) -> dict[str, dict[int, list[float]]]:
        """metric -> node count -> repeats, at ``ranks_per_node`` (the run's by default)."""
        ranks = self.plan.run_ranks if ranks_per_node is None else ranks_per_node
        out: dict[str, dict[int, list[float]]] = {m: {} for m in METRIC_FIELDS}
        for point in self.points:
            if point.ranks_per_node != ranks:
                continue
            for metric, name in METRIC_FIELDS.items():
                out[metric].setdefault(point.nodes, []).append(getattr(point, name))
        return out

    def by_ranks(self) -> dict[int, dict[str, dict[int, list[float]]]]:
        """node count -> metric -> ranks per node -> repeats: the ranks-per-node curves."""
        out: dict[int, dict[str, dict[int, list[float]]]] = {}
        for point in self.points:
            metrics = out.setdefault(point.nodes, {m: {} for m in METRIC_FIELDS})
            for metric, name in METRIC_FIELDS.items():
                metrics[metric].setdefault(point.ranks_per_node, []).append(getattr(point, name))
        return out

    def grids(self) -> dict[str, dict[int, dict[int, list[float]]]]:
        """metric -> node count -> ranks per node -> repeats: every point, for the storage's
        measured ceiling (``ckptgate.projection.ceiling``)."""
        out: dict[str, dict[int, dict[int, list[float]]]] = {m: {} for m in METRIC_FIELDS}
        for nodes, metrics in self.by_ranks().items():
            for metric, by_ranks in metrics.items():
                out[metric][nodes] = by_ranks
        return out

    def summary(self) -> list[dict[str, Any]]:
        """Each point (node count, ranks per node) and metric: the mean of its repeats with
        its bootstrap interval, and the worst and best repeat."""
        out = []
        for ranks in self.plan.ranks_per_node:
            for metric, by_nodes in self.series(ranks).items():
                for nodes, values in sorted(by_nodes.items()):
                    mean = mean_interval(values)
                    out.append({"nodes": nodes, "ranks_per_node": ranks, "metric": metric,
                                "repeats": len(values), **mean.to_json(),
                                "worst": min(values), "best": max(values)})  # fmt: skip
        return out

    def section(self) -> dict[str, Any]:
        """The report's ``scaling`` section."""
        return {
            "plan": {
                k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.plan).items()
            },
            "words": self.plan.words(self.cluster_nodes),
            "cluster_nodes": self.cluster_nodes,
            "points": [asdict(p) for p in self.points],
            "summary": self.summary(),
            "verified_bytes": sum(p.verified_bytes for p in self.points),
            "projection": self.projection.to_json() if self.projection else None,
            "no_projection": self.no_projection,
            "skipped": [{"nodes": n, "ranks_per_node": r} for n, r in self.skipped],
            "node_limits": {
                metric: {"name": limit.name, "per_node": limit.per_node}
                for metric, limit in self.node_limits.items()
            },
            "ranks": {
                "meaning": RANKS_MEANING,
                "curves": [c.to_json() for c in ranks_curves(self.by_ranks())],
            },
        }


@contextlib.contextmanager
def gated(pool: RankPool, nodes: Nodes) -> Iterator[None]:
    """Runs inside start together on ``nodes`` (a view of the first nodes), not on the run's."""
    gate, pool.gate = pool.gate, pool_gate(nodes)
    try:
        yield
    finally:
        pool.gate = gate


def projected_requirements(ctx: CheckContext) -> dict[str, Requirement]:
    """The requirement at the full cluster each swept metric answers: the persist bandwidth
    of the profile's mode, the restart read, the create rate (SPEC.md's formulas)."""
    reqs = ctx.sizing.requirements
    persist = (
        "async_persist_planned_bytes_per_s"
        if ctx.profile.checkpoint.mode == "async"
        else "sync_write_bytes_per_s"
    )
    return {
        "write": reqs[persist],
        "read": reqs["restart_read_bytes_per_s"],
        "create": reqs["create_rate_per_s"],
    }


@dataclass
class ScalingSweep:
    """Runs a ``SweepPlan`` with the write campaign's file plan (one per session)."""

    campaign: WriteCampaign
    plan: SweepPlan

    @property
    def ctx(self) -> CheckContext:
        return self.campaign.ctx

    def storm_files_per_rank(self) -> int:
        """The main storm's files per rank at this run's scale (at least one)."""
        profile, ctx = self.ctx.profile, self.ctx
        files = storm_file_count(profile)
        return max(1, math.ceil(files / (ctx.nodes.count * ctx.pool.ranks)))

    def null_read(self) -> BurstResult:
        """The null-source read (``ckptgate.workloads.null_read``) on every node of the run at
        once, before the points: every node's part, merged, on node 0 (this node's
        elsewhere)."""
        ctx = self.ctx
        timeout_s = ctx.restart_timeout_s
        bursts = run_everywhere(
            ctx.nodes,
            timeout_s,
            "the end of the sweep's null-source read",
            lambda: run_null_read(
                ctx.pool, ctx.target.spec, self.campaign.shards_in(""), timeout_s
            ),
        )
        return merge_nodes("null read", bursts)

    def node_limits(self, null_read: BurstResult) -> dict[str, NodeLimit]:
        """A node's own measured limits, per metric, each an aggregate over the run's nodes
        per node: the read's is the sweep's null-source read (``null_read``); the write's is
        the generator-only burst (the suite's own data path into a null sink,
        ``WriteCampaign.generator_burst``, gathered from every node) where the write checklist
        already ran it; the sweep runs none of its own (a burst on node 0 alone would not meet
        the other nodes' collectives)."""
        count = self.ctx.nodes.count
        limits = {"read": NodeLimit(NULL_READ_WORDS, null_read.aggregate_bytes_per_s / count)}
        if self.campaign.generators:
            rate = self.campaign.generator_burst().aggregate_bytes_per_s / count
            name = (
                "the suite's own data path on one node (stamping and write calls into a null sink)"
            )
            limits["write"] = NodeLimit(name, rate)
        return limits

    def step_timeout_s(self) -> float:
        """How long a point may take: its write, read and storm deadlines and their checks."""
        ctx = self.ctx
        return 3 * ctx.save_timeout_s + 2 * ctx.restart_timeout_s

    def run(self) -> SweepResult:
        """Every point, in order (node counts, then ranks per node, then repeats)."""
        ctx = self.ctx
        result = SweepResult(self.plan, ctx.plan.cluster_nodes)
        ctx.target.new_dir("sweep")
        null_read = self.null_read()  # every node takes part; node 0 has every node's
        if ctx.nodes.index == 0:
            result.node_limits = self.node_limits(null_read)
        for nodes in self.plan.node_counts:
            flat = False
            for ranks in self.plan.ranks_per_node:
                if flat and ranks != self.plan.run_ranks:
                    result.skipped.append((nodes, ranks))
                    continue
                for repeat in range(self.plan.repeats):
                    point = on_first(
                        ctx.nodes,
                        nodes,
                        self.step_timeout_s(),
                        f"the end of the sweep point at {nodes} node(s), {ranks} rank(s)",
                        functools.partial(self.point, nodes=nodes, ranks=ranks, repeat=repeat),
                    )
                    if point is not None and ctx.nodes.index == 0:
                        result.points.append(point)
                if self.plan.until_flat and not flat:
                    flat = self.stopped_helping(result, nodes, ranks)
        if ctx.nodes.index == 0 and max(self.plan.node_counts) >= ctx.plan.cluster_nodes:
            result.no_projection = (
                "no projection: every node of the profile took part, so the run's own verdict "
                "speaks for the full count"
            )
        elif ctx.nodes.index == 0:
            result.projection = project(
                result.series(),
                projected_requirements(ctx),
                ctx.plan.cluster_nodes,
                self.plan.words(ctx.plan.cluster_nodes),
                grids=result.grids(),
                ranks_per_node=self.plan.run_ranks,
                node_limits=result.node_limits,
            )
        return result

    def stopped_helping(self, result: SweepResult, nodes: int, ranks: int) -> bool:
        """Whether the ranks per node stop at ``nodes`` nodes after ``ranks``: node 0 decides
        from its points (``more_streams_helped``) and every node gets the same answer."""
        helped = more_streams_helped(result.points, nodes, ranks)  # elsewhere: no points
        _, stop = self.ctx.nodes.gather_decide(
            not helped,
            lambda said: bool(said[0]),
            self.ctx.restart_timeout_s,
            f"whether {ranks} rank(s) per node at {nodes} node(s) still raised the aggregate",
        )
        return stop

    def point(self, view: Nodes, nodes: int, ranks: int, repeat: int) -> SweepPoint | None:
        """One repeat on the first ``nodes`` nodes (``view``), ``ranks`` ranks each; the
        point on node 0, None elsewhere. Removes its files before it returns."""
        ctx, campaign = self.ctx, self.campaign
        target, pool, spec = ctx.target, ctx.pool, ctx.target.spec
        name = f"nodes-{nodes}-ranks-{ranks}-repeat-{repeat + 1}"
        directory = campaign.new_checkpoint_dir("sweep", name)
        mine = lanes(campaign.shards_in(directory), pool.ranks)[:ranks]
        shards = [f for lane in mine for f in lane]
        storm_dir = target.new_dir("sweep", name, "storm")
        per_rank = self.storm_files_per_rank()
        planned = storm_files(storm_dir, nodes * ranks * per_rank, 1)
        storm = split(planned, nodes)[view.index]
        target.register_shards(shards, writer=Writer.SWEEP)
        register_storm(target, storm, ctx.run_id)
        save_s, read_s = ctx.save_timeout_s, ctx.restart_timeout_s
        try:
            with gated(pool, view):
                written = merge_nodes(
                    "write",
                    run_everywhere(
                        view,
                        save_s,
                        f"the end of the sweep's write burst ({name})",
                        lambda: run_write_burst(pool, spec, shards, save_s),
                    ),
                )
                theirs: list[ShardFile] = view.shift(shards, save_s, "the sweep's file lists")
                shift = 0 if nodes > 1 else (1 if ranks > 1 else 0)
                reads = run_everywhere(
                    view,
                    read_s,
                    f"the end of the sweep's read ({name})",
                    lambda: run_readback(
                        pool, spec, theirs, read_s, shift=shift, direct=ctx.direct
                    ),
                )
                read = merge_nodes("read", [r.burst for r in reads])
                creates = run_everywhere(
                    view,
                    save_s,
                    f"the end of the sweep's create storm ({name})",
                    lambda: run_metadata_storm(
                        pool, spec, storm_dir, storm, save_s, run_id=ctx.run_id, commit=False,
                        ranks=ranks,
                    ),
                )  # fmt: skip
                checked = run_everywhere(
                    view,
                    save_s,
                    f"the verification of the sweep's storm ({name})",
                    lambda: verify_storm(pool, spec, storm, save_s, run_id=ctx.run_id),
                )
        finally:
            target.remove_files([f.path for f in shards] + [f.path for f in storm])
        if view.index != 0:
            return None
        create = combine_phases([c.create for c in creates])
        return SweepPoint(
            nodes=nodes,
            ranks_per_node=ranks,
            repeat=repeat + 1,
            write_bytes=written.total_bytes,
            write_bytes_per_s=written.aggregate_bytes_per_s,
            read_bytes=read.total_bytes,
            read_bytes_per_s=read.aggregate_bytes_per_s,
            created_files=len(planned),
            create_per_s=create.rate_per_s,
            verified_bytes=read.total_bytes + sum(checked),
        )
