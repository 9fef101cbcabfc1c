"""A saved JSON gate report read back: its items, its burst sections and its sizing sweep.

Everything the CSV, HTML and compare outputs show comes from the JSON object the plugin writes
(``GateReport.json_data()``), whether the run has just ended or the file was saved months ago,
so that a file re-rendered later says exactly what the run said.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptgate.report.items import Item
from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile, profile_to_dict, sweep
from ckptgate.sizing.checklist import sort_key

BURST_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("write", ("write",)),
    ("read", ("read",)),
    ("reshard", ("reshard",)),
    ("contention writers", ("contention", "writers")),
)
"""The report's sections that hold a burst (per-rank records), by label and JSON path."""

PHASES: tuple[str, ...] = ("open_s", "write_s", "read_s", "fsync_s", "close_s")
"""A rank record's phase times, in the order a rank goes through them."""

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

_ITEM_FIELDS = {f.name for f in dataclasses.fields(Item)}


def load_report(path: str | Path) -> dict[str, Any]:
    """A saved JSON report; a ValueError names the file when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable ckptgate JSON report: {error}") from None
    if not isinstance(data, dict) or "items" not in data or "verdict" not in data:
        raise ValueError(f"{path}: not a ckptgate JSON report (no 'items' or 'verdict')")
    return data


def items_of(data: dict[str, Any]) -> list[Item]:
    """The report's items as ``Item`` objects, in checklist order (margins recomputed)."""
    items = [Item(**{k: v for k, v in raw.items() if k in _ITEM_FIELDS}) for raw in data["items"]]
    return sorted(items, key=lambda i: sort_key(i.id))


def section_at(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """The nested section at ``path`` (``("contention", "writers")``), or None."""
    node: Any = data
    for key in path:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return None
        node = node[key]
    return node


@dataclass(frozen=True)
class Burst:
    """One burst section: its label, its summary and its per-rank records."""

    label: str
    data: dict[str, Any]

    @property
    def ranks(self) -> list[dict[str, Any]]:
        return list(self.data.get("ranks") or [])

    def is_slowest(self, record: dict[str, Any]) -> bool:
        """Whether ``record`` is the slowest rank (local rank and node, as the JSON names it)."""
        slowest = self.data.get("slowest_rank") or {}
        return bool(slowest) and (record.get("rank"), record.get("node")) == (
            slowest.get("rank"),
            slowest.get("node"),
        )

    def phases(self) -> tuple[str, ...]:
        """The phase columns any of its records carries, in the order ranks run them."""
        return tuple(p for p in PHASES if any(p in r for r in self.ranks))


def bursts(data: dict[str, Any]) -> Iterator[Burst]:
    """The report's burst sections that have per-rank records."""
    for label, path in BURST_SECTIONS:
        section = section_at(data, path)
        if section and section.get("ranks"):
            yield Burst(label, section)


def sweep_section(profile: Any) -> dict[str, Any]:
    """The ``sweep`` section the plugin adds to the JSON report: the sizing evaluated over
    intervals (``ckptgate.sizing.sweep``) and the profile that produced it, so that a saved
    report can be re-plotted and re-derived without the run's command line."""
    return {"profile": profile_to_dict(profile), "rows": sweep(profile)}


def sweep_rows(data: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The sizing sweep for a saved report, and where it came from.

    The report's own ``sweep`` section first; else, for a shipped profile whose sizing
    reproduces the report's (SWEEP_MATCH), that profile's sweep; else none, and why."""
    own = data.get("sweep")
    if isinstance(own, dict) and own.get("rows"):
        return list(own["rows"]), "from the run's cluster profile (the report's sweep section)"
    name = data.get("profile")
    sizing = data.get("sizing") or {}
    if name in SHIPPED_PROFILES:
        profile = load_profile(name)
        derived = derive(profile).to_json()
        if all(_close(derived.get(k), sizing.get(k)) for k in SWEEP_MATCH):
            return sweep(profile), (
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
