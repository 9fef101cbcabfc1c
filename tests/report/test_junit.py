"""JUnit XML carries every checklist item as properties; a marker per check selects."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ckptgate.report.items import judge
from ckptgate.report.junit import properties
from tests.fixtures.test_plugin import SMALL, run_pytest


def test_properties_are_in_the_jsons_units() -> None:
    item = judge(id="async-persist", measured=2e9, required=1e9, unit="B/s", detail="d",
                 scope="s")  # fmt: skip
    pairs = dict(properties([item]))
    assert pairs["async-persist.required"] == "1000000000.0"
    assert pairs["async-persist.unit"] == "B/s" and pairs["async-persist.verdict"] == "PASS"
    assert pairs["async-persist.margin"] == "2.0" and pairs["async-persist.margin_text"] == "x2.00"
    assert pairs["async-persist.cluster_required"] == ""


def test_junit_xml_carries_each_items_numbers_and_m_selects_a_module(tmp_path: Path) -> None:
    xml = tmp_path / "junit.xml"
    target = tmp_path / "target"  # its own: a run beside another live one is refused
    target.mkdir()
    result = run_pytest("--profile=tmpfs", f"--target={target}", "ckptgate/acceptance",
                        "-m", "restart", f"--junitxml={xml}", *SMALL)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    cases = {c.get("name"): c for c in ET.parse(xml).iter("testcase")}
    assert set(cases) == {"test_checklist[restart-read]", "test_checklist[resharded-restore]"}
    props = {
        p.get("name"): p.get("value") or ""
        for p in cases["test_checklist[restart-read]"].iter("property")
    }
    assert props["restart-read.unit"] == "B/s" and props["restart-read.verdict"] == "PASS"
    assert float(props["restart-read.measured"]) > float(props["restart-read.required"]) > 0
    assert float(props["restart-read.margin"]) > 1
    assert props["restart-read.scope"] and props["restart-read.message"].startswith("restart read")


def test_a_junit_xml_run_without_a_sweep_skips_the_sweep_rather_than_erroring(
    tmp_path: Path,
) -> None:
    """``--junitxml`` with the sweep's module selected: it asked for ``record_property``, which
    warns under pytest's default xunit2 family, and with warnings as errors (this repository's
    setting) the sweep errored and the run's verdict was ``failed``."""
    xml = tmp_path / "junit.xml"
    target = tmp_path / "target"
    target.mkdir()
    module = "ckptgate/acceptance/test_scaling.py"
    result = run_pytest(
        "--profile=tmpfs", f"--target={target}", module, f"--junitxml={xml}", *SMALL
    )
    assert "record_property" not in result.stdout, result.stdout[-3000:]
    (case,) = ET.parse(xml).iter("testcase")
    assert case.find("error") is None and case.find("skipped") is not None, ET.tostring(case)
