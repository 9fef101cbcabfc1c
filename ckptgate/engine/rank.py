"""A rank's side of the pool (ckptgate.engine.pool): what a task sees of its rank
(``RankContext``: the common start, progress reports), the progress slot it reports into
(``ProgressSlot``, memory shared with the parent), and the loop each rank process runs.

A progress report is a few stores into the slot and no system call (the pool's docstring says
why); ``ctx.start()`` tells the parent this rank is ready and waits for the common release.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import multiprocessing.process
import signal
import time
import traceback
from collections.abc import MutableSequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, cast

from ckptgate.engine.lifeline import die_with_parent
from ckptgate.engine.sampler import TOTAL_BYTES
from ckptgate.engine.startline import StartLine
from ckptgate.sizing.units import format_bytes

_READY = "ready"
_GO = "go"
_ABORT = "abort"
_DONE = "done"
_ERROR = "error"
_STOP = "stop"

PATH_BYTES = 1024
PHASE_BYTES = 32
_PHASE_CODES: dict[str, bytes] = {}
"""Each phase name's bytes, encoded once (a create storm flips phases four times a file)."""
READ_PHASES = frozenset({"read", "verify", "stat", "list", "load", "single_load"})
"""Phases whose bytes a failure message calls read rather than written."""


class _Aborted(Exception):
    """Another rank failed before the common start; this rank stands down."""


FILES_DONE = 2
"""Where a slot's ``values`` hold the files done: the index a per-file loop stores into
(``RankContext.files_done``)."""


class ProgressSlot:
    """One rank's progress in memory shared with the parent (see the module docstring).

    ``values``: the report counter, bytes, files, the task's own total bytes
    (``TOTAL_BYTES``); ``phase`` and ``path`` as bytes. The
    counter moves on every report, so the parent sees progress even when a phase moves no
    bytes (a create storm's files, an fsync's start); a per-file loop that stores its files
    count alone (``RankContext.files_done``) moves the files instead.
    """

    def __init__(self, context: Any) -> None:
        self.values = context.RawArray(ctypes.c_double, 4)
        self.phase = context.RawArray(ctypes.c_char, PHASE_BYTES)
        self.path = context.RawArray(ctypes.c_char, PATH_BYTES)

    @property
    def counter(self) -> tuple[float, float]:
        """What moves with every report: the report counter and the files done."""
        values = self.values
        return (values[0], values[FILES_DONE])

    def reset(self) -> None:
        """Nothing done and no total: a new task starts."""
        values = self.values
        values[1] = values[FILES_DONE] = values[TOTAL_BYTES] = 0

    def offset(self) -> int:
        """The bytes the task reported done: where in its file an I/O error struck."""
        return int(self.values[1])

    def describe(self) -> tuple[str, str, str]:
        """(phase, path, amount done) as the parent reads them now."""
        nbytes, files = int(self.values[1]), int(self.values[FILES_DONE])
        phase = self.phase.value.decode(errors="replace") or "its task"
        verb = "read" if phase in READ_PHASES else "written"
        done = [f"{format_bytes(nbytes)} {verb}"] if nbytes or not files else []
        if files:
            done.append(f"{files} file{'s' if files != 1 else ''} done")
        return phase, self.path.value.decode(errors="replace"), ", ".join(done)


