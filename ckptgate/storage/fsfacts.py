"""Facts about filesystems: which protocols are this node's kernel, what is under a path, and
whether the target can take the run (there, writable, room).

Nothing here does I/O on a target beyond reading ``/proc/mounts``, ``stat``, ``access``, one
``statvfs`` and the placement facts (``placement``: extended attributes, or a GlusterFS
client's graph); the backends (``posix``, ``fsspec_backend``) and the target (``target``) ask
these questions, so this module imports no other part of ``ckptgate.storage`` but its error
and ``placement`` (with the ``glusterfs`` reader it calls).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ckptgate.storage.errors import TargetError
from ckptgate.storage.placement import client_placement

__all__ = [
    "LOCAL_PROTOCOLS",
    "MEMORY_BACKED_FS_TYPES",
    "FsFacts",
    "check_room",
    "check_writable",
    "is_local",
    "local_fs_facts",
    "target_facts",
]

LOCAL_PROTOCOLS = frozenset({"file", "local"})
"""fsspec's names for a filesystem of this node's kernel."""

MEMORY_BACKED_FS_TYPES = frozenset({"tmpfs", "ramfs", "memory"})
"""Filesystem types (``/proc/mounts``, and fsspec's ``memory`` protocol) whose storage is RAM."""


def is_local(protocol: str) -> bool:
    """Whether an fsspec protocol is a filesystem of this node's kernel."""
    return protocol in LOCAL_PROTOCOLS


@dataclass(frozen=True)
class FsFacts:
    """What the report says about the filesystem under the target."""

    fs_type: str
    mount_point: str
    free_bytes: int | None
    total_bytes: int | None
    read_only: bool = False
    """Mounted read-only (statvfs ST_RDONLY): no room figure means anything then."""
    placement: dict[str, str] = field(default_factory=dict)
    """Where the filesystem puts the target's data, in its own words
    (``ckptgate.storage.placement``: CephFS's ``ceph.dir.layout.pool``, GlusterFS's volume
    type, bricks and translators)."""
    client_cache: str | None = None
    """Why the filesystem's client may serve a read from memory of its own, which this node's
    page cache (and so ``mincore``) does not show, or None: a GlusterFS client with io-cache."""

    @property
    def memory_backed(self) -> bool:
        return self.fs_type in MEMORY_BACKED_FS_TYPES


def local_fs_facts(path: str) -> FsFacts:
    """Filesystem type (from /proc/mounts, longest mount prefix) and statvfs capacity."""
    real = os.path.realpath(path)
    fs_type, mount_point = "unknown", "/"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(mount_point):
                    mount_point, fs_type = point, fields[2]
    except OSError:
        pass
    stats = os.statvfs(real)
    placement, client_cache = client_placement(real, mount_point, fs_type)
    return FsFacts(
        fs_type=fs_type,
        mount_point=mount_point,
        free_bytes=stats.f_bavail * stats.f_frsize,
        total_bytes=stats.f_blocks * stats.f_frsize,
        read_only=bool(stats.f_flag & os.ST_RDONLY),
        placement=placement,
        client_cache=client_cache,
    )


def target_facts(url: str, protocol: str, root: str) -> FsFacts:
    """The facts about the target ``url`` (fsspec ``protocol``, path ``root``): the kernel's
    for a local directory, which must exist; the protocol's name elsewhere (no room figure)."""
    if not is_local(protocol):
        return FsFacts(protocol, root, None, None)
    if not os.path.exists(root):
        raise TargetError(f"--target {url}: no such directory")
    if not os.path.isdir(root):
        raise TargetError(f"--target {url}: is a file, not a directory")
    return local_fs_facts(root)


def check_writable(url: str, protocol: str, root: str, facts: FsFacts) -> None:
    """Refuse a read-only or unwritable local target as such (before the room is judged: a
    read-only mount reports no free blocks, which is not the same as being full)."""
    if not is_local(protocol):
        return
    if facts.read_only:
        raise TargetError(
            f"--target {url}: read-only ({facts.fs_type} at {facts.mount_point} is mounted "
            "read-only)"
        )
    if not os.access(root, os.W_OK | os.X_OK):
        raise TargetError(f"--target {url}: not writable by this user")


def check_room(url: str, facts: FsFacts, needed_bytes: int, what: str) -> None:
    """Refuse the run before it starts when the target lacks the room it needs."""
    free = facts.free_bytes
    if free is not None and free < needed_bytes:
        raise TargetError(
            f"--target {url}: {free / 1e9:.3g} GB free, this run needs "
            f"{needed_bytes / 1e9:.3g} GB ({what}); shrink it with --set run.shard_bytes_cap"
        )
