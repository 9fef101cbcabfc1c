"""The CSV outputs: items in the JSON's units, one row per rank per burst beside them."""

from __future__ import annotations

import csv
from pathlib import Path

from ckptgate.checks.table import report_parts
from ckptgate.report.csvfiles import ITEM_COLUMNS, RANK_COLUMNS, ranks_path, write_csv
from tests.report.saved_runs import saved_report


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_ranks_file_sits_beside_the_items_file() -> None:
    assert ranks_path("/r/run.csv") == Path("/r/run-ranks.csv")
    assert ranks_path("/r/run") == Path("/r/run-ranks.csv")


def test_items_are_rows_in_checklist_order_in_the_jsons_units(tmp_path: Path) -> None:
    items_file, ranks_file = write_csv(
        saved_report(write_s=0.01), tmp_path / "run.csv", parts=report_parts()
    )
    rows = _read(items_file)
    assert list(rows[0]) == list(ITEM_COLUMNS)
    assert [r["id"] for r in rows] == ["sync-stall", "async-persist", "reader-slowdown"]
    persist = rows[1]
    assert persist["unit"] == "B/s" and float(persist["required"]) == 9.33e6
    assert float(persist["measured"]) == 4e6 / 0.06  # bytes per second, unformatted
    assert rows[0]["unit"] == "s" and float(rows[0]["measured"]) == 0.06
    assert rows[2]["required"] == "" and rows[2]["status"] == "report"
    assert ranks_file == tmp_path / "run-ranks.csv"


def test_every_rank_of_every_burst_is_a_row_with_its_phases(tmp_path: Path) -> None:
    _, ranks_file = write_csv(
        saved_report(write_s=0.01), tmp_path / "run.csv", parts=report_parts()
    )
    rows = _read(ranks_file)
    assert list(rows[0]) == list(RANK_COLUMNS)
    sections = [r["section"] for r in rows]
    assert sections == ["write"] * 4 + ["read"] * 4 + ["contention writers"] * 4
    write = rows[0]
    assert int(write["bytes"]) == 1_000_000 and float(write["fsync_s"]) == 0.002
    assert float(write["bytes_per_s"]) == 1_000_000 / float(write["total_s"])
    assert rows[4]["fsync_s"] == "" and float(rows[4]["read_s"]) > 0
    slowest = [r for r in rows if r["section"] == "write" and r["slowest"] == "True"]
    assert [(r["node"], r["rank"]) for r in slowest] == [("1", "1")]
