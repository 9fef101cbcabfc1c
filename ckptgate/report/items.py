"""One checklist answer: what was required, what was measured, and the words for both.

An ``Item`` carries the requirement at this run's scale, the full cluster's requirement beside
it, what was measured, and the words that explain them, so that a failed assertion, the
terminal table and the JSON say the same thing. A failure reads like ``async persist
bandwidth: measured 41.2 GB/s < required 48.0 GB/s (405b: 5.67 TB / 600 s x 2.5 headroom; ...)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ckptgate.sizing.requirements import format_value as sizing_format_value
from ckptgate.sizing.units import round3

Better = Literal["higher", "lower", "equal"]
Status = Literal["PASS", "FAIL", "report", "ERROR"]


def format_value(value: float | None, unit: str) -> str:
    """A number in the report's units (the sizing table's formatting); "-" for none."""
    return "-" if value is None else sizing_format_value(value, unit)


def format_margin(margin: float | None) -> str:
    """How far past the requirement, in plain numbers: x1.95, x77.8, x96,400 (never 9.64e+04)."""
    if margin is None or not math.isfinite(margin):
        return "-"
    rounded = round3(margin)
    if rounded >= 100:
        return f"x{rounded:,.0f}"
    if rounded >= 10:
        return f"x{rounded:.1f}"
    return f"x{rounded:.2f}"


@dataclass(kw_only=True)
class Item:
    """One checklist answer. ``passed`` is None for an item that is reported, not gated;
    ``error`` holds the one-line reason where the test errored before it could judge."""

    id: str
    required: float | None
    measured: float | None
    unit: str
    passed: bool | None
    detail: str
    better: Better = "higher"
    scope: str = ""
    """What this scale of run proves and does not prove for the full cluster."""
    title: str = ""
    """The checklist row's title (``GateReport.record`` gives it from the check table); the id
    where none is known."""
    cluster_required: float | None = None
    """The full cluster's requirement, beside this run's share of it (``required``)."""
    error: str | None = None
    node: int | None = None
    """The node that failed, where one node's failure failed the item on every node."""
    checklist: str | None = None
    """The checklist question the item answers (``1`` to ``8``, ``c``), from the check table
    (``GateReport.record``); None for a row that is not a checklist answer (a test's error)."""

    def __post_init__(self) -> None:
        if not self.title:
            self.title = self.id

    @property
    def status(self) -> Status:
        if self.error is not None:
            return "ERROR"
        words: dict[bool | None, Status] = {True: "PASS", False: "FAIL", None: "report"}
        return words[self.passed]

    def report_only(self, reason: str) -> None:
        """Keep the measurement, do not gate it, and say why."""
        self.passed = None
        self.detail += f"; {reason}"

    @property
    def margin(self) -> float | None:
        """How far past the requirement: >= 1 passes (measured/required, or its inverse)."""
        if self.required in (None, 0) or self.measured in (None, 0):
            return None
        ratio = self.measured / self.required
        if self.better == "equal":
            return min(ratio, 1 / ratio)
        return ratio if self.better == "higher" else 1 / ratio

    def _relation(self) -> str:
        """The comparison as it came out, whether or not the item is gated."""
        assert self.measured is not None and self.required is not None
        if self.better == "equal":
            return "==" if self.measured == self.required else "!="
        meets = (
            self.measured >= self.required
            if self.better == "higher"
            else self.measured <= self.required
        )
        if self.better == "higher":
            return ">=" if meets else "<"
        return "<=" if meets else ">"

    @property
    def message(self) -> str:
        """The sentence an assertion, the table and the JSON share."""
        if self.error is not None:
            return f"{self.title}: ERROR: {self.error}"
        measured = format_value(self.measured, self.unit)
        if self.required is None or self.measured is None:
            return f"{self.title}: measured {measured} ({self.detail})"
        required = format_value(self.required, self.unit)
        gated = "" if self.passed is not None else ", reported, not gated"
        return (
            f"{self.title}: measured {measured} {self._relation()} required {required}"
            f"{gated} ({self.detail})"
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status
        data["margin"] = self.margin
        data["message"] = self.message
        return data


def judge(
    *,
    id: str,
    measured: float,
    required: float,
    unit: str,
    detail: str,
    better: Better = "higher",
    scope: str = "",
    title: str = "",
    cluster_required: float | None = None,
) -> Item:
    """An item that passes when ``measured`` meets ``required`` in the ``better`` direction."""
    if better == "equal":
        ok = measured == required
    else:
        ok = measured >= required if better == "higher" else measured <= required
    return Item(
        id=id,
        title=title,
        required=required,
        measured=measured,
        unit=unit,
        passed=bool(ok),
        detail=detail,
        better=better,
        scope=scope,
        cluster_required=cluster_required,
    )
