"""The projected verdict: never qualified, a pass only on the lower bound."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from ckptgate.projection.projected import (
    BY_METRIC,
    NEEDS_EVERY_NODE,
    overall,
    project,
    project_item,
    worst_shortfall,
)
from ckptgate.projection.usl import usl
from ckptgate.sizing import Requirement
from tests.projection.worked_example import worked_example

pytest.importorskip("scipy")

GB = 10**9


def requirement(value: float, unit: str = "B/s") -> Requirement:
    return Requirement(
        name="async_persist_planned_bytes_per_s",
        title="async persist (planned)",
        value=value,
        unit=unit,
        formula="5.67 TB / 600 s x 2.5 headroom",
        source="SPEC.md",
    )


def bent(counts=(1, 2, 4, 8, 16), lam=2 * GB, sigma=0.05, kappa=2e-3, wobble=0.01):
    return {
        n: [float(usl(n, lam, sigma, kappa)) * (1 + f * wobble) for f in (-1, 0, 1)] for n in counts
    }


def linear(counts=(1, 2, 4, 8, 16), lam=2 * GB):
    return {n: [lam * n * f for f in (0.99, 1.0, 1.01)] for n in counts}


def test_a_requirement_met_at_k_nodes_is_met_outright():
    item = project_item(BY_METRIC["write"], linear(), requirement(20 * GB), 2048)
    assert item.word == "met"
    assert item.reason.startswith("met outright at 16 nodes")


def test_a_curve_still_linear_never_passes_beyond_what_it_proves():
    # 16 nodes deliver 32 GB/s and still scale linearly: a naive line through them would
    # promise 4 TB/s at 2,048 nodes; the projection says the ceiling is unknown.
    item = project_item(BY_METRIC["write"], linear(), requirement(40 * GB), 2048)
    assert item.word == "undetermined"
    assert item.reason.startswith("still linear at 16 nodes")
    assert "the ceiling is above 31.7 GB/s and unknown" in item.reason


def test_pass_needs_the_lower_bound_at_n():
    # Measured on 1 to 8 nodes: 10.9 GB/s at 8; the curve peaks near 22 nodes at 14.8 GB/s.
    points = bent(counts=(1, 2, 4, 8))
    ok = project_item(BY_METRIC["write"], points, requirement(12 * GB), 16)
    assert ok.word == "projected-pass", ok.reason
    assert ok.lower is not None and ok.lower >= 12 * GB > ok.measured_worst
    low = project_item(BY_METRIC["write"], points, requirement(20 * GB), 16)
    assert low.word == "projected-fail", low.reason
    assert low.upper is not None and low.upper < 20 * GB


def test_a_band_that_straddles_the_requirement_is_undetermined():
    points = bent(wobble=0.05)
    item = project_item(BY_METRIC["write"], points, requirement(100 * GB), 32)
    estimate = item.estimate
    assert estimate is not None
    straddling = project_item(BY_METRIC["write"], points, requirement(estimate), 32)
    assert straddling.word == "undetermined"
    assert "the interval straddles" in straddling.reason


def test_too_few_node_counts_are_undetermined_and_say_so():
    item = project_item(BY_METRIC["write"], bent(counts=(1, 2)), requirement(40 * GB), 2048)
    assert item.word == "undetermined"
    assert item.reason.startswith("too few points: 2 client count(s)")


def test_the_line_is_never_qualified_and_names_what_needs_every_node():
    series = {"write": linear(), "read": linear()}
    reqs = {"write": requirement(40 * GB), "read": requirement(1 * GB)}
    projection = project(series, reqs, 2048, "1, 2, 4, 8, 16 of 2,048 nodes")
    assert projection.word == "undetermined"
    assert projection.line.startswith("PROJECTION undetermined (not a qualification")
    assert "qualified" not in projection.line.replace("not a qualification", "")
    assert NEEDS_EVERY_NODE in projection.line
    assert [i.word for i in projection.items] == ["undetermined", "met"]


def test_overall_word():
    met = project_item(BY_METRIC["write"], linear(), requirement(1), 4)

    def item(word):
        return dataclasses.replace(met, word=word)

    assert overall([item("met"), item("projected-pass")]) == "projected-pass"
    assert overall([item("met"), item("undetermined")]) == "undetermined"
    assert overall([item("projected-fail"), item("undetermined")]) == "projected-fail"
    assert overall([]) == "undetermined"


SCALING_DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


def test_the_docs_worked_example() -> None:
    """docs/scaling.md, "Worked example": 405b on 2,048 nodes from an 8-node sweep at 1 to 8
    ranks per node; the page quotes the line the code writes, and its figure is the one the
    script draws."""
    projection = worked_example().projection
    assert projection is not None
    write, read, create = projection.items
    assert projection.word == "projected-fail"
    assert write.word == "projected-fail"
    assert write.upper is not None and write.upper < 23.6 * GB
    assert write.ceiling is not None and write.ceiling["limiter"] == "storage"
    assert read.word == "undetermined" and read.ceiling is not None
    assert read.ceiling["limiter"] == "client"
    assert create.word == "met" and "measured 881 /s" in create.reason
    page = " ".join(SCALING_DOC.read_text(encoding="utf-8").split())
    quoted = [
        "the storage is saturated (storage-limited: the aggregate is flat from 16 to 64 streams "
        "across 2, 4, 8 nodes at 2, 4, 8 stream(s) per node while the clients had headroom "
        "(each of its 8 nodes delivered 2.56 GB/s where 1 node(s) delivered 14.8 GB/s each)): "
        "projected 20.5 GB/s at 2,048 nodes, 95 % prediction interval 19.8 GB/s to 21.2 GB/s, "
        "its measured level at 64 streams (the plateau less the decline the points can show, "
        "up to 1.7% across it); it assumes no decline (nor rise) beyond 64 streams (8 nodes x "
        "8 per node), the largest concurrency measured",
        "even its upper bound falls short of required 23.6 GB/s",
        "still linear at 8 nodes (fitted efficiency 1.00 >= 0.8): the ceiling is above "
        "39.2 GB/s and unknown; required 47.3 GB/s",
        "what limited the trial: client-limited: at 8 nodes 8 streams per node gave no more "
        "than 4 (40.0 GB/s against 40.0 GB/s) while more nodes still raised the aggregate: "
        "each node's own ceiling, 5.00 GB/s per node; the storage was not shown its ceiling",
        "met outright at 8 nodes: measured 881 /s",
    ]
    for words in quoted:
        assert words in projection.line and words in page, words
    assert "(scaling-example.svg)" in page
    assert (SCALING_DOC.parent / "scaling-example.svg").is_file()


def test_a_pass_holds_for_the_worst_repeat_not_the_average() -> None:
    # Seven good repeats and one 10 % short at every count: a requirement just below the
    # mean's lower bound at 16 nodes is not a pass; the worst repeat's bound decides.
    factors = (1.0,) * 7 + (0.9,)
    points = {n: [float(usl(n, 2 * GB, 0.05, 2e-3)) * f for f in factors] for n in (1, 2, 4, 8)}
    shortfall = worst_shortfall(points)
    assert math.isclose(shortfall, 1 - 0.9 / (7.9 / 8))
    probe = project_item(BY_METRIC["write"], points, requirement(100 * GB), 16)
    assert probe.lower is not None
    mean_lower = probe.lower / (1 - shortfall)
    item = project_item(BY_METRIC["write"], points, requirement(mean_lower * 0.99), 16)
    assert item.word == "undetermined", item.reason
    assert "but not less the worst repeat's shortfall (8.9%)" in item.reason
    passed = project_item(BY_METRIC["write"], points, requirement(probe.lower * 0.99), 16)
    assert passed.word == "projected-pass", passed.reason


@pytest.mark.parametrize("sigma", [0.0, 0.01, 0.02], ids=lambda s: f"sigma={s}")
def test_a_still_linear_noisy_curve_is_never_a_pass_beyond_its_data(sigma) -> None:
    # 1 to 8 nodes of a curve that has not bent yet (efficiency at 8 nodes >= 0.88), 3 %
    # noise per repeat, seeded: a straight line promises 1.5 times the largest point at 64
    # nodes; no trial may call that a pass (the curve may bend anywhere past 8).
    rng = np.random.default_rng(11)
    for trial in range(10):
        points = {
            n: [float(usl(n, 2 * GB, sigma, 0.0)) * (1 + rng.normal(0, 0.03)) for _ in range(3)]
            for n in (1, 2, 4, 8)
        }
        need = requirement(1.5 * max(points[8]))
        item = project_item(BY_METRIC["write"], points, need, 64, seed=trial)
        assert item.word != "projected-pass", item.reason
        assert item.word == "undetermined", item.reason


def test_three_node_counts_never_project() -> None:
    # Three counts fit three parameters exactly, whatever the curve: no band, no pass.
    item = project_item(BY_METRIC["write"], bent(counts=(1, 2, 4)), requirement(50 * GB), 8)
    assert item.word == "undetermined"
    assert item.reason.startswith("too few points: 3 client count(s) measured (1, 2, 4)")
    assert item.lower is None


def test_a_storage_saturated_from_one_node_projects_a_fail_not_a_poor_fit() -> None:
    # A plateau from the first node (1 % noise): R² is low because nothing varies, yet the
    # curve misses no point by more than the noise; the full count cannot get more.
    rng = np.random.default_rng(7)
    points = {n: [5.6e6 * (1 + rng.normal(0, 0.01)) for _ in range(3)] for n in (1, 2, 4, 8)}
    item = project_item(BY_METRIC["write"], points, requirement(8.4e6), 64)
    assert item.word == "projected-fail", item.reason
    assert item.upper is not None and item.upper < 8.4e6


def plateau_grid(cap=14 * GB, per_stream=1 * GB, wobble=0.02):
    """Nodes 1 to 8 at 1 to 8 streams each: each stream worth ``per_stream`` until the
    storage's ``cap``, three repeats ±``wobble``."""
    return {
        n: {
            r: [min(n * r * per_stream, cap) * (1 + f * wobble) for f in (-1, 0, 1)]
            for r in (1, 2, 4, 8)
        }
        for n in (1, 2, 4, 8)
    }


