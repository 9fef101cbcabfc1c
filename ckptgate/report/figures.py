"""The HTML report's figures: matplotlib drawn to SVG text, to be inlined (no JS, no network).

matplotlib is the optional extra ``report`` (``pip install 'ckptgate[report]'``); ``available()``
says whether it is installed, and the HTML report shows its tables without the figures where it
is not. Each figure is built on a bare ``Figure`` (no pyplot state, no GUI backend) and returned
as one ``<svg>`` element. Text stays text (``svg.fonttype: none``) so that it can be searched
and copied, and each figure's ids are salted with its name so that several can share a page.
"""

from __future__ import annotations

import importlib.util
import io
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from ckptgate.projection.projected import BY_METRIC
from ckptgate.report import figure_layout, series
from ckptgate.report.items import Item, format_margin, format_value
from ckptgate.report.saved import Burst
from ckptgate.report.schema import (
    ScalingSection,
    SeriesRun,
    SweepRow,
)

INSTALL_HINT = "plots need matplotlib: pip install 'ckptgate[report]'"

MAX_TIMELINE_RANKS = 64
"""Ranks drawn in one timeline; beyond it the slowest ones are drawn and the caption says so."""

PHASE_COLOURS = {
    "open_s": "#7f7f7f",
    "write_s": "#1f77b4",
    "read_s": "#2ca02c",
    "fsync_s": "#d62728",
    "close_s": "#9467bd",
}
STATUS_COLOURS = {"PASS": "#2ca02c", "FAIL": "#d62728", "ERROR": "#d62728", "report": "#9e9e9e"}
WIDTH_IN = 9.0
LOG_MINOR_SUBS = (2.0, 5.0)
"""A decimal log axis's minor ticks: at 2 and 5 times each power of ten, where matplotlib's
default puts eight (2 to 9). Each tick is a matplotlib artist of its own, made and drawn: the
report's ten figures at 2,048 nodes drew 442 minor ticks, and with these the HTML renders in
1.04 s against 1.21 s (10 interleaved pairs, medians; benchmarks/README.md, issue 31)."""


def available() -> bool:
    """Whether matplotlib is installed (the ``report`` extra)."""
    return importlib.util.find_spec("matplotlib") is not None


