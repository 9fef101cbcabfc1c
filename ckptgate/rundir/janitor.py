"""Bounded calls on the target from the session's process: removals and directory making.

The session must never hang on the storage it qualifies. A call on a hung mount from pytest's
own process may never return, and not even a signal frees it: an unlink that waits for the
inode lock a hung fsync holds sleeps uninterruptibly, a FUSE request the server never answers
too, and such a thread keeps the whole process from exiting. A reported run deleted a hung
rank's file that way before it printed the failure. So the target's filesystem calls (remove
a file, remove a directory, make one, ask whether a path exists) run in a helper process,
one call at a time, each reported back as it ends. When one does not end within its bound
(the session's target gives the profile's ``run.stall_timeout_s``, the bound a rank's I/O
has; ``CALL_STALL_S`` where the caller gives none) the target counts as hung: the helper is
killed (SIGKILL, then abandoned if it cannot be reaped, like a hung rank) and the paths not
done are returned as left, never retried. Progress-based rather than one total budget: a
cleanup of 16,384 files on a slow but working filesystem may take longer than a few seconds,
and must not be called hung. Nor may one slow call: an unlink through ceph-fuse on a busy
machine took more than 5 s, and a fixed 5 s bound called a working target hung and left the
run directory of a qualified run.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import multiprocessing as mp
import multiprocessing.process
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ckptgate.engine.lifeline import die_with_parent, started_from_main_thread

CALL_STALL_S = 5.0
"""How long one call (an unlink, an rmdir) may take before the target counts as hung, where
the caller gives no bound of its own."""
HELPER_START_S = 30.0
"""What the helper's start (an interpreter, fsspec) may add to a call's first answer's bound."""
REAP_S = 2.0
"""How long the killed helper may take to exit before it is abandoned."""


def syncfs(fs: Any, path: str) -> None:
    """syncfs(2) of the filesystem that holds ``path``: what it holds dirty, and its journal,
    written back; no other filesystem's. (``os.sync()`` flushes every mount on the host, and
    waits on a hung one elsewhere.) ``fs`` is unused: a janitor op takes the filesystem."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), path)
    finally:
        os.close(fd)


OWN_OPS = {"syncfs": syncfs}
"""The janitor's calls that are not the filesystem's own methods, by name."""


def kill_or_abandon(process: multiprocessing.process.BaseProcess) -> bool:
    """SIGKILL ``process`` and reap it within ``REAP_S``; True if it is gone. One stuck in the
    kernel is abandoned: dropped from multiprocessing's children, so that nobody (not even the
    interpreter's exit, which joins them) ever waits for it; False then."""
    with contextlib.suppress(OSError, AttributeError):
        process.kill()
    process.join(REAP_S)
    if not process.is_alive():
        return True
    children = getattr(multiprocessing.process, "_children", None)
    if isinstance(children, set):
        children.discard(process)
    return False


class TargetHung(OSError):
    """A call on the target did not return: the target (or that file) is hung."""


@dataclass
class Outcome:
    """What a batch of calls did: per path ``ok``, ``missing`` or an OSError; what was left."""

    done: dict[str, Any] = field(default_factory=dict)
    """Each finished path's result: the call's return value."""
    missing: list[str] = field(default_factory=list)
    errors: dict[str, OSError] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)
    """Paths not done because a call hung (the hung one first)."""
    hung: str | None = None


SHIELDED = frozenset({signal.SIGINT, signal.SIGTERM})
"""The signals a helper takes from its parent only (see ``shield_from_job_signals``)."""


