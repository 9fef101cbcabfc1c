"""The scaling sweep's projection in the saved report's outputs: the table line below the
verdict, the HTML page (its tables and its figure), the JUnit properties."""

from __future__ import annotations

import math

import pytest

from ckptgate.campaigns.sweep import SweepPlan, SweepPoint, SweepResult
from ckptgate.checks.table import checklist
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
    report = GateReport(checklist=checklist())
    report.section("scaling", sweep_section())
    lines = report.table()
    assert lines[0].startswith(("VERDICT", "ERROR"))
    assert lines[1].startswith("PROJECTION projected-fail (not a qualification")
    assert "PROJECTION" not in report.verdict().line
    assert GateReport(checklist=checklist()).table()[1] == ""  # no sweep, no line


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


def ranks_section() -> dict:
    """Two node counts, each at 1, 2, 4, 8 ranks per node (a node's client peaking near 7),
    and the projection of the run's 8 ranks per node."""
    plan = SweepPlan((1, 2), (1, 2, 4, 8), 2, 8)
    result = SweepResult(plan, cluster_nodes=64)
    for n in plan.node_counts:
        for r in plan.ranks_per_node:
            for repeat, wobble in enumerate((0.99, 1.01), start=1):
                rate = n * float(usl(r, 1 * GB, 0.1, 0.02)) * wobble
                result.points.append(
                    SweepPoint(n, r, repeat, n * r * GB, rate, n * r * GB, rate, 64 * n * r,
                               100.0 * n * r * wobble, 2 * n * r * GB)
                )  # fmt: skip
    return result.section()


def test_a_saved_scaling_section_round_trips_typed(tmp_path) -> None:
    """The ``scaling`` section written to a file reads back as the schema's typed tree, field
    by field (issue 24 item 3): the HTML reads it by attribute."""
    import dataclasses
    import json

    from ckptgate.report.saved import load_report
    from ckptgate.report.schema import ReportSchemaError, ScalingPlan

    section = sweep_section()
    section["ranks"] = ranks_section()["ranks"]
    report = GateReport(
        checklist=checklist(), meta={"profile": "tmpfs", "target": "/dev/shm", "nodes": 8}
    )
    report.section("scaling", section)
    path = tmp_path / "run.json"
    report.write_json(str(path))
    saved = load_report(path).scaling
    assert saved is not None
    assert saved.plan == ScalingPlan((1, 2, 4, 8), (4,), 3, 4)
    assert saved.cluster_nodes == 64 and saved.words == section["words"]
    assert [dataclasses.asdict(p) for p in saved.points] == section["points"]
    assert [dataclasses.asdict(s) for s in saved.summary] == section["summary"]
    assert saved.verified_bytes == section["verified_bytes"]
    projection, written = saved.projection, section["projection"]
    assert projection is not None
    assert (projection.word, projection.line) == (written["word"], written["line"])
    (item,) = projection.items
    (raw,) = written["items"]
    for name in ("metric", "word", "reason", "required", "lower", "estimate", "upper"):
        assert getattr(item, name) == raw[name], name
    assert item.fit == json.loads(json.dumps(raw["fit"]))
    assert [dataclasses.asdict(c) for c in item.curve] == raw["curve"]
    curves = saved.ranks.curves
    assert [(c.nodes, c.metric) for c in curves] == [
        (n, m) for n in (1, 2) for m in ("write", "read", "create")
    ]
    assert curves[0].fit is not None and math.isclose(curves[0].fit.sigma, 0.1, rel_tol=0.05)
    assert saved.ranks.meaning == section["ranks"]["meaning"]

    data = json.loads(path.read_text())
    data["scaling"]["projection"]["word"] = "qualified"
    refused = r"key 'scaling.projection.word': found 'qualified'"
    with pytest.raises(ReportSchemaError, match=refused):
        load_saved(data, "run.json")


def test_the_html_page_shows_the_ranks_per_node_curves() -> None:
    page = render_report(load_saved({**saved_run(), "scaling": ranks_section()}, "run.json"))
    assert "<h3>Ranks per node</h3>" in page
    assert "never projected" in page
    assert "peak at 6.7 ranks per node" in page
    if figures.available():
        assert 'data-figure="scaling-ranks"' in page
