"""The HTML report: one self-contained page from a saved JSON report.

Every style and figure is inline (SVG drawn by matplotlib, ``report/figures.py``); there is no
script and nothing is fetched, so the page can be mailed, archived, or pasted into a
procurement document as it is. Each figure has its numbers in a table beside it; without
matplotlib the tables stay and the page says how to get the figures. The page building blocks
(``page``, ``table``) serve ``ckptgate compare`` too.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import ckptgate
from ckptgate.projection.projected import BY_METRIC
from ckptgate.report import figures, series
from ckptgate.report.items import Item, format_margin, format_value
from ckptgate.report.saved import Burst, bursts, items_of, sweep_rows
from ckptgate.report.schema import (
    LatencyStats,
    SavedReport,
    SavedVerdict,
    ScalingSection,
    SeriesSection,
)
from ckptgate.report.sections import ReportPart, render_part

STYLE = """
body { font-family: "DejaVu Sans", Arial, Helvetica, sans-serif; color: #111; margin: 2em auto;
       max-width: 68em; padding: 0 1em; line-height: 1.35; }
h1 { font-size: 1.45em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.86em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.detail { color: #555; font-size: 0.85em; }
.verdict { padding: 0.6em 0.9em; border-radius: 4px; font-weight: bold; margin: 0.8em 0; }
.verdict-qualified { background: #e3f4e1; border: 1px solid #2ca02c; }
.verdict-partial, .verdict-trial { background: #fff4d6; border: 1px solid #d9a400; }
.verdict-failed, .verdict-error { background: #fbe1e1; border: 1px solid #d62728; }
.status-PASS { color: #1d7a1d; font-weight: bold; }
.status-FAIL, .status-ERROR { color: #c01f1f; font-weight: bold; }
.status-report { color: #666; }
.warning { background: #fff4d6; border-left: 4px solid #d9a400; padding: 0.3em 0.7em; }
.note { color: #555; font-style: italic; }
figure { margin: 0.8em 0; }
figcaption { color: #444; font-size: 0.85em; }
svg.figure { max-width: 100%; height: auto; display: block; }
details { margin: 0.4em 0; }
footer { margin-top: 2.5em; color: #666; font-size: 0.8em; }
@media print { h2 { break-after: avoid; } figure, table { break-inside: avoid; } }
"""

Cell = str | tuple[str, str]
"""A table cell: text (escaped), or (class, inner HTML already escaped)."""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def num(text: str) -> Cell:
    """A right-aligned numeric cell."""
    return ("num", esc(text))


def table(header: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """An HTML table; each cell is escaped text or a (class, HTML) pair."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                cells.append(f'<td class="{cell[0]}">{cell[1]}</td>')
            else:
                cells.append(f"<td>{esc(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: Sequence[str]) -> str:
    """A complete HTML document: inline style, no script, nothing fetched."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + f"\n<footer>ckptgate {esc(ckptgate.__version__)}: self-contained report (inline SVG, "
        "no scripts, nothing fetched).</footer>\n</body></html>\n"
    )


def field_table(header: Sequence[str], fields: Sequence[tuple[str, float | None, str]]) -> str:
    """A two-column table of a section's numbers: (label, value, unit) per row."""
    return table(header, [(label, num(format_value(value, unit))) for label, value, unit in fields])


def figure(svg: str | None, caption: str) -> str:
    """A figure, or the reason there is none (no matplotlib, nothing to plot)."""
    if svg is None:
        return ""
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def verdict_box(verdict: SavedVerdict) -> str:
    return f'<div class="verdict verdict-{esc(verdict.status)}">{esc(verdict.line)}</div>'


def status_cell(status: str) -> Cell:
    return (f"status-{status.replace(' ', '-')}", esc(status))


def gate_rows(items: Sequence[Item]) -> list[list[Cell]]:
    """The gate table's rows: the title with its detail under it, this run's requirement, the
    cluster's, the measurement, the margin and the status."""
    rows: list[list[Cell]] = []
    for item in items:
        words = item.error if item.error is not None else item.detail
        node = f" (node {item.node})" if item.node is not None else ""
        title = f'{esc(item.title)}<div class="detail">{esc(words)}</div>'
        rows.append(
            [
                item.checklist or "",
                ("item", title),
                num(format_value(item.required, item.unit)),
                num(format_value(item.cluster_required, item.unit)),
                num(format_value(item.measured, item.unit)),
                num(format_margin(item.margin)),
                (f"status-{item.status}", esc(item.status + node)),
            ]
        )
    return rows


GATE_HEADER = ("#", "item", "this run requires", "the cluster requires", "measured", "margin",
               "verdict")  # fmt: skip


def _facts(report: SavedReport) -> str:
    scale = report.verdict.scale
    memory = report.memory_backed
    rows = [
        ("cluster profile", f"{report.profile} ({report.profile_source or ''})"),
        ("profile's size", report.profile_as_run.size_words if report.profile_as_run
                           else "not recorded"),
        ("target", f"{report.target} ({report.fs_type}"
                   f"{', memory-backed: its page cache is the storage' if memory else ''})"),
        ("free on the target", format_value(report.free_bytes, "B")),
        ("scale", scale.words or f"{report.nodes} nodes, {report.ranks} ranks"),
        ("trial settings", "; ".join(scale.trial_settings) or "none"),
        ("host (node 0)", report.hostname),
        ("started", report.started_at),
        ("suite", f"ckptgate {report.ckptgate_version}"),
        *(("profile's default", note) for note in report.profile_notes),
    ]  # fmt: skip
    return table(("run", ""), [(k, "" if v is None else str(v)) for k, v in rows])


def _burst_summary(found: Sequence[Burst]) -> str:
    rows = []
    for burst in found:
        section = burst.section
        slowest = section.slowest_rank
        rows.append(
            [
                burst.label,
                num(str(len(burst.ranks))),
                num(format_value(section.total_bytes, "B")),
                num(format_value(section.span_s, "s")),
                num(format_value(section.aggregate_bytes_per_s, "B/s")),
                f"node {slowest.node} rank {slowest.global_rank}: "
                f"{format_value(slowest.total_s, 's')}",
                num(_transfer_latency(section.transfer_latency_s)),
            ]
        )
    header = (
        "burst",
        "ranks",
        "bytes",
        "span",
        "aggregate",
        "slowest rank",
        "per transfer p50 / p99 / max",
    )
    return table(header, rows)


def _transfer_latency(latency: dict[str, LatencyStats]) -> str:
    """``write 12.0 ms / 30.1 ms / 41.0 ms`` per operation the burst timed, or empty."""
    return "; ".join(
        f"{op} " + " / ".join(format_value(seconds, "s") for _, seconds in stats.marks_s())
        for op, stats in latency.items()
    )


MAX_RANK_ROWS = 256
"""Rank rows a burst's table shows at most: the slowest ones. Every rank's record is in the
JSON and the CSV's ``-ranks`` file; a page of 16,384 rows per burst would not open quickly
(``ckptgate bench scale``)."""


def _rank_table(burst: Burst) -> str:
    phases = burst.phases()
    header = ("node", "rank", "bytes", "start", *(p.removesuffix("_s") for p in phases), "total")
    shown = list(burst.ranks)
    if len(shown) > MAX_RANK_ROWS:
        shown = sorted(shown, key=lambda r: -r.end_s)[:MAX_RANK_ROWS]
        summary = (
            f"the {MAX_RANK_ROWS} slowest ranks' records of {len(burst.ranks)} (every rank's "
            "is in the JSON report and the CSV's -ranks file)"
        )
    else:
        summary = f"every rank's record ({len(shown)} ranks)"
    rows = []
    for record in sorted(shown, key=lambda r: (r.node, r.global_rank)):
        mark = " (slowest)" if burst.is_slowest(record) else ""
        rows.append(
            [
                num(str(record.node)),
                num(f"{record.global_rank}{mark}"),
                num(format_value(record.bytes, "B")),
                num(format_value(record.start_s, "s")),
                *(num(format_value(record.phase_s(p), "s")) for p in phases),
                num(format_value(record.total_s, "s")),
            ]
        )
    return f"<details><summary>{summary}</summary>{table(header, rows)}</details>"


def _bursts(found: Sequence[Burst], plots: bool) -> list[str]:
    out = ["<h2>Bursts: per-rank phases</h2>"]
    if not found:
        return [*out, '<p class="note">no burst section in this report</p>']
    out.append(_burst_summary(found))
    for burst in found:
        out.append(f"<h3>{esc(burst.label)}</h3>")
        drawn = figures.timeline(burst) if plots else None
        if drawn is not None:
            svg, caption = drawn
            out.append(
                figure(svg, f"{burst.label}: {caption}; open, transfer, fsync and close drawn "
                       "back to back from each rank's start on the burst's common time axis")
            )  # fmt: skip
        out.append(_rank_table(burst))
    out.append("<h3>Bandwidth per node</h3>")
    nodes = sorted({int(n) for b in found for n in b.section.node_bytes_per_s})
    rows: list[list[Cell]] = [
        [
            f"node {n}",
            *(num(format_value(b.section.node_bytes_per_s.get(str(n)), "B/s")) for b in found),
        ]
        for n in nodes
    ]
    out.append(table(("node", *(b.label for b in found)), rows))
    if plots:
        out.append(figure(figures.node_bandwidth(found), "each node's bytes over the burst span"))
    return out


def _series(section: SeriesSection | None, plots: bool) -> list[str]:
    """Bandwidth over time: the live progress sampler's series (``bandwidth_series``)."""
    out = ["<h3>Bandwidth over time</h3>"]
    runs = section.runs if section else ()
    if not runs:
        return [*out, '<p class="note">no bandwidth series in this report</p>']
    combined = [
        [
            esc(run.label),
            num(str(run.nodes)),
            num(format_value(float(run.total_bytes_per_s.max(initial=0.0)), "B/s")),
            num(format_value(float(run.slowest_node_bytes_per_s.max(initial=0.0)), "B/s")),
            num(format_value(float(run.fastest_node_bytes_per_s.max(initial=0.0)), "B/s")),
        ]
        for run in series.by_run(runs)
    ]
    header = ("run", "nodes", "peak aggregate", "slowest node's peak", "fastest node's peak")
    out.append(table(header, combined))
    rows = [
        [
            esc(f"{r.phase} #{r.nth}"),
            num(str(r.node)),
            num(str(len(r.t_s))),
            num(format_value(r.interval_s, "s")),
            num(format_value(max(r.bytes_per_s or (0.0,)), "B/s")),
        ]
        for r in runs
    ]
    out.append(
        f"<details><summary>every run's series on every node ({len(rows)} series)</summary>"
        f"{table(('run', 'node', 'samples', 'interval', 'peak'), rows)}</details>"
    )
    if plots:
        caption = (
            "bytes per second between samples of the ranks' progress: each run's "
            "aggregate over its nodes, and per node the mean with the slowest to fastest"
        )
        out.append(figure(figures.bandwidth_over_time(runs), caption))
    return out


def _sweep(report: SavedReport, plots: bool) -> list[str]:
    out = ["<h2>Sizing sweep: the requirement against the checkpoint interval</h2>"]
    rows, source = sweep_rows(report)
    out.append(f'<p class="note">{esc(source)}; derived, not measured</p>')
    if not rows:
        return out
    header = ("interval", "", "lost work", "goodput loss", "stall budget", "sync write",
              "async persist (min)", "async persist (planned)", "create rate")  # fmt: skip
    body = [
        [
            num(format_value(r.interval_s, "s")),
            r.label,
            num(format_value(r.lost_work_fraction, "fraction")),
            num(format_value(r.goodput_loss_fraction, "fraction")),
            num(format_value(r.stall_budget_s, "s")),
            num(format_value(r.sync_write_bytes_per_s, "B/s")),
            num(format_value(r.async_persist_min_bytes_per_s, "B/s")),
            num(format_value(r.async_persist_planned_bytes_per_s, "B/s")),
            num(format_value(r.create_rate_per_s, "1/s")),
        ]
        for r in rows
    ]
    out.append(table(header, body))
    if plots:
        write = report.write
        full = report.verdict.scale.full_cluster
        measured = write.aggregate_bytes_per_s if write is not None and full else None
        note = "" if measured else " (no measured line: the run played part of the cluster)"
        out.append(
            figure(figures.sizing_sweep(rows, measured),
                   "the full cluster's requirements at each interval; dotted: the chosen "
                   f"interval and Young's and Daly's optima; green: the measured write{note}")
        )  # fmt: skip
    return out


def _scaling(section: ScalingSection | None, plots: bool) -> list[str]:
    """The scaling sweep: its projection (never a verdict), every point, the figure, and the
    ranks-per-node curves where they were swept."""
    if section is None:
        return []
    out = ["<h2>Scaling sweep and projection</h2>"]
    out.append(f'<p class="note">{esc(section.words)}; every byte verified</p>')
    projection = section.projection
    if projection:
        out.append(f'<p class="detail">{esc(projection.line)}</p>')
        rows = [
            [
                item.title,
                num(format_value(item.required, item.unit)),
                num(format_value(item.measured_worst, item.unit)),
                num(format_value(item.lower, item.unit)),
                num(format_value(item.estimate, item.unit)),
                num(format_value(item.upper, item.unit)),
                item.word,
                item.reason,
            ]
            for item in projection.items
        ]
        header = ("metric", "required at N", "worst at k", "lower", "projected", "upper",
                  "projection", "why")  # fmt: skip
        out.append(table(header, rows))
    elif section.no_projection:
        out.append(f'<p class="note">{esc(section.no_projection)}</p>')
    points = [
        [
            num(str(p.nodes)),
            num(str(p.ranks_per_node)),
            num(str(p.repeat)),
            num(format_value(p.write_bytes_per_s, "B/s")),
            num(format_value(p.read_bytes_per_s, "B/s")),
            num(format_value(p.create_per_s, "1/s")),
        ]
        for p in section.points
    ]
    out.append(table(("nodes", "ranks/node", "repeat", "write", "read", "creates"), points))
    if plots:
        out.append(
            figure(figures.scaling(section),
                   "dots: each repeat; line and band: the USL fit and its prediction band (one "
                   "measurement; the USL's and Amdahl's where the points allow both); dashed: "
                   "the requirement at the full count; dotted: the full count")
        )  # fmt: skip
    out += _scaling_ranks(section, plots)
    return out


def _scaling_ranks(section: ScalingSection, plots: bool) -> list[str]:
    """The ranks-per-node curves (``projection.ranks``): described, never projected."""
    curves = section.ranks.curves
    if not curves:
        return []
    out = ["<h3>Ranks per node</h3>", f'<p class="note">{esc(section.ranks.meaning)}</p>']
    rows = []
    for c in curves:
        unit = BY_METRIC[c.metric].unit
        shown = ", ".join(
            f"{r}: {format_value(m, unit)} ({e:.0%})"
            for r, m, e in zip(c.ranks_per_node, c.means, c.efficiency, strict=True)
        )
        if c.fit is None:
            fit = c.note
        else:
            peak = c.fit.saturation_ranks_per_node
            where = "none (κ = 0)" if peak is None else f"at {peak:.1f} ranks per node"
            fit = f"σ {c.fit.sigma:.3f}, κ {c.fit.kappa:.2e}, R² {c.fit.r_squared:.3f}"
            fit += f", peak {where}"
        rows.append([c.metric, num(str(c.nodes)), shown, num(str(c.best_ranks_per_node)), fit])
    header = ("metric", "nodes", "ranks per node: mean (efficiency)", "best", "USL over ranks")
    out.append(table(header, rows))
    if plots:
        out.append(
            figure(figures.scaling_ranks(section),
                   "mean throughput against ranks per node, a line per node count")
        )  # fmt: skip
    return out


def render_report(report: SavedReport, source: str = "", parts: Sequence[ReportPart] = ()) -> str:
    """The HTML page for one saved JSON report (``source`` names the file it came from;
    ``parts``: the checks' own sections, from the check table)."""
    plots = figures.available()
    items = items_of(report)
    verdict = report.verdict
    title = f"ckptgate: {report.profile} on {report.target}"
    body = [f"<h1>{esc(title)}</h1>"]
    if source:
        body.append(f'<p class="note">from {esc(source)}</p>')
    body.append(verdict_box(verdict))
    scaling = report.scaling
    if scaling is not None and scaling.projection:  # its own line, below the verdict
        body.append(f'<p class="detail">{esc(scaling.projection.line)}</p>')
    if not plots:
        body.append(f'<p class="warning">{esc(figures.INSTALL_HINT)}; the tables are complete</p>')
    body.append(_facts(report))
    body.append("<h2>Gate</h2>")
    body.append(table(GATE_HEADER, gate_rows(items)))
    scopes = list(dict.fromkeys(i.scope for i in items if i.scope))
    body.extend(f'<p class="detail">scope: {esc(s)}</p>' for s in scopes)
    failures = [i for i in items if i.status in ("FAIL", "ERROR")]
    if failures:
        body.append("<ul>" + "".join(f"<li>{esc(i.message)}</li>" for i in failures) + "</ul>")
    if plots:
        body.append(figure(figures.margins([("", items)]), "margin of each item; log scale"))
    found = list(bursts(report, parts))
    body += _bursts(found, plots)
    body += _series(report.bandwidth_series, plots)
    for part in parts:  # the checks' own sections, in the table's order
        body += render_part(report, part, plots)
    body += _sweep(report, plots)
    body += _scaling(scaling, plots)
    return page(title, body)


def write_html(
    report: SavedReport, path: str, source: str = "", parts: Sequence[ReportPart] = ()
) -> None:
    """Render first, then write: a page that fails to render leaves no empty file."""
    page = render_report(report, source, parts)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(page)
