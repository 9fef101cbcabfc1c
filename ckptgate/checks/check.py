"""What a check module declares: one ``Check``, its rows, and how it measures.

A check is one module of ``ckptgate.checks`` that ends with ``CHECK = Check(...)``:

- ``name``: the pytest marker (``pytest -m contention``) and the measurement's id;
- ``place``: where it runs among the checks (the write rounds first: the others read their
  files and rates); gaps of ten leave room for a new check between two;
- ``measure``: the driver call, a context manager given the run's collaborators
  (``Measuring``); what it yields is what the rows judge, and it cleans up on exit. It raises
  ``NotMeasured`` where the check does not apply to this run (its rows skip, saying why);
- ``sections``: the JSON report's sections that hold what it measured, and ``report``: how
  the HTML and CSV outputs show those it owns (``ckptgate.report.sections.ReportPart``: the
  section's schema, its HTML section, the bursts it holds for the per-rank CSV);
- ``answers``: the checklist rows it answers, each a ``Row`` (id, question, title) and the
  judge that turns the measurement into the row's ``Item`` (``judge`` in
  ``ckptgate.report.items``), or into ``Answered`` where a row measures and reports a section
  of its own (the restart's reads).

IOR's ``aiori`` table is the model: each backend fills in one struct of operations, and the
drivers never branch on the backend. ``ckptgate.checks.table`` finds every ``CHECK``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ckptgate.report.checklist import Row
from ckptgate.report.items import Item
from ckptgate.report.sections import ReportPart

if TYPE_CHECKING:
    from ckptgate.campaigns.context import CheckContext
    from ckptgate.campaigns.write import WriteCampaign
    from ckptgate.rundir.target import Target
    from ckptgate.sizing import Profile, Sizing

__all__ = ["Answer", "Answered", "Check", "Measuring", "NotMeasured", "Row", "no_sections", "row"]


class NotMeasured(Exception):
    """The check does not apply to this run; the message says why (its rows skip with it)."""


class Measuring(Protocol):
    """The run's collaborators a check's measurement may ask for (the plugin provides them,
    each made once per session where first asked)."""

    @property
    def profile(self) -> Profile: ...

    @property
    def sizing(self) -> Sizing: ...

    @property
    def target(self) -> Target: ...

    @property
    def context(self) -> CheckContext: ...

    @property
    def campaign(self) -> WriteCampaign: ...


@dataclass(frozen=True)
class Answered:
    """A row's item, and the report sections its judge measured on its own."""

    item: Item | None
    sections: Mapping[str, dict[str, Any]] = field(default_factory=dict)


Judge = Callable[[Any], Item | Answered | None]
"""A row's judgement of its check's measurement: its item, or None where the row does not
apply (the row skips with ``Answer.unless``)."""


@dataclass(frozen=True)
class Answer:
    """One checklist row and its judge."""

    row: Row
    judge: Judge
    unless: str = ""
    """Why the row skips where its judge returns None."""


def no_sections(_measured: Any) -> dict[str, dict[str, Any]]:
    """A check whose measurement adds no section of its own to the JSON report."""
    return {}


@dataclass(frozen=True)
class Check:
    """One check: its measurement, the rows it answers, and the sections it reports."""

    name: str
    place: int
    measure: Callable[[Measuring], AbstractContextManager[Any]]
    answers: tuple[Answer, ...]
    sections: Callable[[Any], Mapping[str, dict[str, Any]]] = no_sections
    report: tuple[ReportPart, ...] = ()
    """How the outputs show the sections it owns: schema, HTML section, CSV rows."""
    summary: str = ""
    """The check in a few words: its marker's help text."""
    needs: str = ""
    """A module that must import for the check to run (``torch``); its rows skip without."""
    needs_words: str = ""
    """The skip's words where ``needs`` does not import (with the install hint)."""


def row(
    check: str,
    id: str,
    number: str,
    title: str,
    judge: Judge,
    *,
    unless: str = "",
    optional: bool = False,
) -> Answer:
    """One row of the check named ``check``: id, question number, title, judge."""
    return Answer(Row(id, number, title, check, optional), judge, unless)
