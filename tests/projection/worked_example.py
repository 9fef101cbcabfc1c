"""docs/scaling.md's worked example ("Scaling sweep and projection"): 405b on 2,048 nodes from an
8-node sweep at 1, 2, 4 and 8 ranks per node, synthetic numbers of the shape such a trial
gives. The test
(``test_projected.py``) checks the document's words against it; run as a script it draws the
document's figure:

    python -m tests.projection.worked_example docs/scaling-example.svg
"""

from __future__ import annotations

import sys
from pathlib import Path

from ckptgate.campaigns.sweep import SweepPlan, SweepPoint, SweepResult
from ckptgate.projection.projected import Projection, project
from ckptgate.projection.usl import usl
from ckptgate.sizing import derive, load_profile

NODES = (1, 2, 4, 8)
RANKS = (1, 2, 4, 8)
RUN_RANKS = 8
CLUSTER_NODES = 2048
REPEATS = (0.98, 1.0, 1.02)


def write(nodes: int, ranks: int) -> float:
    """A storage that takes 2.5 GB/s a stream (σ 0.05) up to its ceiling of 20.5 GB/s."""
    return min(float(usl(nodes * ranks, 2.5e9, 0.05, 0.0)), 20.5e9)


def read(nodes: int, ranks: int) -> float:
    """Each node's client reads 2.5 GB/s a stream up to its NIC's 5 GB/s; the storage more."""
    return nodes * min(ranks * 2.5e9, 5.0e9)


def create(nodes: int, ranks: int) -> float:
    """Creates flattening near 1,000 /s (USL over the streams)."""
    return float(usl(nodes * ranks, 50.0, 0.04, 1e-5))


CURVES = {"write": write, "read": read, "create": create}
"""Each metric's aggregate at n nodes of r ranks: writes on a storage that plateaus inside
the trial, reads limited by the clients' NICs, creates that meet the requirement outright."""


def grids() -> dict[str, dict[int, dict[int, list[float]]]]:
    """metric -> nodes -> ranks per node -> repeats."""
    return {
        metric: {n: {r: [curve(n, r) * f for f in REPEATS] for r in RANKS} for n in NODES}
        for metric, curve in CURVES.items()
    }


def series() -> dict[str, dict[int, list[float]]]:
    """metric -> nodes -> repeats at the run's ranks per node."""
    return {m: {n: g[n][RUN_RANKS] for n in g} for m, g in grids().items()}


def worked_example() -> SweepResult:
    """The sweep's points and the projection to 2,048 nodes."""
    reqs = derive(load_profile("405b")).requirements
    plan = SweepPlan(NODES, RANKS, len(REPEATS), RUN_RANKS)
    result = SweepResult(plan, cluster_nodes=CLUSTER_NODES)
    values = grids()
    for n in NODES:
        for r in RANKS:
            for i in range(len(REPEATS)):
                w, rd, c = (values[m][n][r][i] for m in ("write", "read", "create"))
                size = n * r * 10**9
                result.points.append(SweepPoint(n, r, i + 1, size, w, size, rd, n * r, c, size))
    requirements = {
        "write": reqs["async_persist_planned_bytes_per_s"],
        "read": reqs["restart_read_bytes_per_s"],
        "create": reqs["create_rate_per_s"],
    }
    projection: Projection = project(
        result.series(),
        requirements,
        CLUSTER_NODES,
        plan.words(CLUSTER_NODES),
        grids=result.grids(),
        ranks_per_node=RUN_RANKS,
    )
    result.projection = projection
    return result


def main(argv: list[str]) -> int:
    from ckptgate.report import figures
    from ckptgate.report.schema import scaling_section

    (path,) = argv
    svg = figures.scaling(scaling_section(worked_example().section(), "the worked example"))
    assert svg is not None
    Path(path).write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
