"""How a run's main process meets SIGINT and SIGTERM: it unwinds, and its cleanup finishes.

A batch scheduler cancels with SIGTERM, whose default action ends the process at once: no
``finally`` runs, and the run directory stays behind. ``sigterm_unwinds`` makes SIGTERM raise
``KeyboardInterrupt`` as Ctrl-C does, so the cleanup on the way out runs; ``signals_deferred``
ignores both signals while that cleanup runs, since half a cleanup leaves files behind, and
``signals_postponed`` holds them while a step that must not be cut in two runs (a directory
made but not yet recorded for the cleanup), delivering them once it is done.
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


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM (where this is the main thread) until the block ends: for the
    cleanup on the way out, which a second cancel must not cut short (the run is ending
    anyway, so the signal is not delivered again)."""
    with _interrupts_handled(signal.SIG_IGN):
        yield


@contextlib.contextmanager
def signals_postponed() -> Iterator[None]:
    """Hold SIGINT and SIGTERM (where this is the main thread) while the block runs, then
    deliver the first that came to the handler in place before: a step that must not be cut
    in two (``mkdir`` and recording the directory for the cleanup) finishes, and the cancel
    still takes effect right after it."""
    pending: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    with _interrupts_handled(hold):
        yield
    if pending:
        signal.raise_signal(pending[0])


@contextlib.contextmanager
def _interrupts_handled(handler: Any) -> Iterator[None]:
    """``handler`` for SIGINT and SIGTERM while the block runs (where this is the main
    thread; elsewhere signals cannot be handled and nothing changes), the old ones after."""
    try:
        previous = {s: signal.getsignal(s) for s in INTERRUPTS}
        for signum in previous:
            signal.signal(signum, handler)
    except ValueError:  # not the main thread: nothing to hold
        previous = {}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
