"""Node liveness: every node shows it is alive while it works, so a dead or frozen node is named
within ``run.stall_timeout_s`` instead of at a collective's deadline (ten windows plus the
floor: about 41 minutes at 405b defaults).

A daemon thread per node (``Heartbeat``) sends a tiny message every ``BEAT_S`` on a tag of its
own (``HEARTBEAT_TAG``, below every collective's tag, so the collectives' matched probes never
see one): every node to node 0, and node 0 to every node. Traffic is O(N) at node 0 and O(1)
elsewhere, and at most one send per peer is in flight: a send to a peer that drains nothing
(a stopped node) is not repeated until the last one completed, so nothing piles up. The same
thread drains the heartbeats it receives every ``DRAIN_S`` (a bounded count per drain), so they
never wait in MPI's unexpected queue, and records when each peer was last heard from
(``Liveness``). A node waiting in a collective asks ``Liveness.silent`` about the peers it still
waits for; a peer alive but slow (still writing a large shard) keeps beating and is left to the
collective's deadline.

Node 0's heartbeat carries its notice: once node 0 named a node (silent, or past a deadline),
every beat tells the others, so every node names the same node even while it waits in a
collective where node 0 does not take part (``shift``).

The other nodes' beats also carry their latest progress (``Heartbeat.progress``, the
sampler's ``NodeProgress``: a few numbers, pickled with the beat), so node 0 prints the live
progress of every node and records a bandwidth series per node with no message of its own and
nothing on the timed path; ``Liveness.progress`` holds the latest per peer.

Needs ``MPI_THREAD_MULTIPLE`` (checked by ``detect_nodes``; without it, deadlines alone).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

HEARTBEAT_TAG = 7
"""The heartbeat's tag: the collectives use 100 and up."""

BEAT_S = 2.0
"""How often a node sends its heartbeat."""

DRAIN_S = 0.05
"""How often the receiver drains the heartbeats that arrived."""

STOP_S = 2.0
"""How long ``stop`` waits for the thread, and then for the last sends, at most."""


class Liveness:
    """When each peer this node hears from was last heard from, and node 0's notice.

    ``hears``: the peers that send this node heartbeats (every other node on node 0, node 0
    elsewhere); a peer not among them is never judged here. Thread-safe; ``refresh`` (where
    given) drains what arrived before a judgement, so a receiver thread that has not run lately
    cannot make a live peer look silent.
    """

    def __init__(
        self,
        hears: Iterable[int],
        clock: Callable[[], float] = time.monotonic,
        refresh: Callable[[], object] | None = None,
    ) -> None:
        self.clock = clock
        self.refresh = refresh
        self._lock = threading.Lock()
        now = clock()
        self._last = dict.fromkeys(hears, now)
        self._notice: str | None = None
        self._progress: dict[int, Any] = {}

    def seen(self, peer: int, notice: str | None = None, progress: Any = None) -> None:
        """A heartbeat from ``peer`` arrived (with node 0's notice, and the peer's latest
        progress, if any)."""
        now = self.clock()
        with self._lock:
            if peer in self._last:
                self._last[peer] = now
                if progress is not None:
                    self._progress[peer] = progress
            if notice and self._notice is None:
                self._notice = notice

    def progress(self) -> dict[int, Any]:
        """Each peer's latest progress as its last beat carried it (peers that sent none are
        absent)."""
        with self._lock:
            return dict(self._progress)

    def note(self, notice: str) -> None:
        """This node's own notice (its watchdog named a silent peer): from now on every
        collective here raises it, as it does node 0's (the first one stays)."""
        with self._lock:
            if self._notice is None:
                self._notice = notice

    @property
    def notice(self) -> str | None:
        """What node 0 said went wrong (who it named), once it did; None before."""
        with self._lock:
            return self._notice

    def last_seen(self, peer: int) -> float | None:
        with self._lock:
            return self._last.get(peer)

    def silent(self, peers: Iterable[int], limit_s: float, refresh: bool = True) -> list[int]:
        """The ``peers`` this node hears from that sent nothing for ``limit_s`` or longer
        (``refresh``: drain what arrived first; the watchdog, which makes no MPI call, does
        not)."""
        if refresh and self.refresh is not None:
            self.refresh()
        now = self.clock()
        with self._lock:
            last = self._last
            return sorted(p for p in set(peers) if p in last and now - last[p] >= limit_s)


