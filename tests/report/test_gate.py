"""The gate report: verdicts, margins, messages and the table a procurement decision reads."""

from __future__ import annotations

import json
from pathlib import Path

from ckptgate.report.gate import CHECKLIST, GateReport, Item, judge


def test_a_failed_requirement_reads_as_measured_against_required_with_its_reasons() -> None:
    item = judge(
        id="async-persist",
        title="checkpoint persist",
        measured=41.2e9,
        required=48.0e9,
        unit="B/s",
        detail="405b: 5.67 TB / 600 s x 2.5 headroom; 64 of 2048 nodes, 512 ranks",
    )
    assert item.passed is False
    assert item.message == (
        "checkpoint persist: measured 41.2 GB/s < required 48.0 GB/s "
        "(405b: 5.67 TB / 600 s x 2.5 headroom; 64 of 2048 nodes, 512 ranks)"
    )
    assert round(item.margin, 3) == round(41.2 / 48.0, 3)


def test_a_time_limit_passes_when_measured_is_lower_and_its_margin_is_the_inverse() -> None:
    item = judge(
        id="sync-stall",
        title="sync save stall",
        measured=2.0,
        required=6.0,
        unit="s",
        better="lower",
        detail="1 % of 600 s",
    )
    assert item.passed is True
    assert item.margin == 3.0
    assert "measured 2.00 s <= required 6.00 s" in item.message


def test_the_table_follows_the_checklist_and_the_json_holds_every_item(tmp_path: Path) -> None:
    report = GateReport(meta={"profile": "tmpfs"})
    report.record(Item("retention-capacity", "retention", 10.0, 20.0, "B", True, "d"))
    report.record(Item("checkpoint-bytes", "checkpoint bytes", 5.0, 5.0, "B", True, "d"))
    report.record(Item("reader-slowdown", "slowdown", None, 0.5, "fraction", None, "d"))
    lines = report.table()
    titles = [line.split("  ")[1].strip() for line in lines[2:5]]
    assert titles == ["checkpoint bytes", "retention", "slowdown"]
    assert "report" in lines[4] and "PASS" in lines[2]
    path = tmp_path / "r.json"
    report.write_json(str(path))
    data = json.loads(path.read_text())
    assert data["profile"] == "tmpfs"
    assert [i["checklist"] for i in data["items"]] == ["8", "1", "c"]


def test_every_checklist_item_of_spec_has_a_test_id() -> None:
    assert set(CHECKLIST.values()) == {"1", "2", "3", "4", "5", "6", "7", "8", "c"}
