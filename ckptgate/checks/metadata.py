"""Checklist item 6: the metadata rate: a checkpoint's create storm, its commit, a restore's
listing, and the retention delete storm.

A checkpoint is ``gpus x files_per_rank`` files in one directory plus the global ``.metadata``
(PyTorch DCP). At full count by default, every global rank's files are made by this node's
rank processes (``run.metadata_files`` sets fewer): create, a 4 KiB stamped write, fsync and
close of each, then ``.metadata`` written by one coordinator and committed by a rename. The
``.metadata`` is as large as PyTorch DCP's for the profile (``dcp_metadata_bytes``: tensors
and chunks of the layout at the bytes measured on real saves), whatever the storm's file count,
since one coordinator writes all of it on the save's critical path. Two checkpoints are
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

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ckptgate.campaigns.context import CheckContext
from ckptgate.checks.check import Check, Measuring, row
from ckptgate.cluster.nodes import run_everywhere
from ckptgate.report import figure_layout, figures
from ckptgate.report.html import esc, field_table, figure, num, table
from ckptgate.report.items import Item, format_value, judge
from ckptgate.report.schema import LatencyStats
from ckptgate.report.sections import ReportPart
from ckptgate.rundir.manifest import Writer
from ckptgate.sizing import format_bytes, format_count, format_seconds, storm_file_count
from ckptgate.workloads.fileplan import FilePlan
from ckptgate.workloads.replay import scan_checkpoint
from ckptgate.workloads.storm import (
    METADATA_NAME,
    Phase,
    StormResult,
    combine_phases,
    commit_content,
    metadata_paths,
    planned_storm_files,
    register_storm,
    run_commit,
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    split,
    storm_files,
    verify_storm,
)

ROUNDS = 2
"""Checkpoints made: the newer is listed and stat'ed, the older removed by the delete storm."""


@dataclass
class MetadataRun:
    """The storm's rounds, the restore listing of the newer, the delete storm of the older."""

    ctx: CheckContext
    files: int
    """Shard files per checkpoint made by the whole run (all nodes), without .metadata."""
    rounds: list[StormResult]
    listed_names: tuple[str, ...]
    stat_sizes: dict[str, int]
    listing: Phase
    stat: Phase
    delete: Phase
    deleted: list[str]
    metadata_bytes: int
    """The committed ``.metadata``'s size: DCP's for the profile, or the replayed tree's."""
    left_after_delete: tuple[str, ...] = ()
    """Files of the older checkpoint still there after the delete storm (a bulk delete may
    drop a key without an error: s3fs's DeleteObjects runs quiet)."""

    def worst(self) -> StormResult:
        """The slowest round: every checkpoint must commit within its window."""
        return max(self.rounds, key=lambda r: r.span_s)

    def whole(self) -> bool:
        """The storm made exactly the files, and the commit left ``.metadata`` (at least DCP's
        size for the profile, or the replayed tree's: the listing is longer only for a tiny
        model) and no temp.

        The listing is the checkpoint directory's own entries: a replayed tree's files in
        subdirectories show as those directories (whose sizes are not checked)."""
        newest = self.rounds[-1]
        relative = [path[len(newest.directory) + 1 :] for path in newest.files]
        names = {path.split("/", 1)[0] for path in relative}
        files = {path for path in relative if "/" not in path} | {METADATA_NAME}
        return (
            set(self.listed_names) == names | {METADATA_NAME}
            and set(self.stat_sizes) == names | {METADATA_NAME}
            and all(self.stat_sizes[name] > 0 for name in files)
            and self.stat_sizes[METADATA_NAME] >= self.metadata_bytes
        )

    def section(self) -> dict[str, Any]:
        """The report's ``metadata`` section."""
        worst = self.worst()
        commit = worst.commit.latencies if worst.commit else {}
        return {
            "files": self.files,
            "files_per_checkpoint": self.ctx.sizing.files_per_checkpoint,
            "metadata_bytes": self.metadata_bytes,
            "rounds": [r.to_json() for r in self.rounds],
            "statistic": "slowest round (every checkpoint must commit within its window)",
            "create_rate_per_s": worst.create.rate_per_s,
            "checkpoint_rate_per_s": worst.checkpoint_rate_per_s,
            "stat_rate_per_s": self.stat.rate_per_s,
            "unlink_rate_per_s": self.delete.rate_per_s,
            "latency_s": {
                **{op: s.to_json() for op, s in worst.create.latencies.items()},
                **{f"commit_{op}": s.to_json() for op, s in commit.items()},
                "list": self.listing.latencies["list"].to_json(),
                "stat": self.stat.latencies["stat"].to_json(),
                **{op: s.to_json() for op, s in self.delete.latencies.items()},
            },
            "restore": {"list": self.listing.to_json(), "stat": self.stat.to_json()},
            "delete": self.delete.to_json(),
            "io": worst.io,
            "loop": worst.loop,
        }


