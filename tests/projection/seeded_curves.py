"""Seeded synthetic sweeps whose truth is known, for the projection's safety and usefulness
(issue 36): nodes 1, 2, 4, 8, each at 1, 2, 4, 8 streams per node, 3 repeats with 4 % noise.

Each trial's aggregate at n nodes of r streams is min(S(n r), n C(r)): the storage's curve S
over the concurrency it sees (nodes x streams) and each node's own client C(r) (streams on
one node, capped by its NIC). The families:

- ``usl``: S a USL (Gunther 2007) with σ in [0.03, 0.3] and κ zero (a plateau it approaches,
  Amdahl's) or in [1e-5, 3e-3] per stream (a peak and a fall);
- ``plateau``: a hard ceiling the storage reaches inside the range (at 2 to 16 streams);
- ``rising``: a curve still rising at the largest point (σ at most 0.02, κ zero).

Run as a script, it prints the unsafe rate (a band's lower bound above the truth) and the
lower bound as a fraction of the plateau at 4x, 32x and 256x the largest node count:

    python -m tests.projection.seeded_curves
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.projection.usl import BOOTSTRAP_RESAMPLES, usl

NODES = (1, 2, 4, 8)
RANKS = (1, 2, 4, 8)
RUN_RANKS = 8
REPEATS = 3
NOISE = 0.04
MULTIPLES = (4, 32, 256)
"""The full counts, as multiples of the largest node count measured (8): 32, 256, 2,048."""
FAMILIES = ("usl", "plateau", "rising")
STREAM = 1e9
"""One stream's throughput alone (bytes/s): 1 GB/s."""


@dataclass(frozen=True)
class Truth:
    """A trial's storage and clients; ``aggregate(n, r)`` is what n nodes of r streams get."""

    family: str
    storage: Callable[[float], float]
    nic_per_node: float
    plateau: float | None = None
    """The storage's ceiling where it has a flat one (the ``plateau`` family)."""

    def client(self, ranks: float) -> float:
        return min(float(usl(ranks, STREAM, 0.02, 0.0)), self.nic_per_node)

    def aggregate(self, nodes: float, ranks: float) -> float:
        return min(self.storage(nodes * ranks), nodes * self.client(ranks))


def truth(family: str, rng: np.random.Generator) -> Truth:
    """One trial of ``family`` drawn from ``rng``."""
    nic = STREAM * rng.uniform(4.0, 16.0)
    if family == "usl":
        sigma = rng.uniform(0.03, 0.3)
        kappa = (
            0.0 if rng.random() < 0.5 else float(np.exp(rng.uniform(np.log(1e-5), np.log(3e-3))))
        )
        return Truth(family, lambda c: float(usl(c, STREAM, sigma, kappa)), nic)
    if family == "plateau":
        cap = STREAM * rng.uniform(2.0, 16.0) * 0.95
        sigma = rng.uniform(0.0, 0.05)
        return Truth(family, lambda c: min(float(usl(c, STREAM, sigma, 0.0)), cap), nic * 4, cap)
    if family == "rising":
        sigma = rng.uniform(0.0, 0.02)
        return Truth(family, lambda c: float(usl(c, STREAM, sigma, 0.0)), nic * 8)
    raise ValueError(family)


def sweep(t: Truth, rng: np.random.Generator) -> dict[int, dict[int, list[float]]]:
    """node count -> streams per node -> repeats, each the truth times 1 + N(0, ``NOISE``)."""
    return {
        n: {
            r: [t.aggregate(n, r) * (1.0 + rng.normal(0.0, NOISE)) for _ in range(REPEATS)]
            for r in RANKS
        }
        for n in NODES
    }


@dataclass
class Tally:
    """Per full count: trials whose band had a lower bound, those above the truth, and the
    lower bound as a fraction of a plateau (``plateau`` family only)."""

    bounded: dict[int, int]
    unsafe: dict[int, int]
    fractions: dict[int, list[float]]

    def unsafe_rate(self, multiple: int) -> float:
        return self.unsafe[multiple] / max(self.bounded[multiple], 1)

    def median_fraction(self, multiple: int) -> float:
        values = self.fractions[multiple]
        return statistics.median(values) if values else 0.0


def measure(
    lower_bound: Callable[[dict[int, dict[int, list[float]]], int, int], float | None],
    families: tuple[str, ...] = FAMILIES,
    trials: int = 40,
    seed: int = 36,
) -> Tally:
    """``trials`` of each family; ``lower_bound(grid, cluster_nodes, seed)`` is the band's
    lower bound at the full count (None: no band)."""
    tally = Tally({m: 0 for m in MULTIPLES}, {m: 0 for m in MULTIPLES}, {m: [] for m in MULTIPLES})
    rng = np.random.default_rng(seed)
    for family in families:
        for trial in range(trials):
            t = truth(family, rng)
            grid = sweep(t, rng)
            for multiple in MULTIPLES:
                cluster_nodes = multiple * NODES[-1]
                lower = lower_bound(grid, cluster_nodes, trial)
                if lower is None:
                    continue
                tally.bounded[multiple] += 1
                tally.unsafe[multiple] += int(lower > t.aggregate(cluster_nodes, RUN_RANKS))
                if t.plateau is not None:
                    tally.fractions[multiple].append(lower / t.plateau)
    return tally


def projected_lower(
    use_grid: bool, resamples: int = BOOTSTRAP_RESAMPLES
) -> Callable[[dict[int, dict[int, list[float]]], int, int], float | None]:
    """The projection's lower bound (``project_item``) from the run's streams alone, or from
    the whole grid."""
    from ckptgate.projection.projected import BY_METRIC, project_item
    from ckptgate.sizing import Requirement

    need = Requirement("write", "write", 1e30, "B/s", "a requirement nothing meets", "test")

    def lower(
        grid: dict[int, dict[int, list[float]]], cluster_nodes: int, seed: int
    ) -> float | None:
        points = {n: grid[n][RUN_RANKS] for n in grid}
        extra: dict[str, Any] = {"grid": grid, "ranks_per_node": RUN_RANKS} if use_grid else {}
        if resamples != BOOTSTRAP_RESAMPLES:
            extra["resamples"] = resamples
        item = project_item(BY_METRIC["write"], points, need, cluster_nodes, seed=seed, **extra)
        return item.lower

    return lower


def main(argv: list[str]) -> int:
    use_grid = "--runs-only" not in argv
    for family in FAMILIES:
        tally = measure(projected_lower(use_grid), families=(family,))
        cells = ", ".join(
            f"{m}x: unsafe {tally.unsafe[m]}/{tally.bounded[m]}"
            + (f", lower {tally.median_fraction(m):.0%} of plateau" if tally.fractions[m] else "")
            for m in MULTIPLES
        )
        print(f"{family}: {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
