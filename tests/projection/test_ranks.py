"""The ranks-per-node curve: fitted over the measured range where four or more rank counts
allow it, described and never projected."""

from __future__ import annotations

import math

import pytest

from ckptgate.projection.ranks import ranks_curve, ranks_curves
from ckptgate.projection.usl import usl

pytest.importorskip("scipy")


def node_client(ranks, lam=1e9, sigma=0.1, kappa=0.02, wobble=0.01):
    """One node's client: 3 repeats at each ranks per node on a known USL curve."""
    return {
        r: [float(usl(r, lam, sigma, kappa)) * (1 + f * wobble) for f in (-1, 0, 1)] for r in ranks
    }


def test_four_rank_counts_recover_where_a_nodes_client_peaks():
    curve = ranks_curve("write", 4, node_client((1, 2, 4, 8, 16)))
    assert curve.fit is not None
    assert math.isclose(curve.fit.params.sigma, 0.1, rel_tol=1e-2)
    assert math.isclose(curve.fit.params.kappa, 0.02, rel_tol=1e-2)
    peak = curve.to_json()["fit"]["saturation_ranks_per_node"]
    assert math.isclose(peak, math.sqrt(0.9 / 0.02), rel_tol=1e-2)  # 6.7 ranks per node
    assert curve.best_ranks_per_node == 8  # the measured rank count nearest the peak
    assert curve.efficiency[0] == 1.0
    assert curve.efficiency == tuple(sorted(curve.efficiency, reverse=True))


def test_three_rank_counts_are_described_without_a_fit():
    curve = ranks_curve("read", 2, node_client((1, 2, 8)))
    assert curve.fit is None
    assert curve.note.startswith("3 ranks-per-node count(s): a USL fit needs at least 4")
    assert curve.to_json()["fit"] is None
    assert len(curve.means) == 3 and curve.best_ranks_per_node in (1, 2, 8)


def test_a_curve_without_a_peak_peaks_nowhere_near_its_ranks():
    curve = ranks_curve("write", 1, node_client((1, 2, 4, 8), sigma=0.2, kappa=0.0))
    assert curve.fit is not None
    assert math.isclose(curve.fit.params.sigma, 0.2, rel_tol=1e-2)
    peak = curve.to_json()["fit"]["saturation_ranks_per_node"]
    assert peak is None or peak > 1000  # κ = 0: no peak (None in JSON, which has no inf)


def test_only_node_counts_that_swept_two_ranks_per_node_have_a_curve():
    one = {"write": {8: [1.0e9]}}
    two = {"write": node_client((1, 8)), "create": node_client((1, 8), lam=500.0)}
    curves = ranks_curves({1: one, 4: two})
    assert [(c.nodes, c.metric) for c in curves] == [(4, "write"), (4, "create")]
