"""The run's options every rank of a burst receives: one frozen, picklable value.

``run_ranks(..., options=RunOptions(spec, direct=...))`` hands the same object to each rank
task as its ``options`` keyword, instead of a loose ``shared={...}`` mapping: a task reads
``options.spec`` and ``options.direct``, and a misspelt option is a type error, not a rank
that silently took a default.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptgate.storage.backend import BackendSpec


@dataclass(frozen=True)
class RunOptions:
    """How every rank of one run does its I/O (what differs per rank goes in its kwargs)."""

    spec: BackendSpec
    """The target's backend; each rank calls ``spec.open()``."""
    direct: bool = False
    """Read with O_DIRECT where the backend can (the readback, the reshard)."""
    drop_cache: bool = True
    """Drop each file's pages before the timed read (where the backend has a page cache)."""
    verify: bool = True
    """Verify every byte inside the timed read (False: verified after it, untimed)."""
    fsync: bool = True
    """fsync each written file before closing it (the write burst, the create storm)."""
    sink: str = "target"
    """Where the write burst writes: ``target``, or ``null`` (the same bytes, discarded)."""
