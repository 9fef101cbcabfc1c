"""The saved JSON report's schema: a report round-trips, and a foreign or old file is refused
by ``ckptgate report`` and ``ckptgate compare`` in one line (exit status 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptgate.checks.table import checklist
from ckptgate.cli import main
from ckptgate.engine.records import BurstResult, RankResult, records_from_results
from ckptgate.report.gate import GateReport
from ckptgate.report.saved import bursts, items_of, load_report
from ckptgate.report.schema import SCHEMA_KEY, SCHEMA_VERSION, load_saved
from ckptgate.workloads.write_burst import FileWritten, WriteDetail
from tests.report.saved_runs import saved_run


def _save(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def _write_burst() -> BurstResult:
    """Two write ranks as the engine records them, with their typed details."""
    results = []
    for rank in (0, 1):
        path = f"/t/__{rank}_0.distcp"
        files = (FileWritten(path, 4096, 0, 0.5 + rank),)
        detail = WriteDetail(0.01, True, 2**27, path, (rank,), files)
        ends = (10.1, 10.4 + rank, 10.5 + rank, 10.6 + rank)
        marks = tuple(zip(("open", "write", "fsync", "close"), ends, strict=True))
        result = RankResult(rank, rank, 4096, 10.0 + rank / 1000, marks, detail=detail)
        result["common_start_mono"] = 10.0
        results.append(result)
    return BurstResult("write", tuple(records_from_results(results, host="node-a")))


def test_a_saved_report_round_trips_through_its_file(tmp_path: Path) -> None:
    """What the run wrote (the engine's own records, the items, the verdict) is what a saved
    file reads back as, field by field, with the schema's version."""
    original = load_saved(saved_run(), "run.json")
    burst = _write_burst()
    report = GateReport(
        checklist=checklist(), meta={"profile": "tmpfs", "target": "/dev/shm", "nodes": 1}
    )
    for item in original.items:
        report.record(item)
    report.section("write", burst.to_json())
    path = tmp_path / "run.json"
    report.write_json(str(path))

    saved = load_report(path)
    assert json.loads(path.read_text())[SCHEMA_KEY] == SCHEMA_VERSION == saved.schema_version
    assert items_of(saved) == items_of(original)
    assert saved.verdict.line == report.verdict().line
    assert saved.profile == "tmpfs" and saved.nodes == 1 and saved.read is None
    (found,) = bursts(saved)
    assert found.label == "write" and found.section.span_s == round(burst.span_s, 9)  # to the ns
    for row, record in zip(found.ranks, burst.ranks, strict=True):
        assert (row.rank, row.global_rank, row.host, row.bytes) == (
            record.rank, record.global_rank, record.host, record.bytes)  # fmt: skip
        assert row.write_s == pytest.approx(record.phases_s["write"])
        assert row.read_s is None and row.total_s == pytest.approx(record.total_s)
    assert found.phases() == ("open_s", "write_s", "fsync_s", "close_s")
    assert found.is_slowest(found.ranks[1]) and not found.is_slowest(found.ranks[0])
    assert saved.data["write"]["ranks"][1]["files"][0]["s"] == 1.5  # the detail, kept as written


def _old() -> dict[str, Any]:
    data = saved_run()
    del data[SCHEMA_KEY]
    return data


def _retyped() -> dict[str, Any]:
    data = saved_run()
    data["write"]["ranks"][1]["bytes"] = "1 MB"
    return data


REFUSED = {
    "old report": (_old, "an old ckptgate report", f"'{SCHEMA_KEY}' is missing, expected 1"),
    "newer schema": (lambda: {**saved_run(), SCHEMA_KEY: 2}, f"'{SCHEMA_KEY}': found 2",
                     "expected 1"),
    "foreign object": (lambda: {"name": "fio", "jobs": []}, "not a ckptgate JSON report",
                       f"'{SCHEMA_KEY}' is missing"),
    "foreign array": (lambda: [1, 2], "not a ckptgate JSON report: found a JSON array",
                      f"'{SCHEMA_KEY}': 1"),
    "a key of the wrong type": (_retyped, "key 'write.ranks[1].bytes': found '1 MB'",
                                "expected an integer"),
    "not JSON": (lambda: "ranks: 4\n", "not a readable ckptgate JSON report", "Expecting value"),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_foreign_or_old_file_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str
) -> None:
    make, *words = REFUSED[case]
    bad = _save(tmp_path, "bad.json", make())
    good = _save(tmp_path, "good.json", saved_run())
    argv = [command, bad] if command == "report" else [command, good, bad]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"ckptgate {command}: {bad}: ")
    for text in words:
        assert text in err
