"""Node liveness without MPI: an in-memory world of fake communicators and an injected clock.

A waiting node names a peer silent for the stall timeout at once, leaves a slow but living
peer to the deadline, and names whoever node 0's notice names; the heartbeat sends at most one
message per peer in flight, O(N) at node 0 and O(1) elsewhere, and drains what arrives.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import pytest

from ckptgate.cluster.heartbeat import HEARTBEAT_TAG, Heartbeat, Liveness
from ckptgate.cluster.nodes import MpiNodes, NodeTimeout, _Broken

ANY = -1


class FakeRequest:
    def __init__(self, done: bool = True) -> None:
        self.done = done

    def test(self) -> tuple[bool, None]:
        return self.done, None


class FakeMessage:
    def __init__(self, value: Any) -> None:
        self.value = value

    def recv(self) -> Any:
        return self.value


class World:
    """Queues of (source, tag, value) per destination; ``deliver`` False keeps sends in flight."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.queues: dict[int, deque[tuple[int, int, Any]]] = {n: deque() for n in range(size)}
        self.deliver = True
        self.sent: list[tuple[int, int, int, Any]] = []

    def comm(self, rank: int) -> FakeComm:
        return FakeComm(self, rank)


class FakeComm:
    def __init__(self, world: World, rank: int) -> None:
        self.world, self.rank = world, rank

    def Get_rank(self) -> int:  # mpi4py names
        return self.rank

    def Get_size(self) -> int:
        return self.world.size

    def isend(self, value: Any, dest: int, tag: int) -> FakeRequest:
        self.world.sent.append((self.rank, dest, tag, value))
        if self.world.deliver:
            self.world.queues[dest].append((self.rank, tag, value))
        return FakeRequest(self.world.deliver)

    def improbe(self, source: int, tag: int) -> FakeMessage | None:
        queue = self.world.queues[self.rank]
        for entry in list(queue):
            if entry[1] == tag and source in (ANY, entry[0]):
                queue.remove(entry)
                return FakeMessage(entry[2])
        return None


