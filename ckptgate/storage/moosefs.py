"""What a MooseFS client says about its mount and a directory's goal, read from the client.

A MooseFS mount (``mfsmount``) is a plain ``fuse`` mount in ``/proc/mounts`` (its source
``mfs#MASTER:PORT``). The client serves its own parameters, read-only, as the virtual file
``.params`` in the mount's root (MooseFS 3.0): one ``name: value`` line each, among them the
master it talks to (``mfsmaster``, ``mfsport``), the data cache mode it runs with
(``mfscachemode``: AUTO by default, or YES, NO, DIRECT) and both sides' versions
(``moosefs_master_version``, ``moosefs_mount_version``). A run reads that one file, as any user
of the mount may, and a directory's goal (how many chunkservers hold each chunk of its files:
the storage class named by the goal, in 3.0) with the client's own ``mfsgetgoal`` where it is
installed, bounded: no server access of the run's own, no root.

The cache mode decides what a later open may read from memory: with ``mfscachemode=YES`` the
client keeps a file's data in the kernel's page cache across opens (FUSE's keep_cache), with
AUTO when the master says no other client changed it. Those are page-cache pages, seen by
``mincore(2)`` and dropped by ``posix_fadvise(DONTNEED)``, so the suite's own residency
measurement and drop see them: a MooseFS client keeps no data cache of its own that the page
cache does not show (``data_cache`` is None), as the suite's MooseFS bed measures
(``tests/beds/test_moosefs_suite.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["FS_TYPES", "PARAMS", "MooseParams", "goal", "mount_params", "parse_params"]

FS_TYPES = ("fuse", "fuse.mfs")
"""The types an mfsmount mount has in ``/proc/mounts`` (``fuse``, from mfsmount 3.0)."""

PARAMS = ".params"
"""The client's parameters, relative to the mount's root."""

PARAMS_MAX_BYTES = 1 << 16
GOAL_TIMEOUT_S = 10.0
"""``mfsgetgoal`` asks the master; a hung master must not hang the run's start."""


def parse_params(text: str) -> dict[str, str]:
    """The ``name: value`` lines of ``.params``."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip():
            found[name.strip()] = value.strip()
    return found


class MooseParams(dict[str, str]):
    """A client's ``.params``, and what they say."""

    @property
    def master(self) -> str:
        return f"{self.get('mfsmaster', '?')}:{self.get('mfsport', '?')}"

    @property
    def cache_mode(self) -> str:
        """``mfscachemode`` as the client runs it (``working_keep_cache_mode``; AUTO unset)."""
        mode = self.get("working_keep_cache_mode") or self.get("mfscachemode", "")
        return "AUTO" if mode in ("", "(not defined)") else mode

    def placement(self, path: str) -> dict[str, str]:
        """The report's ``fs_placement`` for ``path`` on this mount."""
        found = {
            "moosefs.master": self.master,
            "moosefs.version": self.get("moosefs_master_version", "unknown"),
            "moosefs.cachemode": self.cache_mode,
        }
        held = goal(path)
        if held is not None:
            found["moosefs.goal"] = held
        return found


def mount_params(mount_point: str) -> MooseParams | None:
    """The parameters of the MooseFS client mounted at ``mount_point``, or None where there is
    none there (another FUSE filesystem, an old client, a hung mount's error): a report fact
    never fails a run."""
    try:
        with open(os.path.join(mount_point, PARAMS), "rb") as handle:
            text = handle.read(PARAMS_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    params = MooseParams(parse_params(text))
    return params if "moosefs_mount_version" in params else None


def goal(path: str) -> str | None:
    """``path``'s goal (its storage class's name, ``2``) by the client's ``mfsgetgoal``, or
    None where the tool is missing, fails or takes over ``GOAL_TIMEOUT_S``."""
    tool = shutil.which("mfsgetgoal")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [tool, path], capture_output=True, text=True, timeout=GOAL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    # "/ckpt/goal2: 2"
    _, colon, value = done.stdout.strip().rpartition(":")
    return value.strip() if done.returncode == 0 and colon and value.strip() else None
