"""The HTML report's figure margins, measured from the figure's own texts before it is drawn.

matplotlib's constrained layout finds each axes' room by drawing every artist once to measure
its extent and then drawing the figure again: on the report's ten figures that first pass was
60 % of their SVG time (5.6 of 9.1 s on a 2-core machine, ``ckptgate bench scale``). The texts
that need room around a report figure's axes are few and known before the draw: the tick
labels (from the axis' locator and formatter, as matplotlib's ``Axis._update_ticks`` makes
them), the axis labels, the titles and a legend placed outside. :func:`arrange` measures those
with matplotlib's own font metrics (``TextToPath``, the glyph advances the SVG's text is laid out
with) and sets the margins once (``Figure.subplots_adjust``), so each figure is drawn once.

The sizes follow matplotlib's defaults (``rcParams``): tick length and pad, ``axes.labelpad``,
``axes.titlepad``, and the legend's ``handlelength``, ``handletextpad``, ``borderpad`` and
``borderaxespad`` in units of its font size (matplotlib's ``legend.Legend`` docs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from typing import Any

POINTS_PER_IN = 72.0
EDGE_IN = 0.1
"""White space kept between the outermost text and the figure's edge."""
SLACK = 1.06
"""Measured text widths are stretched by this much: the SVG's text is laid out by the viewer
(a browser), whose glyph advances and hinting may differ slightly from matplotlib's."""


@cache
def _text_size_pt(text: str, size_pt: float, weight: str) -> tuple[float, float]:
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    ismath = text.count("$") >= 2
    width, height, _descent = TextToPath().get_text_width_height_descent(
        text, FontProperties(size=size_pt, weight=weight), ismath=ismath
    )
    return float(width) * SLACK, float(height)


def text_width_pt(texts: Iterable[str], size_pt: float, weight: str = "normal") -> float:
    """The widest of ``texts`` (points, one line each) at ``size_pt``; 0 for none."""
    return max((_text_size_pt(t, size_pt, weight)[0] for t in texts if t), default=0.0)


def _line_pt(size_pt: float) -> float:
    """The height of one line of text (matplotlib's text boxes: 1.2 times the font size)."""
    return 1.2 * size_pt


def _tick_pt(axis: Any) -> float:
    """Tick length and pad: the room between the spine and the tick label."""
    import matplotlib

    rc = matplotlib.rcParams
    if axis.axis_name == "y":
        return float(rc["ytick.major.size"] + rc["ytick.major.pad"])
    return float(rc["xtick.major.size"] + rc["xtick.major.pad"])


def _labels(axis: Any, weight: str) -> list[tuple[str, float, str]]:
    """The labels ``axis`` will draw (major and minor, inside its view): text, size, weight.
    The size is the axis' ``tick_params`` labelsize, else rcParams' (as matplotlib's ticks
    take it); the texts are its formatters' for its locators' ticks."""
    import matplotlib
    from matplotlib.font_manager import FontProperties

    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(low), abs(high))
    out = []
    for which, locations, formatter in (
        ("major", axis.get_majorticklocs(), axis.get_major_formatter()),
        ("minor", axis.get_minorticklocs(), axis.get_minor_formatter()),
    ):
        shown = [v for v in locations if low - slack <= v <= high + slack]
        if not shown:
            continue
        size = axis.get_tick_params(which=which).get("labelsize")
        if size is None:
            rc = matplotlib.rcParams
            size = rc["ytick.labelsize"] if axis.axis_name == "y" else rc["xtick.labelsize"]
        points = FontProperties(size=size).get_size_in_points()
        out += [(text, float(points), weight) for text in formatter.format_ticks(shown) if text]
    return out


def _tick_labels_across_pt(labels: list[tuple[str, float, str]], axis: Any) -> float:
    """How far ``axis``' tick ``labels`` reach out from the spine: their widest (y) or their
    height (x)."""
    if not labels:
        return 0.0
    if axis.axis_name == "y":
        reach = max(_text_size_pt(t, s, w)[0] for t, s, w in labels)
    else:
        reach = max(_line_pt(s) for _, s, _ in labels)
    return _tick_pt(axis) + reach


def _axis_label_pt(axis: Any) -> float:
    label = axis.get_label()
    if not label.get_text():
        return 0.0
    return float(axis.labelpad) + _line_pt(float(label.get_fontsize()))


def _title_pt(ax: Any) -> float:
    import matplotlib

    title = ax.title
    if not title.get_text():
        return 0.0
    return float(matplotlib.rcParams["axes.titlepad"]) + _line_pt(float(title.get_fontsize()))


