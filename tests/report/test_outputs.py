"""No output writer can take the verdict with it: a failure or a warning is one line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from ckptgate.report import html
from ckptgate.report.gate import GateReport
from ckptgate.report.items import Item
from ckptgate.report.outputs import write_outputs
from ckptgate.report.schema import SavedReport


def _report() -> GateReport:
    report = GateReport(meta={"profile": "tmpfs"})
    report.record(Item(id="checkpoint-bytes", required=1.0, measured=1.0, unit="B", passed=True,
                       detail="d"))  # fmt: skip
    return report


def test_a_warning_while_rendering_is_a_line_under_filterwarnings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyproject's ``filterwarnings = error`` holds at the session's end: before, a plotting
    library's warning was an exception there, the HTML 0 bytes and no verdict printed."""
    original = html.render_report

    def warns(data: SavedReport, source: str = "") -> str:
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
    def fails(data: SavedReport, source: str = "") -> str:
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
