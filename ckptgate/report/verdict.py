"""The run's one verdict: qualified, partial, trial or failed, or no verdict at all.

SPEC.md, "What a verdict means": nothing but these four may be called a result, and only
``qualified`` says the storage qualified for the cluster profile:

- qualified: every node of the profile took part, every shard at full size, every item passed;
- partial: every item passed for the nodes that took part; only a full-scale run shows the
  storage scales to every client;
- trial: shards capped, items not run, or other trial settings: a rehearsal;
- failed: at least one item failed or errored, each named.

On an object store a passing verdict says what it does not claim (``RunScale.caveats``): the
store has no fsync and commits by copy and delete, so no atomic commit was qualified.

A run that measured nothing (no item answered) is not a verdict: ``status`` is ``error``. A
run stopped by Ctrl-C or SIGTERM is ``interrupted``, whatever its items said so far: it never
reads as a rehearsal that ended.

Every verdict line names the profile as run (``ckptgate.sizing.as_run``): its name, whether
``--set`` modified it and how, Ψ, the checkpoint's bytes, the GPUs and the nodes, so that a
green line never hides that the toy profile or a shrunk one is what qualified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ckptgate.report.checklist import Checklist
from ckptgate.report.items import Item
from ckptgate.sizing.as_run import ProfileAsRun
from ckptgate.sizing.units import format_count

Status = Literal["qualified", "partial", "trial", "failed", "interrupted", "error"]


@dataclass(frozen=True)
class RunScale:
    """What the run played of the cluster, and the settings that make it a trial."""

    nodes: int
    cluster_nodes: int
    ranks: int
    cluster_ranks: int
    full_cluster: bool
    trial_settings: tuple[str, ...] = ()
    """Why the run is a rehearsal (capped shards, fewer metadata files than a checkpoint)."""
    memory_backed: bool = False
    caveats: tuple[str, ...] = ()
    """What a passing verdict does not claim on this target (an object store: no fsync, no
    atomic commit); every verdict line but ``failed`` and ``error`` carries them."""

    def words(self) -> str:
        share = self.nodes / self.cluster_nodes if self.cluster_nodes else 0.0
        return (
            f"{format_count(self.nodes)} of {format_count(self.cluster_nodes)} nodes "
            f"({share * 100:.3g} % of the cluster), {format_count(self.ranks)} of "
            f"{format_count(self.cluster_ranks)} ranks"
        )


@dataclass(frozen=True)
class Verdict:
    status: Status
    line: str
    failed: tuple[str, ...] = ()
    """Titles of the items that failed or errored."""
    missing: tuple[str, ...] = ()
    """Required checklist items that were not answered (skipped, deselected)."""
    not_run: tuple[str, ...] = ()
    """Optional items that were not answered (PyTorch DCP without torch)."""
    scale: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] | None = None
    """The profile as run (``ProfileAsRun.to_json``)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def decide(
    items: Sequence[Item],
    scale: RunScale,
    as_run: ProfileAsRun | None = None,
    interrupted: str | None = None,
    *,
    checklist: Checklist,
) -> Verdict:
    """The verdict of a run from its items and its scale (see the module docstring);
    ``interrupted`` says what stopped the run (``Ctrl-C``, ``SIGTERM``), if anything did;
    ``checklist``, the check table's rows, says which required rows are missing and which
    optional ones did not run. A checklist with no rows is refused: it would miss nothing."""
    if not checklist.rows:
        raise ValueError("decide: an empty checklist would call no row missing")
    verdict = _decide(items, scale, interrupted, checklist)
    if as_run is None:
        return verdict
    named = verdict.line.replace(
        f"VERDICT {verdict.status}:", f"VERDICT {verdict.status} for {as_run.words()}:", 1
    )
    return replace(verdict, line=named, profile=as_run.to_json())


def _decide(
    items: Sequence[Item], scale: RunScale, interrupted: str | None, checklist: Checklist
) -> Verdict:
    answered = {item.id for item in items}
    bad = [item for item in items if item.status in ("FAIL", "ERROR")]
    missing = checklist.missing(answered)
    not_run = checklist.not_run(answered)
    scale_json = {**asdict(scale), "words": scale.words()}
    known = [item for item in items if item.checklist is not None]
    if interrupted:
        names = ", ".join(f"{item.title} ({item.status})" for item in bad)
        return Verdict(
            "interrupted",
            f"VERDICT interrupted: {interrupted} stopped the run after {len(known)} checklist "
            f"item(s); nothing qualified{f'; failed before: {names}' if names else ''}; at "
            f"{scale.words()}",
            failed=tuple(item.title for item in bad),
            missing=missing,
            not_run=not_run,
            scale=scale_json,
        )
    if not known and not bad:
        return Verdict(
            "error",
            "ERROR: no verdict: the run measured nothing (no checklist item was answered)",
            scale=scale_json,
        )
    memory = "; memory-backed target: its page cache is the storage" if scale.memory_backed else ""
    memory += "".join(f"; {caveat}" for caveat in scale.caveats)
    if bad:
        names = ", ".join(f"{item.title} ({item.status})" for item in bad)
        return Verdict(
            "failed",
            f"VERDICT failed: {len(bad)} item(s) failed: {names}; at {scale.words()}",
            failed=tuple(item.title for item in bad),
            missing=missing,
            not_run=not_run,
            scale=scale_json,
        )
    settings = list(scale.trial_settings)
    if missing:
        settings.append(f"items not run: {', '.join(missing)}")
    skipped = f"; not run (optional): {', '.join(not_run)}" if not_run else ""
    if settings:
        return Verdict(
            "trial",
            f"VERDICT trial: every item that ran passed, but {'; '.join(settings)}: a "
            f"rehearsal, not a qualification; at {scale.words()}{skipped}{memory}",
            missing=missing,
            not_run=not_run,
            scale=scale_json,
        )
    if not scale.full_cluster:
        return Verdict(
            "partial",
            f"VERDICT partial: every item passed for {scale.words()}; this proves the played "
            "nodes' share, and only a full-scale run shows the storage scales to every client"
            f"{skipped}{memory}",
            not_run=not_run,
            scale=scale_json,
        )
    return Verdict(
        "qualified",
        f"VERDICT qualified: every item passed with every node of the profile taking part "
        f"({scale.words()}), every shard at full size{skipped}{memory}",
        not_run=not_run,
        scale=scale_json,
    )
