"""Python's cyclic garbage collector paused while node 0 builds or reads a large tree of
plain values (every node's records, a report of 16,384 ranks), which reference counting frees.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block, then back as it was. Each collection scans every
    live object, and a tree of N nodes' records triggers collections as it grows, so the work
    grew faster than N: a records gather of 2,048 to 4,096 nodes took 0.78 to 1.87 s with it on
    and 0.49 to 1.07 s off; ``compare`` of a 2,048-node report 3.18 s on and 2.46 s off, and
    the report files 7.34 s on and 6.59 s off (the gather from ``ckptgate bench scale``; the
    other two an A/B of the same parts, medians of 6 runs with the order alternated, quiet
    2-core machine, 2026-12-07: benchmarks/README.md, issue 31)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
