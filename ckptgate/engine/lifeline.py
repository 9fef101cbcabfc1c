"""A child process's lifeline to its parent: it dies within seconds of the parent's death.

A rank or DCP process left running after pytest is killed (kill -9, an OOM killer, a
launcher's cancel) keeps writing into a run directory nobody will clean, for as long as its
task lasts; one reported run kept writing for 20 s. Linux can tie a child's life to its
parent's: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` makes the kernel send SIGKILL when the parent
dies. Two gaps remain, which a parent-pid watchdog closes:

- the signal fires when the *thread* that started the child ends, not the process
  (prctl(2)), so it is only set for a child started from the parent's main thread, which
  lives as long as the process;
- a parent that died before the child called prctl sent nothing: the child then already has a
  new parent (``getppid`` differs) and exits at once.

The watchdog polls ``getppid`` every ``WATCH_S`` (a sleeping daemon thread, which costs the
rank's timed work nothing measurable), so even without prctl the child is gone within
``WATCH_S`` plus a scheduling delay of the parent's death.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""
WATCH_S = 0.5
"""How often the watchdog checks that the parent is still the parent."""


def die_with_parent(parent_pid: int, *, pdeathsig: bool = True) -> None:
    """Make this process end when ``parent_pid`` dies (call first thing in the child).

    ``pdeathsig`` asks the kernel too (Linux only); pass False when the parent started this
    child from a thread that may end before the parent does.
    """
    if pdeathsig and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl: the watchdog alone
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took hold
        os._exit(1)
    threading.Thread(
        target=_watch, args=(parent_pid,), name="ckptgate-lifeline", daemon=True
    ).start()


def _watch(parent_pid: int) -> None:
    while True:
        time.sleep(WATCH_S)
        if os.getppid() != parent_pid:
            os._exit(1)  # no cleanup: the files are the run's, and its cleanup is gone too


def started_from_main_thread() -> bool:
    """Whether a child started now may rely on PR_SET_PDEATHSIG (see the module docstring)."""
    return threading.current_thread() is threading.main_thread()
