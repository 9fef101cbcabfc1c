"""The payload check in a run (issue 53): its four rows and its report section; with
``run.payload: realistic`` the compression row is reported, not gated, the others stay gated,
and the verdict line names the realistic payload."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.test_plugin import SMALL, run_pytest

ROWS = ("payload-compress", "payload-dedup-4k", "payload-dedup-8k", "payload-fold")


def _run(tmp_path: Path, *extra: str) -> dict:
    report = tmp_path / "report.json"
    target = tmp_path / "target"
    target.mkdir()
    result = run_pytest(
        "--profile=tmpfs", f"--target={target}", f"--report-json={report}", *SMALL, *extra,
        "ckptgate/acceptance", "-m", "write or payload",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return json.loads(report.read_text())


def test_a_run_gates_every_ratio_of_the_default_payload(tmp_path: Path) -> None:
    data = _run(tmp_path)
    items = {i["id"]: i for i in data["items"]}
    assert all(items[r]["status"] == "PASS" and items[r]["measured"] <= 1.02 for r in ROWS)
    section = data["payload"]
    assert section["payload"] == "random" and section["files"] >= 4
    assert 0 < section["sample_bytes"] <= section["budget_bytes"]
    assert "realistic payload" not in data["verdict"]["line"]


def test_a_realistic_payload_is_named_and_its_compression_reported(tmp_path: Path) -> None:
    data = _run(tmp_path, "--set", "run.payload=realistic")
    items = {i["id"]: i for i in data["items"]}
    assert items["payload-compress"]["status"] == "report"
    assert 1.05 < items["payload-compress"]["measured"] < 1.25
    assert all(items[r]["status"] == "PASS" for r in ROWS[1:])
    assert data["payload"]["payload"] == "realistic-14"
    assert "realistic payload (run.payload)" in data["verdict"]["line"]
