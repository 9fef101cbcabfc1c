"""A test-only pytest plugin (``-p tests.report.warning_html``): rendering the HTML report
warns first, as matplotlib does on some data, so that the run's end meets a warning under
``filterwarnings = error`` (pyproject.toml) exactly where a real plotting warning arises."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pytest

WORDS = "a plotting library's warning while rendering (injected by tests.report.warning_html)"


def pytest_configure(config: pytest.Config) -> None:
    from ckptgate.report import html
    from ckptgate.report.schema import SavedReport
    from ckptgate.report.sections import ReportPart

    original = html.render_report

    def warning_render(
        report: SavedReport, source: str = "", parts: Sequence[ReportPart] = ()
    ) -> str:
        warnings.warn(WORDS, UserWarning, stacklevel=2)
        return original(report, source, parts)

    html.render_report = warning_render
