"""Small tmpfs mounts for fault tests: a full or read-only target, where root allows it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def small_tmpfs(size_bytes: int, read_only: bool = False) -> Iterator[str]:
    """Mount a tmpfs of ``size_bytes`` on a new directory; unmount and remove it after.

    Skips the calling test, saying why, where this process may not mount filesystems.
    """
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    point = tempfile.mkdtemp(prefix="ckptgate-mount-")
    options = f"size={size_bytes}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", point], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        os.rmdir(point)
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", point], check=True)
        os.rmdir(point)