class Heartbeat:
    """The sender and receiver of one node's heartbeats, on ``comm`` (an mpi4py communicator).

    ``any_source``: the MPI library's ``MPI.ANY_SOURCE`` (node 0 drains every node's beats).
    A beat is ``(sender, notice, progress)``: the notice is node 0's (``declare``), None
    elsewhere; the progress is what ``progress`` returns (set by the plugin on nodes other than
    0; None: the beat carries none).
    """

    def __init__(
        self,
        comm: Any,
        any_source: int,
        beat_s: float = BEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.comm = comm
        self.index = comm.Get_rank()
        self.count = comm.Get_size()
        self.any_source = any_source
        self.beat_s = beat_s
        self.peers = list(range(1, self.count)) if self.index == 0 else [0]
        self.liveness = Liveness(self.peers, clock=clock, refresh=self.drain)
        self.failed: str | None = None
        self.progress: Callable[[], Any] | None = None
        self._notice: str | None = None
        self.drained_mono: float | None = None
        """When the thread last finished a drain (``time.monotonic``): a watchdog tells a
        silent peer from a heartbeat thread of its own stuck in MPI."""
        self._sends: dict[int, Any] = {}
        self._drain_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def declare(self, notice: str) -> None:
        """Node 0: from now on every beat tells the others ``notice`` (the first one stays)."""
        if self.index == 0 and self._notice is None:
            self._notice = notice

    def beat(self) -> None:
        """One heartbeat to each peer whose previous one was delivered (one in flight each)."""
        progress = self.progress() if self.progress is not None else None
        payload = (self.index, self._notice, progress)
        for peer in self.peers:
            request = self._sends.get(peer)
            if request is not None and not request.test()[0]:
                continue
            self._sends[peer] = self.comm.isend(payload, dest=peer, tag=HEARTBEAT_TAG)

    def drain(self) -> int:
        """Receive the heartbeats that arrived (at most a few per peer), recording each sender.

        Returns how many arrived. Called by the thread and before each judgement; a lock keeps
        the two from receiving at once. After ``stop`` it receives nothing.
        """
        limit = 4 * len(self.peers) + 4
        source = self.any_source if self.index == 0 else 0
        received = 0
        with self._drain_lock:
            while received < limit and not self.stopped:
                message = self.comm.improbe(source=source, tag=HEARTBEAT_TAG)
                if message is None:
                    break
                sender, notice, *rest = message.recv()
                self.liveness.seen(sender, notice, rest[0] if rest else None)
                received += 1
        return received

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        """Start the thread (once); ``stop`` runs at exit, before MPI finalizes."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="ckptgate-heartbeat", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def _run(self) -> None:
        next_beat = 0.0
        try:
            while not self._stop.wait(DRAIN_S):
                now = time.monotonic()
                if now >= next_beat:
                    self.beat()
                    next_beat = now + self.beat_s
                self.drain()
                self.drained_mono = time.monotonic()
        except Exception as error:  # an MPI error: this node's peers will call it silent
            self.failed = f"{type(error).__name__}: {error}"

    def stop(self) -> None:
        """Stop the thread and give the last sends a moment to complete (bounded; idempotent)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_S)
        deadline = time.monotonic() + STOP_S / 4
        pending = [r for r in self._sends.values() if r is not None]
        self._sends.clear()
        while pending and time.monotonic() < deadline:
            pending = [r for r in pending if not r.test()[0]]
            time.sleep(0.01)
