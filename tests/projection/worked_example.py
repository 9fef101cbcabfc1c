"""The README's worked example ("Scaling sweep and projection"): 405b on 2,048 nodes from a
16-node sweep, synthetic numbers of the shape such a trial gives. The test
(``test_projected.py``) checks the README's words against it; run as a script it draws the
README's figure:

    python -m tests.projection.worked_example docs/scaling-example.svg
"""

from __future__ import annotations

import sys
from pathlib import Path

from ckptgate.checks.scaling import SweepPlan, SweepPoint, SweepResult
from ckptgate.projection.projected import Projection, project
from ckptgate.projection.usl import usl
from ckptgate.sizing import derive, load_profile

NODES = (1, 2, 4, 8, 16)
CLUSTER_NODES = 2048
REPEATS = (0.98, 1.0, 1.02)
CURVES = {"write": (2.0e9, 0.05, 0.0), "read": (2.5e9, 0.0, 0.0), "create": (400.0, 0.3, 2e-3)}
"""λ, σ, κ of each metric: writes with a ceiling near 40 GB/s, reads still linear, creates
flattening near 1,000 /s."""


def series() -> dict[str, dict[int, list[float]]]:
    return {
        metric: {n: [float(usl(n, *params)) * f for f in REPEATS] for n in NODES}
        for metric, params in CURVES.items()
    }


def worked_example() -> SweepResult:
    """The sweep's points at 8 ranks per node and the projection to 2,048 nodes."""
    reqs = derive(load_profile("405b")).requirements
    plan = SweepPlan(NODES, (8,), len(REPEATS), 8)
    result = SweepResult(plan, cluster_nodes=CLUSTER_NODES)
    values = series()
    for n in NODES:
        for i in range(len(REPEATS)):
            write, read, create = (values[m][n][i] for m in ("write", "read", "create"))
            result.points.append(
                SweepPoint(n, 8, i + 1, n * 8 * 10**9, write, n * 8 * 10**9, read, n * 8,
                           create, n * 8 * 10**9)
            )  # fmt: skip
    requirements = {
        "write": reqs["async_persist_planned_bytes_per_s"],
        "read": reqs["restart_read_bytes_per_s"],
        "create": reqs["create_rate_per_s"],
    }
    projection: Projection = project(values, requirements, CLUSTER_NODES, plan.words(CLUSTER_NODES))
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