def test_a_saturated_storage_projects_from_its_measured_plateau_and_says_what_it_assumes():
    # 14 GB/s from 16 streams on: flat across 2, 4 and 8 nodes and 2 to 8 streams per node.
    # A free κ left the band at 2,048 nodes from near nothing to above 15 GB/s (undetermined);
    # the measured plateau, less what the points can show of a decline, bounds it: the
    # storage cannot give 15 GB/s to any number of nodes, and says what that assumes.
    grid = plateau_grid()
    points = {n: grid[n][8] for n in grid}
    item = project_item(
        BY_METRIC["write"], points, requirement(15 * GB), 2048, grid=grid, ranks_per_node=8
    )
    assert item.word == "projected-fail", item.reason
    assert item.lower is not None and 0.9 * 14 * GB <= item.lower < 14 * GB
    assert item.upper is not None and 14 * GB < item.upper < 15 * GB
    assert item.reason.startswith("the storage is saturated (storage-limited: the aggregate")
    assert "while the clients had headroom" in item.reason
    assert "assumes no decline (nor rise) beyond 64 streams (8 nodes x 8 per node)" in item.reason
    assert item.ceiling is not None and item.ceiling["limiter"] == "storage"
    assert "qualified" not in item.reason


def test_a_client_limited_trial_says_the_storage_was_not_shown_its_ceiling():
    # Each node's client caps at 4 GB/s (8 streams give no more than 4): the aggregate grows
    # with nodes and the storage's ceiling is not in the data.
    grid = {
        n: {r: [n * min(r, 4) * GB * f for f in (0.99, 1.0, 1.01)] for r in (1, 2, 4, 8)}
        for n in (1, 2, 4, 8)
    }
    points = {n: grid[n][8] for n in grid}
    item = project_item(
        BY_METRIC["write"], points, requirement(100 * GB), 2048, grid=grid, ranks_per_node=8
    )
    assert item.word == "undetermined"
    assert "what limited the trial: client-limited: at 8 nodes 8 streams per node" in item.reason
    assert item.reason.endswith("the storage was not shown its ceiling")


def test_a_projection_from_a_plateau_is_its_own_line() -> None:
    grid = plateau_grid()
    projection = project(
        {"write": {n: grid[n][8] for n in grid}},
        {"write": requirement(15 * GB)},
        2048,
        "1, 2, 4, 8 of 2,048 nodes",
        grids={"write": grid},
        ranks_per_node=8,
    )
    assert projection.word == "projected-fail"
    assert projection.line.startswith("PROJECTION projected-fail (not a qualification")
    assert "assumes no decline (nor rise) beyond 64 streams" in projection.line
