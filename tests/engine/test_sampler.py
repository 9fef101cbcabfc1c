"""The progress sampler: what the parent reads from the ranks' slots, on an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.engine.records import detail_as
from ckptgate.engine.sampler import TOTAL_BYTES, Expected, NodeProgress, ProgressSampler
from ckptgate.report.live import LiveProgress, progress_line
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.write_burst import ShardFile, WriteDetail, run_write_burst

MiB = 2**20


class FakeSlot:
    """A rank's progress slot as the sampler reads it: counter, bytes, files, own total."""

    def __init__(self) -> None:
        self.values = [0.0, 0.0, 0.0, 0.0]

    def report(self, nbytes: int = 0, files: int = 0, total_bytes: int | None = None) -> None:
        self.values[1], self.values[2] = nbytes, files
        if total_bytes is not None:
            self.values[TOTAL_BYTES] = total_bytes
        self.values[0] += 1


def started(
    sampler: ProgressSampler, expected: Expected, slots: list[FakeSlot], now: float = 100.0
) -> None:
    sampler.begin(expected, slots, [f"global rank {i} (file)" for i in range(len(slots))], now)
    sampler.released(now)


def test_the_series_samples_at_its_interval_from_the_release_and_ends_with_the_total() -> None:
    slots = [FakeSlot(), FakeSlot()]
    sampler = ProgressSampler(interval_s=0.5)
    started(sampler, Expected("write burst", rank_bytes=(100, 100)), slots)
    for step in range(1, 11):  # the watch loop's steps, 0.2 s apart
        slots[0].report(step * 10)
        slots[1].report(step * 5)
        sampler.poll(100.0 + 0.2 * step)
    slots[1].report(100, files=1)
    sampler.end(102.3)
    (series,) = sampler.series
    assert series.t_s[0] == 0.0
    assert all(b - a >= 0.5 - 1e-9 for a, b in zip(series.t_s, series.t_s[1:-1], strict=False))
    assert series.done_bytes[-1] == 200
    spans = zip(series.bytes_per_s(), series.t_s, series.t_s[1:], strict=False)
    area = sum(r * (t1 - t0) for r, t0, t1 in spans)
    assert area == pytest.approx(200)  # the rates over time add up to the bytes done
    assert sampler.latest is not None and not sampler.latest.running


def test_bytes_the_ranks_wrote_before_the_parent_first_looked_are_in_the_series() -> None:
    # a busy parent runs its release step after the ranks, released by one wake, wrote a lot
    slots = [FakeSlot(), FakeSlot()]
    sampler = ProgressSampler(interval_s=0.5)
    sampler.begin(Expected("write burst", rank_bytes=(100, 100)), slots, ["a", "b"], 100.0)
    slots[0].report(70)
    slots[1].report(80)
    sampler.released(100.0)
    slots[0].report(100)
    slots[1].report(100)
    sampler.end(100.3)
    (series,) = sampler.series
    assert (series.t_s[0], series.done_bytes[0]) == (0.0, 0)  # the release: nothing moved yet
    spans = zip(series.bytes_per_s(), series.t_s, series.t_s[1:], strict=False)
    assert sum(r * (t1 - t0) for r, t0, t1 in spans) == pytest.approx(200)


def test_the_slowest_rank_is_the_one_least_through_its_own_total() -> None:
    slots = [FakeSlot(), FakeSlot()]
    sampler = ProgressSampler()
    # rank 1 has written more bytes, but of a shard four times as large
    started(sampler, Expected("write burst", rank_bytes=(100, 400)), slots)
    slots[0].report(60)
    slots[1].report(80)
    sampler.poll(101.0)
    latest = sampler.latest
    assert latest is not None
    assert latest.slowest == "global rank 1"
    assert latest.slowest_fraction == pytest.approx(0.2)
    assert (latest.bytes, latest.total_bytes, latest.elapsed_s) == (140, 500, 1.0)


def test_totals_the_ranks_report_give_the_eta_where_the_parent_knew_none() -> None:
    """A DCP load learns its bytes only once DCP has planned it, in the rank: the slot's
    total then stands in for ``Expected``'s (the live line's percentage and ETA)."""
    slots = [FakeSlot(), FakeSlot()]
    sampler = ProgressSampler()
    started(sampler, Expected("DCP load"), slots)
    slots[0].report(10)
    sampler.poll(101.0)
    assert sampler.latest is not None and sampler.latest.total_bytes == 0  # none reported yet
    slots[0].report(30, total_bytes=100)
    slots[1].report(0, total_bytes=300)
    sampler.poll(102.0)
    latest = sampler.latest
    assert (latest.bytes, latest.total_bytes) == (30, 400)
    assert latest.slowest == "global rank 1" and latest.slowest_fraction == 0.0
    line = progress_line([latest])
    assert "30 B / 400 B (7.5%)" in line and "ETA 24.7 s" in line  # 370 B at 15 B/s


