"""A step on the first nodes of the run while the others wait at a bounded barrier: three fake
nodes (in-memory communicators, one thread each) stand in for an MPI world."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from ckptgate.cluster.nodes import TAG_BASE, TAG_SPAN, MpiNodes, Nodes, SingleNode, on_first
from ckptgate.engine.pool import RankFailure
from tests.cluster.test_heartbeat import FakeComm, World

DEADLINE_S = 120.0
"""Generous: the threads only wait for each other."""


class LockedComm(FakeComm):
    """The fake communicator, safe across the nodes' threads."""

    lock = threading.Lock()

    def isend(self, value: Any, dest: int, tag: int) -> Any:
        with self.lock:
            return super().isend(value, dest, tag)

    def improbe(self, source: int, tag: int) -> Any:
        with self.lock:
            return super().improbe(source, tag)


def run_world(size: int, body: Callable[[MpiNodes], Any]) -> list[Any]:
    """``body`` on each node of a fake world, one thread each; each node's result or error."""
    world = World(size)
    outcomes: list[Any] = [None] * size

    def node(rank: int) -> None:
        nodes = MpiNodes(LockedComm(world, rank))
        nodes.hosts = {i: f"h{i}" for i in range(size)}
        nodes.host = f"h{rank}"
        try:
            outcomes[rank] = body(nodes)
        except Exception as error:
            outcomes[rank] = error

    threads = [threading.Thread(target=node, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S * 2)
    assert not any(t.is_alive() for t in threads)
    world.sent_tags = [tag for _, _, tag, _ in world.sent]  # type: ignore[attr-defined]
    outcomes.append(world)
    return outcomes


def test_the_first_nodes_run_the_step_on_a_view_of_their_own() -> None:
    def step(view: Nodes) -> Any:
        gathered, total = view.gather_decide(view.index + 1, sum, DEADLINE_S, "the point")
        return (view.count, total, gathered)

    *outcomes, world = run_world(3, lambda n: on_first(n, 2, DEADLINE_S, "the point's end", step))
    assert outcomes[0] == (2, 3, [1, 2])  # node 0 judges, with the first two nodes' values
    assert outcomes[1] == (2, 3, None)
    assert outcomes[2] is None  # waited at the barrier, took no part
    view_tags = [t for t in world.sent_tags if t >= TAG_BASE + TAG_SPAN]
    assert view_tags and all(src in (0, 1) for src, _, t, _ in world.sent if t in view_tags)


def test_a_failure_on_a_node_that_took_part_fails_the_step_everywhere() -> None:
    def step(view: Nodes) -> Any:
        if view.index == 1:
            raise RankFailure("local rank 0 (global rank 4): EIO on fsync", [0])
        return "fine"

    *outcomes, _ = run_world(3, lambda n: on_first(n, 2, DEADLINE_S, "the point's end", step))
    for outcome in outcomes:
        assert isinstance(outcome, RankFailure)
        assert str(outcome) == "node 1 (h1): local rank 0 (global rank 4): EIO on fsync"


def test_a_view_is_only_for_the_first_nodes() -> None:
    nodes = MpiNodes(FakeComm(World(3), 2))
    with pytest.raises(ValueError, match="node 2 is not among the first 2"):
        nodes.first(2)
    assert SingleNode().first(1).count == 1
    assert on_first(SingleNode(), 1, 1.0, "a point", lambda view: view.count) == 1
