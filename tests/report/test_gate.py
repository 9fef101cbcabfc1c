"""The gate report: the verdict line first, every item in checklist order, the JSON."""

from __future__ import annotations

import json
from pathlib import Path

from ckptgate.checks.table import checklist
from ckptgate.report.gate import GateReport
from ckptgate.report.items import Item
from ckptgate.report.verdict import RunScale


def _item(id: str, passed: bool | None, required: float | None = 10.0) -> Item:
    return Item(id=id, required=required, measured=20.0, unit="B", passed=passed, detail="d",
                cluster_required=1000.0)  # fmt: skip


def test_the_table_opens_with_the_verdict_and_follows_the_checklist(tmp_path: Path) -> None:
    report = GateReport(
        meta={"profile": "tmpfs"},
        scale=RunScale(1, 1, 4, 4, True),
        checklist=checklist(),
    )
    report.record(_item("retention-capacity", True))
    report.record(_item("checkpoint-bytes", True))
    report.record(_item("reader-slowdown", None, None))
    lines = report.table()
    assert lines[0].startswith("VERDICT ")
    titles = [line.split("  ")[1].strip() for line in lines[4:7]]
    assert titles == ["checkpoint bytes", "retention tier capacity",
                      "dataloader slowdown during a save"]  # fmt: skip
    assert "cluster needs" in lines[2] and "1.00 kB" in lines[4]
    path = tmp_path / "r.json"
    report.write_json(str(path))
    data = json.loads(path.read_text())
    assert data["profile"] == "tmpfs"
    assert [i["checklist"] for i in data["items"]] == ["1", "8", "c"]  # in checklist order
    assert data["verdict"]["status"] in ("qualified", "partial", "trial", "failed", "error")


def test_an_errored_test_is_a_row_and_is_listed_under_the_table() -> None:
    report = GateReport(checklist=checklist(), scale=RunScale(1, 1, 4, 4, True))
    report.record(_item("checkpoint-bytes", True))
    report.record_error("test:test_x", "test_x", "setup: RankFailure: rank 1 died", node=3)
    lines = report.table()
    assert lines[0].startswith("VERDICT failed: 1 item(s) failed: test_x (ERROR)")
    assert any("test_x" in line and "ERROR (node 3)" in line for line in lines)
    assert lines[-1] == "ERROR: test_x: ERROR: setup: RankFailure: rank 1 died"


def test_the_terminal_shows_each_bursts_per_transfer_latency() -> None:
    report = GateReport(checklist=checklist())
    stats = {"count": 64, "p50_s": 0.012, "p99_s": 0.0301, "max_s": 0.041, "mean_s": 0.013}
    report.section("write", {"total_bytes": 1, "transfer_latency_s": {"write": stats}})
    report.section("metadata", {"latency_s": {"create": stats}})  # its own table, not here
    assert report.latency_lines() == [
        "per-transfer latency, write burst: write p50 / p99 / max 12.0 ms / 30.1 ms / 41.0 ms "
        "(64 transfers)"
    ]
