"""Every figure of the HTML report reads at 2, 64 and 2,048 ranks: drawn without a matplotlib
warning, its plot area covering most of the figure (no strip squeezed by a legend), its ticks
few enough to read, the bandwidth figure's legend naming runs and never nodes or ranks; and the
page drawn by a real headless browser at each scale, its plot areas measured where it drew them
and no text cut off at a figure's edge. Each figure is laid out from its texts and drawn once
(``report.figure_layout``), which the counts of matplotlib's text calls show.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ckptgate.checks.table import report_parts
from ckptgate.report import figures
from ckptgate.report.html import render_report
from ckptgate.report.schema import load_saved
from tests.report.browser import chromium, cut_texts, probed_figures
from tests.report.figure_geometry import figures_of, geometry
from tests.report.saved_runs import saved_run_at

pytestmark = pytest.mark.skipif(
    not figures.available(), reason="matplotlib (the report extra) not installed"
)

SCALES = (2, 64, 2048)
AT_EACH_SCALE = pytest.mark.parametrize("ranks", SCALES, ids=lambda r: f"ranks={r}")
NO_CHROMIUM = "no chromium: apt-get install chromium"
IN_A_BROWSER = pytest.mark.skipif(chromium() is None, reason=NO_CHROMIUM)
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
            page = render_report(data, parts=report_parts())
        out[ranks] = (page, [f"{w.category.__name__}: {w.message}" for w in caught])
    return out


@AT_EACH_SCALE
def test_rendering_raises_no_warning(pages: dict[int, tuple[str, list[str]]], ranks: int) -> None:
    assert pages[ranks][1] == []


@AT_EACH_SCALE
def test_every_figure_is_mostly_plot(pages: dict[int, tuple[str, list[str]]], ranks: int) -> None:
    drawn = figures_of(pages[ranks][0])
    assert len(drawn) == FIGURES, sorted(drawn)
    for name, svg in drawn.items():
        shape = geometry(name, svg)
        assert shape.plot_areas, f"{name}: no plot area"
        assert shape.plot_fraction >= MIN_PLOT_FRACTION, (name, shape)
        assert shape.xticks <= MAX_XTICKS_PER_AXES * len(shape.plot_areas), (name, shape)


@AT_EACH_SCALE
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


@IN_A_BROWSER
@AT_EACH_SCALE
def test_a_headless_browser_draws_every_figure_mostly_plot(
    pages: dict[int, tuple[str, list[str]]], ranks: int, tmp_path: Path
) -> None:
    drawn = probed_figures(pages[ranks][0], tmp_path)
    assert len(drawn) == FIGURES, drawn
    for name, width, height, plot_fraction in drawn:
        assert width > 100 and height > 50, (name, width, height)
        assert plot_fraction >= MIN_PLOT_FRACTION, (name, plot_fraction)


@IN_A_BROWSER
@AT_EACH_SCALE
def test_no_figure_cuts_off_a_text_at_its_edge(
    pages: dict[int, tuple[str, list[str]]], ranks: int, tmp_path: Path
) -> None:
    drawn = cut_texts(pages[ranks][0], tmp_path)
    assert len(drawn) == FIGURES, drawn
    assert [(name, cut) for name, cut in drawn if cut] == []


def _text_calls(data: dict[str, Any]) -> tuple[Counter[Any], int]:
    """Rendering ``data``'s page: how often each matplotlib Text object was drawn (keyed by the
    object, which keeps it alive: an id could be reused), and how many times any text's extent
    was measured (``Text.get_window_extent``)."""
    from matplotlib.text import Text

    draws: Counter[Any] = Counter()
    measured = 0
    draw, extent = Text.draw, Text.get_window_extent

    def counted_draw(self: Text, *args: Any, **kwargs: Any) -> Any:
        draws[self] += 1
        return draw(self, *args, **kwargs)

    def counted_extent(self: Text, *args: Any, **kwargs: Any) -> Any:
        nonlocal measured
        measured += 1
        return extent(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Text, "draw", counted_draw)
        patch.setattr(Text, "get_window_extent", counted_extent)
        render_report(load_saved(data, "run.json"), parts=report_parts())
    return draws, measured


def test_each_figure_is_drawn_once_with_its_texts_measured_about_once() -> None:
    """matplotlib's constrained layout drew every text twice and measured each 2.2 times (the
    cost of 60 % of the figures' time); laid out from its texts, a figure draws each once."""
    draws, measured = _text_calls(_report_at(2048))
    assert draws, "no text drawn"
    twice = [(text.get_text(), n) for text, n in draws.items() if n > 1]
    assert twice == [], twice[:5]
    assert measured <= 1.25 * sum(draws.values()), (measured, sum(draws.values()))


def test_a_legend_of_many_runs_above_the_bandwidth_plot_does_not_shrink_it() -> None:
    """The bandwidth figure's legend names every run (a full run has about 45): the room it
    takes is added to the figure, and the plots keep their height."""
    heights = {}
    for copies in (1, 12):
        data = _report_at(64)
        runs = data["bandwidth_series"]["runs"]
        data["bandwidth_series"]["runs"] = [
            {**run, "nth": run["nth"] + 4 * copy} for copy in range(copies) for run in runs
        ]
        svg = figures_of(render_report(load_saved(data, "run.json"), parts=report_parts()))[
            "bandwidth-over-time"
        ]
        areas = geometry("bandwidth-over-time", svg).plot_areas
        heights[copies] = [round(y1 - y0, 1) for _, y0, _, y1 in areas]
    assert heights[12] == heights[1], heights


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


def test_a_decimal_log_axis_has_minor_ticks_at_2_and_5_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each minor tick is an artist made and drawn: matplotlib's default eight a decade (2 to
    9) were 442 of them in the page at 2,048 ranks, 14 % of the HTML's rendering. A decimal log
    axis keeps 2 and 5 times each power of ten (``figures.LOG_MINOR_SUBS``)."""
    import math

    mantissas: dict[str, set[float]] = {}
    svg = figures.svg_of

    def recorded(figure: Any, name: str, *args: Any, **kwargs: Any) -> str:
        drawn = svg(figure, name, *args, **kwargs)
        for ax in figure.axes:
            for axis in (ax.xaxis, ax.yaxis):
                if axis.get_scale() == "log" and axis.get_transform().base == 10:
                    for loc in axis.get_minorticklocs():
                        mantissa = loc / 10 ** math.floor(math.log10(loc) + 1e-9)
                        mantissas.setdefault(name, set()).add(round(mantissa, 6))
        return drawn

    monkeypatch.setattr(figures, "svg_of", recorded)
    render_report(load_saved(_report_at(2048), "run.json"), parts=report_parts())
    assert mantissas, "no decimal log axis drawn"
    assert {name: sorted(m) for name, m in mantissas.items() if m - {2.0, 5.0}} == {}