def new_figure(height_in: float, ncols: int = 1, nrows: int = 1) -> tuple[Any, Any]:
    """A bare figure and its grid of axes; its margins are set by ``_svg`` (``figure_layout``)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, height_in))
    axes = figure.subplots(nrows, ncols, squeeze=False)
    return figure, axes


def svg_of(
    figure: Any, name: str, right_pt: float = 0.0, top_pt: float = 0.0, **layout: str
) -> str:
    """``figure`` with its margins measured (room for a legend outside: ``right_pt`` beside,
    ``top_pt`` above; ``layout``: ``figure_layout.arrange``'s other words), drawn once to SVG
    text with page-unique element ids."""
    import matplotlib

    figure_layout.arrange(figure, right_pt=right_pt, top_pt=top_pt, **layout)
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"ckptgate-{name}"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = text.index("<svg")
    svg = text[start:]
    # Each figure's element ids become unique on a page that inlines several.
    svg = re.sub(r'id="([^"]+)"', rf'id="{name}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{name}-\1)", svg)
    svg = re.sub(r'xlink:href="#([^"]+)"', rf'xlink:href="#{name}-\1"', svg)
    return svg.replace("<svg ", f'<svg class="figure" data-figure="{name}" role="img" ', 1)


def unit_ticks(axis: Any, unit: str) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: format_value(v, unit) if v else "0"))


def margins(runs: Sequence[tuple[str, Sequence[Item]]]) -> str | None:
    """How far past its requirement each item lies (log scale, the requirement at x1); one
    bar per run and item (``ckptgate compare``), coloured by status for a single run."""
    ids = list(dict.fromkeys(i.id for _, items in runs for i in items if i.margin is not None))
    if not ids:
        return None
    by_run = [(label, {i.id: i for i in items}) for label, items in runs]
    titles = {i.id: f"{i.checklist or '-'}  {i.title}" for _, items in runs for i in items}
    height = 0.8 / len(by_run)
    figure, axes = new_figure((0.2 + 0.22 * len(by_run)) * len(ids) + 1.0)
    ax = axes[0][0]
    values = []
    for index, (label, items) in enumerate(by_run):
        for row, item_id in enumerate(ids):
            item = items.get(item_id)
            if item is None or item.margin is None:
                continue
            y = row + (index - (len(by_run) - 1) / 2) * height
            colour = STATUS_COLOURS[item.status] if len(by_run) == 1 else f"C{index}"
            ax.barh(y, item.margin, height=height * 0.92, color=colour)
            prefix = f" {label}:" if len(by_run) > 1 else ""
            ax.annotate(f"{prefix} {format_margin(item.margin)} {item.status}",
                        (item.margin, y), va="center", fontsize=7)  # fmt: skip
            values.append(item.margin)
    ax.set_xscale("log", subs=LOG_MINOR_SUBS)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(ids)), [titles[i] for i in ids])
    ax.invert_yaxis()
    ax.set_xlim(min(0.5, min(values) / 2), max(values) * 40)
    ax.set_xlabel("margin: measured against required (x1 = the requirement; right of it passes)")
    if len(by_run) > 1:
        handles = [_patch(f"C{n}", label) for n, (label, _) in enumerate(by_run)]
        ax.legend(handles=handles, fontsize=8, loc="lower right")
    return svg_of(figure, "margins")


def timeline(burst: Burst) -> tuple[str, str] | None:
    """Each rank's phases as horizontal bars on the burst's common time axis; the slowest rank
    is marked. Returns the SVG and a caption, or None without records."""
    records = list(burst.ranks)
    if not records:
        return None
    caption = f"{len(records)} ranks"
    if len(records) > MAX_TIMELINE_RANKS:
        records = sorted(records, key=lambda r: -r.total_s)[:MAX_TIMELINE_RANKS]
        caption = f"the {MAX_TIMELINE_RANKS} slowest of {len(burst.ranks)} ranks"
    records = sorted(records, key=lambda r: (r.node, r.global_rank))
    phases = burst.phases()
    figure, axes = new_figure(0.28 * len(records) + 1.3)
    ax = axes[0][0]
    _phase_bars(ax, records, phases)
    labels = []
    for record in records:
        label = f"node {record.node} rank {record.global_rank}"
        labels.append(label + ("  (slowest)" if burst.is_slowest(record) else ""))
    ax.set_yticks(range(len(records)), labels)
    for tick, record in zip(ax.get_yticklabels(), records, strict=True):
        if burst.is_slowest(record):
            tick.set_fontweight("bold")
            tick.set_color("#d62728")
    slowest = [row for row, r in enumerate(records) if burst.is_slowest(r)]
    for row in slowest:
        ax.axhspan(row - 0.45, row + 0.45, color="#d62728", alpha=0.12, linewidth=0)
        ax.axvline(records[row].end_s, color="#d62728", linewidth=0.8, linestyle="--")
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    unit_ticks(ax.xaxis, "s")
    ax.set_xlabel(f"time from the common start ({burst.label}); dashed: the slowest rank's end")
    handles = [_patch(PHASE_COLOURS[p], p.removesuffix("_s")) for p in phases]
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    name = f"timeline-{burst.label.replace(' ', '-')}"
    right_pt = figure_layout.legend_width_pt(legend)
    return svg_of(figure, name, right_pt=right_pt, y_weight="bold"), caption


BAR_HEIGHT = 0.7
"""A timeline bar's height, in rows."""


def _phase_bars(ax: Any, records: Sequence[Any], phases: Sequence[str]) -> None:
    """Each record's phases back to back from its start, one row per record: a polygon
    collection per phase (a bar each as one ``Rectangle`` artist cost the timeline half its
    time: 64 rows of 4 phases in 4 bursts are a thousand artists, each updating the limits)."""
    from matplotlib.collections import PolyCollection

    lefts = [r.start_s for r in records]
    half = BAR_HEIGHT / 2
    for phase in phases:
        widths = [r.phase_s(phase) or 0.0 for r in records]
        boxes = [
            [(x, row - half), (x + w, row - half), (x + w, row + half), (x, row + half)]
            for row, (x, w) in enumerate(zip(lefts, widths, strict=True))
            if w > 0
        ]
        ax.add_collection(PolyCollection(boxes, facecolors=PHASE_COLOURS[phase], linewidths=0))
        lefts = [left + width for left, width in zip(lefts, widths, strict=True)]
    ax.autoscale_view()


def _patch(colour: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(color=colour, label=label)


MAX_BAR_NODES = 12
"""Nodes drawn as grouped bars with a label each; beyond it, one line per burst over the nodes."""


def node_bandwidth(bursts: Sequence[Burst]) -> str | None:
    """Each node's bandwidth in each burst (node_bytes_per_s): grouped bars, one per node and
    burst, up to ``MAX_BAR_NODES`` nodes; beyond, a step line per burst over the node index
    (hundreds of labelled bars neither read nor draw in reasonable time)."""
    series = [(b.label, b.section.node_bytes_per_s) for b in bursts]
    series = [(label, values) for label, values in series if values]
    if not series:
        return None
    nodes = sorted({int(n) for _, values in series for n in values})
    figure, axes = new_figure(3.2)
    ax = axes[0][0]
    if len(nodes) <= MAX_BAR_NODES:
        width = 0.8 / len(series)
        for index, (label, values) in enumerate(series):
            xs = [n + (index - (len(series) - 1) / 2) * width for n in nodes]
            ax.bar(xs, [values.get(str(n), 0.0) for n in nodes], width=width, label=label)
        ax.set_xticks(nodes, [f"node {n}" for n in nodes])
    else:
        from matplotlib.ticker import MaxNLocator

        edges = [*nodes, nodes[-1] + 1]
        for label, values in series:
            ax.stairs([values.get(str(n), 0.0) for n in nodes], edges, label=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(nodes[0], nodes[-1] + 1)
        ax.set_xlabel(f"node ({len(nodes)} nodes)")
    unit_ticks(ax.yaxis, "B/s")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bandwidth per node")
    ax.legend(fontsize=8)
    return svg_of(figure, "node-bandwidth")


def bandwidth_over_time(runs: Sequence[SeriesRun]) -> str | None:
    """Each run's sampled bandwidth (``bandwidth_series``) against the time since its common
    start, drawn as steps: the aggregate over nodes, one line per run; with several nodes a
    second panel gives the mean node and a band from the slowest to the fastest node
    (``ckptgate.report.series``). The legend names the runs, never the nodes, so the figure
    reads the same at 2 ranks and at 2,048."""
    drawn = series.by_run(runs)
    if not drawn:
        return None
    spread = max(r.nodes for r in drawn) > 1
    figure, axes = new_figure(5.6 if spread else 3.2, nrows=2 if spread else 1)
    total_ax = axes[0][0]
    for index, run in enumerate(drawn):
        colour = f"C{index % 10}"
        total_ax.stairs(run.total_bytes_per_s, run.edges_s, color=colour, label=run.label)
        if spread:
            node_ax = axes[1][0]
            node_ax.stairs(
                run.fastest_node_bytes_per_s,
                run.edges_s,
                color=colour,
                alpha=0.25,
                baseline=run.slowest_node_bytes_per_s,
                fill=True,
                linewidth=0,
            )
            node_ax.stairs(run.mean_node_bytes_per_s, run.edges_s, color=colour)  # fmt: skip
    nodes = max(r.nodes for r in drawn)
    total_ax.set_ylabel(f"aggregate ({nodes} node{'s' if nodes > 1 else ''})")
    for row in axes:
        ax = row[0]
        unit_ticks(ax.yaxis, "B/s")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
    if spread:
        axes[1][0].set_ylabel("per node")
        axes[1][0].set_title("per node: the mean, and a band from the slowest to the fastest node",
                             fontsize=8)  # fmt: skip
    axes[-1][0].set_xlabel("seconds since the run's common start")
    columns = min(4, len(drawn))
    legend = total_ax.legend(fontsize=7, ncols=columns, loc="lower center",
                             bbox_to_anchor=(0.5, 1.0), frameon=False)  # fmt: skip
    top_pt = figure_layout.legend_height_pt(legend, columns)
    return svg_of(figure, "bandwidth-over-time", top_pt=top_pt)


Line = tuple[str, Callable[[SweepRow], float | None]]
"""One line of a sweep panel: its legend label and the row's number it plots."""

SWEEP_PANELS: tuple[tuple[str, tuple[Line, ...], str], ...] = (
    ("lost work to failures", (("lost work", lambda r: r.lost_work_fraction),), "fraction"),
    ("stall budget per checkpoint", (("stall budget", lambda r: r.stall_budget_s),), "s"),
    ("sync write bandwidth needed", (("sync write", lambda r: r.sync_write_bytes_per_s),), "B/s"),
    ("async persist bandwidth needed",
     (("min", lambda r: r.async_persist_min_bytes_per_s),
      ("planned", lambda r: r.async_persist_planned_bytes_per_s)), "B/s"),
)  # fmt: skip


def sizing_sweep(rows: Sequence[SweepRow], measured_bytes_per_s: float | None) -> str | None:
    """Lost work, stall, sync and async bandwidth against the checkpoint interval, the chosen
    interval and Young's and Daly's optima marked; the run's measured write bandwidth beside
    the bandwidth panels where it is comparable (a full-cluster run)."""
    rows = [r for r in rows if r.interval_s]
    if len(rows) < 2:
        return None
    figure, axes = new_figure(5.6, ncols=2, nrows=2)
    xs = [r.interval_s for r in rows]
    marks = _merged_marks([(r.interval_s, r.label) for r in rows if r.label])
    for ax, (title, names, unit) in zip(
        (a for line in axes for a in line), SWEEP_PANELS, strict=True
    ):
        for label, value in names:
            ax.plot(xs, [value(r) for r in rows], marker="o", markersize=3, label=label)
        if unit == "B/s" and measured_bytes_per_s:
            ax.axhline(measured_bytes_per_s, color="#2ca02c", linewidth=1.2,
                       label="measured write")  # fmt: skip
        for x, label in marks:
            ax.axvline(x, color="#555555", linestyle=":", linewidth=0.9)
            ax.annotate(label, (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="right", fontsize=7)  # fmt: skip
        ax.set_xscale("log", subs=LOG_MINOR_SUBS)
        ax.set_yscale("log", subs=LOG_MINOR_SUBS)
        ax.set_title(title, fontsize=9)
        unit_ticks(ax.xaxis, "s")
        unit_ticks(ax.yaxis, unit)
        ax.tick_params(labelsize=7)
        if len(names) > 1 or (unit == "B/s" and measured_bytes_per_s):
            ax.legend(fontsize=7)
    for ax in axes[1]:
        ax.set_xlabel("checkpoint interval", fontsize=8)
    return svg_of(figure, "sizing-sweep")


def _merged_marks(marks: Sequence[tuple[float, str]]) -> list[tuple[float, str]]:
    """Interval marks closer than 10 % to each other share one line and one label (Young's and
    Daly's optima are often a few seconds apart)."""
    merged: list[tuple[float, str]] = []
    for x, label in sorted(marks):
        if merged and math.isclose(x, merged[-1][0], rel_tol=0.1):
            merged[-1] = (merged[-1][0], f"{merged[-1][1]}, {label}")
        else:
            merged.append((x, label))
    return merged


POINT_FIELDS = {"write": "write_bytes_per_s", "read": "read_bytes_per_s", "create": "create_per_s"}
"""Each swept metric and the ``ScalingPoint`` field that holds it."""


def scaling(section: ScalingSection) -> str | None:
    """The scaling sweep, one panel per projected metric: every repeat at the run's ranks per
    node (dots), the fitted USL curve to the profile's node count with its prediction band
    (shaded, where the fit projects), the requirement at the full count (dashed) and that
    count (dotted). Log-log: a straight line of slope 1 is perfect scaling."""
    from matplotlib.ticker import NullFormatter

    items = section.projection.items if section.projection else ()
    if not items:
        return None
    run_ranks = section.plan.run_ranks
    points = [p for p in section.points if p.ranks_per_node == run_ranks]
    figure, axes = new_figure(3.2, ncols=len(items))
    for ax, item in zip(axes[0], items, strict=True):
        xs = [p.nodes for p in points]
        ys = [getattr(p, POINT_FIELDS[item.metric]) for p in points]
        ax.scatter(xs, ys, s=14, color="#1f77b4", zorder=3, label="measured (each repeat)")
        curve = item.curve
        if curve:
            cx = [c.nodes for c in curve]
            ax.plot(cx, [c.estimate for c in curve], color="#1f77b4", linewidth=1,
                    label="USL fit")  # fmt: skip
            lower, upper = [c.lower for c in curve], [c.upper for c in curve]
            if all(v is not None for v in lower + upper):
                ax.fill_between(cx, lower, upper, color="#1f77b4", alpha=0.18, linewidth=0,
                                label="prediction band")  # fmt: skip
        ax.axhline(item.required, color="#d62728", linestyle="--", linewidth=1,
                   label="required at the full count")  # fmt: skip
        ax.axvline(item.cluster_nodes, color="black", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", subs=LOG_MINOR_SUBS)
        unit_ticks(ax.yaxis, item.unit)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("nodes")
        ax.set_title(f"{item.title}: {item.word}", fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    return svg_of(figure, "scaling")


def scaling_ranks(section: ScalingSection) -> str | None:
    """Throughput against ranks per node, one panel per metric and one line per node count
    (``projection.ranks``): where a node's client stops gaining from more ranks."""
    curves = section.ranks.curves
    metrics = list(dict.fromkeys(c.metric for c in curves))
    if not metrics:
        return None
    figure, axes = new_figure(3.0, ncols=len(metrics))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for curve in (c for c in curves if c.metric == metric):
            ax.plot(curve.ranks_per_node, curve.means, marker="o", markersize=3, linewidth=1,
                    label=f"{curve.nodes} node(s)")  # fmt: skip
        ax.set_xscale("log", base=2)
        unit_ticks(ax.yaxis, BY_METRIC[metric].unit)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("ranks per node")
        ax.set_title(metric, fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    return svg_of(figure, "scaling-ranks")
