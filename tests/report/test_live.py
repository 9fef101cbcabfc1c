"""Live progress: a line every few seconds in a batch log, a redrawn line on a terminal,
nothing under -q or for a short phase; on a fake clock, with fake output."""

from __future__ import annotations

import itertools
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from ckptgate.engine.sampler import NodeProgress
from ckptgate.fixtures.run.progress import start_progress
from ckptgate.report.live import LiveProgress, progress_line

GB = 10**9


def snapshot(elapsed_s: float, nbytes: int, running: bool = True, **fields: Any) -> NodeProgress:
    base = NodeProgress(
        node=0,
        phase="write burst",
        nth=0,
        elapsed_s=elapsed_s,
        bytes=nbytes,
        files=0,
        total_bytes=4 * GB,
        total_files=8,
        ranks=8,
        slowest="global rank 3",
        slowest_fraction=0.25,
        running=running,
    )
    return replace(base, **fields)


class Out:
    """What the renderer wrote, by kind."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.redrawn: list[str] = []


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def renderer(tty: bool, enabled: bool = True, **kwargs: Any) -> tuple[LiveProgress, Out, Clock]:
    out, clock = Out(), Clock()
    live = LiveProgress(
        out.lines.append, out.redrawn.append, tty=tty, enabled=enabled, clock=clock, **kwargs
    )
    return live, out, clock


def play(live: LiveProgress, clock: Clock, seconds: float, step_s: float = 0.2) -> None:
    """A 1 GB/s phase as the sampler reports it every watch step, then its end."""
    steps = round(seconds / step_s)
    for i in range(1, steps + 1):
        clock.now = i * step_s
        live.update(snapshot(clock.now, int(clock.now * GB)))
    live.update(snapshot(clock.now, 4 * GB, running=False))


def test_the_line_says_phase_done_of_total_rate_slowest_rank_and_eta() -> None:
    line = progress_line([snapshot(1.0, 1 * GB)])
    assert line.startswith("ckptgate: write burst")
    assert "1.00 GB / 4.00 GB (25.0%)" in line
    assert "1.00 GB/s" in line
    assert "slowest global rank 3 (25.0%)" in line
    assert "ETA 3.00 s" in line
    assert "[8 ranks]" in line


def test_the_line_sums_every_node_and_names_the_slowest_node() -> None:
    behind = snapshot(1.0, GB // 2, node=1, slowest="global rank 12", slowest_fraction=0.1)
    line = progress_line([snapshot(1.0, GB), behind])
    assert "1.50 GB / 8.00 GB" in line
    assert "1.50 GB/s" in line
    assert "slowest node 1 global rank 12 (10.0%)" in line
    assert "[2 nodes, 16 ranks]" in line


def test_node_0_done_while_another_node_still_runs_says_so() -> None:
    mine = snapshot(9.0, 4 * GB, running=False)
    other = snapshot(8.0, 3 * GB, node=1)
    line = progress_line([mine, other])
    assert "node 0 done in 9.00 s, 1 other node running at the last beat" in line
    assert "done in" in progress_line([mine, replace(other, running=False)])


def test_a_files_phase_counts_files() -> None:
    storm = snapshot(2.0, 0, phase="create storm", files=500, total_files=2000, total_bytes=0)
    line = progress_line([storm])
    assert "500 / 2,000 files (25.0%)" in line
    assert "250 files/s" in line
    assert "ETA 6.00 s" in line


def test_a_task_that_counts_nothing_shows_its_time_not_zero_files() -> None:
    joining = snapshot(4.2, 0, phase="DCP join", total_bytes=0, total_files=0, ranks=2)
    assert progress_line([joining]) == "ckptgate: DCP join  4.20 s so far  [2 ranks]"
    ended = replace(joining, running=False)
    assert progress_line([ended]) == "ckptgate: DCP join  done in 4.20 s  [2 ranks]"


def test_a_batch_log_gets_a_line_every_few_seconds_and_the_last_one() -> None:
    live, out, clock = renderer(tty=False, batch_every_s=5.0, show_after_s=2.0)
    play(live, clock, 14.0)
    assert out.redrawn == []
    assert len(out.lines) == 4  # at 2 s, 7 s and 12 s, then the end
    assert "done in 14.0 s" in out.lines[-1]
    assert "slowest" not in out.lines[-1] and "ETA" not in out.lines[-1]


def test_a_terminal_gets_one_line_redrawn_in_place() -> None:
    live, out, clock = renderer(tty=True, tty_every_s=0.5, show_after_s=2.0)
    play(live, clock, 4.0)
    assert len(out.redrawn) >= 4
    assert out.lines == [""]  # the end: a newline after the last redraw
    assert "done in" in out.redrawn[-1]


def test_a_short_phase_prints_nothing() -> None:
    live, out, clock = renderer(tty=False, show_after_s=2.0)
    play(live, clock, 1.8)
    assert out.lines == out.redrawn == []


def test_disabled_prints_nothing() -> None:
    live, out, clock = renderer(tty=False, enabled=False)
    play(live, clock, 20.0)
    assert out.lines == out.redrawn == []


class FakeReporter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._tw = SimpleNamespace(fullwidth=80, _file=SimpleNamespace(isatty=lambda: False))

    def write_line(self, line: str) -> None:
        self.lines.append(line)

    def flush(self) -> None:
        pass


def fake_config(verbosity: int, reporter: FakeReporter) -> Any:
    plugins = {"terminalreporter": reporter, "capturemanager": None}
    return SimpleNamespace(
        get_verbosity=lambda: verbosity,
        pluginmanager=SimpleNamespace(get_plugin=plugins.get),
        stash=pytest.Stash(),
    )


@pytest.mark.parametrize(
    ("verbosity", "node", "prints"),
    [(0, 0, True), (-1, 0, False), (0, 1, False)],
    ids=["default", "quiet", "node=1"],
)
def test_only_node_0_prints_and_minus_q_quiets_it(verbosity: int, node: int, prints: bool) -> None:
    reporter = FakeReporter()
    sampler = start_progress(fake_config(verbosity, reporter), node, SimpleNamespace())
    assert sampler.on_sample is not None
    for elapsed in (0.5, 3.0, 9.0):
        sampler.on_sample(snapshot(elapsed, int(elapsed * GB)))
    assert bool(reporter.lines) is prints


def test_other_nodes_send_their_progress_with_the_heartbeat() -> None:
    heartbeat = SimpleNamespace(progress=None)
    sampler = start_progress(
        fake_config(0, FakeReporter()), 1, SimpleNamespace(heartbeat=heartbeat)
    )
    sampler.latest = snapshot(1.0, GB)
    assert heartbeat.progress is not None and heartbeat.progress() == sampler.latest


def gaps_s(times_s: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times_s)]


class Timed:
    """Output that notes the fake clock's time of each line written."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.at_s: list[float] = []
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.at_s.append(self.clock.now)
        self.lines.append(line)


