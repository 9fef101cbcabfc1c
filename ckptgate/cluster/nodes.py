"""The nodes taking part: one node by default, many under MPI (mpi4py, srun or mpirun).

Under MPI each node's pytest process is one MPI process and keeps its own local rank
processes. Every collective here has a deadline: it is built from non-blocking MPI calls
polled against the clock, so a node that dies or hangs turns into a ``NodeTimeout`` naming it,
never a hung job. After a timeout the layer is broken: later collectives fail at once, and
the session ends with ``MPI_Abort`` so that the launcher reaps every process.

Data flows to node 0 only: ``gather`` brings every node's value to node 0 (O(N) bytes there,
O(1) per other node), and what comes back is a decision node 0 made (``decide``): a verdict,
a list of failures, never the gathered data. When a node does not arrive, node 0 names it and
tells every node that did, so every node names the same missing node; the others wait a grace
longer than node 0 does, so that only a dead or hung node 0 is named as node 0.

Liveness (``ckptgate.cluster.heartbeat``): every node beats while it works, and a node waiting
in a collective for a peer that showed no sign of life for ``run.stall_timeout_s``
(``set_stall_timeout``) names it at once; node 0 names it and tells the others, on the
decision's tag and in its heartbeats, so every node names the same node. A node alive but slow
keeps beating: only the deadline, the outer bound, ends that wait. Where MPI does not give
``MPI_THREAD_MULTIPLE`` there is no heartbeat thread and the deadline alone bounds a wait
(``liveness_text`` says which, for the report header).

Node 0 makes the run directory and the run id and broadcasts them; it gathers every rank's
records, judges them and writes the report.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ckptgate.cluster.heartbeat import BEAT_S, Heartbeat, Liveness
from ckptgate.cluster.watchdog import Watchdog
from ckptgate.engine.collector import gc_paused
from ckptgate.engine.pool import RankFailure, StartGate

T = TypeVar("T")
D = TypeVar("D")

_POLL_S = 0.0002

GRACE_S = 10.0
"""How much longer than node 0 the other nodes wait for its decision: node 0 names a missing
node and tells them within this, so they name the same node rather than node 0."""

LIVENESS_EVERY_S = 0.25
"""How often a waiting node asks whether the peers it waits for still show signs of life."""

TAG_BASE = 100
"""The collectives' first tag (the heartbeat's is below it)."""
TAG_SPAN = 15000
"""Tags per tag space: the whole run's collectives use ``TAG_BASE`` + [0, span), a view of the
first nodes (``MpiNodes.first``) the next span, so that a view's messages never match a
collective of the whole run (MPI guarantees tags up to 32,767)."""

SHOWN_FAILURES = 4
"""How many failures a decision carries in words (the rest are counted): what is sent back to
every node stays small at any node count."""


class NodeTimeout(RuntimeError):
    """A node did not reach a collective in time."""


class NodesUnavailable(RuntimeError):
    """Launched under MPI but mpi4py cannot be used; the message says how to fix it."""


class Nodes(Protocol):
    """What the suite needs from the nodes: an index, a count, and bounded collectives."""

    index: int
    count: int
    host: str

    def barrier(self, timeout_s: float, what: str) -> None: ...

    def bcast(self, value: Any, timeout_s: float, what: str) -> Any: ...

    def allgather(self, value: Any, timeout_s: float, what: str) -> list[Any]: ...

    def gather_decide(
        self, value: Any, decide: Callable[[list[Any]], D], timeout_s: float, what: str
    ) -> tuple[list[Any] | None, D]: ...

    def shift(self, value: Any, timeout_s: float, what: str) -> Any: ...

    def abort(self, code: int) -> None: ...

    def set_stall_timeout(self, stall_timeout_s: float | None) -> None: ...

    def liveness_text(self) -> str | None: ...

    def first(self, count: int) -> Nodes: ...


class SingleNode:
    """The embedded default: this node is the whole run."""

    index = 0
    count = 1

    def __init__(self) -> None:
        self.host = socket.gethostname()

    def barrier(self, timeout_s: float, what: str) -> None:
        return None

    def bcast(self, value: Any, timeout_s: float, what: str) -> Any:
        return value

    def allgather(self, value: Any, timeout_s: float, what: str) -> list[Any]:
        return [value]

    def gather_decide(
        self, value: Any, decide: Callable[[list[Any]], D], timeout_s: float, what: str
    ) -> tuple[list[Any] | None, D]:
        return [value], decide([value])

    def shift(self, value: Any, timeout_s: float, what: str) -> Any:
        return value

    def abort(self, code: int) -> None:
        return None

    def set_stall_timeout(self, stall_timeout_s: float | None) -> None:
        return None

    def liveness_text(self) -> str | None:
        return None

    def first(self, count: int) -> Nodes:
        if count != 1:
            raise ValueError(f"one node cannot make a view of {count} nodes")
        return self


@dataclass(frozen=True)
class _Broken:
    """What node 0 sends in place of a decision when a node did not arrive."""

    reason: str


class MpiNodes:
    """Nodes on an MPI communicator, with deadlines on every collective.

    ``liveness`` (from a ``Heartbeat``; None: deadlines alone) says when each peer this node
    hears from last showed a sign of life; ``clock`` and ``sleep`` are the waits' (injected by
    tests).
    """

    def __init__(
        self,
        comm: Any,
        liveness: Liveness | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        count: int | None = None,
        tag_base: int = TAG_BASE,
        any_source: int | None = None,
        status: Callable[[], Any] | None = None,
    ) -> None:
        self.comm = comm
        self.any_source = any_source
        self.status = status
        """The MPI library's ``ANY_SOURCE`` and ``Status`` (None: one probe per peer): node 0
        receives a gather with one wildcard probe per poll, O(1), instead of one probe per
        node still waited for, O(N) per poll and O(N^2) over a gather whose nodes arrive one
        by one (``ckptgate.benchmarks.scale``)."""
        self.index = comm.Get_rank()
        self.count = comm.Get_size() if count is None else count
        self.tag_base = tag_base
        self.host = socket.gethostname()
        self.hosts: dict[int, str] = {self.index: self.host}
        """The host names this node knows, by node: every node's on node 0; node 0's and the
        next node's elsewhere (the peers a node ever waits for), ``learn_hosts``."""
        self.broken: str | None = None
        self.liveness = liveness
        self.heartbeat: Heartbeat | None = None
        self.stall_timeout_s: float | None = None
        self.watchdog: Watchdog | None = None
        """Names silent peers and ends a process that outlives a broken run (with a
        heartbeat and a stall timeout)."""
        self.thread_level_note: str | None = None
        """Why there is no heartbeat (the MPI thread level), where there is none."""
        self._clock = clock
        self._sleep = sleep
        self._sequence = 0

    def set_stall_timeout(self, stall_timeout_s: float | None) -> None:
        """From now on a peer silent this long is named at once (None: deadlines alone), by
        a collective waiting for it or by the watchdog (``cluster.watchdog``), which also
        ends this process if it outlives a broken run."""
        if stall_timeout_s is not None and stall_timeout_s <= 0:
            raise ValueError(f"stall_timeout_s must be positive, got {stall_timeout_s}")
        self.stall_timeout_s = stall_timeout_s
        heartbeat = self.heartbeat
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog = None
        if stall_timeout_s is None or heartbeat is None or self.liveness is None:
            return
        self.watchdog = Watchdog(
            self.liveness,
            heartbeat.peers,
            stall_timeout_s,
            name=self._name,
            declare=heartbeat.declare if self.index == 0 else None,
            broken=lambda: self.broken,
            drained=lambda: heartbeat.drained_mono,
        )
        self.watchdog.start()

    def stopping(self) -> str | None:
        """Why the run stopped (a node named lost), once this node knows; None before: what
        the rank pool stops a running burst on (``RankPool.cancelled``)."""
        if self.liveness is None:
            return None
        return self.liveness.notice

    def liveness_text(self) -> str:
        """One line for the report header: how a dead or frozen node is named."""
        if self.liveness is None:
            why = f" ({self.thread_level_note})" if self.thread_level_note else ""
            return (
                f"node liveness: no heartbeat{why}: a dead or frozen node is named only at a "
                "collective's deadline (ten windows plus run.timeout_floor_s)"
            )
        limit = self.stall_timeout_s
        after = f"{limit:.3g} s" if limit is not None else "run.stall_timeout_s"
        return (
            f"node liveness: a heartbeat every {BEAT_S:.3g} s; a node silent for {after} is "
            "named at once, a slow one at the collective's deadline"
        )

    def _tag(self) -> int:
        self._sequence += 1
        return self.tag_base + self._sequence % TAG_SPAN

    def first(self, count: int) -> MpiNodes:
        """A view of nodes 0 to ``count - 1`` of the same communicator, for a step that only
        they take (a scaling sweep's point; ``on_first``): its collectives involve them alone
        and use a tag space of their own. It shares this object's liveness, host names and
        stall timeout; only a node among the first ``count`` may use it."""
        if not 1 <= count <= self.count:
            raise ValueError(f"a view of {count} nodes of {self.count}")
        if self.index >= count:
            raise ValueError(f"node {self.index} is not among the first {count}")
        view = MpiNodes(
            self.comm,
            self.liveness,
            self._clock,
            self._sleep,
            count=count,
            tag_base=self.tag_base + TAG_SPAN,
            any_source=self.any_source,
            status=self.status,
        )
        view.hosts = self.hosts
        view.stall_timeout_s = self.stall_timeout_s
        view.broken = self.broken
        view.thread_level_note = self.thread_level_note
        return view

    def _check(self) -> None:
        if self.broken:
            raise NodeTimeout(f"the nodes fell out of step earlier: {self.broken}")
        notice = self.liveness.notice if self.liveness is not None else None
        if notice:
            raise self._fail(notice)

    def _fail(self, reason: str) -> NodeTimeout:
        self.broken = reason
        if self.heartbeat is not None:
            self.heartbeat.declare(reason)  # node 0: every beat tells the others from now on
        return NodeTimeout(reason)

    def _lifeless(self, waiting: set[int], what: str) -> tuple[str, list[int]] | None:
        """Node 0's notice, or the peers waited for that showed no sign of life for the stall
        timeout, in words; None while every one of them lives (or nothing can tell)."""
        if self.liveness is None:
            return None
        notice = self.liveness.notice
        if notice:
            return notice, []
        limit = self.stall_timeout_s
        if limit is None or not waiting:
            return None
        silent = self.liveness.silent(waiting, limit)
        if not silent:
            return None
        names = ", ".join(self._name(p) for p in silent)
        reason = f"{names}: no sign of life for {limit:.3g} s while the others waited at {what}"
        return reason, silent

    def _wait(
        self,
        sends: dict[int, Any],
        receives: list[int],
        tag: int,
        timeout_s: float,
        what: str,
        notify: bool = False,
    ) -> dict[int, Any]:
        """Poll sends (by peer) and receives from peers until all complete or time runs out.

        Receives use matched probes, so a value of any size arrives whole. A ``_Broken``
        received from node 0 raises its reason: node 0 named who did not arrive. ``notify``
        (node 0's gather): on a timeout, the nodes that arrived are told who did not, on the
        decision's tag (``tag + 1``). Every ``LIVENESS_EVERY_S`` the peers still waited for
        are asked after (``_lifeless``): one silent for the stall timeout is named at once,
        and so is whoever node 0's notice names.
        """
        now = self._clock()
        deadline = now + timeout_s
        next_look = now + LIVENESS_EVERY_S
        pending_sends = dict(sends)
        pending = set(receives)
        values: dict[int, Any] = {}
        while pending_sends or pending:
            for peer, request in list(pending_sends.items()):
                if request.test()[0]:
                    del pending_sends[peer]
            for peer, value in self._arrived(pending, tag):
                if isinstance(value, _Broken):
                    raise self._fail(value.reason)
                values[peer] = value
                pending.discard(peer)
            if not (pending_sends or pending):
                break
            now = self._clock()
            if now >= next_look:
                next_look = now + LIVENESS_EVERY_S
                lifeless = self._lifeless(set(pending_sends) | set(pending), what)
                if lifeless is not None:
                    reason, silent = lifeless
                    if notify and silent:
                        self._tell_others(reason, tag + 1, exclude=set(silent))
                    raise self._fail(reason)
            if now > deadline:
                missing = sorted(set(pending_sends) | set(pending))
                names = ", ".join(self._name(p) for p in missing)
                reason = f"{names} did not reach {what} within {timeout_s:.0f} s"
                if notify:
                    self._tell_others(reason, tag + 1, exclude=set(missing))
                raise self._fail(reason)
            self._sleep(_POLL_S)
        return values

    def _arrived(self, pending: set[int], tag: int) -> list[tuple[int, Any]]:
        """The values that arrived on ``tag`` from the ``pending`` peers, with their senders.

        With a wildcard (``any_source``) and more than one peer waited for, it probes once
        per arrived message and once more to find none: every node that sends this node a
        message on ``tag`` is among those it waits for, since each collective has a tag of its
        own. Otherwise one matched probe per pending peer."""
        if self.any_source is None or self.status is None or len(pending) < 2:
            arrived = []
            for peer in sorted(pending):
                message = self.comm.improbe(source=peer, tag=tag)
                if message is not None:
                    arrived.append((peer, message.recv()))
            return arrived
        arrived = []
        while len(arrived) < len(pending):
            status = self.status()
            message = self.comm.improbe(source=self.any_source, tag=tag, status=status)
            if message is None:
                break
            arrived.append((status.Get_source(), message.recv()))
        return arrived

    def _tell_others(self, reason: str, tag: int, exclude: set[int]) -> None:
        """Node 0: every node that arrived learns who did not, in place of the decision."""
        notice = _Broken(reason)
        sends = [
            self.comm.isend(notice, dest=p, tag=tag)
            for p in range(1, self.count)
            if p not in exclude
        ]
        deadline = self._clock() + GRACE_S / 2
        while sends and self._clock() < deadline:
            sends = [s for s in sends if not s.test()[0]]
            self._sleep(_POLL_S)

    def _name(self, node: int) -> str:
        return f"node {node} ({self.hosts.get(node, '?')})"

    def learn_hosts(self, timeout_s: float) -> None:
        """Node 0 learns every node's host name; each other node learns node 0's and the next
        node's (the peers it waits for): O(N) bytes at node 0, O(1) elsewhere."""
        gathered, first = self.gather_decide(
            self.host, lambda hosts: hosts[0], timeout_s, "start-up"
        )
        following = (self.index + 1) % self.count
        self.hosts[0] = first
        self.hosts[following] = self.shift(self.host, timeout_s, "start-up")
        if gathered is not None:
            self.hosts.update(enumerate(gathered))

    def gather_decide(
        self, value: Any, decide: Callable[[list[Any]], D], timeout_s: float, what: str
    ) -> tuple[list[Any] | None, D]:
        """Every node's ``value`` to node 0, which decides; the decision to every node.

        Returns (the gathered values in node order on node 0, None elsewhere; the decision).
        Two tags: the gather's, and the decision's right after it (where a ``_Broken`` naming
        a missing node comes instead).
        """
        self._check()
        tag = self._tag()
        self._tag()  # the decision's tag, tag + 1
        if self.index == 0:
            with gc_paused():
                values = self._wait({}, list(range(1, self.count)), tag, timeout_s, what, True)
            gathered = [value] + [values[p] for p in range(1, self.count)]
            decision = decide(gathered)
            sends = {
                p: self.comm.isend(decision, dest=p, tag=tag + 1) for p in range(1, self.count)
            }
            self._wait(sends, [], tag + 1, timeout_s, what)
            return gathered, decision
        self._wait({0: self.comm.isend(value, dest=0, tag=tag)}, [], tag, timeout_s, what)
        decision = self._wait({}, [0], tag + 1, timeout_s + GRACE_S, what)[0]
        return None, decision

    def allgather(self, value: Any, timeout_s: float, what: str) -> list[Any]:
        """Every node's ``value``, in node order, on every node: O(N) bytes on every node, so
        the suite itself uses ``gather_decide`` (a decision back, not the values)."""
        return self.gather_decide(value, lambda values: values, timeout_s, what)[1]

    def barrier(self, timeout_s: float, what: str) -> None:
        self.gather_decide(None, lambda _: None, timeout_s, what)

    def bcast(self, value: Any, timeout_s: float, what: str) -> Any:
        """Node 0's ``value`` on every node."""
        return self.gather_decide(None, lambda _: value, timeout_s, what)[1]

    def shift(self, value: Any, timeout_s: float, what: str) -> Any:
        """The value of the next node (index + 1, wrapping): each node sends one value to the
        previous node and receives one, O(1) per node (the readback reads the next node's
        files)."""
        self._check()
        tag = self._tag()
        previous, following = (self.index - 1) % self.count, (self.index + 1) % self.count
        sends = {previous: self.comm.isend(value, dest=previous, tag=tag)}
        return self._wait(sends, [following], tag, timeout_s, what)[following]

    def abort(self, code: int) -> None:
        self.stop_heartbeat()  # no thread inside MPI while it ends
        self.comm.Abort(code)

    def stop_heartbeat(self) -> None:
        """Stop the heartbeat thread (bounded, idempotent; also at exit, before MPI finalizes),
        and the watchdog with it (without beats every peer would look silent)."""
        if self.watchdog is not None:
            self.watchdog.stop()
        if self.heartbeat is not None:
            self.heartbeat.stop()


