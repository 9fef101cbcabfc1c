"""Checklist item 6: the metadata rate: a checkpoint's create storm, its commit, a restore's
listing, and the retention delete storm.

A checkpoint is ``gpus x files_per_rank`` files in one directory plus the global ``.metadata``
(PyTorch DCP). At full count by default, every global rank's files are made by this node's
rank processes (``run.metadata_files`` sets fewer): create, a 4 KiB stamped write, fsync and
close of each, then ``.metadata`` written and committed by a rename. Two checkpoints are
made, as step after step; the restore's listing and stat pass reads the newer, and the
retention delete storm removes the older while the newer stays.

Requirements at this scale: the create window is the stall budget (sync) or interval /
headroom (async), so the storm's rate must reach files per checkpoint / window
(``create_rate_per_s``); the delete storm must finish within the checkpoint interval. When
fewer files than the full checkpoint are made, the rate is projected linearly to the full
count, which assumes the rate holds as the directory grows (only a full-count run shows it).
With many nodes, the nodes split the files and start together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from ckptgate.cluster.nodes import run_everywhere, start_gate
from ckptgate.engine.pool import RankPool
from ckptgate.fixtures.plugin import RunState
from ckptgate.report.gate import GateReport, Item, judge
from ckptgate.sizing import Profile, Sizing, format_count, format_seconds
from ckptgate.storage.target import Target
from ckptgate.workloads.campaign import timeout_for
from ckptgate.workloads.metadata_storm import (
    METADATA_NAME,
    Phase,
    StormResult,
    combine_phases,
    metadata_paths,
    run_commit,
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    split,
    storm_files,
)

ROUNDS = 2
"""Checkpoints made: the newer is listed and stat'ed, the older removed by the delete storm."""


@dataclass
class MetadataRun:
    """The storm's rounds, the restore listing of the newer, the delete storm of the older."""

    files: int
    """Shard files per checkpoint made by the whole run (all nodes), without .metadata."""
    rounds: list[StormResult]
    listed_names: tuple[str, ...]
    stat_sizes: dict[str, int]
    listing: Phase
    stat: Phase
    delete: Phase
    deleted: list[str]

    def worst(self) -> StormResult:
        """The slowest round: every checkpoint must commit within its window."""
        return max(self.rounds, key=lambda r: r.span_s)


def _storm_round(
    step: int,
    files: int,
    target: Target,
    pool: RankPool,
    run_state: RunState,
    timeout_s: float,
) -> StormResult:
    profile, nodes = run_state.profile, run_state.cluster
    directory = target.new_dir("metadata", f"step-{step}")
    planned = storm_files(directory, files, profile.checkpoint.files_per_rank)
    shares = split(planned, nodes.count)
    mine = shares[nodes.index] if nodes.index < len(shares) else []
    target.register([f.path for f in mine])
    if nodes.index == 0:
        target.register(list(metadata_paths(directory)))
    creates = run_everywhere(
        nodes,
        timeout_s,
        f"the end of the metadata storm {step}",
        lambda: run_metadata_storm(
            pool,
            target.fs_spec,
            directory,
            mine,
            timeout_s,
            run_id=run_state.run_id,
            commit=False,
            before_start=start_gate(nodes, timeout_s, "the storm start"),
        ),
    )
    create = combine_phases([r.create for r in creates])
    # The coordinator (node 0) commits once every node's files are closed; a failure there is
    # exchanged like any other, so no node waits on a commit that will not come.
    commit = run_everywhere(
        nodes,
        timeout_s,
        f"the commit of storm {step}",
        lambda: (
            run_commit(pool, target.fs_spec, directory, planned, timeout_s)
            if nodes.index == 0
            else None
        ),
    )[0]
    return StormResult(
        directory,
        tuple(f.path for f in planned),
        metadata_paths(directory)[1],
        creates[0].io,
        create,
        commit,
    )


