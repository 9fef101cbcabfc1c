"""The suite's own tests in two tiers (docs/testing.md, "Two tiers"): ``-m "not beds and not
slow"`` is the fast tier, ``-m "beds or slow"`` the bed tier; together they are every test, each
bed test names its beds, and no checklist test is ``slow`` (the fast tier runs the whole
checklist)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.beds import BED_MARKERS, BEDS_MARKER

ROOT = Path(__file__).resolve().parent.parent

_MARKERS_OF_EACH_TEST = """
import json, sys
import pytest

class Markers:
    def pytest_collection_finish(self, session):
        found = {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items}
        with open(sys.argv[1], "w") as out:
            json.dump(found, out)

sys.exit(pytest.main(["--co", "-q", "-p", "no:cacheprovider", "tests"], plugins=[Markers()]))
"""


def markers_of_each_test(out: Path) -> dict[str, set[str]]:
    """Every test under tests/ (one collection, as ``pytest tests`` makes it) and its markers'
    names: what ``-m`` selects on."""
    script = [sys.executable, "-c", _MARKERS_OF_EACH_TEST, str(out)]
    subprocess.check_output(script, cwd=ROOT, stderr=subprocess.STDOUT, timeout=300)
    found: dict[str, list[str]] = json.loads(out.read_text())
    return {nodeid: set(names) for nodeid, names in found.items()}


@pytest.mark.slow  # a second collection of every test, in a subprocess: 7 s
def test_the_bed_tier_is_tests_beds_and_every_bed_test_names_its_beds(tmp_path: Path) -> None:
    tests = markers_of_each_test(tmp_path / "markers.json")
    beds = {nodeid for nodeid, names in tests.items() if BEDS_MARKER in names}
    assert beds == {nodeid for nodeid in tests if nodeid.startswith("tests/beds/")}
    assert len(beds) < len(tests)  # the fast tier is the rest, -m "not beds"
    per_bed = {marker for marker, _ in BED_MARKERS.values()}
    unnamed = sorted(nodeid for nodeid in beds if not tests[nodeid] & per_bed)
    assert unnamed == [], "its bed module is missing from tests/beds/__init__.py's BED_MARKERS"
    assert not any(tests[nodeid] & per_bed for nodeid in tests.keys() - beds)
    assert {n for n in beds if {"slurm", "ceph"} <= tests[n]} == {
        n for n in beds if n.startswith("tests/beds/test_ceph_suite.py::")
    }  # the Ceph module builds the Slurm bed too, for its srun tests
    assert all({"fuse"} <= tests[n] for n in beds if n.startswith("tests/beds/test_faultfs.py::"))
    slow = {nodeid for nodeid, names in tests.items() if "slow" in names} - beds
    fast = tests.keys() - beds - slow
    assert slow and len(slow) < 0.02 * len(fast), sorted(slow)  # a few, named in docs/testing.md


def test_no_checklist_test_is_marked_slow() -> None:
    """The fast tier leaves out ``slow`` tests: a checklist module marked so would leave its
    items out of the fast tier's run (they would report as not run, and the tier's verdict
    would not be the whole checklist's)."""
    marked = [
        path.name
        for path in sorted((ROOT / "ckptgate" / "acceptance").glob("test_*.py"))
        if "mark.slow" in path.read_text(encoding="utf-8")
    ]
    assert marked == []


def test_a_missing_bed_skips_with_its_reason_and_fails_where_ci_requires_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.beds import REQUIRED_ENV, bed_missing

    monkeypatch.delenv(REQUIRED_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^ceph-mon not found$"):
        bed_missing("ceph", "ceph-mon not found")
    monkeypatch.setenv(REQUIRED_ENV, "fuse hosts ceph")
    with pytest.raises(pytest.fail.Exception, match=r"ceph-mon not found .* the ceph bed"):
        bed_missing("ceph", "ceph-mon not found")
    with pytest.raises(pytest.skip.Exception):  # a bed CI did not install still skips
        bed_missing("slurm", "slurmctld not found")