def pool_cancel(nodes: Nodes) -> Callable[[], str | None] | None:
    """The rank pool's ``cancelled``: a running burst stops once this node knows a node was
    named lost (None: one node, or no heartbeat)."""
    return getattr(nodes, "stopping", None)


def pool_gate(nodes: Nodes) -> StartGate | None:
    """The rank pool's gate: every node's ranks start together, or none do (None: one node)."""
    if nodes.count == 1:
        return None
    return lambda ready, timeout_s: nodes.gather_decide(ready, all, timeout_s, "the common start")[
        1
    ]


def _failures(outcomes: list[tuple[str, Any, str | None]]) -> list[str]:
    failures = [f"node {i} ({host}): {why}" for i, (host, _, why) in enumerate(outcomes) if why]
    if len(failures) > SHOWN_FAILURES:
        failures = [*failures[:SHOWN_FAILURES], f"(+{len(failures) - SHOWN_FAILURES} nodes more)"]
    return failures


def run_everywhere(nodes: Nodes, timeout_s: float, what: str, step: Callable[[], T]) -> list[T]:
    """Run ``step`` on this node; node 0 gathers every node's result.

    Returns every node's result in node order on node 0, and this node's own alone (a list of
    one) elsewhere: node 0 judges the whole run, the others only take part. A failure on any
    node fails the step on every node, naming the nodes that failed (the decision node 0 sends
    back); ``timeout_s`` is the step's own deadline, so a node waits that long for the slowest.
    """
    result, error = None, None
    try:
        result = step()
    except RankFailure as failure:
        error = str(failure)
    except Exception as failure:  # exchanged too: a node that skips the gather hangs the rest
        if nodes.count == 1:
            raise
        error = f"{type(failure).__name__}: {failure}"
    outcomes, failures = nodes.gather_decide(
        (nodes.host, result, error), _failures, timeout_s, what
    )
    if failures:
        raise RankFailure("; ".join(failures), [])
    if outcomes is None:
        return [result]  # type: ignore[list-item]
    return [r for _, r, _ in outcomes]


def on_first(
    nodes: Nodes, count: int, timeout_s: float, what: str, step: Callable[[Nodes], T]
) -> T | None:
    """Run ``step`` on the first ``count`` nodes, given their view (``Nodes.first``), while
    the others wait at a bounded barrier of the whole run; returns the step's result on the
    nodes that ran it and None on the others.

    One allocation serves a whole scaling sweep this way. A failure on any node that took part
    fails the step on every node, named (as ``run_everywhere``); ``timeout_s`` bounds the wait
    of those that did not take part, so it must cover the whole step.
    """
    result, error = None, None
    if nodes.index < count:
        view = nodes if count == nodes.count else nodes.first(count)
        try:
            result = step(view)
        except RankFailure as failure:
            error = str(failure)
        except NodeTimeout as failure:
            if isinstance(nodes, MpiNodes):
                nodes.broken = nodes.broken or str(failure)
            raise
        except Exception as failure:  # exchanged too: the waiting nodes would hang otherwise
            if nodes.count == 1:
                raise
            error = f"{type(failure).__name__}: {failure}"
    _, failures = nodes.gather_decide((nodes.host, None, error), _failures, timeout_s, what)
    if failures:
        raise RankFailure("; ".join(failures), [])
    return result
