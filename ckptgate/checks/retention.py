"""Checklist item 8: the retention tier sized: the target's capacity against the retained bytes.

The hot tier keeps ``retention.count`` checkpoints, each with its protection overhead
(``retained_bytes``). The whole cluster's retained checkpoints land on this one storage,
whatever the scale of the run, so the requirement is the full figure. Free capacity is read
(statvfs) when the session starts, before the run wrote anything. An object store reports no
capacity: the item is reported, not gated.
"""

from __future__ import annotations

from contextlib import nullcontext

from ckptgate.checks.check import Check, Measuring, row
from ckptgate.report.items import Item, judge
from ckptgate.rundir.target import Target
from ckptgate.sizing import Profile, Sizing, format_bytes

SCOPE = "capacity is a property of the whole target, not of this run's scale"


def capacity(target: Target, profile: Profile, sizing: Sizing) -> Item:
    """Free capacity on the target holds the retained checkpoints of the full cluster."""
    facts = target.facts
    retained = sizing.requirements["retained_bytes"]
    offers = (
        f"the target offers {format_bytes(facts.free_bytes)} free of "
        f"{format_bytes(facts.total_bytes)} ({facts.fs_type} at {facts.mount_point})"
        if facts.free_bytes is not None and facts.total_bytes is not None
        else f"the target ({facts.fs_type}) reports no capacity"
    )
    detail = (
        f"{profile.name}: the full cluster needs {format_bytes(sizing.retained_bytes)} "
        f"retained ({retained.formula}); {offers}"
    )
    if facts.free_bytes is None:
        return Item(
            id="retention-capacity",
            required=sizing.retained_bytes,
            measured=None,
            cluster_required=sizing.retained_bytes,
            unit="B",
            passed=None,
            detail=detail + "; object stores grow on demand: check the quota with the provider",
            scope=SCOPE,
        )
    item = judge(
        id="retention-capacity",
        measured=facts.free_bytes,
        required=sizing.retained_bytes,
        cluster_required=sizing.retained_bytes,
        unit="B",
        detail=detail,
        scope=SCOPE,
    )
    if not item.passed and facts.total_bytes is not None:
        item.detail += f"; short by {format_bytes(sizing.retained_bytes - facts.free_bytes)}"
        if facts.total_bytes < sizing.retained_bytes:
            item.detail += "; even the empty target could not hold it"
    return item


def _capacity(run: Measuring) -> Item:
    return capacity(run.target, run.profile, run.sizing)


CHECK = Check(
    name="retention",
    place=60,
    measure=nullcontext,
    summary="the retention tier's capacity",
    answers=(row("retention", "retention-capacity", "8", "retention tier capacity", _capacity),),
)
"""Checklist 8: the target's free capacity, read when the session started."""