@dataclass
class RankContext:
    """What a task sees of its rank: its local index, the common start, progress reports."""

    local_rank: int
    ranks: int
    _conn: Connection
    _slot: ProgressSlot | None = None
    _line: StartLine | None = None
    _phase: str | None = None
    _path: str | None = None

    def stop_requested(self) -> bool:
        """Whether the parent asked this task to stop early (``RankPool.request_stop``): a
        task that runs until told, such as a dataloader reader, checks it between steps."""
        if self._conn.poll():
            message = self._conn.recv()
            return message[0] == _STOP
        return False

    def start(self) -> float:
        """Wait at the common start; returns this rank's monotonic time when released."""
        line = self._line
        if line is not None and line.usable:
            seen = line.seen()
            self._conn.send((_READY,))
            if not line.wait(seen):
                raise _Aborted()
            return time.monotonic()
        self._conn.send((_READY,))
        message = self._conn.recv()
        if message[0] != _GO:
            raise _Aborted()
        return time.monotonic()

    def progress(
        self,
        *,
        bytes: int | None = None,
        files: int | None = None,
        phase: str | None = None,
        path: str | None = None,
        total_bytes: int | None = None,
    ) -> None:
        """Report progress: the task's bytes and files so far (totals, not increments), the
        phase it enters and the file it works on, and (once known, where the parent could
        not know it) the bytes it will move in all. A few stores into shared memory, no
        system call: call it before each operation that may block (so a hang is named by the
        phase it is in) and after each transfer or file."""
        slot = self._slot
        if slot is None:
            return
        values = slot.values
        if bytes is not None:
            values[1] = bytes
        if files is not None:
            values[FILES_DONE] = files
        if total_bytes is not None:
            values[TOTAL_BYTES] = total_bytes
        if phase is not None and phase != self._phase:
            self._phase = phase
            encoded = _PHASE_CODES.get(phase)
            if encoded is None:
                encoded = _PHASE_CODES[phase] = phase.encode()[: PHASE_BYTES - 1]
            slot.phase.value = encoded
        if path is not None and path != self._path:
            self._path = path
            slot.path.value = path.encode(errors="replace")[: PATH_BYTES - 1]
        values[0] += 1

    def files_done(self) -> MutableSequence[float]:
        """The files count as one store per file, for loops of microsecond operations (a
        metadata storm's creates, stats and unlinks): ``done[FILES_DONE] = n``.

        ``progress(files=n)`` is a call with keywords, about 0.3 us a file: a sixth of a
        stat that the dentry cache answers in 1.7 us, which a C loop such as mdtest's does
        not pay. This is one store into the shared slot (a ``memoryview`` of its doubles);
        the parent's stall watch and the live line read it as every report's files count.
        Without a slot (no parent reading) it is a plain list.
        """
        slot = self._slot
        if slot is None:
            return [0.0] * 3
        # a memoryview of doubles is a mutable sequence of floats (typeshed does not say so)
        return cast(MutableSequence[float], memoryview(slot.values).cast("B").cast("d"))


class _NoParent:
    """A rank's connection when no parent waits on it (``inline_context``): ``ready`` goes
    nowhere and the answer is always go."""

    def send(self, message: object) -> None:
        pass

    def recv(self) -> tuple[str]:
        return (_GO,)


def inline_context() -> RankContext:
    """Rank 0 of 1 in this very process, released at once, with a real progress slot (so a
    task's per-file stores cost what they cost in a rank): for timing a task's loop as a rank
    runs it, without a pool or a second process (``ckptgate.benchmarks.loops``)."""
    slot = ProgressSlot(mp.get_context())
    return RankContext(0, 1, cast(Connection, _NoParent()), slot)


class StampedResult:
    """A typed task result that the pool stamps with the run's common start, as it stamps a
    dict result (``result["common_start_mono"] = ...``); a frozen dataclass with a
    ``common_start_mono`` field takes that one stamp and no other."""

    def __setitem__(self, key: str, value: float | None) -> None:
        if key != "common_start_mono":
            raise TypeError(f"{type(self).__name__} is frozen: cannot set {key!r}")
        object.__setattr__(self, "common_start_mono", value)


def _rank_main(
    local_rank: int,
    ranks: int,
    conn: Connection,
    slot: ProgressSlot | None = None,
    parent_pid: int | None = None,
    pdeathsig: bool = True,
    line: StartLine | None = None,
) -> None:
    """Loop of one rank process: run tasks until told to stop; die with the parent."""
    if parent_pid is not None:
        die_with_parent(parent_pid, pdeathsig=pdeathsig)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        if message == (_STOP,):  # a stop that came after the task had ended by itself
            continue
        task, kwargs = message
        context = RankContext(local_rank, ranks, conn, slot, line)
        if slot is not None:  # a new task starts with nothing done
            slot.reset()
            slot.phase.value = slot.path.value = b""
            slot.values[0] += 1
        try:
            result = task(context, **kwargs)
        except _Aborted:
            conn.send((_DONE, None))
        except BaseException as error:  # reported to the parent, never swallowed
            conn.send((_ERROR, f"{type(error).__name__}: {error}", traceback.format_exc()))
        else:
            conn.send((_DONE, result))
