"""The run's lease: a small file in its run directory that a live run keeps fresh.

A thread of the session rewrites ``<run dir>/.ckptgate-lease.node<N>.json`` every
``LEASE_PERIOD_S`` (write a temporary file, then rename it over the lease, so a reader sees a
whole lease or the previous one) with the host, the pid and the time. Another run that finds a
lease younger than ``LEASE_FRESH_S`` treats its run as live; ``ckptgate clean --force-stale``
removes a run it cannot prove dead (another host) only once its lease is older than
``FORCE_STALE_AFTER_S``.

The bounds, and why: five seconds between writes costs nothing (one 200-byte file); thirty
seconds (six periods) before a lease counts as stale tolerates a slow target that delays a few
writes; ten minutes before ``--force-stale`` may remove another host's files tolerates a run
whose lease writes a hung target holds up, which ``clean`` must not mistake for a dead one.
Times are the writer's wall clock (``time.time``), compared with the reader's: hosts whose
clocks differ by more than the bounds' margin misjudge, which is why the bounds are generous.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ckptgate.storage.manifest import ProcessId, lease_name

LEASE_PERIOD_S = 5.0
"""Seconds between lease writes."""

LEASE_FRESH_S = 30.0
"""A lease younger than this means its run is live (six periods)."""

FORCE_STALE_AFTER_S = 600.0
"""``clean --force-stale`` removes a run not provably dead only with a lease this old."""


def lease_path(run_dir: str, node: int) -> str:
    return f"{run_dir}/{lease_name(node)}"


def read_lease(path: str) -> dict[str, Any] | None:
    """The lease's content, or None where there is none (or it cannot be read whole)."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class LeaseKeeper:
    """Rewrites one node's lease every ``period_s`` from a daemon thread until ``stop``.

    ``clock`` gives the time written (seconds since the epoch); tests pass their own.
    """

    def __init__(
        self,
        run_dir: str,
        node: int,
        *,
        run_id: int | None = None,
        period_s: float = LEASE_PERIOD_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = lease_path(run_dir, node)
        self.tmp_path = f"{self.path}.tmp"
        self.run_id = run_id
        self.period_s = period_s
        self.clock = clock
        self.process = ProcessId.current()
        self.error: str | None = None
        """The last write's failure (a full or hung target); the lease goes stale then."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def write(self, ended: bool = False) -> None:
        """One lease write: temporary file, then rename over the lease."""
        record = {
            **self.process.to_json(),
            "run_id": self.run_id,
            "time": self.clock(),
            "period_s": self.period_s,
            "ended": ended,
        }
        with open(self.tmp_path, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(self.tmp_path, self.path)

    def start(self) -> None:
        """Write the lease now, then keep it fresh from a daemon thread."""
        self.write()
        self._thread = threading.Thread(target=self._run, name="ckptgate-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.write()
                self.error = None
            except OSError as error:
                self.error = f"{self.path}: {error.strerror}"

    def stop(self, ended: bool = False) -> None:
        """Stop the thread; ``ended``: write a last lease saying the run ended normally.

        Waits at most one period for the thread: a write stuck on a hung target must not
        hold up the run's end (the thread is a daemon).
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.period_s)
            self._thread = None
        if ended:
            with contextlib.suppress(OSError):  # the manifest's end line says it as well
                self.write(ended=True)
