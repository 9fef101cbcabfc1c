"""A saved JSON gate report read back: its items, its burst sections and its sizing sweep.

Everything the CSV, HTML and compare outputs show comes from the JSON object the plugin writes
(``GateReport.json_data()``), whether the run has just ended or the file was saved months ago,
so that a file re-rendered later says exactly what the run said.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptgate.engine.collector import gc_paused
from ckptgate.report.checklist import in_checklist_order
from ckptgate.report.items import Item
from ckptgate.report.schema import (
    PHASES,
    BurstSection,
    RankRow,
    ReportSchemaError,
    SavedReport,
    SweepRow,
    load_saved,
    sweep_row,
)
from ckptgate.report.sections import ReportPart, part_bursts
from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile, profile_to_dict, sweep

__all__ = ["PHASES", "Burst", "ReportSchemaError", "SavedReport", "bursts", "load_report"]

BURST_SECTIONS: tuple[str, ...] = ("write", "read", "reshard")
"""The run's own sections that hold a burst (per-rank records), by label, in report order; a
check's section may hold more (``ReportPart.bursts``: ``contention writers``)."""

SWEEP_MATCH: tuple[str, ...] = (
    "checkpoint_bytes",
    "interval_s",
    "mtbf_s",
    "stall_budget_s",
    "gpus",
    "async_persist_planned_bytes_per_s",
)
"""The sizing numbers a shipped profile must reproduce before its sweep stands in for a
report that has none of its own."""


def load_report(path: str | Path) -> SavedReport:
    """A saved JSON report; a ``ReportSchemaError`` (a ValueError) names the file in one line
    when it is unreadable, not a ckptgate report, or of another schema version."""
    with gc_paused():  # a 16,384-rank report is a tree of millions of plain values
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ReportSchemaError(
                f"{path}: not a readable ckptgate JSON report: {error}"
            ) from None
        return load_saved(data, str(path))


def items_of(report: SavedReport) -> list[Item]:
    """The report's items, in checklist order (margins recomputed)."""
    return in_checklist_order(report.items)


@dataclass(frozen=True)
class Burst:
    """One burst section: its label, and its summary with its per-rank records."""

    label: str
    section: BurstSection

    @property
    def ranks(self) -> tuple[RankRow, ...]:
        return self.section.ranks

    def is_slowest(self, record: RankRow) -> bool:
        """Whether ``record`` is the slowest rank (local rank and node, as the JSON names it)."""
        slowest = self.section.slowest_rank
        return slowest.rank is not None and (record.rank, record.node) == (
            slowest.rank,
            slowest.node,
        )

    def phases(self) -> tuple[str, ...]:
        """The phase columns any of its records carries, in the order ranks run them."""
        return tuple(p for p in PHASES if any(r.phase_s(p) is not None for r in self.ranks))


def bursts(report: SavedReport, parts: Sequence[ReportPart] = ()) -> Iterator[Burst]:
    """The report's burst sections that have per-rank records: the run's own, then those the
    checks' sections hold (``parts``, from the check table: the contended round's writers)."""
    sections = [
        *zip(BURST_SECTIONS, (report.write, report.read, report.reshard), strict=True),
        *part_bursts(report, parts),
    ]
    for label, section in sections:
        if section is not None and section.ranks:
            yield Burst(label, section)


def sweep_section(profile: Any) -> dict[str, Any]:
    """The ``sweep`` section the plugin adds to the JSON report: the sizing evaluated over
    intervals (``ckptgate.sizing.sweep``) and the profile that produced it, so that a saved
    report can be re-plotted and re-derived without the run's command line."""
    return {"profile": profile_to_dict(profile), "rows": sweep(profile)}


def sweep_rows(report: SavedReport) -> tuple[list[SweepRow], str]:
    """The sizing sweep for a saved report, and where it came from.

    The report's own ``sweep`` section first; else, for a shipped profile whose sizing
    reproduces the report's (SWEEP_MATCH), that profile's sweep; else none, and why."""
    if report.sweep is not None and report.sweep.rows:
        rows = list(report.sweep.rows)
        return rows, "from the run's cluster profile (the report's sweep section)"
    name = report.profile
    sizing = report.sizing
    if name in SHIPPED_PROFILES:
        profile = load_profile(name)
        derived = derive(profile).to_json()
        if all(_close(derived.get(k), sizing.get(k)) for k in SWEEP_MATCH):
            rows = [sweep_row(row, f"the shipped profile {name}") for row in sweep(profile)]
            return rows, (
                f"recomputed from the shipped profile {name} (this report has no sweep section; "
                "the profile's sizing matches the report's)"
            )
    return [], (
        "this report has no sweep section and its sizing is not a shipped profile's: "
        f"'ckptgate sizing {name or 'PROFILE'} --sweep' prints it from the profile"
    )


def _close(a: Any, b: Any) -> bool:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return a == b
    return math.isclose(a, b, rel_tol=1e-9)
