"""No output writer can take the verdict with it: a failure or a warning is one line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from ckptgate.checks.table import checklist
from ckptgate.report import gate, html, outputs
from ckptgate.report.gate import GateReport
from ckptgate.report.items import Item
from ckptgate.report.outputs import write_outputs
from ckptgate.report.schema import SavedReport


def _report() -> GateReport:
    report = GateReport(checklist=checklist(), meta={"profile": "tmpfs"})
    report.record(Item(id="checkpoint-bytes", required=1.0, measured=1.0, unit="B", passed=True,
                       detail="d"))  # fmt: skip
    return report


def test_a_warning_while_rendering_is_a_line_under_filterwarnings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyproject's ``filterwarnings = error`` holds at the session's end: before, a plotting
    library's warning was an exception there, the HTML 0 bytes and no verdict printed."""
    original = html.render_report

    def warns(data: SavedReport, source: str = "", parts: object = ()) -> str:
        warnings.warn("Attempting to set identical low and high ylims", UserWarning, stacklevel=1)
        return original(data, source)

    monkeypatch.setattr(html, "render_report", warns)
    paths = {name: tmp_path / f"run.{name}" for name in ("json", "csv", "html")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lines = write_outputs(_report(), json_path=str(paths["json"]),
                              csv_path=str(paths["csv"]), html_path=str(paths["html"]))  # fmt: skip
    (line,) = lines
    assert line.startswith("ckptgate: --report-html: warning while writing (UserWarning: ")
    assert "identical low and high ylims" in line
    assert "VERDICT" in paths["html"].read_text(encoding="utf-8")
    assert json.loads(paths["json"].read_text())["verdict"]["status"]


def test_a_writer_that_fails_is_one_line_and_the_other_files_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(data: SavedReport, source: str = "", parts: object = ()) -> str:
        raise ValueError("no figure today")

    monkeypatch.setattr(html, "render_report", fails)
    out = tmp_path / "run.html"
    lines = write_outputs(_report(), json_path=str(tmp_path / "run.json"), html_path=str(out))
    assert lines == [
        f"ckptgate: --report-html {out} not written: ValueError: no figure today; "
        "the verdict stands"
    ]
    assert not out.exists()  # no empty file that reads as a report
    assert (tmp_path / "run.json").stat().st_size > 0


def test_the_report_is_encoded_and_read_back_once_whichever_files_are_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 16,384 ranks each encoding (``to_json``, ``json.dumps``) and each read back
    (``json.loads``, ``load_saved``) of the report costs node 0 about half a second: the JSON,
    the CSV and the HTML share one of each."""
    calls = {"to_json": 0, "load_saved": 0}
    to_json, load_saved = GateReport.to_json, outputs.load_saved

    def counted_to_json(self: GateReport) -> dict[str, object]:
        calls["to_json"] += 1
        return to_json(self)

    def counted_load_saved(data: object, source: str) -> SavedReport:
        calls["load_saved"] += 1
        return load_saved(data, source)

    monkeypatch.setattr(GateReport, "to_json", counted_to_json)
    monkeypatch.setattr(outputs, "load_saved", counted_load_saved)
    paths = {name: str(tmp_path / f"run.{name}") for name in ("json", "csv", "html")}
    lines = write_outputs(_report(), json_path=paths["json"], csv_path=paths["csv"],
                          html_path=paths["html"])  # fmt: skip
    assert lines == []
    assert calls == {"to_json": 1, "load_saved": 1}
    assert json.loads(Path(paths["json"]).read_text())["profile"] == "tmpfs"


class _Record:
    """A rank's record that counts its conversions to JSON."""

    converted = 0

    def to_json(self) -> dict[str, object]:
        _Record.converted += 1
        return {"rank": 0}


def test_the_terminals_latency_lines_read_the_summaries_never_the_ranks_records() -> None:
    """The terminal's latency lines print on every run, with or without report files: at
    1,024 nodes of 8 ranks they convert none of the 8,192 records of a burst."""
    stats = {"count": 64, "p50_s": 0.012, "p99_s": 0.0301, "max_s": 0.041, "mean_s": 0.013}
    report = _report()
    ranks = [_Record() for _ in range(1024 * 8)]
    report.section("write", {"transfer_latency_s": {"write": stats}, "ranks": ranks})
    _Record.converted = 0
    (line,) = report.latency_lines()
    assert line.startswith("per-transfer latency, write burst: write p50 / p99 / max 12.0 ms")
    assert _Record.converted == 0
    assert gate.plain({"ranks": ranks[:2]}) == {"ranks": [{"rank": 0}, {"rank": 0}]}
