"""The gate report: one item per checklist question, the summary table, and the JSON report.

An ``Item`` carries what was required, what was measured, and the words that explain both,
so that a failed assertion, the terminal table and the JSON say the same thing. A failure reads
like ``checkpoint persist: measured 41.2 GB/s < required 48.0 GB/s (405b: 5.67 TB / 600 s x
2.5 headroom; 1 of 2048 nodes, 8 ranks: per-node share)``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ckptgate.sizing.requirements import format_value as sizing_format_value

Better = Literal["higher", "lower"]

CHECKLIST: dict[str, str] = {
    "checkpoint-bytes": "1",
    "dcp-bytes": "1",
    "interval-from-failure-rate": "2",
    "stall-budget": "3",
    "sync-stall": "3",
    "dcp-async-block": "3",
    "sync-vs-async": "4",
    "load-generator": "5",
    "async-persist": "5",
    "dcp-async-complete": "5",
    "metadata-create-rate": "6",
    "metadata-restore-stat": "6",
    "metadata-delete": "6",
    "restart-read": "7",
    "resharded-restore": "7",
    "dcp-reshard-load": "7",
    "retention-capacity": "8",
    "contention-persist": "c",
    "reader-slowdown": "c",
}
"""Each item's place on SPEC.md's checklist (1 to 8; c: the test plan's concurrency item)."""


def format_value(value: float | None, unit: str) -> str:
    """A number in the report's units (the sizing table's formatting); "-" for none."""
    return "-" if value is None else sizing_format_value(value, unit)


@dataclass
class Item:
    """One checklist answer. ``passed`` is None for an item that is reported, not gated."""

    id: str
    title: str
    required: float | None
    measured: float | None
    unit: str
    passed: bool | None
    detail: str
    better: Better = "higher"
    scope: str = ""
    """What this scale of run proves and does not prove for the full cluster."""

    @property
    def margin(self) -> float | None:
        """How far past the requirement: >= 1 passes (measured/required, or its inverse)."""
        if self.required in (None, 0) or self.measured in (None, 0):
            return None
        ratio = self.measured / self.required
        return ratio if self.better == "higher" else 1 / ratio

    @property
    def message(self) -> str:
        """The sentence an assertion, the table and the JSON share."""
        measured = format_value(self.measured, self.unit)
        if self.required is None:
            return f"{self.title}: measured {measured} ({self.detail})"
        required = format_value(self.required, self.unit)
        if self.passed is False:
            relation = "<" if self.better == "higher" else ">"
        else:
            relation = ">=" if self.better == "higher" else "<="
        return f"{self.title}: measured {measured} {relation} required {required} ({self.detail})"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["checklist"] = CHECKLIST.get(self.id)
        data["margin"] = self.margin
        data["message"] = self.message
        return data


def judge(
    *,
    id: str,
    title: str,
    measured: float,
    required: float,
    unit: str,
    detail: str,
    better: Better = "higher",
    scope: str = "",
) -> Item:
    """An item that passes when ``measured`` meets ``required`` in the ``better`` direction."""
    ok = measured >= required if better == "higher" else measured <= required
    return Item(id, title, required, measured, unit, bool(ok), detail, better, scope)


@dataclass
class GateReport:
    """Everything the run found; the plugin prints it and writes it as JSON."""

    meta: dict[str, Any] = field(default_factory=dict)
    items: list[Item] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)

    def record(self, item: Item) -> Item:
        """Keep ``item`` (a later item with the same id replaces the earlier) and return it."""
        self.items = [i for i in self.items if i.id != item.id] + [item]
        return item

    def section(self, name: str, data: dict[str, Any]) -> None:
        self.sections[name] = data

    def to_json(self) -> dict[str, Any]:
        return {**self.meta, "items": [i.to_json() for i in self.items], **self.sections}

    def write_json(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.to_json(), handle, indent=2, default=_json_default)
            handle.write("\n")

    def table(self) -> list[str]:
        """The summary table, one line per checklist item, plus scope notes."""
        rows = [("#", "item", "required", "measured", "margin", "verdict")]
        for item in sorted(self.items, key=lambda i: CHECKLIST.get(i.id, "z")):
            margin = item.margin
            verdict = {True: "PASS", False: "FAIL", None: "report"}[item.passed]
            rows.append(
                (
                    CHECKLIST.get(item.id, ""),
                    item.title,
                    format_value(item.required, item.unit),
                    format_value(item.measured, item.unit),
                    "-" if margin is None else f"x{margin:.3g}",
                    verdict,
                )
            )
        widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(widths[c]) for c, cell in enumerate(row)) for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        scopes = list(dict.fromkeys(i.scope for i in self.items if i.scope))
        lines.extend(f"scope: {scope}" for scope in scopes)
        return lines


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "to_json"):
        return value.to_json()
    return str(value)
