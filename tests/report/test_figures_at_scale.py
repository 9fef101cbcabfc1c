"""Every figure of the HTML report reads at 2, 64 and 2,048 ranks: drawn without a matplotlib
warning, its plot area covering most of the figure (no strip squeezed by a legend), its ticks
few enough to read, the bandwidth figure's legend naming runs and never nodes or ranks; and the
page drawn by a real headless browser at each scale, its plot areas measured where it drew them.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from ckptgate.report import figures
from ckptgate.report.html import render_report
from ckptgate.report.schema import load_saved
from tests.report.browser import chromium, probed_figures
from tests.report.figure_geometry import figures_of, geometry
from tests.report.saved_runs import saved_run_at

pytestmark = pytest.mark.skipif(
    not figures.available(), reason="matplotlib (the report extra) not installed"
)

SCALES = (2, 64, 2048)
MIN_PLOT_FRACTION = 0.4
"""The plot areas' share of a figure's area at least (the collapsed bandwidth figure had 0.19
at 64 ranks and none at 2,048)."""
MAX_XTICKS_PER_AXES = 16
"""Labels a 9-inch axis holds side by side without overlapping ("node 255" is ~45 pt)."""


SCALING = importlib.util.find_spec("scipy") is not None
"""The scaling sweep's figure needs its fit (scipy, the projection extra)."""
FIGURES = 10 if SCALING else 9


def _report_at(ranks: int) -> dict[str, Any]:
    data = saved_run_at(ranks)
    if SCALING:
        from tests.report.test_scaling_report import sweep_section

        data["scaling"] = sweep_section()
    return data


@pytest.fixture(scope="module")
def pages() -> dict[int, tuple[str, list[str]]]:
    """The page at each scale and the warnings raised while rendering it (rendered once)."""
    out = {}
    for ranks in SCALES:
        data = load_saved(_report_at(ranks), "run.json")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            page = render_report(data)
        out[ranks] = (page, [f"{w.category.__name__}: {w.message}" for w in caught])
    return out


@pytest.mark.parametrize("ranks", SCALES, ids=lambda r: f"ranks={r}")
def test_rendering_raises_no_warning(pages: dict[int, tuple[str, list[str]]], ranks: int) -> None:
    assert pages[ranks][1] == []


@pytest.mark.parametrize("ranks", SCALES, ids=lambda r: f"ranks={r}")
def test_every_figure_is_mostly_plot(pages: dict[int, tuple[str, list[str]]], ranks: int) -> None:
    drawn = figures_of(pages[ranks][0])
    assert len(drawn) == FIGURES, sorted(drawn)
    for name, svg in drawn.items():
        shape = geometry(name, svg)
        assert shape.plot_areas, f"{name}: no plot area"
        assert shape.plot_fraction >= MIN_PLOT_FRACTION, (name, shape)
        assert shape.xticks <= MAX_XTICKS_PER_AXES * len(shape.plot_areas), (name, shape)


@pytest.mark.parametrize("ranks", SCALES, ids=lambda r: f"ranks={r}")
def test_the_bandwidth_legend_names_runs_not_nodes(
    pages: dict[int, tuple[str, list[str]]], ranks: int
) -> None:
    svg = figures_of(pages[ranks][0])["bandwidth-over-time"]
    start = svg.index('id="bandwidth-over-time-legend_1"')
    end = svg.find('<g id="bandwidth-over-time-axes_', start)
    legend = svg[start : end if end > 0 else len(svg)]
    texts = [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", legend)]
    assert texts == ["write burst #0", "write burst #1", "write burst #2", "readback #0"]


def test_the_bandwidth_figure_does_not_grow_with_the_nodes(
    pages: dict[int, tuple[str, list[str]]],
) -> None:
    sizes = {r: len(figures_of(pages[r][0])["bandwidth-over-time"]) for r in (64, 2048)}
    assert sizes[2048] < 1.5 * sizes[64], sizes


@pytest.mark.skipif(chromium() is None, reason="no chromium: apt-get install chromium")
@pytest.mark.parametrize("ranks", SCALES, ids=lambda r: f"ranks={r}")
def test_a_headless_browser_draws_every_figure_mostly_plot(
    pages: dict[int, tuple[str, list[str]]], ranks: int, tmp_path: Path
) -> None:
    drawn = probed_figures(pages[ranks][0], tmp_path)
    assert len(drawn) == FIGURES, drawn
    for name, width, height, plot_fraction in drawn:
        assert width > 100 and height > 50, (name, width, height)
        assert plot_fraction >= MIN_PLOT_FRACTION, (name, plot_fraction)


def test_the_series_table_has_a_row_per_run_and_the_nodes_folded_away(
    pages: dict[int, tuple[str, list[str]]],
) -> None:
    page = pages[2048][0]
    section = page[page.index("<h3>Bandwidth over time</h3>") :]
    first = section[: section.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", first)[1:]  # after the header
    assert [re.findall(r"<td[^>]*>([^<]*)</td>", r)[:2] for r in rows] == [
        ["write burst #0", "256"],
        ["write burst #1", "256"],
        ["write burst #2", "256"],
        ["readback #0", "256"],
    ]
    assert "every run's series on every node (1024 series)</summary>" in section
