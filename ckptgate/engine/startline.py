"""The common start: every waiting rank released by one futex wake.

IOR and mdtest start a phase with ``MPI_Barrier``; the suite's ranks are processes of one node,
and the parent decides when they go (the node's ranks are ready, and the gate across nodes
says every node is). Sending each rank a pipe message released them one after another: the
last of 8 ranks left up to milliseconds after the first, which a short burst carries as skew.

Here the ranks wait on one 32-bit word in memory shared with the parent, with ``futex(2)``
``FUTEX_WAIT``; the parent stores the new word and wakes them all with one ``FUTEX_WAKE``
(Linux futex(2): "wake at most val of the waiters"; ``INT_MAX`` wakes every one). The word
holds the release count and the decision in one store (``2 * releases + go``), so a rank that
sees it change also sees whether to go, on any memory order. A rank reads the word before it
reports ready, so it waits for the release after that report, never an earlier one.

Where the futex system call is not known (an architecture outside ``_SYS_FUTEX``), ``usable``
is False and the pool falls back to one pipe message per rank.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from typing import Any

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "ppc64le": 221, "riscv64": 98}
"""futex's system call number (Linux's unistd tables for each architecture)."""
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1
_WAKE_ALL = 2**31 - 1
WAIT_SLICE_S = 0.5
"""A waiting rank wakes this often by itself to look at the word again (a wake lost to a
signal costs at most this much; the parent's deadline bounds the wait as a whole)."""


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def futex_known() -> bool:
    """Whether this machine's futex system call number is known (``_SYS_FUTEX``)."""
    return os.name == "posix" and platform.machine() in _SYS_FUTEX


class StartLine:
    """One release word shared by the parent and its ranks (``RawArray`` of one int32)."""

    def __init__(self, context: Any, *, futex: bool = True) -> None:
        self.word = context.RawArray(ctypes.c_int32, 1)
        self.usable = futex and futex_known()
        """Whether the ranks wait on the word; False: the pool sends each rank a message."""

    def __getstate__(self) -> dict[str, Any]:
        return {"word": self.word, "usable": self.usable}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.word, self.usable = state["word"], state["usable"]

    def seen(self) -> int:
        """The word now: a rank reads it before it reports ready."""
        return int(self.word[0])

    def wait(self, seen: int) -> bool:
        """Block until the word moves past ``seen``; True when the ranks go, False on abort."""
        address = ctypes.addressof(self.word)
        number = _SYS_FUTEX[platform.machine()]
        seconds = int(WAIT_SLICE_S)
        timeout = _Timespec(seconds, int((WAIT_SLICE_S - seconds) * 1e9))
        while (now := int(self.word[0])) == seen:
            # EAGAIN (the word moved already), EINTR and ETIMEDOUT all just look again
            _syscall(number, ctypes.c_void_p(address), _FUTEX_WAIT, seen, ctypes.byref(timeout))
        return bool(now & 1)

    def release(self, go: bool) -> None:
        """Publish the decision and wake every waiting rank at once (one system call)."""
        self.word[0] = ((self.word[0] >> 1) + 1) % 2**30 * 2 | int(go)
        _syscall(
            _SYS_FUTEX[platform.machine()],
            ctypes.c_void_p(ctypes.addressof(self.word)),
            _FUTEX_WAKE,
            _WAKE_ALL,
            None,
        )
