"""The CSV outputs: one file of items, and one of every burst's per-rank records.

``--report-csv PATH`` (or ``ckptgate report RUN.json --csv PATH``) writes

- ``PATH``: one row per checklist item, in checklist order;
- ``PATH`` with ``-ranks`` before its extension (``run.csv`` -> ``run-ranks.csv``): one row per
  rank per burst section (``write``, ``read``, ``reshard``, and those a check's section holds,
  ``ReportPart.bursts``: ``contention writers``).

Numbers are the JSON report's, unformatted, in the unit each column names: bytes, seconds,
bytes per second (``B/s``), and the item's own ``unit`` column for ``required``,
``cluster_required`` and ``measured``. Empty cells are values the run did not have.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckptgate.report.saved import PHASES, bursts, items_of
from ckptgate.report.schema import SavedReport
from ckptgate.report.sections import ReportPart

ITEM_COLUMNS: tuple[str, ...] = (
    "checklist",
    "id",
    "title",
    "status",
    "required",
    "cluster_required",
    "measured",
    "unit",
    "margin",
    "better",
    "scope",
    "message",
    "run_verdict",
    "profile_as_run",
)
"""The last two are the run's, on every row: the verdict's status and the profile as run
(its label and size), so that a row read alone still says what the run proved."""

RANK_COLUMNS: tuple[str, ...] = (
    "section",
    "node",
    "host",
    "rank",
    "global_rank",
    "bytes",
    "start_s",
    *PHASES,
    "total_s",
    "end_s",
    "bytes_per_s",
    "slowest",
)
"""``bytes_per_s`` is the rank's own bytes over its ``total_s``; ``slowest`` marks the rank that
set the section's span."""


def ranks_path(path: str | Path) -> Path:
    """Where the per-rank records go beside the items' file: ``run.csv`` -> ``run-ranks.csv``."""
    path = Path(path)
    return path.with_name(f"{path.stem}-ranks{path.suffix or '.csv'}")


def item_rows(report: SavedReport) -> list[dict[str, Any]]:
    """One dict per item (ITEM_COLUMNS), in checklist order."""
    as_run = report.profile_as_run
    run = {
        "run_verdict": report.verdict.status,
        "profile_as_run": f"{as_run.label}: {as_run.size_words}" if as_run else report.profile,
    }
    rows = []
    for item in items_of(report):
        rows.append({name: run[name] if name in run else getattr(item, name, None)
                     for name in ITEM_COLUMNS})  # fmt: skip
    return rows


def rank_rows(report: SavedReport, parts: Sequence[ReportPart] = ()) -> list[list[Any]]:
    """One row per rank record of each burst section, its cells in RANK_COLUMNS' order (a list,
    not a dict: 131,072 rows at 16,384 ranks, written by ``csv.writer`` without a dict's
    per-row check of its keys)."""
    rows = []
    for burst in bursts(report, parts):
        for record in burst.ranks:
            rows.append(
                [
                    burst.label,
                    record.node,
                    record.host,
                    record.rank,
                    record.global_rank,
                    record.bytes,
                    record.start_s,
                    *[record.phase_s(phase) for phase in PHASES],
                    record.total_s,
                    record.end_s,
                    record.bytes_per_s,
                    burst.is_slowest(record),
                ]
            )
    return rows


def write_csv(
    report: SavedReport, path: str | Path, parts: Sequence[ReportPart] = ()
) -> tuple[Path, Path]:
    """Write the items to ``path`` and the per-rank records beside it (the checks' own bursts
    too: ``parts``, from the check table); return both paths."""
    items_file, ranks_file = Path(path), ranks_path(path)
    items = [[row[name] for name in ITEM_COLUMNS] for row in item_rows(report)]
    for target, header, rows in (
        (items_file, ITEM_COLUMNS, items),
        (ranks_file, RANK_COLUMNS, rank_rows(report, parts)),
    ):
        with target.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows([_cell(v) for v in row] for row in rows)
    return items_file, ranks_file


def _cell(value: Any) -> Any:
    return "" if value is None else value
