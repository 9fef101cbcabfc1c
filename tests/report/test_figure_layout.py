"""The figures' margins measured from their texts (``report.figure_layout``): the measures agree
with what matplotlib draws, the plots get the room the texts leave, and a figure too small for
its texts is left to matplotlib's constrained layout."""

from __future__ import annotations

from typing import Any

import pytest

from ckptgate.report import figure_layout, figures

pytestmark = pytest.mark.skipif(
    not figures.available(), reason="matplotlib (the report extra) not installed"
)


def _drawn(figure: Any) -> Any:
    """``figure`` drawn (to no file); its renderer, to measure what it drew."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def _figure(height_in: float = 3.0, ncols: int = 1, nrows: int = 1) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(figures.WIDTH_IN, height_in), dpi=72)
    return figure, figure.subplots(nrows, ncols, squeeze=False)


def test_a_text_is_measured_as_wide_as_matplotlib_draws_it_or_a_little_wider() -> None:
    figure, axes = _figure()
    words = "node 2047 rank 16383  (slowest)"
    text = axes[0][0].text(0.5, 0.5, words, fontsize=10)
    drawn_pt = text.get_window_extent(_drawn(figure)).width  # dpi 72: pixels are points
    measured_pt = figure_layout.text_width_pt([words], 10.0)
    assert drawn_pt <= measured_pt <= 1.1 * drawn_pt, (drawn_pt, measured_pt)


def test_a_legend_beside_the_axes_is_measured_as_matplotlib_draws_it() -> None:
    figure, axes = _figure()
    ax = axes[0][0]
    for label in ("open", "write", "fsync", "close"):
        ax.plot([0, 1], [0, 1], label=label)
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    renderer = _drawn(figure)
    drawn_pt = legend.get_window_extent(renderer).x1 - ax.get_window_extent(renderer).x1
    assert drawn_pt <= figure_layout.legend_width_pt(legend) <= 1.15 * drawn_pt


def test_the_margins_hold_the_tick_labels_and_the_axis_labels_and_no_more() -> None:
    figure, axes = _figure()
    ax = axes[0][0]
    ax.barh(range(3), [1, 2, 3])
    ax.set_yticks(range(3), ["a", "a much longer label than the others", "b"])
    ax.set_xlabel("seconds")
    figure_layout.arrange(figure)
    renderer = _drawn(figure)
    whole = ax.get_tightbbox(renderer)  # the axes with every text around it
    plot = ax.get_window_extent(renderer)
    width_pt, edge_pt = figures.WIDTH_IN * 72, figure_layout.EDGE_IN * 72
    assert whole.x0 >= 0 and whole.y0 >= 0, whole
    # What is left beside the texts is the edge's white space and the measure's slack (the
    # right side also keeps room for half an x tick label), not a strip the plot could use.
    assert whole.x0 <= edge_pt + 0.1 * (plot.x0 - whole.x0), whole
    assert width_pt - plot.x1 <= edge_pt + figure_layout.text_width_pt(["3.0"], 10.0) / 2 + 1
    assert whole.y0 <= edge_pt + 0.4 * 10, whole  # a line of 10 pt type is 12 pt high


def test_a_figure_too_small_for_its_texts_is_left_to_the_constrained_layout() -> None:
    figure, axes = _figure(height_in=0.4, nrows=3)
    for row in axes:
        row[0].set_title("a title")
        row[0].set_xlabel("an x label")
    figure_layout.arrange(figure)
    engine = figure.get_layout_engine()
    assert engine is not None and type(engine).__name__ == "ConstrainedLayoutEngine"


def test_a_figure_with_room_is_drawn_without_a_layout_engine() -> None:
    figure, axes = _figure(nrows=2, ncols=2)
    for row in axes:
        for ax in row:
            ax.plot([1, 10], [1, 100])
            ax.set_title("panel")
    figure_layout.arrange(figure)
    assert figure.get_layout_engine() is None
