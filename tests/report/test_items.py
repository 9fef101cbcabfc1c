"""One checklist answer: its verdict, margin and message say the same thing everywhere."""

from __future__ import annotations

import pytest

from ckptgate.checks.table import checklist
from ckptgate.report.gate import GateReport
from ckptgate.report.items import Item, format_margin, judge


def test_a_failed_requirement_reads_as_measured_against_required_with_its_reasons() -> None:
    item = judge(
        id="async-persist",
        title="checkpoint persist",
        measured=41.2e9,
        required=48.0e9,
        unit="B/s",
        detail="405b: 5.67 TB / 600 s x 2.5 headroom; 64 of 2048 nodes, 512 ranks",
    )
    assert item.passed is False and item.status == "FAIL"
    assert item.message == (
        "checkpoint persist: measured 41.2 GB/s < required 48.0 GB/s "
        "(405b: 5.67 TB / 600 s x 2.5 headroom; 64 of 2048 nodes, 512 ranks)"
    )
    assert item.margin is not None and round(item.margin, 3) == round(41.2 / 48.0, 3)


def test_a_time_limit_passes_when_measured_is_lower_and_its_margin_is_the_inverse() -> None:
    item = judge(
        id="sync-stall", measured=2.0, required=6.0, unit="s", better="lower", detail="1 %"
    )
    assert item.passed is True
    assert item.margin == 3.0
    assert "measured 2.00 s <= required 6.00 s" in item.message


def test_a_report_only_row_states_the_comparison_as_it_came_out() -> None:
    """Issue: 'measured 23.0 s <= required 6.00 s' on a row that was not gated."""
    item = judge(
        id="sync-stall", measured=23.0, required=6.0, unit="s", better="lower", detail="async"
    )
    item.report_only("async profile: not gated")
    assert item.status == "report"
    assert "measured 23.0 s > required 6.00 s, reported, not gated" in item.message


def test_the_title_and_number_come_from_the_check_table_when_recorded_unless_given() -> None:
    item = judge(id="restart-read", measured=2.0, required=1.0, unit="B/s", detail="d")
    assert (item.title, item.checklist) == ("restart-read", None)  # not a row until recorded
    GateReport(checklist=checklist()).record(item)
    assert (item.title, item.checklist) == ("restart read bandwidth", "7")
    named = judge(id="restart-read", measured=2.0, required=1.0, unit="B/s", detail="d",
                  title="restart read [object store]")  # fmt: skip
    GateReport(checklist=checklist()).record(named)
    assert (named.title, named.checklist) == ("restart read [object store]", "7")


def test_an_exact_requirement_passes_only_when_equal() -> None:
    item = judge(id="checkpoint-bytes", measured=99, required=100, unit="B", detail="d",
                 better="equal")  # fmt: skip
    assert item.passed is False and "measured 99 B != required 100 B" in item.message


def test_an_errored_test_is_an_error_row_with_its_words() -> None:
    item = Item(id="x", required=None, measured=None, unit="", passed=False, detail="",
                error="RankFailure: rank 3: OSError: [Errno 28]")  # fmt: skip
    assert item.status == "ERROR"
    assert item.message == "x: ERROR: RankFailure: rank 3: OSError: [Errno 28]"


@pytest.mark.parametrize(
    ("margin", "text"),
    [(96400.0, "x96,400"), (96437.2, "x96,400"), (77.84, "x77.8"), (1.954, "x1.95"),
     (1.0, "x1.00"), (0.857, "x0.86"), (None, "-")],
)  # fmt: skip
def test_margins_are_plain_numbers_never_exponents(margin: float | None, text: str) -> None:
    assert format_margin(margin) == text
