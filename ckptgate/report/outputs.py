"""The report files a run writes at its end: JSON, CSV and HTML, all from one JSON object."""

from __future__ import annotations

from ckptgate.report.gate import GateReport


def write_outputs(
    report: GateReport,
    *,
    json_path: str | None = None,
    csv_path: str | None = None,
    html_path: str | None = None,
) -> None:
    """Write each report file asked for. CSV and HTML render the same plain JSON object that
    the JSON file holds, so a saved JSON re-rendered with ``ckptgate report`` says the same."""
    if json_path:
        report.write_json(json_path)
    if not (csv_path or html_path):
        return
    data = report.json_data()
    if csv_path:
        from ckptgate.report.csvfiles import write_csv

        write_csv(data, csv_path)
    if html_path:
        from ckptgate.report.html import write_html

        write_html(data, html_path, source=json_path or "")
