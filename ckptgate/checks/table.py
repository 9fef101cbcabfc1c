"""The check table: every check of ``ckptgate.checks``, in the order they run, and the
checklist's rows in checklist order.

Each module of this package that answers checklist rows ends with ``CHECK = Check(...)``
(``ckptgate.checks.check``); the table is every such module, found by walking the package
(as pytest finds test modules), ordered by ``Check.place``. Nothing else lists the checks, so
a new checklist item is four files: its workload, its check module, its profile keys and its
test (CONTRIBUTING.md walks through one). From the table come:

- the plugin's measurement fixture, one per check (``ckptgate.fixtures.provided.measured``);
- the acceptance test's parametrisation, one test per row (``acceptance/test_checklist.py``);
- a pytest marker per check (``markers``);
- the report's rows, titles, numbers and order, and the verdict's "missing" and "not run"
  lists (``checklist``, handed to ``GateReport``);
- the JSON report's sections (each check's ``sections``), and how the HTML and CSV outputs
  show those a check owns (``report_parts``: each check's ``report``).

Anchors: IOR's ``aiori`` operations table, fsspec's ``registry.py``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

import ckptgate.checks
from ckptgate.checks.check import Answer, Check
from ckptgate.report.checklist import Checklist, question_key
from ckptgate.report.sections import ReportPart

__all__ = ["check_named", "checklist", "checks", "markers", "report_parts", "rows"]


@functools.cache
def checks() -> tuple[Check, ...]:
    """Every check, in the order they run (``Check.place``); two at one place are an error."""
    found: list[Check] = []
    for info in pkgutil.iter_modules(ckptgate.checks.__path__):
        module = importlib.import_module(f"{ckptgate.checks.__name__}.{info.name}")
        check = getattr(module, "CHECK", None)
        if isinstance(check, Check):
            found.append(check)
    found.sort(key=lambda c: c.place)
    places = [c.place for c in found]
    if len(set(places)) != len(places):
        raise RuntimeError(f"two checks share a place: {[(c.name, c.place) for c in found]}")
    return tuple(found)


def check_named(name: str) -> Check:
    """The check called ``name``; a KeyError names the known ones."""
    for check in checks():
        if check.name == name:
            return check
    raise KeyError(f"no check {name!r}; known: {', '.join(c.name for c in checks())}")


def rows() -> tuple[tuple[Check, Answer], ...]:
    """Every row with its check, in the order the tests run: by check, then as it lists them."""
    return tuple((check, answer) for check in checks() for answer in check.answers)


@functools.cache
def checklist() -> Checklist:
    """The rows in checklist order: by question, then in the order the tests run."""
    ordered = sorted(enumerate(rows()), key=lambda p: (question_key(p[1][1].row.number), p[0]))
    return Checklist(tuple(answer.row for _, (_, answer) in ordered))


def report_parts() -> tuple[ReportPart, ...]:
    """Every check's own report sections, in the order the checks run."""
    return tuple(part for check in checks() for part in check.report)


def markers() -> dict[str, str]:
    """Marker name -> help text, one per check (``pytest -m restart``)."""
    out = {}
    for check in checks():
        numbers = ", ".join(dict.fromkeys(a.row.number for a in check.answers))
        titles = "; ".join(a.row.title for a in check.answers)
        optional = " (optional part: " + check.needs + ")" if check.needs else ""
        out[check.name] = f"checklist {numbers}{optional}: {titles}"
    return out
