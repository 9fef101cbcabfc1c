"""A run's nodes on one grid: the aggregate is the sum of the nodes' rates, the band their
least and greatest, a node counts in the band only inside its own samples, and the rates
times the intervals give back the bytes the samples saw."""

from __future__ import annotations

import itertools
import math

from ckptgate.report.schema import SeriesRun
from ckptgate.report.series import MAX_POINTS, by_run


def _node(node: int, t_s: list[float], done: list[int], nth: int = 0) -> SeriesRun:
    """A node's series as the JSON holds it: sample times and the rate between each two."""
    samples = list(zip(t_s, done, strict=True))
    rates = [(b1 - b0) / (t1 - t0) for (t0, b0), (t1, b1) in itertools.pairwise(samples)]
    return SeriesRun("write burst", nth, node, 0.5, tuple(t_s), tuple(rates))


def test_two_nodes_sum_to_the_aggregate_and_bound_the_band() -> None:
    (run,) = by_run([_node(0, [0.0, 1.0, 2.0], [0, 100, 300]),
                     _node(1, [0.0, 1.0, 2.0], [0, 300, 400])])  # fmt: skip
    assert run.nodes == 2 and run.label == "write burst #0"
    assert list(run.edges_s) == [0.0, 1.0, 2.0]
    assert list(run.total_bytes_per_s) == [400.0, 300.0]
    assert list(run.slowest_node_bytes_per_s) == [100.0, 100.0]
    assert list(run.fastest_node_bytes_per_s) == [300.0, 200.0]
    assert list(run.mean_node_bytes_per_s) == [200.0, 150.0]


def test_a_node_whose_samples_stop_early_leaves_the_band_not_the_aggregate() -> None:
    (run,) = by_run([_node(0, [0.0, 1.0, 2.0], [0, 100, 200]),
                     _node(1, [0.0, 1.0], [0, 100])])  # fmt: skip
    assert list(run.slowest_node_bytes_per_s) == [100.0, 100.0]
    assert list(run.total_bytes_per_s) == [200.0, 100.0]


def test_runs_stay_apart_and_keep_their_order() -> None:
    runs = by_run([_node(0, [0.0, 1.0], [0, 10], nth=1), _node(0, [0.0, 1.0], [0, 20], nth=0),
                   _node(1, [0.0, 1.0], [0, 30], nth=1), _node(0, [0.0], [0])])  # fmt: skip
    assert [(r.nth, r.nodes, list(r.total_bytes_per_s)) for r in runs] == [
        (1, 2, [40.0]),
        (0, 1, [20.0]),
    ]


def test_a_long_run_is_thinned_and_keeps_its_bytes() -> None:
    samples = 5 * MAX_POINTS
    t_s = [0.5 * i for i in range(samples)]
    done = [i * i for i in range(samples)]
    (run,) = by_run([_node(0, t_s, done), _node(1, t_s, done)])
    assert len(run.edges_s) == MAX_POINTS
    moved = sum(run.total_bytes_per_s * (run.edges_s[1:] - run.edges_s[:-1]))
    assert math.isclose(moved, 2 * done[-1], rel_tol=1e-9)
