"""A test-only pytest plugin (``-p tests.report.warning_html``): rendering the HTML report
warns first, as matplotlib does on some data, so that the run's end meets a warning under
``filterwarnings = error`` (pyproject.toml) exactly where a real plotting warning arises."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

WORDS = "a plotting library's warning while rendering (injected by tests.report.warning_html)"


def pytest_configure(config: pytest.Config) -> None:
    from ckptgate.report import html

    original = html.render_report

    def warning_render(data: dict[str, Any], source: str = "") -> str:
        warnings.warn(WORDS, UserWarning, stacklevel=2)
        return original(data, source)

    html.render_report = warning_render