def _storm_round(
    ctx: CheckContext, step: int, files: int, replay: FilePlan | None = None
) -> StormResult:
    profile, nodes, target, pool = ctx.profile, ctx.nodes, ctx.target, ctx.pool
    timeout_s = ctx.save_timeout_s
    directory = target.new_dir("metadata", f"step-{step}")
    if replay is None:
        dist = ctx.sizing.distribution
        named = dist.rank_files if dist is not None else None
        names = [[n for n, _ in rank] for rank in named] if named is not None else None
        planned = storm_files(directory, files, profile.checkpoint.files_per_rank, names)
    else:  # the replayed tree's own files, in its own subdirectories
        for sub in replay.subdirectories():
            target.new_dir("metadata", f"step-{step}", *sub)
        planned = planned_storm_files(directory, replay)
    shares = split(planned, nodes.count)
    mine = shares[nodes.index] if nodes.index < len(shares) else []
    register_storm(target, mine, ctx.run_id)
    if nodes.index == 0:
        target.register(list(metadata_paths(directory)), writer=Writer.STORM_COMMIT)
    creates = run_everywhere(
        nodes,
        timeout_s,
        f"the end of the metadata storm {step}",
        lambda: run_metadata_storm(
            pool, target.spec, directory, mine, timeout_s, run_id=ctx.run_id, commit=False
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
            _commit(ctx, directory, planned, _metadata_bytes(ctx, replay))
            if nodes.index == 0
            else None
        ),
    )[0]
    # Untimed: every byte the storm wrote is read back and checked once (this node's files).
    run_everywhere(
        nodes,
        timeout_s,
        f"the verification of storm {step}",
        lambda: verify_storm(pool, target.spec, mine, timeout_s, run_id=ctx.run_id),
    )
    if nodes.index == 0:
        tmp_path, final_path = metadata_paths(directory)
        # every byte of the commit's .metadata, for ckptgate verify: its listing, then padding
        head, padding = commit_content(
            planned, metadata_bytes=_metadata_bytes(ctx, replay), run_id=ctx.run_id,
            transfer_bytes=ctx.profile.run.transfer_bytes,
        )  # fmt: skip
        target.record_content(final_path, head, padding)
        target.forget_removed([tmp_path])  # renamed away by the commit
    return StormResult(
        directory,
        tuple(f.path for f in planned),
        metadata_paths(directory)[1],
        creates[0].io,
        creates[0].loop,
        create,
        commit,
    )


def _metadata_bytes(ctx: CheckContext, replay: FilePlan | None) -> int:
    """The storm's ``.metadata``: the replayed tree's metadata file's size, else DCP's for the
    profile (``dcp_metadata_bytes``)."""
    return replay.metadata_bytes if replay is not None else ctx.sizing.dcp_metadata_bytes


def _commit(ctx: CheckContext, directory: str, planned: list, metadata_bytes: int) -> Phase:
    """The coordinator's commit: node 0 alone, so its ranks start without the nodes' gate."""
    with ctx.pool.alone():
        return run_commit(
            ctx.pool,
            ctx.target.spec,
            directory,
            planned,
            ctx.save_timeout_s,
            metadata_bytes=metadata_bytes,
            run_id=ctx.run_id,
            transfer_bytes=ctx.profile.run.transfer_bytes,
        )


