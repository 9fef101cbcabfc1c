"""The scaling sweep's projection in the saved report's outputs: the table line below the
verdict, the HTML page (its tables and its figure), the JUnit properties."""

from __future__ import annotations

import pytest

from ckptgate.checks.scaling import SweepPlan, SweepPoint, SweepResult
from ckptgate.projection.projected import project
from ckptgate.projection.usl import usl
from ckptgate.report import figures
from ckptgate.report.gate import GateReport
from ckptgate.report.html import render_report
from ckptgate.report.junit import projection_properties
from ckptgate.report.schema import load_saved
from ckptgate.sizing import Requirement
from tests.report.saved_runs import saved_run

pytest.importorskip("scipy")

GB = 10**9


def sweep_section() -> dict:
    """Four node counts of a bent curve (3 repeats each) projected to 64 nodes."""
    plan = SweepPlan((1, 2, 4, 8), (4,), 3, 4)
    result = SweepResult(plan, cluster_nodes=64)
    for n in plan.node_counts:
        for repeat, wobble in enumerate((0.99, 1.0, 1.01), start=1):
            rate = float(usl(n, 2 * GB, 0.05, 2e-3)) * wobble
            result.points.append(
                SweepPoint(n, 4, repeat, n * GB, rate, n * GB, rate, 512 * n, 1e4 * n * wobble,
                           2 * n * GB)
            )  # fmt: skip
    need = Requirement("async_persist_planned_bytes_per_s", "async persist", 40 * GB, "B/s",
                       "5.67 TB / 600 s x 2.5 headroom", "SPEC.md")  # fmt: skip
    result.projection = project(
        {"write": result.series()["write"]}, {"write": need}, 64, plan.words(64)
    )
    return result.section()


def test_the_projection_is_its_own_line_below_the_verdict() -> None:
    report = GateReport()
    report.section("scaling", sweep_section())
    lines = report.table()
    assert lines[0].startswith(("VERDICT", "ERROR"))
    assert lines[1].startswith("PROJECTION projected-fail (not a qualification")
    assert "PROJECTION" not in report.verdict().line
    assert GateReport().table()[1] == ""  # no sweep, no line


def test_the_html_page_shows_the_points_the_fit_and_the_requirement() -> None:
    data = {**saved_run(), "scaling": sweep_section()}
    page = render_report(load_saved(data, "run.json"))
    assert "<h2>Scaling sweep and projection</h2>" in page
    assert page.count("PROJECTION projected-fail (not a qualification") == 2  # top and section
    assert "projected-fail" in page and "required at N" in page
    if figures.available():
        assert 'data-figure="scaling"' in page


def test_junit_properties_carry_the_projection() -> None:
    pairs = dict(projection_properties(sweep_section()["projection"]))
    assert pairs["projection.word"] == "projected-fail"
    assert pairs["projection.write.word"] == "projected-fail"
    assert float(pairs["projection.write.upper"]) < 40 * GB
