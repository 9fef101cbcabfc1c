"""The node watchdog, with an injected clock and no threads or MPI: a peer whose heartbeat
stopped is named whatever this node is doing (node 0 told the others through its beats, and
its own collectives and rank pool stop on it), and a process that outlives a broken run by its
grace ends itself, once."""

from __future__ import annotations

import pytest

from ckptgate.cluster.heartbeat import Liveness
from ckptgate.cluster.nodes import MpiNodes, NodeTimeout
from ckptgate.cluster.watchdog import NAME_MARGIN_S, Watchdog
from ckptgate.engine.pool import RankFailure, RankPool
from tests.cluster.test_heartbeat import Clock as PollClock
from tests.cluster.test_heartbeat import World
from tests.engine import rank_tasks

STALL_S = 60.0
GRACE_S = 90.0


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Recorder:
    def __init__(self) -> None:
        self.said: list[str] = []
        self.declared: list[str] = []
        self.gave_up: list[str] = []


def _node0(clock: Clock, broken: list[str | None] | None = None) -> tuple[Watchdog, Recorder]:
    liveness = Liveness([1, 2], clock=clock)
    seen = Recorder()
    watchdog = Watchdog(
        liveness, [1, 2], STALL_S, name=lambda p: f"node {p} (node{p})",
        declare=seen.declared.append, broken=lambda: (broken or [None])[0],
        give_up=seen.gave_up.append, end_grace_s=GRACE_S, clock=clock, say=seen.said.append,
    )  # fmt: skip
    return watchdog, seen


def test_node_0_names_a_node_whose_heartbeat_stopped_and_tells_the_others() -> None:
    clock = Clock()
    watchdog, seen = _node0(clock)
    clock.advance(STALL_S + NAME_MARGIN_S - 0.5)
    watchdog.liveness.seen(2)  # node 2 beats on; node 1 lost its link
    watchdog.look()
    assert seen.said == [] and watchdog.liveness.notice is None
    clock.advance(1.0)
    watchdog.look()
    (line,) = seen.said
    assert line.startswith("ckptgate: node 1 (node1): no sign of life for 62 s (its heartbeat")
    assert line.endswith(": the run stops")
    assert seen.declared == [watchdog.liveness.notice] and "node 2" not in seen.declared[0]


def test_a_process_that_outlives_a_broken_run_by_its_grace_ends_itself_once() -> None:
    clock = Clock()
    watchdog, seen = _node0(clock)
    clock.advance(STALL_S + NAME_MARGIN_S)
    watchdog.look()  # named: the grace starts
    clock.advance(GRACE_S - 1)
    watchdog.look()
    assert seen.gave_up == []
    clock.advance(1)
    watchdog.look()
    watchdog.look()
    assert seen.gave_up == [watchdog.liveness.notice]
    assert "did not end within 90 s of the run breaking" in seen.said[-1]


def test_a_collectives_failure_starts_the_grace_too() -> None:
    clock = Clock()
    broken: list[str | None] = [None]
    watchdog, seen = _node0(clock, broken)
    for peer in (1, 2):
        watchdog.liveness.seen(peer)
    broken[0] = "node 2 (node2) did not reach the end of the write burst within 330 s"
    watchdog.look()
    clock.advance(GRACE_S)
    watchdog.liveness.seen(1)
    watchdog.liveness.seen(2)
    watchdog.look()
    assert seen.gave_up == [broken[0]] and seen.declared == []  # nobody silent was named


def test_a_stuck_heartbeat_thread_is_named_as_this_nodes_own() -> None:
    clock = Clock()
    liveness = Liveness([0], clock=clock)
    said: list[str] = []
    watchdog = Watchdog(
        liveness, [0], STALL_S, name=str, clock=clock, say=said.append,
        drained=lambda: 0.0, give_up=lambda why: None,
    )  # fmt: skip
    clock.advance(STALL_S + NAME_MARGIN_S)
    watchdog.look()
    assert "this node's heartbeat thread has not run for 62 s" in said[0]


def test_a_node_in_a_collective_raises_what_its_watchdog_named() -> None:
    """Node 0 waits in a shift for node 1, alive, while node 2 fell silent: named anyway."""
    world, clock = World(3), PollClock()
    liveness = Liveness([1, 2], clock=clock)
    nodes = MpiNodes(world.comm(0), liveness=liveness, clock=clock, sleep=clock.sleep)
    liveness.note("node 2 (node2): no sign of life for 62 s")
    with pytest.raises(NodeTimeout, match="node 2 \\(node2\\): no sign of life"):
        nodes.shift("files", 600.0, "the readback's file list")


def test_a_running_burst_stops_once_the_run_is_stopped() -> None:
    why: list[str | None] = [None]
    with RankPool(2, cancelled=lambda: why[0]) as pool:
        pool.run(rank_tasks.report_start, [{}, {}], 60)  # nothing to stop: it runs
        why[0] = "node 1 (node1): no sign of life for 62 s"
        with pytest.raises(RankFailure, match="stopped: node 1 \\(node1\\): no sign of life"):
            pool.run(rank_tasks.hang_on, [{"bad_rank": 0}, {"bad_rank": 0}], 3600)