def run_metadata(ctx: CheckContext) -> MetadataRun:
    """The storms (two checkpoints), the restore listing of the newer, the delete storm of the
    older; their files are the run's (registered; the session's cleanup removes what stays)."""
    profile, nodes, target, pool = ctx.profile, ctx.nodes, ctx.target, ctx.pool
    replay = scan_checkpoint(profile.checkpoint.replay) if profile.checkpoint.replay else None
    # every file of the replayed tree, whatever run.metadata_files says
    files = len(replay.files) if replay is not None else storm_file_count(profile)
    timeout_s = ctx.save_timeout_s
    target.new_dir("metadata")
    rounds = [_storm_round(ctx, step, files, replay) for step in range(1, ROUNDS + 1)]
    newer, older = rounds[-1], rounds[0]
    listings = run_everywhere(
        nodes,
        timeout_s,
        "the end of the restore listing",
        lambda: run_restore_listing(
            pool, target.spec, newer.directory, timeout_s, part=(nodes.index, nodes.count)
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
    delete_timeout_s = ctx.interval_timeout_s
    deletes = run_everywhere(
        nodes,
        delete_timeout_s,
        "the end of the delete storm",
        lambda: run_delete_storm(pool, target.spec, mine, delete_timeout_s),
    )
    left = target.forget_removed(mine)
    return MetadataRun(
        ctx=ctx,
        files=files,
        rounds=rounds,
        listed_names=listings[0].names,
        stat_sizes=sizes,
        listing=combine_phases([listing.list for listing in listings]),
        stat=combine_phases([listing.stat for listing in listings]),
        delete=combine_phases(deletes),
        deleted=older_paths,
        metadata_bytes=_metadata_bytes(ctx, replay),
        left_after_delete=tuple(left),
    )


def _percentiles(phase: Phase, ops: tuple[str, ...]) -> str:
    return ", ".join(
        f"{op} p50 {format_seconds(s.p50_s)} p99 {format_seconds(s.p99_s)} max "
        f"{format_seconds(s.max_s)}"
        for op, s in phase.latencies.items()
        if op in ops
    )


def _scale(run: MetadataRun) -> str:
    full = run.ctx.sizing.files_per_checkpoint
    made = run.files + 1
    if made >= full:
        words = f"{format_count(made)} files made, a checkpoint has {format_count(full)}"
    else:
        words = (
            f"{format_count(made)} of {format_count(full)} files per checkpoint made "
            "(run.metadata_files): projected linearly to the full count"
        )
    return f"{words}; {run.ctx.plan.scale()}"


def _scope(run: MetadataRun) -> str:
    if run.files + 1 >= run.ctx.sizing.files_per_checkpoint:
        return (
            "full file count made: the target's metadata service saw a whole checkpoint's "
            "creates in one directory; clients on more nodes may push it harder"
        )
    return (
        "fewer files than a checkpoint: proves the rate at this directory size; a full-count "
        "run shows whether it holds as the directory grows"
    )


TITLES = {
    "metadata-create-rate": "metadata storm create rate",
    "metadata-restore-stat": "restore listing and stat rate",
    "metadata-delete": "retention delete storm",
}
"""The rows' titles (``CHECK`` below), which an object store's phases extend."""


def _title(id: str, label: str) -> str:
    """The row's title, with what the phase is on an object store in brackets."""
    title = TITLES[id]
    return f"{title} [{label}]" if label else title


def create_rate(run: MetadataRun) -> Item:
    """Checklist 6: files per second from the common start to the commit, against the window."""
    ctx = run.ctx
    sizing, profile = ctx.sizing, ctx.profile
    worst = run.worst()
    required = sizing.requirements["create_rate_per_s"]
    window = (
        f"stall budget {format_seconds(sizing.stall_budget_s)} (sync)"
        if profile.checkpoint.mode == "sync"
        else f"interval / headroom {format_seconds(sizing.create_window_s)} (async)"
    )
    projected_s = sizing.files_per_checkpoint / worst.checkpoint_rate_per_s
    store = ctx.target.store
    ops = ("create", "close") if store else ("create", "fsync", "close")
    labels = f"; {store.fsync_words}; {store.commit_words}" if store else ""
    item = judge(
        id="metadata-create-rate",
        title=_title("metadata-create-rate", "no fsync, commit copy+delete" if store else ""),
        measured=worst.checkpoint_rate_per_s,
        required=sizing.create_rate_per_s,
        cluster_required=sizing.create_rate_per_s,
        unit="1/s",
        detail=(
            f"{profile.name}: {required.formula}; the storm must fit the {window}; "
            f"slowest of {len(run.rounds)} rounds: {format_count(worst.committed_files)} "
            f"files committed in {format_seconds(worst.span_s)} (creates "
            f"{format_seconds(worst.create.span_s)}, commit of a "
            f"{format_bytes(run.metadata_bytes)} .metadata "
            f"{format_seconds(worst.commit.span_s if worst.commit else 0.0)}), a full "
            f"checkpoint in {format_seconds(projected_s)}; "
            f"{_percentiles(worst.create, ops)}; {_scale(run)}{labels}"
        ),
        scope=_scope(run),
    )
    if not run.whole():
        item.passed = False
        item.detail += (
            "; the listing after the commit did not show exactly the storm's files and a "
            f".metadata of at least {format_bytes(run.metadata_bytes)}"
        )
    return item


def restore_stat(run: MetadataRun) -> Item:
    """Checklist 6: what a restore does first, listed and stat'ed; reported, not gated."""
    stat, listing = run.stat, run.listing
    projected_s = run.ctx.sizing.files_per_checkpoint / stat.rate_per_s
    return Item(
        id="metadata-restore-stat",
        required=None,
        measured=stat.rate_per_s,
        unit="1/s",
        passed=None,
        detail=f"{format_count(stat.ops)} files stat'ed in {format_seconds(stat.span_s)} "
        f"after a listing of {format_seconds(listing.span_s)}; a full checkpoint's stats in "
        f"{format_seconds(projected_s)}; {_percentiles(stat, ('stat',))}; no requirement: "
        f"the restart read time covers it; {_scale(run)}",
        scope=_scope(run),
    )


def delete_storm(run: MetadataRun) -> Item:
    """Checklist 6: removing an older checkpoint's files finishes within the interval; on an
    object store through its bulk delete, named with its keys per request."""
    ctx = run.ctx
    delete = run.delete
    interval_s = ctx.profile.checkpoint.interval_s
    files = ctx.sizing.files_per_checkpoint
    projected_s = files / delete.rate_per_s
    store = ctx.target.store
    requests = delete.latencies.get("delete_batch")
    if store is not None and requests is not None:
        how = (
            f"{store.batch_delete_words} from {len(delete.burst.ranks)} ranks: "
            f"{format_count(delete.ops)} keys in "
            f"{format_count(requests.count)} requests in {format_seconds(delete.span_s)}"
        )
        label = store.batch_label(delete.ops, requests.count)
    else:
        how = f"{format_count(delete.ops)} unlinks in {format_seconds(delete.span_s)}"
        label = ""
    item = judge(
        id="metadata-delete",
        title=_title("metadata-delete", label),
        measured=projected_s,
        required=interval_s,
        cluster_required=interval_s,
        unit="s",
        better="lower",
        detail=f"{ctx.profile.name}: a checkpoint's {format_count(files)} files removed within "
        f"the {format_seconds(interval_s)} interval; measured {how} "
        f"({delete.rate_per_s:.3g}/s); "
        f"{_percentiles(delete, ('unlink', 'delete_batch'))}; {_scale(run)}",
        scope=_scope(run),
    )
    if run.left_after_delete:
        item.passed = False
        item.detail += (
            f"; {len(run.left_after_delete)} files still there after the delete, e.g. "
            f"{run.left_after_delete[0]}"
        )
    return item


# The report's metadata section: its schema, its HTML section and figure.


@dataclass(frozen=True)
class MetadataSection:
    """The metadata storm's answers as the JSON report holds them (``MetadataRun.section``),
    read back through the schema's rules."""

    files: int = 0
    statistic: str = ""
    create_rate_per_s: float | None = None
    checkpoint_rate_per_s: float | None = None
    stat_rate_per_s: float | None = None
    unlink_rate_per_s: float | None = None
    latency_s: dict[str, LatencyStats] = field(default_factory=dict)


def _html(section: MetadataSection, plots: bool) -> list[str]:
    """The HTML report's section: each phase's rate, the latency table and its figure."""
    out = [f"<p>{esc(section.files)} files; {esc(section.statistic)}</p>"]
    rates = (
        ("create (whole storm)", section.create_rate_per_s, "1/s"),
        ("checkpoint commit", section.checkpoint_rate_per_s, "1/s"),
        ("restore stat", section.stat_rate_per_s, "1/s"),
        ("retention unlink", section.unlink_rate_per_s, "1/s"),
    )
    out.append(field_table(("operation", "rate"), rates))
    latency = section.latency_s
    rows = [
        [
            op,
            num(str(stats.count)),
            *(num(format_value(seconds, "s")) for _, seconds in stats.marks_s()),
        ]
        for op, stats in latency.items()
    ]
    out.append(table(("operation", "count", "p50", "p99", "max"), rows))
    if plots:
        out.append(figure(_latency_figure(latency), "latency per metadata operation"))
    return out


def _latency_figure(latency_s: dict[str, LatencyStats]) -> str | None:
    """p50, p99 and max latency per metadata operation (log scale)."""
    ops = [op for op, stats in latency_s.items() if stats.max_s]
    if not ops:
        return None
    figure, axes = figures.new_figure(0.42 * len(ops) + 1.2)
    ax = axes[0][0]
    colours = ("#1f77b4", "#ff7f0e", "#d62728")
    height = 0.8 / len(colours)
    marks = [latency_s[op].marks_s() for op in ops]
    for index, colour in enumerate(colours):
        ys = [row + (index - 1) * height for row in range(len(ops))]
        values = [max(each[index][1] or 0.0, 1e-9) for each in marks]
        ax.barh(ys, values, height=height, color=colour, label=marks[0][index][0])
    ax.set_xscale("log", subs=figures.LOG_MINOR_SUBS)
    ax.set_yticks(range(len(ops)), [f"{op} (n={latency_s[op].count})" for op in ops])
    ax.invert_yaxis()
    figures.unit_ticks(ax.xaxis, "s")
    ax.set_xlabel("latency per operation")
    legend = ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figures.svg_of(
        figure, "metadata-latency", right_pt=figure_layout.legend_width_pt(legend)
    )


REPORT = ReportPart(key="metadata", title="Metadata", schema=MetadataSection, html=_html)
"""The section in the outputs: rates per phase and the latency of each operation."""


@contextmanager
def _measure(run: Measuring) -> Iterator[MetadataRun]:
    """The storms, once; their files are the run's (the session's cleanup removes them)."""
    yield run_metadata(run.context)


CHECK = Check(
    name="metadata",
    place=30,
    measure=_measure,
    sections=lambda storms: {"metadata": storms.section()},
    report=(REPORT,),
    summary="the metadata storm: create and commit, restore listing and stat, delete",
    answers=tuple(
        row("metadata", id, "6", TITLES[id], judge)
        for id, judge in (
            ("metadata-create-rate", create_rate),
            ("metadata-restore-stat", restore_stat),
            ("metadata-delete", delete_storm),
        )
    ),
)
"""Checklist 6 at full rank count: two checkpoints' storms, the newer listed and stat'ed, the
older deleted."""
