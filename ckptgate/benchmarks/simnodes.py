"""Node 0's end of an in-process communicator of N nodes, for the scale harness and its tests.

``SimComm`` has the mpi4py calls the node layer makes (``Get_rank``, ``Get_size``, ``isend``,
``improbe`` with a matched message's ``recv``, ``Abort``) for node 0 of ``size`` nodes. The
other nodes are not processes: what each one sends on a tag comes from ``peer_value(peer,
tag)``, which the harness builds with the suite's own code for that node (its records, its
digest, its heartbeat). Every value crosses as pickled bytes, both ways, as mpi4py's lowercase
calls carry it, so node 0 pays the real deserialisation and the counters hold the real sizes.

``arrival(peer, tag)`` says when (on the injected ``SimClock``) a peer's message is there, so
a test can make the peers arrive one by one and count node 0's probes, never the wall clock.
The time spent building the peers' values is kept in ``excluded_s``: node 0's own cost is the
part's time less that.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ANY_SOURCE = -1
"""This communicator's wildcard source (as OpenMPI's ``MPI.ANY_SOURCE``)."""


@dataclass
class Counts:
    """What node 0 did on the communicator: messages and pickled bytes each way, and probes."""

    sent_messages: int = 0
    sent_bytes: int = 0
    received_messages: int = 0
    received_bytes: int = 0
    probes: int = 0

    def since(self, earlier: Counts) -> Counts:
        return Counts(
            self.sent_messages - earlier.sent_messages,
            self.sent_bytes - earlier.sent_bytes,
            self.received_messages - earlier.received_messages,
            self.received_bytes - earlier.received_bytes,
            self.probes - earlier.probes,
        )


class SimClock:
    """A clock that moves only when the code under test sleeps: deadlines and arrivals in
    event time, whatever the machine's load."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += max(seconds, 1e-6)


class _Done:
    """A send request: the in-process send completes at once."""

    def test(self) -> tuple[bool, None]:
        return True, None


class SimStatus:
    """What a matched probe fills in: the message's source."""

    def __init__(self) -> None:
        self.source = ANY_SOURCE

    def Get_source(self) -> int:
        return self.source


@dataclass
class _Message:
    data: bytes

    def recv(self) -> Any:
        return pickle.loads(self.data)


@dataclass
class SimComm:
    """Node 0 of ``size`` in-process nodes (see the module docstring)."""

    size: int
    peer_value: Callable[[int, int], Any] | None = None
    """What ``peer`` sends node 0 on ``tag`` (None: the peers send nothing)."""
    arrival: Callable[[int, int], float] | None = None
    """When (on ``clock``) the peer's message on the tag is there; None: at once."""
    clock: SimClock = field(default_factory=SimClock)
    counts: Counts = field(default_factory=Counts)
    excluded_s: float = 0.0
    """Seconds spent building and pickling the peers' values (not node 0's work)."""
    _delivered: dict[int, set[int]] = field(default_factory=dict)
    _cursor: dict[int, int] = field(default_factory=dict)

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return self.size

    def Abort(self, code: int) -> None:
        raise SystemExit(code)

    def isend(self, value: Any, dest: int, tag: int) -> _Done:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self.counts.sent_messages += 1
        self.counts.sent_bytes += len(data)
        return _Done()

    def again(self, tag: int) -> None:
        """Every peer may send on ``tag`` once more (the heartbeat's next beat)."""
        self._delivered.pop(tag, None)
        self._cursor.pop(tag, None)

    def improbe(self, source: int, tag: int, status: SimStatus | None = None) -> _Message | None:
        self.counts.probes += 1
        if self.peer_value is None:
            return None
        delivered = self._delivered.setdefault(tag, set())
        peer = self._next_any(tag, delivered) if source == ANY_SOURCE else source
        if peer is None or not 0 < peer < self.size or peer in delivered:
            return None
        if self.arrival is not None and self.arrival(peer, tag) > self.clock():
            return None
        started = time.perf_counter()
        data = pickle.dumps(self.peer_value(peer, tag), protocol=pickle.HIGHEST_PROTOCOL)
        self.excluded_s += time.perf_counter() - started
        delivered.add(peer)
        self.counts.received_messages += 1
        self.counts.received_bytes += len(data)
        if status is not None:
            status.source = peer
        return _Message(data)

    def _next_any(self, tag: int, delivered: set[int]) -> int | None:
        """The first peer, in node order, whose message on ``tag`` has arrived (a wildcard
        probe matches the earliest arrival; in-process, node order among those there)."""
        start = self._cursor.get(tag, 1)
        while start < self.size and start in delivered:
            start += 1
        self._cursor[tag] = start
        if self.arrival is None:
            return start if start < self.size else None
        now = self.clock()
        for peer in range(start, self.size):
            if peer not in delivered and self.arrival(peer, tag) <= now:
                return peer
        return None
