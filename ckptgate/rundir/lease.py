"""The run's lease: a small file in its run directory that a live run keeps fresh.

A helper process of the session rewrites ``<run dir>/.ckptgate-lease.node<N>.json`` every
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

A process, not a thread: a lease write on a hung target (a FUSE server that never answers, a
CephFS whose MDS stopped) sleeps in the kernel, and a thread stuck there keeps the session's
process from exiting after it printed its verdict; a stuck helper process is killed, or
abandoned where it cannot be (``ckptgate.rundir.janitor.kill_or_abandon``), and dies with its
parent.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from ckptgate.engine.lifeline import die_with_parent, started_from_main_thread
from ckptgate.rundir.janitor import kill_or_abandon
from ckptgate.rundir.manifest import ProcessId, lease_name

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


def _write_lease(path: str, tmp_path: str, record: dict[str, Any]) -> None:
    """One lease write: temporary file, then rename over the lease."""
    with open(tmp_path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(tmp_path, path)


def _keep_main(
    path: str,
    tmp_path: str,
    record: dict[str, Any],
    period_s: float,
    stop: multiprocessing.connection.Connection,
    parent_pid: int,
    pdeathsig: bool,
) -> None:
    """The helper process: rewrite the lease every ``period_s`` until ``stop`` (the read end
    of a pipe) says so: a byte, or the end of the pipe once the session closed its end or died.

    Ctrl-C reaches the whole process group, this helper too: it ignores SIGINT and leaves the
    stopping to the session, which always ends it (:meth:`LeaseKeeper.stop`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid, pdeathsig=pdeathsig)
    while not stop.poll(period_s):
        with contextlib.suppress(OSError):  # a full or hung target: the lease goes stale
            _write_lease(path, tmp_path, {**record, "time": time.time()})


class LeaseKeeper:
    """Rewrites one node's lease every ``period_s`` from a helper process until ``stop``.

    ``clock`` gives the time :meth:`write` writes (seconds since the epoch); tests pass their
    own. The helper writes ``time.time()``.
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
        self.abandoned: list[int] = []
        """Helpers stuck in the kernel on a hung target, killed and left (pids)."""
        self._stop: multiprocessing.connection.Connection | None = None
        """The write end of the helper's stop pipe. A pipe, not a multiprocessing Event: an
        Event's ``set`` waits for every process asleep in its ``wait`` to wake, and a helper
        that died asleep there (a signal) left ``set`` waiting forever, inside the session's
        cleanup with its signals held."""
        self._helper: multiprocessing.process.BaseProcess | None = None

    def _record(self, ended: bool) -> dict[str, Any]:
        return {
            **self.process.to_json(),
            "run_id": self.run_id,
            "time": self.clock(),
            "period_s": self.period_s,
            "ended": ended,
        }

    def write(self, ended: bool = False) -> None:
        """One lease write, from this process: temporary file, then rename over the lease."""
        _write_lease(self.path, self.tmp_path, self._record(ended))

    def start(self) -> None:
        """Write the lease now, then keep it fresh from a helper process."""
        self.write()
        context = mp.get_context("spawn")
        reader, self._stop = context.Pipe(duplex=False)
        self._helper = context.Process(
            target=_keep_main,
            args=(
                self.path, self.tmp_path, self._record(False), self.period_s, reader,
                os.getpid(), started_from_main_thread(),
            ),
            name="ckptgate-lease",
            daemon=True,
        )  # fmt: skip
        self._helper.start()
        reader.close()  # the helper holds the read end; ours would keep the pipe open

    def stop(self, ended: bool = False) -> None:
        """Stop the helper; ``ended``: write a last lease saying the run ended normally.

        Waits at most one period for the helper, then kills it (abandoned if stuck in the
        kernel): a write stuck on a hung target must not hold up the run's end. The last
        write is made only when the helper ended by itself (the target answers).
        """
        answered = True
        if self._stop is not None and self._helper is not None:
            with contextlib.suppress(OSError):  # a helper already gone: the pipe is broken
                self._stop.send_bytes(b"stop")
            self._stop.close()
            self._helper.join(self.period_s)
            if self._helper.is_alive():
                answered = False
                if not kill_or_abandon(self._helper):
                    self.abandoned.append(self._helper.pid or -1)
            self._helper = self._stop = None
        if ended and answered:
            with contextlib.suppress(OSError):  # the manifest's end line says it as well
                self.write(ended=True)
