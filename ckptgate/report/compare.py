"""``ckptgate compare A.json B.json [...]``: saved runs side by side, and what makes it unfair.

Two storage systems compare fairly only when the runs asked the same of them: the same cluster
profile and sizing numbers, the same scale (nodes, ranks, capped shards), the same suite
version, and alike targets (a memory-backed target measures RAM, not storage). Every difference
of that kind is printed first, as a warning; then each run's verdict with its tightest margin,
then every item's required, measured and margin per run.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptgate.report.checklist import question_key
from ckptgate.report.items import Item, format_margin, format_value
from ckptgate.report.saved import items_of, load_report
from ckptgate.report.schema import SavedReport, SavedScale, SavedVerdict
from ckptgate.report.text import columns

SIZING_SKIPPED = ("requirements", "description", "profile", "profile_name")
"""Sizing keys that are not numbers to compare (the profile name is compared on its own)."""


@dataclass(frozen=True)
class Run:
    """One saved report in a comparison: its letter, its file and its contents."""

    label: str
    path: str
    report: SavedReport

    @property
    def items(self) -> list[Item]:
        return items_of(self.report)

    @property
    def verdict(self) -> SavedVerdict:
        return self.report.verdict

    @property
    def scale(self) -> SavedScale:
        return self.verdict.scale

    def tightest(self) -> Item | None:
        """The gated item with the smallest margin: by how much the run passed (or failed).
        Items that must equal their requirement (checkpoint bytes) have no room to spare and
        are left out."""
        gated = [
            i
            for i in self.items
            if i.passed is not None and i.margin is not None and i.better != "equal"
        ]
        return min(gated, key=lambda i: i.margin or 0.0) if gated else None

    def summary(self) -> str:
        """``qualified, tightest margin x16.7 (load generator vs target)``."""
        tight = self.tightest()
        how = f", tightest margin {format_margin(tight.margin)} ({tight.title})" if tight else ""
        return f"{self.verdict.status}{how}"


def load_runs(paths: Sequence[str]) -> list[Run]:
    """Saved reports labelled A, B, C ... (then A2, B2 ... beyond 26)."""
    letters = string.ascii_uppercase
    return [
        Run(letters[n % 26] + (str(n // 26 + 1) if n >= 26 else ""), path, load_report(path))
        for n, path in enumerate(paths)
    ]


def _unit(name: str, sizing: dict[str, Any]) -> str:
    requirement = (sizing.get("requirements") or {}).get(name)
    if requirement:
        return requirement.get("unit", "")
    for suffix, unit in (("_bytes_per_s", "B/s"), ("_per_s", "1/s"), ("_bytes", "B"),
                         ("_s", "s"), ("_fraction", "fraction")):  # fmt: skip
        if name.endswith(suffix) or name.endswith(suffix + "_per_node"):
            return unit
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(values: Sequence[Any]) -> bool:
    """Equal, exactly for integers and text, within float noise (1e-9 relative) for floats."""
    first = values[0]
    if all(_is_number(v) for v in values) and any(isinstance(v, float) for v in values):
        return all(math.isclose(v, first, rel_tol=1e-9) for v in values)
    return all(v == first for v in values)


def _exact(value: int | float, unit: str) -> str:
    """The value as saved: every digit of an integer, a float's shortest repr."""
    text = f"{value:,}" if isinstance(value, int) else repr(value)
    return f"{text} {unit}".rstrip()


def _each(runs: Sequence[Run], values: Sequence[Any], unit: str = "") -> str:
    """Each run's value; numbers in their unit, exact where two would print alike, and each
    later run's change relative to the first run's value."""
    numeric = bool(unit) and all(_is_number(v) for v in values)
    shown = [format_value(v, unit) if numeric else str(v) for v in values]
    if numeric and len(set(shown)) < len(shown):
        shown = [f"{text} ({_exact(v, unit)})" for text, v in zip(shown, values, strict=True)]
    text = ", ".join(f"{run.label} {shown}" for run, shown in zip(runs, shown, strict=True))
    if numeric and values[0]:
        changes = [
            f"{run.label} {100 * (v - values[0]) / abs(values[0]):+.3g} %"
            for run, v in zip(runs[1:], values[1:], strict=True)
        ]
        text += f" (relative to {runs[0].label}: {', '.join(changes)})"
    return text


