"""The checklist's rows as the report sees them: id, question number, title, optional.

The rows are declared by the checks themselves (``ckptgate.checks.table``: each check module
its own rows) and handed to the report by the plugin, so the report layer, below the checks,
never imports them. A saved report carries each item's question number (``Item.checklist``):
read back later, it numbers and orders its rows without the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ckptgate.report.items import Item

__all__ = ["Checklist", "Row", "in_checklist_order", "question_key"]


@dataclass(frozen=True)
class Row:
    """One answer of the checklist: its id, question number, title, and the check that
    answers it (the check's name, also its pytest marker)."""

    id: str
    number: str
    """SPEC.md's checklist question, ``1`` to ``8``, or ``c`` for the test plan's concurrency."""
    title: str
    check: str = ""
    optional: bool = False
    """Answered only where an optional part is installed (PyTorch for DCP): a run without it
    can still qualify, and its verdict says what did not run."""


@dataclass(frozen=True)
class Checklist:
    """Every row, in checklist order (by question, then in the order the checks run)."""

    rows: tuple[Row, ...] = ()

    def get(self, id: str) -> Row | None:
        return next((row for row in self.rows if row.id == id), None)

    def required_ids(self) -> tuple[str, ...]:
        """The rows every qualifying run answers (all but the optional ones)."""
        return tuple(row.id for row in self.rows if not row.optional)

    def missing(self, answered: Iterable[str]) -> tuple[str, ...]:
        """The titles of the required rows not answered (skipped, deselected)."""
        done = set(answered)
        return tuple(row.title for row in self.rows if not row.optional and row.id not in done)

    def not_run(self, answered: Iterable[str]) -> tuple[str, ...]:
        """The titles of the optional rows not answered (their part is not installed)."""
        done = set(answered)
        return tuple(row.title for row in self.rows if row.optional and row.id not in done)

    def sort_key(self, id: str) -> tuple[tuple[int, str], int]:
        """A row's place: its question, then its place in the table; unknown ids last."""
        ids = [row.id for row in self.rows]
        row = self.get(id)
        if row is None:
            return (question_key(None), len(ids))
        return (question_key(row.number), ids.index(id))


def question_key(number: str | None) -> tuple[int, str]:
    """Questions in SPEC.md's order: ``1`` to ``8``, then the lettered ones, then none."""
    if number is None:
        return (2, "")
    return (0, number.zfill(4)) if number.isdigit() else (1, number)


T = TypeVar("T", bound="Item")


def in_checklist_order(items: Sequence[T]) -> list[T]:
    """``items`` by question number; within a question, in the order given (a report's items
    are written in the table's order: ``GateReport.to_json``)."""
    return sorted(items, key=lambda item: question_key(item.checklist))
