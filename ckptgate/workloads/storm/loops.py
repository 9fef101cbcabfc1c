"""The metadata storm's per-file loops: in C where built (``ckptgate.workloads.storm._loops``), else
the Python loops of ``ckptgate.workloads.storm`` (``create_task``, ``timed_each``).

Why a native loop: a user comparing ckptgate's creates, stats and unlinks per second with
mdtest's on the same storage must see the same number, or the storm measures Python. On the
dentry cache a stat costs 1.7 us from C and 2.2-2.4 us through ``os.stat``, and the Python
loop's own steps (a clock read appended to a list, a store per file) cost the rest; the C
loop is mdtest's loop with the recording kept (``_loops.c`` says how):

- one clock read before the first operation and one after each, on CLOCK_MONOTONIC (the clock
  of ``time.perf_counter`` on Linux), so each latency is the operation's own, as in Python;
- the files done stored into the rank's progress slot before each file's first call, which
  the parent's stall watch and live line read (``RankContext.files_done``), so liveness and a
  hang's naming are the Python loop's;
- the first error ends the loop, and it is raised here as ``OSError`` with the file named.

The choice (``BackendSpec.loop``, ``--storm-loop``): ``auto`` runs the C loop wherever it is
built and the backend is POSIX (it makes POSIX calls; fsspec's operations stay in Python);
``native`` requires it (a one-line error where it cannot run); ``python`` forces the Python
loop (to compare the two, or where a user distrusts the extension). The run's header and JSON
name the loop that ran (``storm loop: native`` or ``python``, and why).

How it is built: one C file on CPython's own API (pyproject's ``ext-modules``), compiled at
install where a C compiler is present and skipped where not (``optional``): the install goes
on, and the storm runs its Python loop. A wheel built on the users' platform carries it.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ckptgate.storage.backend import BackendSpec

__all__ = [
    "AUTO",
    "LOOP_CHOICES",
    "NATIVE",
    "PYTHON",
    "PathBatch",
    "create_files",
    "loop_words",
    "native_module",
    "resolve_loop",
    "spec_loop",
    "spec_loop_words",
    "stat_files",
    "unlink_files",
]

AUTO, NATIVE, PYTHON = "auto", "native", "python"
LOOP_CHOICES = (AUTO, NATIVE, PYTHON)
"""``--storm-loop``'s values."""

_POSIX = "posix"
"""The one backend whose operations the C loop makes (ckptgate.storage.registry's name)."""


@functools.cache
def _loaded() -> tuple[ModuleType | None, str]:
    """The C loops' module, or None and why not (cached: imported once per process)."""
    try:
        # by its full name: ``from ckptgate.workloads.storm import _loops`` would import the
        # storm's package, which imports this module
        module = importlib.import_module("ckptgate.workloads.storm._loops")
    except ImportError as error:
        return None, (
            f"the C loop is not built in this install ({error}); a C compiler at install "
            "time builds it (pip install -e . again)"
        )
    return module, ""


def native_module() -> ModuleType | None:
    """The C loops' module where this install has it."""
    return _loaded()[0]


def _why_python(choice: str, backend: str) -> str | None:
    """Why the storm runs the Python loop under ``choice`` on ``backend`` (None: it runs C)."""
    if choice == PYTHON:
        return "--storm-loop python"
    if backend != _POSIX:
        return f"the {backend} backend's operations are Python calls"
    module, why = _loaded()
    return None if module is not None else why


def resolve_loop(choice: str, backend: str) -> str:
    """``native`` or ``python``: the loop the storm runs for ``choice`` on ``backend``.

    ValueError (one line) for a choice outside ``LOOP_CHOICES``, or ``native`` where the C
    loop cannot run."""
    if choice not in LOOP_CHOICES:
        raise ValueError(f"--storm-loop {choice!r}: choose one of {', '.join(LOOP_CHOICES)}")
    why = _why_python(choice, backend)
    if why is None:
        return NATIVE
    if choice == NATIVE:
        raise ValueError(f"--storm-loop native cannot run here: {why}")
    return PYTHON


def loop_words(choice: str, backend: str) -> str:
    """The header's words: ``native (C: ...)`` or ``python (why)``."""
    why = _why_python(choice, backend)
    if why is None:
        return "native (C: one system call per operation, as mdtest)"
    return f"python ({why})"


def spec_loop(spec: BackendSpec) -> str:
    """The storm's loop on ``spec``: ``native`` (C) or ``python``; ValueError (one line)
    where its choice cannot run on its backend."""
    return resolve_loop(spec.loop, spec.resolved)


def spec_loop_words(spec: BackendSpec) -> str:
    """The loop on ``spec`` and why, for the run's header (``native (C: ...)``, ``python
    (why)``)."""
    return loop_words(spec.loop, spec.resolved)


def _slot(done: MutableSequence[float]) -> memoryview | np.ndarray:
    """A writable buffer of doubles for the files done: the shared slot's memoryview, or a
    scratch array where the rank has no slot (no parent reading)."""
    return done if isinstance(done, memoryview) else np.zeros(len(done), dtype=np.float64)


def _raise_failed(outcome: tuple[int, int, str | None], paths: Sequence[str]) -> None:
    """The C loop's first error, raised as the Python loop raises it: its file named."""
    files_done, errno, _op = outcome
    if errno:
        raise OSError(errno, os.strerror(errno), paths[files_done])


@dataclass(frozen=True)
class PathBatch:
    """A rank's paths, and the same encoded for the C loop: made before the common start, so
    the timed loop only does I/O."""

    paths: Sequence[str]
    encoded: list[bytes]

    @classmethod
    def of(cls, paths: Sequence[str]) -> PathBatch:
        return cls(paths, [os.fsencode(path) for path in paths])


def create_files(
    batch: PathBatch,
    payloads: list[bytes],
    *,
    fsync: bool,
    ops: int,
    done: MutableSequence[float],
    files_done_at: int,
) -> np.ndarray:
    """Create, write (payloads not empty), fsync (``fsync``) and close each path in C; the
    clock stamps (one before the first call, one after each of the ``ops`` per file)."""
    stamps = np.empty(1 + len(batch.paths) * ops, dtype=np.float64)
    outcome = _required().create_files(
        batch.encoded, payloads, fsync, stamps, _slot(done), files_done_at
    )
    _raise_failed(outcome, batch.paths)
    return stamps


def stat_files(
    batch: PathBatch, *, done: MutableSequence[float], files_done_at: int
) -> tuple[np.ndarray, np.ndarray]:
    """stat(2) each path in C: the clock stamps and each path's size (int64)."""
    stamps = np.empty(1 + len(batch.paths), dtype=np.float64)
    sizes = np.empty(len(batch.paths), dtype=np.int64)
    outcome = _required().stat_files(batch.encoded, sizes, stamps, _slot(done), files_done_at)
    _raise_failed(outcome, batch.paths)
    return stamps, sizes


def unlink_files(
    batch: PathBatch, *, done: MutableSequence[float], files_done_at: int
) -> np.ndarray:
    """unlink(2) each path in C: the clock stamps."""
    stamps = np.empty(1 + len(batch.paths), dtype=np.float64)
    outcome = _required().unlink_files(batch.encoded, stamps, _slot(done), files_done_at)
    _raise_failed(outcome, batch.paths)
    return stamps


def _required() -> ModuleType:
    module, why = _loaded()
    if module is None:
        raise RuntimeError(f"the storm's native loop was chosen, but {why}")
    return module
