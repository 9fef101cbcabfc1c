"""The node watchdog: a silent node is named at once, and no suite process waits forever.

The heartbeat (``cluster.heartbeat``) says when each peer was last heard from, but only a node
waiting in a collective asked, and only about the peers that collective waits for: node 0
busy with its own ranks' burst, or waiting for a live node that itself waits for the lost
one, named nobody until a deadline (ten windows plus the floor). And once a node is lost, a
process can still wait on MPI (an abort the launcher cannot deliver, a finalize). A daemon
thread per node (``Watchdog``), which makes no MPI call of its own, bounds both:

1. Naming. Every ``WATCH_S`` it asks the heartbeat's ``Liveness`` about every peer this node
   hears from (node 0: every node; elsewhere: node 0). One silent for the stall timeout
   (``run.stall_timeout_s``, plus ``NAME_MARGIN_S`` so that a collective waiting for it names
   it first, saying where) is named at once: one line on stderr, the notice every
   collective of this node checks every ``LIVENESS_EVERY_S`` (``Liveness.note``), and, on node
   0, the notice every beat carries to the other nodes (``Heartbeat.declare``); the rank pool
   stops the local burst on it (``RankPool.cancelled``). So node 0 names a node that lost its
   link within ``stall_timeout_s + NAME_MARGIN_S + WATCH_S`` of its last beat, whatever it was
   doing, and every node learns it within a beat (``BEAT_S``) more.
2. Ending. From the moment this node knows the run is broken (its own notice, node 0's, or a
   collective that failed: ``broken``), the process has ``END_GRACE_S`` to end by the normal
   path (the remaining tests fail at once, the report is written, the run directory cleaned,
   ``MPI_Abort`` with its own grace); past that the watchdog calls ``give_up`` (the plugin's:
   write the report, end this process and its launcher daemon).

A surviving suite process therefore ends within ``stall_timeout_s + NAME_MARGIN_S + WATCH_S +
BEAT_S + END_GRACE_S`` of the lost node's last beat (155 s at the default 60 s stall timeout),
whatever the launcher does; the launcher itself (mpirun) may wait longer for the lost node's
daemon: see docs/scaling.md, "A node that loses its link".
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from ckptgate.cluster.heartbeat import Liveness

WATCH_S = 1.0
"""How often the watchdog looks."""

NAME_MARGIN_S = 2.0
"""The watchdog names a peer silent this much past the stall timeout: a node waiting for that
peer in a collective names it first, with the collective's name in its words."""

END_GRACE_S = 90.0
"""How long a process whose run is broken may take to end by itself before the watchdog ends
it: the remaining tests fail at their first collective, then the report, the bounded cleanup
(the janitor's stall bound on a hung target) and the abort's own ``ABORT_GRACE_S``."""


def _exit(reason: str) -> None:
    os._exit(1)


class Watchdog:
    """Names silent peers and ends a broken run's process (see the module docstring).

    ``liveness``: the heartbeat's; ``peers``: those this node hears from; ``name``: a peer's
    words (``node 1 (node1)``); ``declare``: node 0's ``Heartbeat.declare`` (None elsewhere);
    ``broken``: what this node already knows went wrong (its collectives' failure), if
    anything; ``give_up``: ends the process (tests pass their own); ``clock`` is monotonic;
    ``drained``: when the heartbeat thread last drained (``Heartbeat.drained_mono``).
    """

    def __init__(
        self,
        liveness: Liveness,
        peers: list[int],
        stall_timeout_s: float,
        *,
        name: Callable[[int], str],
        declare: Callable[[str], None] | None = None,
        broken: Callable[[], str | None] = lambda: None,
        give_up: Callable[[str], None] = _exit,
        end_grace_s: float = END_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] | None = None,
        drained: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.liveness = liveness
        self.peers = peers
        self.stall_timeout_s = stall_timeout_s
        self.name = name
        self.declare = declare
        self.broken = broken
        self.give_up = give_up
        self.end_grace_s = end_grace_s
        self.clock = clock
        self.say = say or _stderr
        self.drained = drained
        self.named: str | None = None
        """What this watchdog named (None while every peer lives)."""
        self.broken_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def look(self) -> None:
        """One look: name the silent peers, then end the process if its grace is over."""
        if self._stop.is_set():
            return
        if self.named is None and self.liveness.notice is None:
            reason = self._silence()
            if reason is not None:
                self.named = reason
                self.liveness.note(reason)
                if self.declare is not None:
                    self.declare(reason)
                self.say(f"ckptgate: {reason}: the run stops")
        why = self.liveness.notice or self.broken()
        if why is None:
            return
        now = self.clock()
        if self.broken_since is None:
            self.broken_since = now
        elif now - self.broken_since >= self.end_grace_s:
            self.say(
                f"ckptgate: this process did not end within {self.end_grace_s:.0f} s of "
                f"the run breaking ({why}); it ends itself now"
            )
            self.give_up(why)
            self.stop()

    def _silence(self) -> str | None:
        """The words naming the peers silent for the stall timeout (or this node's own
        heartbeat thread, stuck: then it hears nobody), or None while every peer lives."""
        limit = self.stall_timeout_s + NAME_MARGIN_S
        drained = self.drained()
        if drained is not None and self.clock() - drained >= limit:
            return (
                f"this node's heartbeat thread has not run for {limit:.3g} s (stuck in MPI): "
                "it cannot tell whether the other nodes live"
            )
        silent = self.liveness.silent(self.peers, limit, refresh=False)
        if not silent:
            return None
        names = ", ".join(self.name(p) for p in silent)
        return (
            f"{names}: no sign of life for {limit:.3g} s (its heartbeat stopped: a lost link, "
            "a dead or a frozen node)"
        )

    def start(self) -> None:
        """Start the daemon thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ckptgate-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WATCH_S):
            self.look()

    def stop(self) -> None:
        self._stop.set()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
