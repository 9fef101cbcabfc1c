"""The ranks-per-node curve of a scaling sweep (``--sweep-ranks``), described, never projected.

At a fixed node count, the aggregate throughput against the ranks each node runs says how one
node's client (its filesystem client, page cache, NIC, the storage's per-client share) copes
with more writers: the USL fits it as well as it fits nodes (Gunther 2007, ch. 4: σ is what
the ranks of a node serialize on, κ their crosstalk), and its peak r* = sqrt((1 - σ) / κ)
(eq. 4.33) is the most ranks a node can use before more of them only contend.

Nothing is projected from it. The profile's ranks per node (its GPUs per node) is a fixed
number the sweep always measures (``plan_sweep`` adds the run's own), so there is no count
beyond the data to reach; and extrapolating past a node's rank processes would describe a
node that does not exist. What it reports, at each node count: every ranks-per-node point's
mean, its efficiency against a straight line from the fewest ranks, the best ranks per node
measured, and, with at least ``usl.MIN_CLIENT_COUNTS`` rank counts (three fit the three
parameters exactly, so a fit of three says nothing), the USL's σ, κ, r* and R² over the
measured range. Its points do bound the projection, through another door: read with the
node counts as one grid of streams, they show whether the storage is saturated and what
limited the trial (``ceiling``). Pure: no I/O; scipy only through ``usl``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.projection import usl

MEANING = (
    "the ranks per node at a fixed node count: one node's client under more writers; "
    "described over the measured range, never projected (the profile's ranks per node is "
    "measured itself)"
)


@dataclass(frozen=True)
class RanksCurve:
    """One metric's throughput against ranks per node at one node count."""

    metric: str
    nodes: int
    ranks_per_node: tuple[int, ...]
    means: tuple[float, ...]
    """The mean of each ranks-per-node point's repeats, in the metric's unit."""
    efficiency: tuple[float, ...]
    """X(r) / (r X(r0) / r0), r0 the fewest ranks measured: 1 on a straight line."""
    best_ranks_per_node: int
    """The measured ranks per node with the highest mean."""
    fit: usl.UslFit | None = None
    """The USL over the measured ranks (``usl.MIN_CLIENT_COUNTS`` rank counts or more)."""
    note: str = ""
    """Why there is no fit, where there is none."""

    def to_json(self) -> dict[str, Any]:
        fit = self.fit
        return {
            "metric": self.metric,
            "nodes": self.nodes,
            "ranks_per_node": list(self.ranks_per_node),
            "means": list(self.means),
            "efficiency": list(self.efficiency),
            "best_ranks_per_node": self.best_ranks_per_node,
            "fit": None
            if fit is None
            else {
                "lambda": fit.params.lam,
                "sigma": fit.params.sigma,
                "kappa": fit.params.kappa,
                "saturation_ranks_per_node": _finite(fit.params.saturation_clients),
                "r_squared": fit.r_squared,
            },
            "note": self.note,
        }


def _finite(value: float) -> float | None:
    """JSON has no infinity: a curve without a peak (κ = 0) has None."""
    return value if math.isfinite(value) else None


def ranks_curve(metric: str, nodes: int, points: Mapping[int, Sequence[float]]) -> RanksCurve:
    """The curve of ``points`` (ranks per node -> repeats) at ``nodes`` nodes."""
    ranks = tuple(sorted(r for r, v in points.items() if v))
    means = tuple(sum(points[r]) / len(points[r]) for r in ranks)
    per_rank = means[0] / ranks[0]
    efficiency = tuple(m / (r * per_rank) for r, m in zip(ranks, means, strict=True))
    best = ranks[max(range(len(ranks)), key=lambda i: means[i])]
    base: dict[str, Any] = {
        "metric": metric,
        "nodes": nodes,
        "ranks_per_node": ranks,
        "means": means,
        "efficiency": efficiency,
        "best_ranks_per_node": best,
    }
    if len(ranks) < usl.MIN_CLIENT_COUNTS:
        return RanksCurve(
            **base,
            note=f"{len(ranks)} ranks-per-node count(s): a USL fit needs at least "
            f"{usl.MIN_CLIENT_COUNTS} (three parameters fit three counts exactly)",
        )
    if not usl.available():
        return RanksCurve(**base, note=usl.INSTALL_HINT)
    return RanksCurve(**base, fit=usl.fit_usl({r: points[r] for r in ranks}))


def ranks_curves(
    series: Mapping[int, Mapping[str, Mapping[int, Sequence[float]]]],
) -> tuple[RanksCurve, ...]:
    """Every metric's curve at every node count that swept two or more ranks per node
    (``series``: node count -> metric -> ranks per node -> repeats)."""
    return tuple(
        ranks_curve(metric, nodes, points)
        for nodes, by_metric in sorted(series.items())
        for metric, points in by_metric.items()
        if len([r for r, v in points.items() if v]) >= 2
    )
