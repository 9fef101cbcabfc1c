"""The test plan's concurrency item: the persist burst while dataloader readers keep the
target busy, as they do during an async save.

``run.readers`` reader processes (their own pool) stream a prepared dataset of
``run.reader_bytes`` from the target in 8 MiB sequential reads: first alone, then across a
checkpoint round written into ``contention/``. The writers' bandwidth alone is the write
rounds' median (``campaign``); under contention it is this round's. The readers' bandwidth
under contention counts only the bytes they read during the writers' span.

The persist requirement must still hold under contention (the same requirement as
``ckptgate.checks.write.async_persist``, or the stall budget in sync mode); the readers'
slowdown is reported, and gated where the profile sets ``run.max_reader_slowdown``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks.check import Check, Measuring, NotMeasured, row
from ckptgate.checks.write import persist_item, stall_item
from ckptgate.cluster.nodes import pool_cancel, pool_gate, run_everywhere
from ckptgate.engine.pool import RankPool
from ckptgate.engine.records import BurstResult, detail_as, merge_nodes
from ckptgate.engine.sampler import ProgressSampler
from ckptgate.report import figures
from ckptgate.report.html import esc, field_table, figure
from ckptgate.report.items import Item, format_value, judge
from ckptgate.report.schema import BurstSection
from ckptgate.report.sections import ReportPart
from ckptgate.rundir.manifest import Writer
from ckptgate.sizing import format_rate, format_seconds
from ckptgate.workloads.contention import (
    READ_BYTES,
    ContendedRun,
    ReaderDetail,
    ReaderRun,
    dataset_files,
    prepare_dataset,
    run_contended,
    run_readers,
)
from ckptgate.workloads.write_burst import run_write_burst

MIN_READ_S = 2.0
"""The shortest reader run: long enough for a steady rate on any target."""
WARMUP_S = 0.5
"""Readers stream this long before the writers start, so the writers meet a busy target."""
COVER_SPANS = 4.0
"""Readers keep reading for this many of the writers' uncontended spans after the warm-up."""


@dataclass
class Contention:
    """Both sides alone and together, gathered from every node."""

    campaign: WriteCampaign
    writers_alone_bytes_per_s: float
    writers: BurstResult
    readers_alone_bytes_per_s: float
    readers_contended_bytes_per_s: float
    coverage: float
    readers: int
    dataset_bytes: int
    cache_dropped: bool
    memory_backed: bool
    duration_s: float

    @property
    def reader_slowdown(self) -> float:
        """Fraction of the readers' bandwidth lost to the writers (0 = none)."""
        if self.readers_alone_bytes_per_s <= 0:
            return 0.0
        return max(0.0, 1.0 - self.readers_contended_bytes_per_s / self.readers_alone_bytes_per_s)

    @property
    def writer_slowdown(self) -> float:
        if self.writers_alone_bytes_per_s <= 0:
            return 0.0
        return max(0.0, 1.0 - self.writers.aggregate_bytes_per_s / self.writers_alone_bytes_per_s)

    def section(self) -> dict[str, Any]:
        """The report's ``contention`` section."""
        return {
            "readers": self.readers,
            "dataset_bytes": self.dataset_bytes,
            "read_bytes": READ_BYTES,
            "cache_dropped": self.cache_dropped,
            "memory_backed": self.memory_backed,
            "readers_duration_s": self.duration_s,
            "writers_alone_bytes_per_s": self.writers_alone_bytes_per_s,
            "writers_contended_bytes_per_s": self.writers.aggregate_bytes_per_s,
            "writer_slowdown": self.writer_slowdown,
            "readers_alone_bytes_per_s": self.readers_alone_bytes_per_s,
            "readers_contended_bytes_per_s": self.readers_contended_bytes_per_s,
            "reader_slowdown": self.reader_slowdown,
            "coverage": self.coverage,
            "writers": self.writers.to_json(),
        }


def reader_pool(campaign: WriteCampaign) -> RankPool | None:
    """The dataloader's reader processes, apart from the ranks (None: run.readers is 0)."""
    run = campaign.ctx.profile.run
    if run.readers == 0:
        return None
    gate = pool_gate(campaign.ctx.nodes)
    pool = RankPool(
        run.readers,
        gate=gate,
        stall_timeout_s=run.stall_timeout_s,
        cancelled=pool_cancel(campaign.ctx.nodes),
    )
    pool.sampler = reader_sampler(campaign.ctx.pool.sampler)
    return pool


def reader_sampler(ranks: ProgressSampler | None) -> ProgressSampler | None:
    """The readers' own sampler (their pool runs beside the ranks', on another thread): a
    companion of the ranks' sampler ``ranks``, so the readers show their bytes, rate and
    ``done in`` on the same live display and their series are saved in the JSON report's
    ``bandwidth_series`` beside the writers'; none where the ranks have none."""
    if ranks is None:
        return None
    return ranks.companion()