@pytest.fixture(scope="module")
def metadata_run(
    run_state: RunState, target: Target, rank_pool: RankPool, requirements: Sizing
) -> MetadataRun:
    """The storms, once per module; their files are the run's (the plugin removes them)."""
    profile, nodes = run_state.profile, run_state.cluster
    files = profile.run.metadata_files or profile.cluster.gpus * profile.checkpoint.files_per_rank
    timeout_s = timeout_for(profile, requirements.create_window_s)
    target.new_dir("metadata")
    rounds = [
        _storm_round(step, files, target, rank_pool, run_state, timeout_s)
        for step in range(1, ROUNDS + 1)
    ]
    newer, older = rounds[-1], rounds[0]
    listings = run_everywhere(
        nodes,
        timeout_s,
        "the end of the restore listing",
        lambda: run_restore_listing(
            rank_pool,
            target.fs_spec,
            newer.directory,
            timeout_s,
            part=(nodes.index, nodes.count),
            before_start=start_gate(nodes, timeout_s, "the listing start"),
        ),
    )
    sizes: dict[str, int] = {}
    for listing in listings:
        sizes.update(listing.sizes)
    older_paths = [*older.files, metadata_paths(older.directory)[1]]
    # Each node deletes what it created (the same split as the storm; node 0 the .metadata).
    shares = split(list(older.files), nodes.count)
    mine = list(shares[nodes.index]) if nodes.index < len(shares) else []
    if nodes.index == 0:
        mine.append(metadata_paths(older.directory)[1])
    delete_timeout_s = timeout_for(profile, profile.checkpoint.interval_s)
    deletes = run_everywhere(
        nodes,
        delete_timeout_s,
        "the end of the delete storm",
        lambda: run_delete_storm(
            rank_pool,
            target.fs_spec,
            mine,
            delete_timeout_s,
            before_start=start_gate(nodes, delete_timeout_s, "the delete start"),
        ),
    )
    target.forget_removed(mine)
    return MetadataRun(
        files=files,
        rounds=rounds,
        listed_names=listings[0].names,
        stat_sizes=sizes,
        listing=combine_phases([listing.list for listing in listings]),
        stat=combine_phases([listing.stat for listing in listings]),
        delete=combine_phases(deletes),
        deleted=older_paths,
    )


def _percentiles(phase: Phase, ops: tuple[str, ...]) -> str:
    return ", ".join(
        f"{op} p50 {format_seconds(s.p50_s)} p99 {format_seconds(s.p99_s)} max "
        f"{format_seconds(s.max_s)}"
        for op, s in phase.latencies.items()
        if op in ops
    )


def _commit_latencies(storm: StormResult) -> dict[str, Any]:
    return storm.commit.latencies if storm.commit else {}


def _scale(run: MetadataRun, requirements: Sizing, run_state: RunState) -> str:
    full = requirements.files_per_checkpoint
    made = run.files + 1
    if made >= full:
        words = f"{format_count(made)} files made, a checkpoint has {format_count(full)}"
    else:
        words = (
            f"{format_count(made)} of {format_count(full)} files per checkpoint made "
            "(run.metadata_files): projected linearly to the full count"
        )
    return f"{words}; {run_state.plan().scale()}"


def _scope(run: MetadataRun, requirements: Sizing) -> str:
    if run.files + 1 >= requirements.files_per_checkpoint:
        return (
            "full file count made: the target's metadata service saw a whole checkpoint's "
            "creates in one directory; clients on more nodes may push it harder"
        )
    return (
        "fewer files than a checkpoint: proves the rate at this directory size; a full-count "
        "run shows whether it holds as the directory grows"
    )


def test_metadata_storm_commits_a_whole_checkpoint(
    metadata_run: MetadataRun, requirements: Sizing, gate: GateReport
) -> None:
    """The storm made exactly the files, and the commit left ``.metadata`` and no temp file."""
    newer = metadata_run.rounds[-1]
    names = {path.rsplit("/", 1)[-1] for path in newer.files}
    assert set(metadata_run.listed_names) == names | {METADATA_NAME}
    assert set(metadata_run.stat_sizes) == names | {METADATA_NAME}
    worst = metadata_run.worst()
    gate.section(
        "metadata",
        {
            "files": metadata_run.files,
            "files_per_checkpoint": requirements.files_per_checkpoint,
            "rounds": [r.to_json() for r in metadata_run.rounds],
            "statistic": "slowest round (every checkpoint must commit within its window)",
            "create_rate_per_s": worst.create.rate_per_s,
            "checkpoint_rate_per_s": worst.checkpoint_rate_per_s,
            "stat_rate_per_s": metadata_run.stat.rate_per_s,
            "unlink_rate_per_s": metadata_run.delete.rate_per_s,
            "latency_s": {
                **{op: s.to_json() for op, s in worst.create.latencies.items()},
                **{f"commit_{op}": s.to_json() for op, s in _commit_latencies(worst).items()},
                "list": metadata_run.listing.latencies["list"].to_json(),
                "stat": metadata_run.stat.latencies["stat"].to_json(),
                "unlink": metadata_run.delete.latencies["unlink"].to_json(),
            },
            "restore": {
                "list": metadata_run.listing.to_json(),
                "stat": metadata_run.stat.to_json(),
            },
            "delete": metadata_run.delete.to_json(),
            "io": worst.io,
        },
    )
    assert all(size > 0 for size in metadata_run.stat_sizes.values())