def test_a_companion_sampler_feeds_the_same_display_and_the_same_series() -> None:
    seen: list[NodeProgress] = []
    ranks = ProgressSampler(on_sample=seen.append)
    readers = ranks.companion()
    slot = FakeSlot()
    started(readers, Expected("dataloader readers"), [slot])
    slot.report(5)
    readers.end(101.0)
    assert seen[-1].phase == "dataloader readers" and seen[-1].bytes == 5
    assert [s["phase"] for s in ranks.series_json()] == ["dataloader readers"]


def test_a_long_run_halves_its_series_and_doubles_the_interval() -> None:
    slot = FakeSlot()
    sampler = ProgressSampler(interval_s=0.5, max_samples=8)
    started(sampler, Expected("readback"), [slot])
    for step in range(1, 41):
        slot.report(step)
        sampler.poll(100.0 + 0.5 * step)
    sampler.end(121.0)
    (series,) = sampler.series
    assert len(series.t_s) <= 9
    assert series.interval_s > 0.5
    assert series.done_bytes[-1] == 40


def test_runs_of_one_phase_are_counted_apart_and_peers_get_their_own_series() -> None:
    slot = FakeSlot()
    peer = {
        1: NodeProgress(1, "write burst", 1, 0.7, 50, 0, 100, 0, 8, "global rank 9", 0.4),
    }
    sampler = ProgressSampler(peers=lambda: peer)
    for nth in range(2):  # two write rounds
        started(sampler, Expected("write burst"), [slot], now=100.0 + 10 * nth)
        sampler.end(101.0 + 10 * nth)
    nodes = [(s.nth, s.node) for s in sampler.series]
    assert nodes == [(0, 0), (1, 0), (1, 1)]  # the peer is in round 1 only
    assert sampler.series[-1].done_bytes == [50]


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Two rank processes for this module; stopped at its end."""
    with RankPool(2) as ranks:
        yield ranks


def test_a_burst_through_the_pool_is_sampled_and_its_latencies_are_in_the_json(
    pool: RankPool, tmp_path: Path
) -> None:
    seen: list[NodeProgress] = []
    pool.sampler = ProgressSampler(on_sample=seen.append)
    try:
        shards = [ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), 4 * MiB, 7, MiB) for g in (0, 1)]
        burst = run_write_burst(pool, BackendSpec("file"), shards, 60)
    finally:
        sampler, pool.sampler = pool.sampler, None
    (series,) = sampler.series
    assert series.phase == "write burst"
    assert series.done_bytes[-1] == burst.total_bytes == 8 * MiB
    assert seen[-1].files == 2 and not seen[-1].running
    latency = burst.to_json()["transfer_latency_s"]["write"]
    assert latency["count"] == 8  # 4 transfers of 1 MiB per rank
    assert 0 < latency["p50_s"] <= latency["p99_s"] <= latency["max_s"]
    assert detail_as(burst.ranks[0], WriteDetail).generate_s > 0


def test_ranks_preparing_before_the_release_reach_the_live_line() -> None:
    # data generation and opens before the common start: the line says so, then times the run
    now = [100.0]
    lines: list[str] = []
    live = LiveProgress(lines.append, lines.append, tty=False, clock=lambda: now[0])
    slots = [FakeSlot()]
    sampler = ProgressSampler(on_sample=live.update)
    sampler.begin(Expected("write burst", rank_bytes=(100,)), slots, ["global rank 0"], now[0])
    for _ in range(30):  # 6 s preparing, the watch loop's steps
        now[0] += 0.2
        sampler.poll(now[0])
    assert sampler.latest is not None and not sampler.latest.released
    assert lines and "before the common start" in lines[0]
    sampler.released(now[0])
    slots[0].report(100, files=1)
    now[0] += 1.0
    sampler.end(now[0])
    assert sampler.latest.released
    assert "done in 1.00 s (7.00 s with the ranks' preparation)" in lines[-1]