class Clock:
    """Time that passes only when the waiting code sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += 0.05


def _nodes(world: World, rank: int, clock: Clock, liveness: Liveness | None) -> MpiNodes:
    nodes = MpiNodes(world.comm(rank), liveness=liveness, clock=clock, sleep=clock.sleep)
    nodes.hosts = {i: f"h{i}" for i in range(world.size)}
    return nodes


def test_node_0_names_a_silent_node_at_the_stall_timeout_and_tells_the_others() -> None:
    world, clock = World(3), Clock()
    liveness = Liveness([1, 2], clock=clock, refresh=lambda: liveness.seen(2))  # 2 beats
    nodes = _nodes(world, 0, clock, liveness)
    nodes.set_stall_timeout(60)
    world.queues[0].append((2, 101, "node 2's value"))  # node 2 arrived; node 1 never does
    started = clock.now
    with pytest.raises(NodeTimeout) as named:
        nodes.gather_decide("mine", list, 2460.0, "the end of test_write_burst")
    assert str(named.value) == (
        "node 1 (h1): no sign of life for 60 s while the others waited at the end of "
        "test_write_burst"
    )
    assert 60 <= clock.now - started < 61  # not the 2,460 s deadline
    told = [(dest, tag, v.reason) for _, dest, tag, v in world.sent if isinstance(v, _Broken)]
    assert told == [(2, 102, str(named.value))]  # the node that arrived, on the decision's tag
    with pytest.raises(NodeTimeout, match="fell out of step earlier: node 1"):
        nodes.barrier(10, "cleanup")


def test_a_slow_node_that_lives_is_left_to_the_deadline() -> None:
    world, clock = World(2), Clock()
    liveness = Liveness([1], clock=clock, refresh=lambda: liveness.seen(1))
    nodes = _nodes(world, 0, clock, liveness)
    nodes.set_stall_timeout(5)
    started = clock.now
    with pytest.raises(NodeTimeout) as named:
        nodes.barrier(300.0, "the end of a big write")
    assert str(named.value) == "node 1 (h1) did not reach the end of a big write within 300 s"
    assert clock.now - started >= 300


def test_without_a_stall_timeout_or_a_heartbeat_the_deadline_alone_names() -> None:
    for stall, with_liveness in ((None, True), (5.0, False)):
        world, clock = World(2), Clock()
        liveness = Liveness([1], clock=clock) if with_liveness else None
        nodes = _nodes(world, 0, clock, liveness)
        nodes.set_stall_timeout(stall)
        with pytest.raises(NodeTimeout, match=r"did not reach start-up within 20 s"):
            nodes.barrier(20.0, "start-up")


def test_another_node_names_a_silent_node_0() -> None:
    world, clock = World(2), Clock()
    nodes = _nodes(world, 1, clock, Liveness([0], clock=clock))
    nodes.set_stall_timeout(60)
    with pytest.raises(NodeTimeout) as named:
        nodes.barrier(2460.0, "the common start")
    assert str(named.value).startswith("node 0 (h0): no sign of life for 60 s while the others")
    assert clock.now - 1000.0 < 61


def test_another_node_names_whom_node_0s_notice_names_even_in_a_shift() -> None:
    world, clock = World(3), Clock()
    liveness = Liveness([0], clock=clock)
    nodes = _nodes(world, 1, clock, liveness)
    nodes.set_stall_timeout(60)
    notice = "node 2 (h2): no sign of life for 60 s while the others waited at X"
    # node 1 waits for node 2's value (node 0 takes no part); node 0's beat brings the notice
    liveness.refresh = lambda: liveness.seen(0, notice if clock.now > 1010 else None)
    with pytest.raises(NodeTimeout) as named:
        nodes.shift("files", 2460.0, "the readback's file list")
    assert str(named.value) == notice
    assert clock.now - 1000.0 < 11
    with pytest.raises(NodeTimeout, match="node 2"):
        nodes.barrier(10, "cleanup")


def test_a_node_that_beats_is_never_silent_and_a_peer_not_heard_from_is_not_judged() -> None:
    clock = Clock()
    liveness = Liveness([1, 2], clock=clock)
    clock.now += 59
    liveness.seen(1)
    clock.now += 2
    assert liveness.silent([1, 2, 3], 60) == [2]  # 3: not a peer this node hears from
    assert liveness.silent([1], 60) == []


def test_the_heartbeat_is_o_n_at_node_0_o_1_elsewhere_with_one_send_in_flight() -> None:
    world = World(4)
    beats = [Heartbeat(world.comm(n), ANY) for n in range(4)]
    for beat in beats:
        beat.beat()
    sent = [(src, dest) for src, dest, tag, _ in world.sent if tag == HEARTBEAT_TAG]
    assert sorted(sent) == [(0, 1), (0, 2), (0, 3), (1, 0), (2, 0), (3, 0)]
    assert beats[0].drain() == 3 and beats[1].drain() == 1
    assert beats[0].drain() == 0
    world.sent.clear()
    world.deliver = False  # a stopped peer: its sends never complete
    for _ in range(5):
        beats[0].beat()
    assert len(world.sent) == 3  # one each, not five: nothing piles up
    beats[0].declare("node 3 (h3): no sign of life")
    world.deliver = True
    for request in beats[0]._sends.values():
        request.done = True
    beats[0].beat()
    assert beats[1].drain() == 1  # the undelivered ones never arrived
    assert beats[1].liveness.notice == "node 3 (h3): no sign of life"


def test_the_drain_is_bounded_in_count() -> None:
    world = World(2)
    receiver = Heartbeat(world.comm(0), ANY)
    for _ in range(100):
        world.queues[0].append((1, HEARTBEAT_TAG, (1, None)))
    assert receiver.drain() == 4 * 1 + 4
    while receiver.drain():
        pass
    assert not world.queues[0]


def test_the_thread_beats_drains_and_stops() -> None:
    world = World(2)
    sender, receiver = Heartbeat(world.comm(1), ANY, beat_s=0.05), Heartbeat(world.comm(0), ANY)
    before = receiver.liveness.last_seen(1)
    sender.start()
    receiver.start()
    deadline = time.monotonic() + 10
    while receiver.liveness.last_seen(1) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    sender.stop()
    receiver.stop()
    receiver.stop()  # idempotent
    assert receiver.liveness.last_seen(1) != before
    assert sender._thread is not None and not sender._thread.is_alive()
    assert sender.failed is None and receiver.failed is None


def test_the_header_says_how_a_dead_node_is_named() -> None:
    world, clock = World(2), Clock()
    nodes = _nodes(world, 0, clock, Liveness([1], clock=clock))
    nodes.set_stall_timeout(60)
    assert "a node silent for 60 s is named at once" in nodes.liveness_text()
    bare = _nodes(world, 0, clock, None)
    bare.thread_level_note = "MPI gives thread level THREAD_SERIALIZED"
    assert "no heartbeat (MPI gives thread level THREAD_SERIALIZED)" in bare.liveness_text()
    with pytest.raises(ValueError):
        nodes.set_stall_timeout(0)


def test_the_other_nodes_beats_carry_their_progress_to_node_0() -> None:
    world = World(3)
    beats = [Heartbeat(world.comm(n), ANY) for n in range(3)]
    beats[1].progress = lambda: ("write burst", 0, 123)  # the sampler's latest, in the plugin
    for beat in beats:
        beat.beat()
    beats[0].drain()
    assert beats[0].liveness.progress() == {1: ("write burst", 0, 123)}  # node 2 sent none
    assert beats[1].drain() == 1 and beats[1].liveness.progress() == {}
