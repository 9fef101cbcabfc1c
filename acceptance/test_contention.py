"""The test plan's concurrency item: the persist burst while dataloader readers keep the
target busy, as they do during an async save.

``run.readers`` reader processes (their own pool) stream a prepared dataset of
``run.reader_bytes`` from the target in 8 MiB sequential reads: first alone, then across a
checkpoint round written into ``contention/``. The writers' bandwidth alone is the write
rounds' median (``campaign``); under contention it is this round's. The readers' bandwidth
under contention counts only the bytes they read during the writers' span.

The persist requirement must still hold under contention (the same requirement as
``test_write_burst.py::test_async_persist``, or the stall budget in sync mode); the readers'
slowdown is reported, and gated where the profile sets ``run.max_reader_slowdown``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from ckptgate.cluster.nodes import run_everywhere, start_gate
from ckptgate.engine.pool import RankPool, StartHook
from ckptgate.engine.records import BurstResult, merge_nodes
from ckptgate.report.gate import GateReport, Item, judge
from ckptgate.sizing import Profile, Sizing, format_rate, format_seconds
from ckptgate.workloads.campaign import WriteCampaign
from ckptgate.workloads.contention import (
    READ_BYTES,
    ContendedRun,
    ReaderRun,
    dataset_files,
    prepare_dataset,
    run_contended,
    run_readers,
)
from ckptgate.workloads.write_burst import ShardFile, run_write_burst, shard_file_name

MIN_READ_S = 2.0
"""The shortest reader run: long enough for a steady rate on any target."""
WARMUP_S = 0.5
"""Readers stream this long before the writers start, so the writers meet a busy target."""
COVER_SPANS = 4.0
"""Readers keep reading for this many of the writers' uncontended spans after the warm-up."""


@dataclass
class Contention:
    """Both sides alone and together, gathered from every node."""

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

    def to_json(self) -> dict[str, Any]:
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


@pytest.fixture(scope="module")
def reader_pool(cluster_profile: Profile) -> Iterator[RankPool]:
    """The dataloader's reader processes, apart from the ranks; stopped at the module's end."""
    if cluster_profile.run.readers == 0:
        pytest.skip("run.readers is 0: no dataloader readers to contend with")
    pool = RankPool(cluster_profile.run.readers)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def contention(campaign: WriteCampaign, reader_pool: RankPool) -> Iterator[Contention]:
    """Readers alone, then across a checkpoint round; removes the dataset and the round after."""
    profile, target, nodes = campaign.profile, campaign.target, campaign.nodes
    fs = target.fs_spec
    bursts = campaign.rounds()  # the writers alone, measured first
    alone_writers = statistics.median(b.aggregate_bytes_per_s for b in bursts)
    target.new_dir("contention")
    data_dir = target.new_dir("contention", f"dataset-{nodes.index}")
    files = dataset_files(
        data_dir, profile.run.reader_bytes, reader_pool.ranks, campaign.run_id, READ_BYTES
    )
    round_dir = target.new_dir("contention", f"step-{nodes.index}")
    shards = [
        ShardFile(
            s.global_rank,
            f"{round_dir}/{shard_file_name(s.global_rank)}",
            s.bytes,
            s.run_id,
            s.transfer_bytes,
        )
        for s in campaign.latest
    ]
    made = [f.path for f in files] + [s.path for s in shards]
    target.register(made)
    try:
        prepare_dataset(reader_pool, fs, files, campaign.timeout_s)
        paths = [[f.path] for f in files]
        alone_s = MIN_READ_S
        alone: list[ReaderRun] = run_everywhere(
            campaign.nodes,
            campaign.timeout_s,
            "the end of the readers alone",
            lambda: run_readers(
                reader_pool,
                fs,
                paths,
                alone_s,
                alone_s + campaign.timeout_s,
                before_start=start_gate(campaign.nodes, campaign.timeout_s, "the readers' start"),
            ),
        )
        worst_alone_s = max(b.span_s for b in bursts)
        window_s = campaign.sizing.create_window_s
        duration_s = WARMUP_S + max(MIN_READ_S, min(window_s, COVER_SPANS * worst_alone_s))
        writer_gate = start_gate(campaign.nodes, campaign.timeout_s, "the contended writers' start")

        def write(hook: StartHook) -> BurstResult:
            return run_write_burst(
                campaign.pool,
                fs,
                shards,
                campaign.timeout_s,
                before_start=lambda ready: hook(writer_gate(ready)),
            )

        runs: list[ContendedRun] = run_everywhere(
            campaign.nodes,
            campaign.timeout_s,
            "the end of the contended round",
            lambda: run_contended(
                write,
                reader_pool,
                fs,
                paths,
                duration_s,
                duration_s + campaign.timeout_s,
                warmup_s=WARMUP_S,
                reader_gate=start_gate(
                    campaign.nodes, campaign.timeout_s, "the contended readers' start"
                ),
            ),
        )
        yield Contention(
            writers_alone_bytes_per_s=alone_writers,
            writers=merge_nodes("write", [run.writers for run in runs]),
            readers_alone_bytes_per_s=sum(a.aggregate_bytes_per_s for a in alone),
            readers_contended_bytes_per_s=sum(run.reader_bytes_per_s for run in runs),
            coverage=min(run.coverage for run in runs),
            readers=reader_pool.ranks * nodes.count,
            dataset_bytes=profile.run.reader_bytes * nodes.count,
            cache_dropped=all(r.extra["cache_dropped"] for a in alone for r in a.burst.ranks),
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


def test_persist_under_contention(
    contention: Contention,
    campaign: WriteCampaign,
    cluster_profile: Profile,
    requirements: Sizing,
    gate: GateReport,
) -> None:
    """The persist requirement still holds while the dataloader reads from the same target."""
    gate.section("contention", contention.to_json())
    if cluster_profile.checkpoint.mode == "async":
        item = campaign.judge_async_persist(
            contention.writers,
            id="contention-persist",
            title="async persist under read contention",
            words=_sides(contention),
        )
    else:
        item = campaign.judge_stall(
            contention.writers,
            id="contention-persist",
            title="sync stall under read contention",
            words=_sides(contention),
        )
    if contention.coverage < 1.0:
        item.detail += "; the readers stopped before the writers finished (bounded run)"
    gate.record(item)
    assert contention.writers.total_bytes == campaign.played_bytes
    assert item.passed, item.message


def test_reader_slowdown(
    contention: Contention, cluster_profile: Profile, campaign: WriteCampaign, gate: GateReport
) -> None:
    """The dataloader's loss of bandwidth during a save: gated where the profile sets a limit."""
    limit = cluster_profile.run.max_reader_slowdown
    detail = f"{_sides(contention)}; readers' bound {format_seconds(contention.duration_s)}"
    if limit is None:
        item = Item(
            id="reader-slowdown",
            title="dataloader slowdown during a save",
            required=None,
            measured=contention.reader_slowdown,
            unit="fraction",
            passed=None,
            detail=detail + "; run.max_reader_slowdown not set: reported, not gated",
            better="lower",
            scope=campaign.plan.scope(),
        )
    else:
        item = judge(
            id="reader-slowdown",
            title="dataloader slowdown during a save",
            measured=contention.reader_slowdown,
            required=limit,
            unit="fraction",
            better="lower",
            detail=f"{cluster_profile.name}: run.max_reader_slowdown {limit:g}; {detail}",
            scope=campaign.plan.scope(),
        )
    gate.record(item)
    assert item.passed is not False, item.message
