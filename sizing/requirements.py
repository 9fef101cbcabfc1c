"""Every derived number of SPEC.md as a Requirement value object; derive(); the interval sweep.

Derived numbers are derived, not measured: each Requirement says which acceptance test module
measures it (``measured_by``), or None where the number is derived only.

Write rates and retained capacity use the bytes the ranks actually write (``written_bytes``),
which equal the checkpoint bytes except under ``replicas_write: all``, where every dp replica
writes its own copy of the replicated state; restart reads need one copy (checkpoint_bytes).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ckptgate.sizing.schema import Profile
from ckptgate.sizing.shards import ShardDistribution, shard_distribution
from ckptgate.sizing.units import (
    format_bytes,
    format_count,
    format_fraction,
    format_rate,
    format_seconds,
    plural,
    sig3,
)

# The acceptance module that measures each requirement (SPEC.md's checklist, one per item).
TEST_CHECKPOINT_BYTES = "acceptance/test_write_burst.py, acceptance/test_dcp.py"
TEST_WRITE_BURST = "acceptance/test_write_burst.py"
TEST_METADATA_STORM = "acceptance/test_metadata.py"
TEST_RESTART_READ = "acceptance/test_restart_read.py"
TEST_RETENTION = "acceptance/test_retention.py"

SRC_SPEC = "SPEC.md"
SRC_ZERO = "ZeRO (Rajbhandari et al., 2020): 16Ψ = 2Ψ + 2Ψ + 12Ψ; MLPerf Storage: 14 B/parameter"
SRC_LLAMA3 = "The Llama 3 Herd of Models (Meta, 2024): 419 unexpected interruptions in 54 days"
SRC_YOUNG = "Young (1974), A first order approximation to the optimum checkpoint interval"
SRC_DCP = "PyTorch Distributed Checkpoint: one file per rank plus .metadata"


@dataclass(frozen=True)
class Requirement:
    """One derived number: what it is, its value and unit, how it was computed, from where."""

    name: str
    title: str
    value: int | float
    unit: str  # "B", "B/s", "s", "1/s", "fraction", "files", "parameters"
    formula: str  # in words, with the profile's numbers filled in
    source: str
    measured_by: str | None = None  # acceptance test module, or None: derived only

    def display(self) -> str:
        """The value with its unit, 3 significant digits, decimal units."""
        return format_value(self.value, self.unit)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def format_value(value: float, unit: str) -> str:
    if unit == "B":
        return format_bytes(value)
    if unit == "B/s":
        return format_rate(value)
    if unit == "s":
        return format_seconds(value)
    if unit == "1/s":
        return f"{sig3(value)} /s"
    if unit == "fraction":
        return format_fraction(value)
    if unit == "files":
        return f"{format_count(value)} files"
    if unit == "parameters":
        return format_count(value)
    return f"{sig3(value)} {unit}"


# --- the formulas --------------------------------------------------------------------------


def mtbf_s(interruptions: int, window_s: float, observed_gpus: int, gpus: int) -> float:
    """Mean time between failures of the job, seconds: window_s / interruptions, scaled by
    observed_gpus / gpus (the failure rate grows linearly with GPU count).

    Source: SPEC.md; rate from The Llama 3 Herd of Models (Meta, 2024), 419 unexpected
    interruptions in 54 days at 16,384 GPUs."""
    return window_s / interruptions * observed_gpus / gpus


def lost_work_fraction(interval_s: float, restart_s: float, mtbf_s: float) -> float:
    """Fraction of wall clock lost to failures, first order: (T/2 + restart_s) / mtbf_s; a
    failure lands mid-interval on average. Dimensionless. Source: SPEC.md; Young (1974)."""
    return (interval_s / 2 + restart_s) / mtbf_s


def young_interval_s(stall_s: float, mtbf_s: float) -> float:
    """Young's optimum checkpoint interval, seconds: sqrt(2 * stall_s * mtbf_s), where stall_s
    is the time a checkpoint blocks training. Source: Young (1974), Communications of the ACM
    17(9), "A first order approximation to the optimum checkpoint interval"."""
    return math.sqrt(2 * stall_s * mtbf_s)


def first_order_waste(interval_s: float, stall_s: float, restart_s: float, mtbf_s: float) -> float:
    """Fraction of wall clock wasted, first order: stall_s / T (saving) plus
    (T/2 + restart_s) / mtbf_s (lost work). Its minimum over T is young_interval_s.
    Source: Young (1974)."""
    return stall_s / interval_s + lost_work_fraction(interval_s, restart_s, mtbf_s)


def stall_budget_s(overhead_budget: float, interval_s: float) -> float:
    """Seconds a blocking save may take: overhead_budget * T. Source: SPEC.md."""
    return overhead_budget * interval_s


def create_window_s(mode: str, stall_s: float, interval_s: float, async_headroom: float) -> float:
    """Seconds in which a checkpoint's files must be created: the stall budget (sync), or
    interval_s / async_headroom (async). Source: SPEC.md."""
    return stall_s if mode == "sync" else interval_s / async_headroom


# --- derive ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizing:
    """Every SPEC.md number for one profile, plus ``requirements`` in table order."""

    profile_name: str
    description: str
    mode: str
    parameters: int
    bytes_per_parameter: int
    gpus: int
    nodes: int
    checkpoint_bytes: int
    weights_only_bytes: int
    written_bytes: int
    mean_shard_bytes: float
    largest_shard_bytes: int
    largest_shard_rank: int
    smallest_shard_bytes: int
    per_node_bytes: float
    largest_node_bytes: int
    shard_policy: str
    mtbf_s: float
    interval_s: float
    restart_s: float
    lost_work_fraction: float
    optimal_interval_s: float
    stall_budget_s: float
    goodput_loss_fraction: float
    goodput_budget: float | None
    sync_write_bytes_per_s: float
    sync_write_bytes_per_s_per_node: float
    sync_write_bytes_per_s_per_rank: float
    async_persist_min_bytes_per_s: float
    async_persist_planned_bytes_per_s: float
    staging_bytes_per_node: int
    files_per_checkpoint: int
    create_window_s: float
    create_rate_per_s: float
    restart_read_s: float
    restart_read_bytes_per_s: float
    retained_bytes: int
    requirements: dict[str, Requirement] = field(default_factory=dict, compare=False)
    distribution: ShardDistribution | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """Plain numbers in bytes, seconds, bytes per second and fractions, plus the
        requirements with formulas and sources."""
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("requirements", "distribution")
        }
        out["profile"] = self.profile_name
        out["requirements"] = {name: r.to_json() for name, r in self.requirements.items()}
        return out


def _rank_position(dist: ShardDistribution, rank: int) -> str:
    tp_idx = rank % dist.tp
    dp_idx = rank // dist.tp % dist.dp
    pp_idx = rank // (dist.tp * dist.dp)
    return f"rank {rank}: pp {pp_idx}, dp {dp_idx}, tp {tp_idx}"


def derive(profile: Profile) -> Sizing:
    """The sizing for a profile: every SPEC.md output, and the Requirement for each."""
    cluster, ckpt = profile.cluster, profile.checkpoint
    fail = profile.failures
    psi, k = profile.parameters, profile.model.bytes_per_parameter
    gpus, nodes = cluster.gpus, profile.nodes
    dist = shard_distribution(profile)

    checkpoint_bytes = psi * k
    written = dist.written_bytes
    interval = ckpt.interval_s
    mtbf = mtbf_s(fail.interruptions, fail.window_s, fail.observed_gpus, gpus)
    lost = lost_work_fraction(interval, fail.restart_s, mtbf)
    stall = stall_budget_s(ckpt.overhead_budget, interval)
    young = young_interval_s(stall, mtbf)
    goodput_loss = first_order_waste(interval, stall, fail.restart_s, mtbf)
    window = create_window_s(ckpt.mode, stall, interval, ckpt.async_headroom)
    files = gpus * ckpt.files_per_rank + 1
    # Bytes are ints: round the protected capacity to the byte.
    retention = profile.retention
    retained = round(written * retention.count * (1 + retention.protection_overhead))

    values: dict[str, Any] = dict(
        profile_name=profile.name,
        description=profile.description,
        mode=ckpt.mode,
        parameters=psi,
        bytes_per_parameter=k,
        gpus=gpus,
        nodes=nodes,
        checkpoint_bytes=checkpoint_bytes,
        weights_only_bytes=psi * 2,
        written_bytes=written,
        mean_shard_bytes=dist.mean_bytes,
        largest_shard_bytes=dist.largest_bytes,
        largest_shard_rank=dist.largest_rank,
        smallest_shard_bytes=dist.smallest_bytes,
        per_node_bytes=written / nodes,
        largest_node_bytes=dist.largest_node_bytes,
        shard_policy=dist.policy_note,
        mtbf_s=mtbf,
        interval_s=interval,
        restart_s=fail.restart_s,
        lost_work_fraction=lost,
        optimal_interval_s=young,
        stall_budget_s=stall,
        goodput_loss_fraction=goodput_loss,
        goodput_budget=ckpt.goodput_budget,
        sync_write_bytes_per_s=written / stall,
        sync_write_bytes_per_s_per_node=dist.largest_node_bytes / stall,
        sync_write_bytes_per_s_per_rank=dist.largest_bytes / stall,
        async_persist_min_bytes_per_s=written / interval,
        async_persist_planned_bytes_per_s=written / interval * ckpt.async_headroom,
        staging_bytes_per_node=dist.largest_node_bytes * ckpt.staging_buffers,
        files_per_checkpoint=files,
        create_window_s=window,
        create_rate_per_s=files / window,
        restart_read_s=profile.restart.read_s,
        restart_read_bytes_per_s=checkpoint_bytes / profile.restart.read_s,
        retained_bytes=retained,
    )
    requirements = _requirements(profile, dist, values)
    return Sizing(**values, requirements=requirements, distribution=dist)


def _requirements(
    profile: Profile, dist: ShardDistribution, v: dict[str, Any]
) -> dict[str, Requirement]:
    ckpt, fail = profile.checkpoint, profile.failures
    b, s = format_bytes, format_seconds
    ckpt_b = b(v["checkpoint_bytes"])
    duplicates = v["written_bytes"] != v["checkpoint_bytes"]
    written_b = f"{b(v['written_bytes'])} written" if duplicates else ckpt_b
    headroom = f"{ckpt.async_headroom:g} headroom"
    counted = profile.model.parameters is None
    psi_text = format_count(v["parameters"])
    rows = [
        (
            "parameters",
            "Parameters (Ψ)",
            "parameters",
            "counted from model.architecture" if counted else "model.parameters",
            "SPEC.md counting rule; Llama 3 shapes (Meta, 2024)" if counted else SRC_SPEC,
            None,
        ),
        (
            "checkpoint_bytes",
            "Checkpoint size",
            "B",
            f"{psi_text} parameters x {v['bytes_per_parameter']} B/parameter",
            SRC_ZERO,
            TEST_CHECKPOINT_BYTES,
        ),
        (
            "weights_only_bytes",
            "Weights-only (bf16) size",
            "B",
            f"{psi_text} parameters x 2 B/parameter",
            SRC_SPEC,
            None,
        ),
        (
            "written_bytes",
            "Bytes written per checkpoint",
            "B",
            f"sum of per-rank shards (replicas_write {profile.cluster.parallelism.replicas_write})"
            + (f"; {ckpt_b} checkpoint + replica copies" if duplicates else ""),
            SRC_ZERO,
            TEST_WRITE_BURST,
        ),
        (
            "mean_shard_bytes",
            "Mean shard per rank",
            "B",
            f"{written_b} / {plural(v['gpus'], 'GPU')}",
            SRC_SPEC,
            None,
        ),
        (
            "largest_shard_bytes",
            "Largest shard per rank",
            "B",
            _rank_position(dist, dist.largest_rank),
            "shard distribution (sizing.shards)",
            None,
        ),
        (
            "smallest_shard_bytes",
            "Smallest shard per rank",
            "B",
            _rank_position(dist, dist.per_rank_bytes.index(dist.smallest_bytes)),
            "shard distribution (sizing.shards)",
            None,
        ),
        (
            "per_node_bytes",
            "Mean bytes per node",
            "B",
            f"{written_b} / {plural(v['nodes'], 'node')}",
            SRC_SPEC,
            None,
        ),
        (
            "largest_node_bytes",
            "Largest node's bytes",
            "B",
            f"sum of {profile.cluster.gpus_per_node} ranks' shards on the largest node",
            "shard distribution (sizing.shards)",
            None,
        ),
        (
            "mtbf_s",
            "Job MTBF",
            "s",
            f"{s(fail.window_s)} / {fail.interruptions} interruptions x "
            f"{format_count(fail.observed_gpus)} observed GPUs / {format_count(v['gpus'])} GPUs",
            SRC_LLAMA3,
            None,
        ),
        ("interval_s", "Checkpoint interval (T)", "s", "checkpoint.interval_s", SRC_SPEC, None),
        (
            "lost_work_fraction",
            "Lost work at T",
            "fraction",
            f"({s(v['interval_s'])} / 2 + {s(v['restart_s'])} restart) / {s(v['mtbf_s'])} MTBF",
            f"{SRC_SPEC}, first order",
            None,
        ),
        (
            "optimal_interval_s",
            "Young's optimal interval",
            "s",
            f"sqrt(2 x {s(v['stall_budget_s'])} stall x {s(v['mtbf_s'])} MTBF)",
            SRC_YOUNG,
            None,
        ),
        (
            "stall_budget_s",
            "Stall budget per checkpoint",
            "s",
            f"{format_fraction(ckpt.overhead_budget)} overhead budget x {s(v['interval_s'])}",
            SRC_SPEC,
            None,
        ),
        (
            "goodput_loss_fraction",
            "Goodput loss (lost work + stalls)",
            "fraction",
            f"{format_fraction(v['lost_work_fraction'])} lost work + "
            f"{format_fraction(ckpt.overhead_budget)} stall"
            + (f"; budget {format_fraction(ckpt.goodput_budget)}" if ckpt.goodput_budget else ""),
            SRC_YOUNG,
            None,
        ),
        (
            "sync_write_bytes_per_s",
            "Sync write bandwidth (aggregate)",
            "B/s",
            f"{written_b} / {s(v['stall_budget_s'])} stall budget",
            SRC_SPEC,
            TEST_WRITE_BURST,
        ),
        (
            "sync_write_bytes_per_s_per_node",
            "Sync write bandwidth per node",
            "B/s",
            f"{b(v['largest_node_bytes'])} largest node / {s(v['stall_budget_s'])} stall budget",
            SRC_SPEC,
            TEST_WRITE_BURST,
        ),
        (
            "sync_write_bytes_per_s_per_rank",
            "Sync write bandwidth per rank",
            "B/s",
            f"{b(v['largest_shard_bytes'])} largest shard / {s(v['stall_budget_s'])} stall budget",
            SRC_SPEC,
            TEST_WRITE_BURST,
        ),
        (
            "async_persist_min_bytes_per_s",
            "Async persist bandwidth (minimum)",
            "B/s",
            f"{written_b} / {s(v['interval_s'])}",
            SRC_SPEC,
            TEST_WRITE_BURST,
        ),
        (
            "async_persist_planned_bytes_per_s",
            "Async persist bandwidth (planned)",
            "B/s",
            f"{written_b} / {s(v['interval_s'])} x {headroom}",
            SRC_SPEC,
            TEST_WRITE_BURST,
        ),
        (
            "staging_bytes_per_node",
            "Host staging memory per node",
            "B",
            f"{b(v['largest_node_bytes'])} largest node x {ckpt.staging_buffers} staging "
            f"buffer{'s' if ckpt.staging_buffers != 1 else ''}",
            f"{SRC_SPEC}; PyTorch DCP async_save stages to CPU memory",
            None,
        ),
        (
            "files_per_checkpoint",
            "Files per checkpoint",
            "files",
            f"{format_count(v['gpus'])} GPUs x {ckpt.files_per_rank} file/rank + 1 .metadata",
            SRC_DCP,
            TEST_METADATA_STORM,
        ),
        (
            "create_window_s",
            "File-create window",
            "s",
            f"{s(v['stall_budget_s'])} stall budget (sync)"
            if ckpt.mode == "sync"
            else f"{s(v['interval_s'])} / {headroom} (async)",
            SRC_SPEC,
            None,
        ),
        (
            "create_rate_per_s",
            "File-create rate",
            "1/s",
            f"{format_count(v['files_per_checkpoint'])} files / {s(v['create_window_s'])}",
            SRC_SPEC,
            TEST_METADATA_STORM,
        ),
        (
            "restart_read_bytes_per_s",
            "Restart read bandwidth",
            "B/s",
            f"{ckpt_b} / {s(v['restart_read_s'])} restart.read_s",
            SRC_SPEC,
            TEST_RESTART_READ,
        ),
        (
            "retained_bytes",
            "Retained capacity (hot tier)",
            "B",
            f"{written_b} x {profile.retention.count} checkpoints x "
            f"(1 + {profile.retention.protection_overhead:g} protection)",
            SRC_SPEC,
            TEST_RETENTION,
        ),
    ]
    return {
        name: Requirement(name, title, v[name], unit, formula, source, measured_by)
        for name, title, unit, formula, source, measured_by in rows
    }


def sweep(profile: Profile, intervals_s: list[float] | None = None) -> list[dict[str, Any]]:
    """Rows over checkpoint intervals: lost work, stall budget, sync and async bandwidth.

    The stall budget scales with the interval (the overhead budget is a fraction), so
    ``goodput_loss_fraction`` grows with T; ``waste_at_fixed_stall_fraction`` holds the stall
    at the chosen interval's budget instead, and is the first-order waste that Young's
    interval minimizes.

    Default intervals: 0.25x, 0.5x, 1x, 2x, 4x the profile's interval, plus Young's optimum
    for the profile's stall budget. Each row has ``label`` "chosen", "Young" or ""."""
    base = derive(profile)
    ckpt, fail = profile.checkpoint, profile.failures
    if intervals_s is None:
        intervals_s = [base.interval_s * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)]
        intervals_s.append(base.optimal_interval_s)
    rows = []
    for interval in sorted(set(intervals_s)):
        stall = stall_budget_s(ckpt.overhead_budget, interval)
        lost = lost_work_fraction(interval, fail.restart_s, base.mtbf_s)
        window = create_window_s(ckpt.mode, stall, interval, ckpt.async_headroom)
        label = ""
        if math.isclose(interval, base.interval_s):
            label = "chosen"
        elif math.isclose(interval, base.optimal_interval_s):
            label = "Young"
        rows.append(
            {
                "interval_s": interval,
                "label": label,
                "lost_work_fraction": lost,
                "stall_budget_s": stall,
                "goodput_loss_fraction": lost + ckpt.overhead_budget,
                "waste_at_fixed_stall_fraction": first_order_waste(
                    interval, base.stall_budget_s, fail.restart_s, base.mtbf_s
                ),
                "sync_write_bytes_per_s": base.written_bytes / stall,
                "async_persist_min_bytes_per_s": base.written_bytes / interval,
                "async_persist_planned_bytes_per_s": base.written_bytes
                / interval
                * ckpt.async_headroom,
                "create_rate_per_s": base.files_per_checkpoint / window,
            }
        )
    return rows