def _x_overhang_pt(labels: list[tuple[str, float, str]]) -> float:
    """Half the widest x tick label: the first and last labels reach past the axes' ends."""
    return max((_text_size_pt(t, s, w)[0] / 2 for t, s, w in labels), default=0.0)


def legend_width_pt(legend: Any) -> float:
    """A legend's width with the room to the axes it is anchored beside (its texts, handles and
    pads, in units of its font size as ``matplotlib.legend.Legend`` lays it out)."""
    texts = [t.get_text() for t in legend.get_texts()]
    size = float(legend.get_texts()[0].get_fontsize()) if texts else 10.0
    ems = legend.handlelength + legend.handletextpad + 2 * legend.borderpad
    return text_width_pt(texts, size) + (ems + legend.borderaxespad) * size


def legend_height_pt(legend: Any, columns: int) -> float:
    """A legend's height in ``columns`` columns, with the room to the axes it sits on."""
    texts = legend.get_texts()
    size = float(texts[0].get_fontsize()) if texts else 10.0
    rows = math.ceil(len(texts) / max(columns, 1))
    spacing = legend.labelspacing * max(rows - 1, 0)
    return (rows * 1.2 + spacing + 2 * legend.borderpad + legend.borderaxespad) * size


def grid(figure: Any) -> list[list[Any]]:
    """``figure``'s axes as rows of columns (``Figure.subplots``' grid)."""
    rows, columns = figure.axes[0].get_subplotspec().get_geometry()[:2]
    return [figure.axes[r * columns : (r + 1) * columns] for r in range(rows)]


def arrange(
    figure: Any, right_pt: float = 0.0, top_pt: float = 0.0, y_weight: str = "normal"
) -> None:
    """Set ``figure``'s margins and the gaps between its grid of axes from the texts around
    them, so that none is cut off and the plots get the rest. ``right_pt`` and ``top_pt``: room
    for a legend placed outside, to the right (taken from the plots' width) or above (added to
    the figure's height: a legend of many runs does not squeeze the plots); ``y_weight``: the
    y tick labels' weight where some are bold. A figure too small for its texts is left to
    matplotlib's constrained layout (which then shrinks what it must)."""
    axes = grid(figure)
    width_in, height_in = (float(v) for v in figure.get_size_inches())
    if top_pt:  # a legend above adds to the figure's height, not taken from the plots
        height_in += top_pt / POINTS_PER_IN
        figure.set_size_inches(width_in, height_in)
    edge = EDGE_IN * POINTS_PER_IN
    x_labels = {id(ax): _labels(ax.xaxis, "normal") for row in axes for ax in row}
    overhang = max(_x_overhang_pt(labels) for labels in x_labels.values())

    def beside(ax: Any) -> float:  # left of an axes: its y tick labels and y label
        labels = _labels(ax.yaxis, y_weight)
        return _tick_labels_across_pt(labels, ax.yaxis) + _axis_label_pt(ax.yaxis)

    def below(ax: Any) -> float:  # under an axes: its x tick labels and x label
        return _tick_labels_across_pt(x_labels[id(ax)], ax.xaxis) + _axis_label_pt(ax.xaxis)

    left = edge + max(max(beside(row[0]) for row in axes), overhang)
    right = edge + max(right_pt, overhang)
    bottom = edge + max(below(ax) for ax in axes[-1])
    top = edge + max(_title_pt(ax) for ax in axes[0]) + top_pt
    columns, rows = len(axes[0]), len(axes)
    column_gap = max((beside(row[c]) for row in axes for c in range(1, columns)), default=0.0)
    column_gap += overhang if columns > 1 else 0.0
    row_gap = max(
        (
            below(axes[r][c]) + _title_pt(axes[r + 1][c])
            for r in range(rows - 1)
            for c in range(columns)
        ),
        default=0.0,
    )
    width_pt, height_pt = width_in * POINTS_PER_IN, height_in * POINTS_PER_IN
    plot_w = (width_pt - left - right - column_gap * (columns - 1)) / columns
    plot_h = (height_pt - top - bottom - row_gap * (rows - 1)) / rows
    if plot_w <= 0 or plot_h <= 0:
        figure.set_layout_engine("constrained")
        return
    figure.subplots_adjust(
        left=left / width_pt,
        right=1 - right / width_pt,
        bottom=bottom / height_pt,
        top=1 - top / height_pt,
        wspace=column_gap / plot_w,
        hspace=row_gap / plot_h,
    )
