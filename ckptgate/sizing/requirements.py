"""SPEC.md's numbers for a profile: ``derive`` evaluates every definition at the profile's
checkpoint interval into a ``Sizing``, and ``sweep`` evaluates the same definitions at other
intervals: no formula is written twice.

The definitions are in sizing.spec_numbers (one ``@define`` each, registered on import), the
machinery in sizing.definition, the formulas in sizing.formulas; their public names are
importable from here too, as they were when this module held them all.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ckptgate.sizing import spec_numbers  # registers every definition, in table order
from ckptgate.sizing.definition import (
    DEFINITIONS,
    Basis,
    Definition,
    Requirement,
    define,
    format_value,
)
from ckptgate.sizing.distribution import ShardDistribution
from ckptgate.sizing.formulas import (
    create_window_s,
    daly_interval_s,
    first_order_waste,
    lost_work_fraction,
    mtbf_s,
    restart_loss_fraction,
    stall_budget_s,
    young_interval_s,
)
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.shards import shard_distribution

__all__ = [
    "DEFINITIONS",
    "SWEEP_COLUMNS",
    "Basis",
    "Definition",
    "Requirement",
    "Sizing",
    "create_window_s",
    "daly_interval_s",
    "define",
    "derive",
    "first_order_waste",
    "format_value",
    "lost_work_fraction",
    "mtbf_s",
    "restart_loss_fraction",
    "spec_numbers",
    "stall_budget_s",
    "sweep",
    "young_interval_s",
]


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
    dcp_metadata_bytes: int
    dcp_framing_bytes: int
    save_bytes: int
    save_bytes_on_disk: int
    shard_policy: str
    mtbf_s: float
    interval_s: float
    restart_s: float
    lost_work_fraction: float
    restart_cost_s: float
    restart_loss_fraction: float
    optimal_interval_s: float
    daly_interval_s: float
    stall_budget_s: float
    goodput_loss_fraction: float
    goodput_budget: float | None
    sync_write_bytes_per_s: float
    sync_write_shards_bytes_per_s_per_node: float
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


def derive(profile: Profile) -> Sizing:
    """The sizing for a profile: every definition evaluated at the profile's interval."""
    dist = shard_distribution(profile)
    basis = Basis(profile, dist, profile.checkpoint.interval_s)
    requirements = {name: basis.requirement(name) for name, d in DEFINITIONS.items() if d.in_table}
    values: dict[str, Any] = {name: r.value for name, r in requirements.items()}  # int or float
    return Sizing(
        profile_name=profile.name,
        description=profile.description,
        mode=profile.checkpoint.mode,
        bytes_per_parameter=profile.model.bytes_per_parameter,
        gpus=profile.cluster.gpus,
        nodes=profile.nodes,
        largest_shard_rank=dist.largest_rank,
        shard_policy=dist.policy_note,
        restart_s=profile.failures.restart_s,
        goodput_budget=profile.checkpoint.goodput_budget,
        restart_read_s=profile.restart.read_s,
        **values,
        requirements=requirements,
        distribution=dist,
    )


SWEEP_COLUMNS = (
    "lost_work_fraction",
    "stall_budget_s",
    "goodput_loss_fraction",
    "waste_at_fixed_stall_fraction",
    "sync_write_bytes_per_s",
    "async_persist_min_bytes_per_s",
    "async_persist_planned_bytes_per_s",
    "create_rate_per_s",
)


def sweep(profile: Profile, intervals_s: list[float] | None = None) -> list[dict[str, Any]]:
    """The definitions in SWEEP_COLUMNS evaluated over checkpoint intervals.

    The stall budget scales with the interval (the overhead budget is a fraction), so
    ``goodput_loss_fraction`` grows with T; ``waste_at_fixed_stall_fraction`` holds the stall
    at the chosen interval's budget instead, and is the first-order waste that Young's
    interval minimizes.

    Default intervals: 0.25x, 0.5x, 1x, 2x, 4x the profile's interval, plus Young's and Daly's
    optima for the stall budget at the chosen interval. Each row has ``label`` "chosen",
    "Young", "Daly" or ""."""
    dist = shard_distribution(profile)
    chosen = Basis(profile, dist, profile.checkpoint.interval_s)
    if intervals_s is None:
        intervals_s = [chosen["interval_s"] * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)]
        intervals_s += [chosen["optimal_interval_s"], chosen["daly_interval_s"]]
    rows = []
    for interval in sorted(set(intervals_s)):
        basis = Basis(profile, dist, interval, chosen)
        label = ""
        if math.isclose(interval, chosen["interval_s"]):
            label = "chosen"
        elif math.isclose(interval, chosen["optimal_interval_s"]):
            label = "Young"
        elif math.isclose(interval, chosen["daly_interval_s"]):
            label = "Daly"
        rows.append(
            {"interval_s": interval, "label": label, **{n: basis[n] for n in SWEEP_COLUMNS}}
        )
    return rows
