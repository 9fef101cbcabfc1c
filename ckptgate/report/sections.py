"""A check's part of the report: its JSON section read through the schema, its HTML section
and the per-rank CSV rows of the bursts it holds.

A check of the table (``ckptgate.checks.table``) declares its parts (``Check.report``) beside
its driver call and its judgement, so one module holds an item's whole story. The report layer
sits below the checks and never imports them: the plugin (at a run's end) and ``ckptgate
report`` (for a saved file) hand the table's parts to the writers, which render them in the
table's order after the run's own sections (the gate table, the write and read bursts, the
bandwidth over time).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.report.schema import BurstSection, SavedReport, read_section

__all__ = ["ReportPart", "part_bursts", "read_part", "render_part"]


def _no_bursts(_section: Any) -> Sequence[tuple[str, BurstSection | None]]:
    return ()


@dataclass(frozen=True)
class ReportPart:
    """One section of the JSON report that a check owns, and how the outputs show it."""

    key: str
    """The section's key in the JSON report (``contention``)."""
    title: str
    """The HTML section's heading (``render_part`` writes it, and says where a report has
    no such section)."""
    schema: type
    """The dataclass the section is read as (``ckptgate.report.schema``'s rules: each field
    checked against its type, unknown keys left to ``SavedReport.data``)."""
    html: Callable[[Any, bool], list[str]]
    """The HTML section's elements below its heading, for the section read, with or without
    figures (``plots``); called only where the report has the section."""
    bursts: Callable[[Any], Sequence[tuple[str, BurstSection | None]]] = _no_bursts
    """The bursts it holds, by label, for the per-rank CSV and the HTML rank tables."""


def read_part(report: SavedReport, part: ReportPart, source: str = "the report") -> Any:
    """The section ``part`` owns in ``report``, read as its schema; None where absent."""
    raw = report.data.get(part.key)
    return None if raw is None else read_section(part.schema, raw, part.key, source)


def render_part(report: SavedReport, part: ReportPart, plots: bool) -> list[str]:
    """The part's HTML section: its heading, then its elements, or a note where the report
    has no such section (a run that did not measure it)."""
    heading = f"<h2>{html.escape(part.title)}</h2>"
    section = read_part(report, part)
    if section is None:
        return [heading, f'<p class="note">no {html.escape(part.key)} section in this report</p>']
    return [heading, *part.html(section, plots)]


def part_bursts(report: SavedReport, parts: Sequence[ReportPart]) -> list[tuple[str, BurstSection]]:
    """Every burst the parts' sections hold, by label, in the parts' order."""
    found = []
    for part in parts:
        section = read_part(report, part)
        if section is None:
            continue
        found += [(label, b) for label, b in part.bursts(section) if b is not None]
    return found
