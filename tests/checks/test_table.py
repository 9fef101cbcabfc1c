"""The check table: every check module registers itself, the rows come out in checklist
order, every question of SPEC.md is answered, and the sizing names only checks that exist."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import ckptgate.checks
from ckptgate.checks.check import Check
from ckptgate.checks.table import check_named, checklist, checks, markers, report_parts, rows
from ckptgate.fixtures.provided import checklist_params
from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile


def test_every_module_of_the_package_with_a_check_is_in_the_table_in_run_order() -> None:
    modules = [
        importlib.import_module(f"ckptgate.checks.{info.name}")
        for info in pkgutil.iter_modules(ckptgate.checks.__path__)
    ]
    declared = {m.CHECK.name for m in modules if isinstance(getattr(m, "CHECK", None), Check)}
    assert [c.name for c in checks()] == [
        "write", "payload", "restart", "metadata", "contention", "decisions", "retention", "dcp"
    ]  # fmt: skip
    assert declared == {c.name for c in checks()}


def test_the_rows_are_in_checklist_order_by_question_then_run_order() -> None:
    assert [(r.number, r.id) for r in checklist().rows] == [
        ("1", "checkpoint-bytes"), ("1", "payload-compress"), ("1", "payload-dedup-4k"),
        ("1", "payload-dedup-8k"), ("1", "payload-fold"), ("1", "dcp-bytes"),
        ("2", "interval-from-failure-rate"),
        ("3", "sync-stall"), ("3", "stall-budget"), ("3", "dcp-async-block"),
        ("4", "sync-vs-async"),
        ("5", "load-generator"), ("5", "async-persist"), ("5", "dcp-async-complete"),
        ("6", "metadata-create-rate"), ("6", "metadata-restore-stat"), ("6", "metadata-delete"),
        ("7", "restart-read"), ("7", "resharded-restore"), ("7", "dcp-reshard-load"),
        ("8", "retention-capacity"),
        ("c", "contention-persist"), ("c", "reader-slowdown"),
    ]  # fmt: skip


def test_every_checklist_question_of_spec_has_a_row_and_ids_are_unique() -> None:
    numbers = {row.number for row in checklist().rows}
    assert numbers == {"1", "2", "3", "4", "5", "6", "7", "8", "c"}
    ids = [answer.row.id for _, answer in rows()]
    assert len(ids) == len(set(ids))


def test_each_row_names_its_check_and_only_a_check_with_a_part_is_optional() -> None:
    for check, answer in rows():
        assert answer.row.check == check.name
        assert answer.row.optional is bool(check.needs), answer.row.id
    assert checklist().required_ids() == tuple(r.id for r in checklist().rows if r.check != "dcp")


def test_a_marker_per_check_with_its_questions_and_titles() -> None:
    words = markers()
    assert set(words) == {c.name for c in checks()}
    assert "restart read bandwidth" in words["restart"] and "checklist 7" in words["restart"]
    assert "optional part: torch" in words["dcp"]


def test_an_unknown_check_is_named_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no check 'nope'; known: write, payload, restart"):
        check_named("nope")


@pytest.mark.parametrize("name", SHIPPED_PROFILES, ids=lambda n: f"profile={n}")
def test_every_measured_by_of_the_sizing_names_a_check_of_the_table(name: str) -> None:
    sizing = derive(load_profile(name))
    named = {
        marker.strip().removeprefix("-m ")
        for requirement in sizing.requirements.values()
        if requirement.measured_by
        for marker in requirement.measured_by.split(",")
    }
    assert named, "no requirement says which check measures it"
    assert named <= {c.name for c in checks()}, sorted(named)


NEW_CHECK = """
from contextlib import nullcontext

from ckptgate.checks.check import Check, row
from ckptgate.report.items import judge
from ckptgate.report.schema import BurstSection
from ckptgate.report.sections import ReportPart


def _judged(run):
    return judge(id="example-row", measured=2.0, required=1.0, unit="x", detail="d")


REPORT = ReportPart(
    key="example", title="Example", schema=BurstSection, html=lambda section, plots: []
)

CHECK = Check(
    name="example",
    place=16,
    measure=nullcontext,
    answers=(row("example", "example-row", "1", "an example row", _judged),),
    report=(REPORT,),
)
"""


def test_a_check_module_added_to_the_package_is_everywhere_without_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    """The four-file promise (CONTRIBUTING.md): a new module with a ``CHECK`` is in the table,
    its rows, the checklist's order and required rows, the markers, the report's parts and the
    acceptance test's parameters; nothing else is edited."""
    package = tmp_path / "extra"
    package.mkdir()
    (package / "example.py").write_text(NEW_CHECK)
    monkeypatch.setattr(ckptgate.checks, "__path__", [*ckptgate.checks.__path__, str(package)])
    for cached in (checks, checklist):
        cached.cache_clear()
    monkeypatch.delitem(sys.modules, "ckptgate.checks.example", raising=False)
    try:
        assert [c.name for c in checks()][:4] == ["write", "payload", "example", "restart"]
        ids = [r.id for r in checklist().rows]
        assert ids.index("payload-fold") < ids.index("example-row") < ids.index("dcp-bytes")
        assert "example-row" in checklist().required_ids()
        assert "an example row" in checklist().missing(["checkpoint-bytes"])
        assert markers()["example"] == "checklist 1: an example row"
        assert "example" in [part.key for part in report_parts()]
        # the plugin registers each check's marker at start-up (plugin.MARKERS); here, by hand
        pytestconfig.addinivalue_line("markers", f"example: {markers()['example']}")
        params = [p for p in checklist_params() if p.id == "example-row"]
        assert len(params) == 1 and params[0].values[0] == "example"
    finally:
        for cached in (checks, checklist):
            cached.cache_clear()
        sys.modules.pop("ckptgate.checks.example", None)