@contextmanager
def run_contention(campaign: WriteCampaign, readers: RankPool) -> Iterator[Contention]:
    """Readers alone, then across a checkpoint round; removes the dataset and the round after.

    The contended round's files are verified (untimed) before they go: every byte the run
    writes is read back at least once.
    """
    ctx = campaign.ctx
    profile, target, nodes = ctx.profile, ctx.target, ctx.nodes
    spec = target.spec
    bursts = campaign.rounds()  # the writers alone, measured first
    alone_writers = statistics.median(b.aggregate_bytes_per_s for b in bursts)
    target.new_dir("contention")
    data_dir = target.new_dir("contention", f"dataset-{nodes.index}")
    files = dataset_files(data_dir, profile.run.reader_bytes, readers.ranks, ctx.run_id, READ_BYTES)
    shards = campaign.shards_in(campaign.new_checkpoint_dir("contention", f"step-{nodes.index}"))
    made = [f.path for f in files] + [s.path for s in shards]
    target.register_shards(files, writer=Writer.DATASET)
    target.register_shards(shards, writer=Writer.CONTENTION)
    timeout_s = campaign.timeout_s
    try:
        prepare_dataset(readers, spec, files, timeout_s)
        paths = [[f.path] for f in files]
        alone: list[ReaderRun] = run_everywhere(
            nodes,
            timeout_s,
            "the end of the readers alone",
            lambda: run_readers(readers, spec, paths, MIN_READ_S, MIN_READ_S + timeout_s),
        )
        worst_alone_s = max(b.span_s for b in bursts)
        window_s = ctx.sizing.create_window_s
        duration_s = WARMUP_S + max(MIN_READ_S, min(window_s, COVER_SPANS * worst_alone_s))

        def write() -> BurstResult:
            return run_write_burst(ctx.pool, spec, shards, timeout_s)

        runs: list[ContendedRun] = run_everywhere(
            nodes,
            timeout_s,
            "the end of the contended round",
            lambda: run_contended(
                write,
                ctx.pool,
                readers,
                spec,
                paths,
                duration_s,
                duration_s + timeout_s,
                warmup_s=WARMUP_S,
            ),
        )
        campaign.verify(shards)
        yield Contention(
            campaign=campaign,
            writers_alone_bytes_per_s=alone_writers,
            writers=merge_nodes("write", [run.writers for run in runs]),
            readers_alone_bytes_per_s=sum(a.aggregate_bytes_per_s for a in alone),
            readers_contended_bytes_per_s=sum(run.reader_bytes_per_s for run in runs),
            coverage=min(run.coverage for run in runs),
            readers=readers.ranks * nodes.count,
            dataset_bytes=profile.run.reader_bytes * nodes.count,
            cache_dropped=all(
                detail_as(r, ReaderDetail).cache_dropped for a in alone for r in a.burst.ranks
            ),
            memory_backed=target.facts.memory_backed,
            duration_s=duration_s,
        )
    finally:
        target.remove_files(made)


def _sides(result: Contention) -> str:
    return (
        f"writers alone {format_rate(result.writers_alone_bytes_per_s)} (median round), "
        f"contended {format_rate(result.writers.aggregate_bytes_per_s)}; {result.readers} "
        f"readers alone {format_rate(result.readers_alone_bytes_per_s)}, during the writes "
        f"{format_rate(result.readers_contended_bytes_per_s)}; readers covered "
        f"{result.coverage * 100:.3g} % of the writers' span"
        + (
            "; memory-backed target: readers and writers share RAM bandwidth and CPU"
            if result.memory_backed
            else ""
            if result.cache_dropped
            else "; readers' cached pages could not be dropped: reads may come from RAM"
        )
    )


def persist(result: Contention) -> Item:
    """The persist requirement still holds while the dataloader reads from the same target."""
    campaign = result.campaign
    if campaign.ctx.profile.checkpoint.mode == "async":
        item = persist_item(campaign, result.writers, id="contention-persist", words=_sides(result))
    else:
        item = stall_item(campaign, result.writers, id="contention-persist", words=_sides(result))
    if result.coverage < 1.0:
        item.detail += "; the readers stopped before the writers finished (bounded run)"
    if result.writers.total_bytes != campaign.played_bytes:
        item.passed = False
        item.detail += (
            f"; wrote {result.writers.total_bytes} B, the plan says {campaign.played_bytes} B"
        )
    return item


def reader_slowdown(result: Contention) -> Item:
    """The dataloader's loss of bandwidth during a save: gated where the profile sets a limit."""
    ctx = result.campaign.ctx
    limit = ctx.profile.run.max_reader_slowdown
    detail = f"{_sides(result)}; readers' bound {format_seconds(result.duration_s)}"
    if limit is None:
        return Item(
            id="reader-slowdown",
            required=None,
            measured=result.reader_slowdown,
            unit="fraction",
            passed=None,
            detail=detail + "; run.max_reader_slowdown not set: reported, not gated",
            better="lower",
            scope=ctx.plan.scope(),
        )
    return judge(
        id="reader-slowdown",
        measured=result.reader_slowdown,
        required=limit,
        unit="fraction",
        better="lower",
        detail=f"{ctx.profile.name}: run.max_reader_slowdown {limit:g}; {detail}",
        scope=ctx.plan.scope(),
    )