def test_a_string_of_short_phases_is_never_silent_longer_than_5_s() -> None:
    # verification, data generation, readback: each under the 2 s a lone phase waits for
    clock = Clock()
    out = Timed(clock)
    live = LiveProgress(out, out, tty=False, clock=clock)
    for nth in range(8):
        began = clock.now
        for _ in range(8):  # 1.6 s of watch steps
            clock.now += 0.2
            live.update(snapshot(clock.now - began, GB, nth=nth, phase=f"untimed {nth}"))
        live.update(snapshot(clock.now - began, 4 * GB, running=False, nth=nth))
        clock.now += 0.3  # the parent between two runs
    assert out.lines, "nothing printed over 15 s"
    assert max(gaps_s([0.0, *out.at_s, clock.now])) <= 5.0, out.at_s


def test_each_phase_that_printed_ends_with_done_in() -> None:
    clock = Clock()
    out = Timed(clock)
    live = LiveProgress(out, out, tty=False, clock=clock)
    shown: set[int] = set()
    for nth in range(6):
        began = clock.now
        for _ in range(8):
            clock.now += 0.2
            before = len(out.lines)
            live.update(snapshot(clock.now - began, GB, nth=nth))
            if len(out.lines) > before:
                shown.add(nth)
        live.update(snapshot(clock.now - began, 4 * GB, running=False, nth=nth))
        if nth in shown:
            assert "done in 1.60 s" in out.lines[-1], out.lines
    assert shown


def test_ranks_preparing_before_the_common_start_are_shown_and_timed() -> None:
    # the ranks generate data or open files before the release: elapsed_s stays 0 there
    clock = Clock()
    out = Timed(clock)
    live = LiveProgress(out, out, tty=False, clock=clock)
    for step in range(41):  # the run begins at 0 s, the first snapshot
        clock.now = 0.2 * step
        live.update(snapshot(0.0, 0, released=False))
    live.update(snapshot(0.0, 4 * GB, released=False, running=False))
    assert out.lines and out.at_s[0] <= 5.0
    assert "before the common start" in out.lines[0]
    assert max(gaps_s([0.0, *out.at_s])) <= 5.0
    assert "done in 8.00 s" in out.lines[-1]


def test_writers_and_the_contention_readers_each_get_their_lines_and_done_in() -> None:
    # two pools, two samplers, one display: neither run's state resets the other's
    clock = Clock()
    out = Timed(clock)
    live = LiveProgress(out, out, tty=False, clock=clock)
    for step in range(1, 51):  # 10 s, the two watch loops interleaved
        clock.now = 0.2 * step
        live.update(snapshot(clock.now, int(clock.now * GB), phase="contended writes"))
        live.update(snapshot(clock.now, int(clock.now * GB), phase="dataloader readers"))
    live.update(snapshot(10.0, 4 * GB, running=False, phase="contended writes"))
    live.update(snapshot(10.0, 4 * GB, running=False, phase="dataloader readers"))
    for phase in ("contended writes", "dataloader readers"):
        mine = [line for line in out.lines if f"ckptgate: {phase} " in line]
        assert len(mine) >= 3 and "done in 10.0 s" in mine[-1], out.lines


def test_after_a_long_silence_a_new_phase_waits_until_it_has_something_to_say() -> None:
    # the parent worked for a minute between two runs: the next run's first line is not 0 B
    clock = Clock()
    out = Timed(clock)
    live = LiveProgress(out, out, tty=False, clock=clock)
    live.update(snapshot(0.2, GB, phase="earlier"))
    live.update(snapshot(0.4, GB, running=False, phase="earlier"))
    clock.now = 60.0
    live.update(snapshot(0.0, 0))
    assert out.lines == []
    clock.now = 60.6
    live.update(snapshot(0.6, int(0.6 * GB)))
    assert len(out.lines) == 1 and "600 MB" in out.lines[0]
