"""A command's manners on its standard output: a reader that goes away ends it quietly."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

CLOSED_PIPE_EXIT = 141
"""Exit status when the reader of our output went away (``ckptgate sizing 405b | head``): 128
plus SIGPIPE's number, as a shell reports a tool that SIGPIPE ended."""


def quiet_on_closed_pipe(command: Callable[[], int]) -> int:
    """Run ``command``; if the reader closes our standard output first, end quietly with
    :data:`CLOSED_PIPE_EXIT` instead of a BrokenPipeError traceback (the recipe of Python's
    ``signal`` documentation: point stdout at /dev/null so the interpreter's final flush
    cannot raise again)."""
    try:
        status = command()
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_PIPE_EXIT