def shield_from_job_signals(parent_pid: int) -> None:
    """Let SIGINT and SIGTERM end this helper only when its parent sends them.

    A terminal's Ctrl-C goes to the whole foreground process group, and a batch scheduler's
    cancel (Slurm's slurmstepd, by process tree or cgroup) to every process of the job: both
    reach the helper as well as the session. The session unwinds and cleans up *through* the
    helper, so a helper that died of the same signal took the cleanup's bounded calls, and the
    manifest's open part, with it: a Slurm job ended by a node's failure recorded its last
    removals into a fresh helper that had no descriptor, failed the round with a KeyError
    instead of saying ``interrupted``, and left its run directory without a manifest. The
    signals are blocked here and taken by a thread with ``sigwaitinfo``, which tells the
    sender: the parent's (multiprocessing's exit terminates daemonic children with SIGTERM)
    ends the helper, anyone else's is dropped. The lifeline ends it once the parent is gone,
    and SIGKILL always does.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, SHIELDED)
    # Started during cleanup, it inherits the session's deferred signals (ignored dispositions
    # survive exec): a blocked signal is queued whatever its disposition, the default kept.
    for signum in SHIELDED:
        signal.signal(signum, signal.SIG_DFL)
    threading.Thread(
        target=_take_signals, args=(parent_pid,), name="ckptgate-shield", daemon=True
    ).start()


def _take_signals(parent_pid: int) -> None:
    while True:
        info = signal.sigwaitinfo(SHIELDED)
        if info.si_pid == parent_pid:
            os._exit(128 + info.si_signo)


def _helper_main(conn: Connection, fs: Any, parent_pid: int, pdeathsig: bool) -> None:
    """The helper process: run each requested call, answer one line per path."""
    shield_from_job_signals(parent_pid)  # before any other thread: they inherit the mask
    die_with_parent(parent_pid, pdeathsig=pdeathsig)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        op, paths, kwargs = request
        call = functools.partial(OWN_OPS[op], fs) if op in OWN_OPS else getattr(fs, op)
        for path in paths:
            try:
                conn.send((path, "ok", call(path, **kwargs)))
            except FileNotFoundError:
                conn.send((path, "missing", None))
            except OSError as error:
                conn.send((path, "error", (error.errno, error.strerror or str(error))))
            except Exception as error:  # an fsspec backend's own exception: reported as EIO
                conn.send((path, "error", (errno.EIO, f"{type(error).__name__}: {error}")))


class Janitor:
    """One helper process for a filesystem, started on first use (see the module docstring)."""

    def __init__(self, fs: Any, stall_s: float = CALL_STALL_S) -> None:
        self.fs = fs
        self.stall_s = stall_s
        self.hung: str | None = None
        """Why the target counts as hung, once a call did not return."""
        self.abandoned: list[int] = []
        self._process: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None

    def _start(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        context = mp.get_context("spawn")
        parent, child = context.Pipe(duplex=True)
        self._process = context.Process(
            target=_helper_main,
            args=(child, self.fs, os.getpid(), started_from_main_thread()),
            name="ckptgate-janitor",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._conn = parent
        return parent

    def call(
        self, op: str, paths: Sequence[str], *, bound_s: float | None = None, **kwargs: Any
    ) -> Outcome:
        """``fs.<op>(path, **kwargs)`` (or an ``OWN_OPS`` call) for each path, in order, each
        bounded by ``stall_s``, or by ``bound_s`` where the call may take longer by nature
        (writing back a filesystem's dirty data).

        Once the target is hung nothing more is attempted: every path is left.
        """
        outcome = Outcome()
        if self.hung is not None:
            outcome.left = list(paths)
            outcome.hung = self.hung
            return outcome
        if not paths:
            return outcome
        try:
            bound = self.stall_s if bound_s is None else bound_s
            return self._answers(self._start(), op, paths, kwargs, outcome, bound)
        except BaseException:
            # Ctrl-C or SIGTERM between a request and its answers: the helper's answers to
            # it would be read as the next request's (a removal counted done that was not).
            # The helper goes (a manifest part is reopened by the next one); the caller's
            # paths stay as they were, never assumed done.
            self._kill()
            raise

    def _answers(
        self,
        conn: Connection,
        op: str,
        paths: Sequence[str],
        kwargs: Any,
        outcome: Outcome,
        bound_s: float,
    ) -> Outcome:
        conn.send((op, list(paths), kwargs))
        # A call's first answer may also wait for the helper's start (an interpreter and
        # fsspec: on first use, or after a hang killed it): every call's first answer gets
        # HELPER_START_S more, on purpose, since a tighter bound may call a working target
        # hung on a busy machine; the later answers of a call get the bound alone. The words
        # name the bound the caller gave (the profile's stall timeout), not that allowance.
        for number, path in enumerate(paths):
            if not conn.poll(bound_s + HELPER_START_S if number == 0 else bound_s):
                self.hung = f"{op} {path} did not return within {bound_s:g} s"
                outcome.left = list(paths[number:])
                outcome.hung = self.hung
                self._kill()
                return outcome
            got, status, value = conn.recv()
            if got != path:  # never: one request at a time, in order (see ``call``)
                raise RuntimeError(f"janitor: the answer for {got} came where {path}'s was due")
            if status == "ok":
                outcome.done[got] = value
            elif status == "missing":
                outcome.missing.append(got)
            else:
                outcome.errors[got] = OSError(value[0], value[1], got)
        return outcome

    def one(self, op: str, path: str, *, bound_s: float | None = None, **kwargs: Any) -> Any:
        """One bounded call, as if made here: its value, or its OSError (``TargetHung``
        when it did not return)."""
        outcome = self.call(op, [path], bound_s=bound_s, **kwargs)
        if outcome.hung is not None:
            raise TargetHung(errno.ETIMEDOUT, f"the target is hung: {outcome.hung}", path)
        if outcome.missing:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if path in outcome.errors:
            raise outcome.errors[path]
        return outcome.done[path]

    def _kill(self) -> None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()
        if process is None:
            return
        if not kill_or_abandon(process):
            self.abandoned.append(process.pid or -1)

    def close(self) -> None:
        """Stop the helper (bounded)."""
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send(None)
        if self._process is not None:
            self._process.join(REAP_S)
        self._kill()