def test_metadata_create_rate(
    metadata_run: MetadataRun,
    cluster_profile: Profile,
    requirements: Sizing,
    run_state: RunState,
    gate: GateReport,
) -> None:
    """Checklist 6: files per second from the common start to the commit, against the window."""
    worst = metadata_run.worst()
    required = requirements.requirements["create_rate_per_s"]
    window = (
        f"stall budget {format_seconds(requirements.stall_budget_s)} (sync)"
        if cluster_profile.checkpoint.mode == "sync"
        else f"interval / headroom {format_seconds(requirements.create_window_s)} (async)"
    )
    projected_s = requirements.files_per_checkpoint / worst.checkpoint_rate_per_s
    detail = (
        f"{cluster_profile.name}: {required.formula}; the storm must fit the {window}; "
        f"slowest of {len(metadata_run.rounds)} rounds: {format_count(worst.committed_files)} "
        f"files committed in {format_seconds(worst.span_s)} (creates "
        f"{format_seconds(worst.create.span_s)}, commit "
        f"{format_seconds(worst.commit.span_s if worst.commit else 0.0)}), a full checkpoint "
        f"in {format_seconds(projected_s)}; "
        f"{_percentiles(worst.create, ('create', 'fsync', 'close'))}"
        f"; {_scale(metadata_run, requirements, run_state)}"
    )
    item = gate.record(
        judge(
            id="metadata-create-rate",
            title="metadata storm create rate",
            measured=worst.checkpoint_rate_per_s,
            required=requirements.create_rate_per_s,
            unit="1/s",
            detail=detail,
            scope=_scope(metadata_run, requirements),
        )
    )
    assert item.passed, item.message


def test_restore_listing_and_stat(
    metadata_run: MetadataRun, requirements: Sizing, run_state: RunState, gate: GateReport
) -> None:
    """Checklist 6: what a restore does first, listed and stat'ed; reported, not gated."""
    stat, listing = metadata_run.stat, metadata_run.listing
    projected_s = requirements.files_per_checkpoint / stat.rate_per_s
    item = gate.record(
        Item(
            id="metadata-restore-stat",
            title="restore listing and stat rate",
            required=None,
            measured=stat.rate_per_s,
            unit="1/s",
            passed=None,
            detail=f"{format_count(stat.ops)} files stat'ed in {format_seconds(stat.span_s)} "
            f"after a listing of {format_seconds(listing.span_s)}; a full checkpoint's stats in "
            f"{format_seconds(projected_s)}; {_percentiles(stat, ('stat',))}; no requirement: "
            f"the restart read time covers it; {_scale(metadata_run, requirements, run_state)}",
            scope=_scope(metadata_run, requirements),
        )
    )
    assert item.passed is None
    assert stat.ops == len(metadata_run.listed_names)


def test_retention_delete_storm(
    metadata_run: MetadataRun,
    cluster_profile: Profile,
    requirements: Sizing,
    run_state: RunState,
    gate: GateReport,
) -> None:
    """Checklist 6: removing an older checkpoint's files finishes within the interval."""
    delete = metadata_run.delete
    projected_s = requirements.files_per_checkpoint / delete.rate_per_s
    item = gate.record(
        judge(
            id="metadata-delete",
            title="retention delete storm",
            measured=projected_s,
            required=cluster_profile.checkpoint.interval_s,
            unit="s",
            better="lower",
            detail=f"{cluster_profile.name}: a checkpoint's "
            f"{format_count(requirements.files_per_checkpoint)} files removed within the "
            f"{format_seconds(cluster_profile.checkpoint.interval_s)} interval; measured "
            f"{format_count(delete.ops)} unlinks in "
            f"{format_seconds(delete.span_s)} ({delete.rate_per_s:.3g}/s); "
            f"{_percentiles(delete, ('unlink',))}; {_scale(metadata_run, requirements, run_state)}",
            scope=_scope(metadata_run, requirements),
        )
    )
    assert item.passed, item.message
