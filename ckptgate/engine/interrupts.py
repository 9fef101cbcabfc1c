"""How a run's main process meets SIGINT and SIGTERM: it unwinds, and its cleanup finishes.

A batch scheduler cancels with SIGTERM, whose default action ends the process at once: no
``finally`` runs, and the run directory stays behind. ``sigterm_unwinds`` makes SIGTERM raise
``KeyboardInterrupt`` as Ctrl-C does, so the cleanup on the way out runs; ``signals_deferred``
holds both signals while that cleanup runs, since half a cleanup leaves files behind.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


def interrupt_words(error: BaseException) -> str:
    """What interrupted the run, in words: ``SIGTERM`` (``sigterm_unwinds`` raised it) or
    ``Ctrl-C``."""
    return "SIGTERM" if str(error) == f"signal {signal.SIGTERM}" else "Ctrl-C"


def sigterm_unwinds() -> None:
    """SIGTERM (a batch scheduler's cancel) unwinds like Ctrl-C, so cleanup runs (where this
    is the main thread; elsewhere signals cannot be handled and nothing changes)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, interrupt)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM (where this is the main thread) until the block ends."""
    try:
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for signum in previous:
            signal.signal(signum, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to hold
        previous = {}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
