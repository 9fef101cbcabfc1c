"""The report files a run writes at its end: JSON, CSV and HTML, all from one JSON object.

No output can take the verdict with it: each file is written on its own, a writer that fails
(a full disk, a plotting library's error) is one line naming the option, the path and the
cause, and a warning raised while writing (which pytest's ``filterwarnings = error`` would turn
into an exception at the end of the session) is a line too. The other files are still written
and the run's verdict and exit status stand.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Callable, Sequence

from ckptgate.engine.collector import gc_paused
from ckptgate.report.gate import GateReport, json_text, write_json_text
from ckptgate.report.schema import SavedReport, load_saved
from ckptgate.report.sections import ReportPart


def write_outputs(
    report: GateReport,
    *,
    json_path: str | None = None,
    csv_path: str | None = None,
    html_path: str | None = None,
    parts: Sequence[ReportPart] = (),
) -> list[str]:
    """Write each report file asked for; return one line per file that failed or warned. CSV
    and HTML render the same plain JSON object that the JSON file holds, read through the same
    schema as ``ckptgate report`` reads a saved file, so a saved JSON re-rendered later says
    the same. The report is encoded once and read back once, whichever files are asked for.
    ``parts``: the checks' own sections (``ckptgate.checks.table.report_parts``)."""
    with gc_paused():  # the records of 16,384 ranks, encoded and read back: plain trees
        return _write_outputs(report, json_path, csv_path, html_path, parts)


def _write_outputs(
    report: GateReport,
    json_path: str | None,
    csv_path: str | None,
    html_path: str | None,
    parts: Sequence[ReportPart],
) -> list[str]:
    problems: list[str] = []

    @functools.cache
    def text() -> str:  # made once for every file: a run of 16,384 ranks makes tens of MB,
        return json_text(report.to_json())  # seconds to encode, to parse, to read back

    @functools.cache
    def saved() -> SavedReport:
        return load_saved(json.loads(text()), json_path or "the run's report")

    if json_path:
        problems += _guarded("--report-json", json_path, lambda: write_json_text(text(), json_path))
    source = json_path or ""

    if csv_path:
        from ckptgate.report.csvfiles import write_csv

        problems += _guarded("--report-csv", csv_path, lambda: write_csv(saved(), csv_path, parts))
    if html_path:
        from ckptgate.report.html import write_html

        problems += _guarded(
            "--report-html",
            html_path,
            lambda: write_html(saved(), html_path, source=source, parts=parts),
        )
    return problems


def _guarded(option: str, path: str, write: Callable[[], object]) -> list[str]:
    """Run one writer: its warnings and its failure become lines, never an exception."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            write()
        except Exception as error:  # any writer's failure is one line, never a traceback
            failed = f"ckptgate: {option} {path} not written: {type(error).__name__}: {error}"
            return [failed + "; the verdict stands", *_warning_lines(option, caught)]
    return _warning_lines(option, caught)


def _warning_lines(option: str, caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        f"ckptgate: {option}: warning while writing ({w.category.__name__}: {w.message}); "
        "the file is written and the verdict stands"
        for w in caught
    ]
