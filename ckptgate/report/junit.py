"""What pytest's own outputs see of each checklist item: JUnit properties.

The properties put each item a test answered into ``--junitxml`` as ``<property
name="ITEM.FIELD" value="..."/>``, in the JSON report's units (bytes, seconds, B/s), so a CI
dashboard can read measured against required without parsing the terminal. The run's verdict,
its line, the profile as run and the exit status are properties of the test suite
(``<testsuite><properties>``), so a JUnit file of passing tests still says the run was a
trial. The markers per check (``pytest -m restart``) come from the check table
(``ckptgate.checks.table.markers``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from _pytest.junitxml import xml_key  # the LogXML of --junitxml: pytest has no public handle

from ckptgate.report.items import Item, format_margin
from ckptgate.report.verdict import Verdict
from ckptgate.sizing.as_run import ProfileAsRun

PROPERTY_FIELDS: tuple[str, ...] = (
    "required",
    "cluster_required",
    "measured",
    "unit",
    "margin",
    "margin_text",
    "verdict",
    "scope",
    "message",
)
"""The fields each item contributes, as ``ITEM_ID.FIELD`` property names."""


def properties(items: Iterable[Item]) -> list[tuple[str, str]]:
    """``(ITEM_ID.FIELD, value)`` pairs for ``record_property``/``user_properties``: numbers
    as ``repr`` (exact, in the JSON's units), absent values as empty strings."""
    pairs = []
    for item in items:
        values = {
            "required": item.required,
            "cluster_required": item.cluster_required,
            "measured": item.measured,
            "unit": item.unit,
            "margin": item.margin,
            "margin_text": format_margin(item.margin),
            "verdict": item.status,
            "scope": item.scope,
            "message": item.message,
        }
        for name in PROPERTY_FIELDS:
            value = values[name]
            pairs.append((f"{item.id}.{name}", "" if value is None else str(value)))
    return pairs


def suite_pairs(
    verdict: Verdict, as_run: ProfileAsRun | None, exit_status: int
) -> list[tuple[str, str]]:
    """The run's own ``(name, value)`` properties: verdict, line, profile as run, exit status."""
    pairs = [
        ("ckptgate.verdict", verdict.status),
        ("ckptgate.verdict_line", verdict.line),
        ("ckptgate.exit_status", str(exit_status)),
    ]
    if as_run is not None:
        pairs += [
            ("ckptgate.profile", as_run.label()),
            ("ckptgate.profile_modified", str(as_run.modified).lower()),
            ("ckptgate.parameters", str(as_run.parameters)),
            ("ckptgate.checkpoint_bytes", str(as_run.checkpoint_bytes)),
            ("ckptgate.gpus", str(as_run.gpus)),
            ("ckptgate.nodes", str(as_run.nodes)),
        ]
    return pairs


def suite_properties(
    config: pytest.Config, verdict: Verdict, as_run: ProfileAsRun | None, exit_status: int
) -> None:
    """Add the run's properties to the ``--junitxml`` test suite (nothing without one); call
    before junitxml's own ``pytest_sessionfinish`` writes the file."""
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, value in suite_pairs(verdict, as_run, exit_status):
        xml.add_global_property(name, value)


def projection_properties(projection: dict[str, Any]) -> list[tuple[str, str]]:
    """The scaling sweep's projection (``ckptgate.projection.projected``, its JSON) as
    ``projection.FIELD`` and ``projection.METRIC.FIELD`` pairs: its word (never
    ``qualified``), its line, and each metric's word, required value and bounds."""
    pairs = [("projection.word", projection["word"]), ("projection.line", projection["line"])]
    for item in projection["items"]:
        for name in ("word", "required", "estimate", "lower", "upper", "unit", "reason"):
            value = item.get(name)
            pairs.append(
                (f"projection.{item['metric']}.{name}", "" if value is None else str(value))
            )
    return pairs