# The report's contention section: its schema, its HTML section and figure, the burst it holds.


@dataclass(frozen=True)
class ContentionSection:
    """Readers and writers under contention, as the JSON report holds them
    (``Contention.section``), read back through the schema's rules."""

    readers: int = 0
    writers_alone_bytes_per_s: float | None = None
    writers_contended_bytes_per_s: float | None = None
    writer_slowdown: float | None = None
    readers_alone_bytes_per_s: float | None = None
    readers_contended_bytes_per_s: float | None = None
    reader_slowdown: float | None = None
    coverage: float | None = None
    writers: BurstSection | None = None


def _html(section: ContentionSection, plots: bool) -> list[str]:
    """The HTML report's section: both sides alone and together, and the figure."""
    out = [f"<p>{esc(section.readers)} dataloader readers</p>"]
    fields = (
        ("writers alone", section.writers_alone_bytes_per_s, "B/s"),
        ("writers during reads", section.writers_contended_bytes_per_s, "B/s"),
        ("writer slowdown", section.writer_slowdown, "fraction"),
        ("readers alone", section.readers_alone_bytes_per_s, "B/s"),
        ("readers during the save", section.readers_contended_bytes_per_s, "B/s"),
        ("reader slowdown", section.reader_slowdown, "fraction"),
        ("coverage (reads across the save)", section.coverage, "fraction"),
    )
    out.append(field_table(("", "value"), fields))
    if plots:
        out.append(figure(_figure(section), "each side alone and during the other"))
    return out


def _figure(section: ContentionSection) -> str | None:
    """Writers and readers alone and while the other runs, with each side's slowdown."""
    sides = [
        ("checkpoint writers", section.writers_alone_bytes_per_s,
         section.writers_contended_bytes_per_s, section.writer_slowdown),
        ("dataloader readers", section.readers_alone_bytes_per_s,
         section.readers_contended_bytes_per_s, section.reader_slowdown),
    ]  # fmt: skip
    pairs = [
        (label, alone, contended, slowdown)
        for label, alone, contended, slowdown in sides
        if alone is not None and contended is not None
    ]
    if not pairs:
        return None
    figure, axes = figures.new_figure(2.6)
    ax = axes[0][0]
    for place, (_label, alone, contended, slowdown) in enumerate(pairs):
        ax.barh(place - 0.2, alone, height=0.38, color="#9e9e9e",
                label="alone" if place == 0 else None)  # fmt: skip
        ax.barh(place + 0.2, contended, height=0.38, color="#1f77b4",
                label="during the other" if place == 0 else None)  # fmt: skip
        words = f" {format_value(slowdown, 'fraction')} slower"
        ax.annotate(words, (contended, place + 0.2), va="center", fontsize=8)
    ax.set_yticks(range(len(pairs)), [p[0] for p in pairs])
    ax.invert_yaxis()
    figures.unit_ticks(ax.xaxis, "B/s")
    ax.set_xlim(right=max(max(p[1], p[2]) for p in pairs) * 1.25)
    ax.set_xlabel("aggregate bandwidth")
    ax.legend(fontsize=8, loc="lower right")
    return figures.svg_of(figure, "contention")


REPORT = ReportPart(
    key="contention",
    title="Readers and writers under contention",
    schema=ContentionSection,
    html=_html,
    bursts=lambda section: [("contention writers", section.writers)],
)
"""The section in the outputs: the HTML section, and the contended round's writers as a burst
(``contention writers``) in the per-rank CSV and the HTML's rank tables."""


@contextmanager
def _measure(run: Measuring) -> Iterator[Contention]:
    """Readers alone, then across a checkpoint round; the reader processes stop, and the
    dataset and the round's files are removed, when the check's rows are done."""
    campaign = run.campaign
    readers = reader_pool(campaign)
    if readers is None:
        raise NotMeasured("run.readers is 0: no dataloader readers to contend with")
    with readers, run_contention(campaign, readers) as result:
        yield result


CHECK = Check(
    name="contention",
    place=40,
    measure=_measure,
    sections=lambda result: {"contention": result.section()},
    report=(REPORT,),
    summary="read while write: the persist burst beside dataloader readers",
    answers=(
        row("contention", "contention-persist", "c", "persist under read contention", persist),
        row("contention", "reader-slowdown", "c", "dataloader slowdown during a save",
            reader_slowdown),
    ),
)  # fmt: skip
"""The test plan's concurrency item: both rows judge one contended round."""