def unfairness(runs: Sequence[Run]) -> list[str]:
    """Every difference between the runs that makes comparing their storage unfair."""
    warnings = []

    def differs(what: str, values: Sequence[Any], unit: str = "", why: str = "") -> None:
        if not _same(values):
            warnings.append(f"{what} differs: {_each(runs, values, unit)}{why}")

    differs("cluster profile", [r.report.profile for r in runs],
            why=": the runs were asked for different requirements")  # fmt: skip
    sizings = [r.report.sizing for r in runs]
    names = [k for k in dict.fromkeys(k for s in sizings for k in s) if k not in SIZING_SKIPPED]
    for name in names:
        differs(f"sizing {name}", [s.get(name) for s in sizings], _unit(name, sizings[0]))
    differs("nodes", [_or(r.scale.nodes, r.report.nodes) for r in runs])
    differs("cluster nodes", [r.scale.cluster_nodes for r in runs])
    differs("ranks", [_or(r.scale.ranks, r.report.ranks) for r in runs])
    differs("capped shards", [r.report.write.capped if r.report.write else None for r in runs],
            why=": a capped run writes less than a checkpoint")  # fmt: skip
    differs("trial settings", ["; ".join(r.scale.trial_settings) or "none" for r in runs])
    differs("suite version (ckptgate_version)", [r.report.ckptgate_version for r in runs],
            why=": the measurements may differ in method")  # fmt: skip
    differs("memory-backed target", [bool(r.report.memory_backed) for r in runs],
            why=": a memory-backed target's page cache is the storage")  # fmt: skip
    return warnings


def _or(first: int | None, second: int | None) -> int | None:
    """The verdict's scale's count, or the run's own where the scale has none."""
    return first if first is not None else second


def item_ids(runs: Sequence[Run]) -> list[str]:
    """Every item any run answered, in checklist order."""
    numbers: dict[str, str | None] = {}
    for run in runs:  # each run's items are in its table's order; the first run's order leads
        for item in run.items:
            numbers.setdefault(item.id, item.checklist)
    return sorted(numbers, key=lambda id: question_key(numbers[id]))


def item_cells(item: Item | None) -> tuple[str, str, str, str]:
    """An item's required, measured, margin and status for one run ("-" where not answered)."""
    if item is None:
        return ("-", "-", "-", "not run")
    return (
        format_value(item.required, item.unit),
        format_value(item.measured, item.unit),
        format_margin(item.margin),
        item.status,
    )


def item_table(runs: Sequence[Run]) -> tuple[list[str], list[list[str]]]:
    """The side-by-side table: one row per item, four columns per run."""
    header = ["#", "item"]
    for run in runs:
        header += [f"{run.label} required", f"{run.label} measured", f"{run.label} margin",
                   run.label]  # fmt: skip
    by_run = [{i.id: i for i in run.items} for run in runs]
    rows = []
    for item_id in item_ids(runs):
        first = next(items[item_id] for items in by_run if item_id in items)
        row = [first.checklist or "", first.title]
        for items in by_run:
            row += item_cells(items.get(item_id))
        rows.append(row)
    return header, rows


def run_lines(runs: Sequence[Run]) -> list[str]:
    """One line per run: its letter, file, profile and target, and its verdict."""
    return [
        f"{run.label}: {run.path}: {run.report.profile} on {run.report.target} "
        f"({run.report.fs_type}), {run.scale.words}: {run.summary()}"
        for run in runs
    ]


def render_text(runs: Sequence[Run]) -> list[str]:
    """Warnings first, then the runs and their verdicts, then the item table."""
    lines = [f"WARNING: unfair comparison: {w}" for w in unfairness(runs)]
    if lines:
        lines.append("")
    lines += run_lines(runs)
    lines.append("")
    header, rows = item_table(runs)
    lines += columns([header, *rows])
    return lines


def render_html(runs: Sequence[Run]) -> str:
    """The comparison as one self-contained page (warnings, verdicts, table, margins)."""
    from ckptgate.report import figures
    from ckptgate.report.html import esc, figure, num, page, status_cell, table, verdict_box

    body = [f"<h1>ckptgate: {len(runs)} runs compared</h1>"]
    body += [f'<p class="warning">unfair comparison: {esc(w)}</p>' for w in unfairness(runs)]
    for run in runs:
        body.append(f"<h3>{esc(run.label)}: {esc(Path(run.path).name)}</h3>")
        body.append(verdict_box(run.verdict))
        body.append(f'<p class="detail">{esc(run_lines([run])[0])}</p>')
    header, rows = item_table(runs)
    statuses = {r.label for r in runs}
    cells = [
        [
            cell if n < 2 else (status_cell(cell) if header[n] in statuses else num(cell))
            for n, cell in enumerate(row)
        ]
        for row in rows
    ]
    body.append("<h2>Items</h2>")
    body.append(table(header, cells))
    if figures.available():
        svg = figures.margins([(run.label, run.items) for run in runs])
        body.append(figure(svg, "margin of each item per run; log scale"))
    else:
        body.append(f'<p class="warning">{esc(figures.INSTALL_HINT)}</p>')
    return page(f"ckptgate compare: {', '.join(Path(r.path).name for r in runs)}", body)
