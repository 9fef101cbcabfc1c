"""Where a parallel filesystem puts the target's data, as the filesystem itself says.

The report's ``fs_type`` names the client (``fuse.ceph-fuse``, ``ceph``); it does not say which
of the cluster's pools the run's files land in, and on CephFS that is a property of the
directory (its layout), set by whoever owns it: a run on an unreplicated pool is faster than
one on a replicated or erasure-coded pool and loses data when one server dies, so the report
must say which one was qualified.

CephFS exposes a directory's layout as virtual extended attributes (Ceph docs, "File
layouts"): ``ceph.dir.layout.pool`` on a directory with a layout of its own; a directory
without one inherits its nearest ancestor's, so the lookup walks up to the mount point. Only
reads of extended attributes are made, and any error reads as "not there": a filesystem without
them (tmpfs, ext4) gives nothing, and a report fact never fails a run.

On GlusterFS a directory has no layout of its own: the whole volume is placed one way, and
its client says how in its translator graph (``ckptgate.storage.glusterfs``): the volume's
type, bricks and translators, and whether the client keeps a data cache of its own that this
node's page cache does not show (``client_placement``). On MooseFS the client says which
master it talks to and its cache mode (``ckptgate.storage.moosefs``), and a directory's goal
(how many chunkservers hold each chunk) is the directory's own, as ``mfsgetgoal`` reads it.
"""

from __future__ import annotations

import os

from ckptgate.storage import glusterfs, moosefs

__all__ = ["PLACEMENT_ATTRIBUTES", "client_placement", "fs_placement"]

PLACEMENT_ATTRIBUTES = ("ceph.dir.layout.pool",)
"""The placement attributes read from the target directory or its nearest ancestor."""


def fs_placement(path: str, mount_point: str) -> dict[str, str]:
    """Each attribute of :data:`PLACEMENT_ATTRIBUTES` that ``path``, or its nearest ancestor
    up to ``mount_point``, carries: ``{"ceph.dir.layout.pool": "replicated"}`` on CephFS,
    ``{}`` elsewhere."""
    found: dict[str, str] = {}
    top = os.path.realpath(mount_point)
    for name in PLACEMENT_ATTRIBUTES:
        here = os.path.realpath(path)
        while True:
            value = _attribute(here, name)
            if value is not None:
                found[name] = value
                break
            if here == top or os.path.dirname(here) == here:
                break
            here = os.path.dirname(here)
    return found


def _attribute(path: str, name: str) -> str | None:
    try:
        return os.getxattr(path, name).decode("utf-8", "replace")
    except OSError:
        return None


def client_placement(
    path: str, mount_point: str, fs_type: str
) -> tuple[dict[str, str], str | None]:
    """The target's placement and, where the filesystem's client caches file data in memory
    of its own (GlusterFS's io-cache), why a read may come from there: the GlusterFS client's
    graph on a ``fuse.glusterfs`` mount, the MooseFS client's parameters and the directory's goal
    on an mfsmount, the placement attributes elsewhere (no cache)."""
    if fs_type == glusterfs.FS_TYPE:
        graph = glusterfs.mount_graph(mount_point)
        if graph is not None:
            return graph.placement(), graph.data_cache()
    if fs_type in moosefs.FS_TYPES:
        params = moosefs.mount_params(mount_point)
        if params is not None:
            return params.placement(path), None
    return fs_placement(path, mount_point), None
