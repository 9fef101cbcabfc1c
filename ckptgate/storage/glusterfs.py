"""What a GlusterFS client says about its volume, read from the client alone.

A GlusterFS FUSE mount (``fuse.glusterfs`` in ``/proc/mounts``) is a graph of translators the
client fetched from glusterd when it mounted: the bricks it talks to (``protocol/client``),
how they are combined (``cluster/distribute``, ``cluster/replicate``, ``cluster/disperse``)
and the performance translators above them (``performance/io-cache``, ``read-ahead``,
``write-behind``, ...). The client serves its own active graph, read-only, through its meta
translator (GlusterFS 3.6 on): the virtual file ``.meta/graphs/active/volfile`` under the
mount's root lists every translator with its type, the options it was given and its
subvolumes. A run reads that one file, as any user of the mount may: no server access, no
``gluster`` CLI, no root. (The other client-side source, the virtual extended attribute
``trusted.glusterfs.pathinfo``, names one file's bricks but is readable by root only and says
nothing of the performance translators.)

Two facts come from the graph: the volume's placement (``placement``: its type, replica
count, bricks and translators, for the report beside CephFS's pool), and the client's own data
cache (``data_cache``). GlusterFS's io-cache (off by default in GlusterFS 10.3; ``gluster
volume set VOLUME performance.io-cache on`` puts it in every client's graph) keeps file data
that this client read in the glusterfs process's memory and serves later reads from it, on
new opens too, for as long as the file's modification time does not change (revalidated every
``cache-refresh-timeout`` seconds, 1 by default). Those bytes are not in the kernel's page
cache: ``mincore(2)`` reports a file io-cache holds as 0 % resident and
``posix_fadvise(DONTNEED)`` does not drop them, so a restart read the suite calls uncached may
be served from the client's memory. An O_DIRECT descriptor is not cached by io-cache (it winds
such a descriptor's reads to the bricks), so a read with ``--direct`` is the servers'. Every
read from a GlusterFS file with io-cache in its graph and without O_DIRECT is refused as
possibly the cache's (``ckptgate.checks.restart``). All of this was seen on the suite's
GlusterFS bed (``tests/beds/test_gluster_suite.py``): a second read of a 64 MiB file, 0 %
resident, made the bricks read nothing; an O_DIRECT read of it made them read all of it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = [
    "FS_TYPE",
    "VOLFILE",
    "GlusterGraph",
    "Translator",
    "mount_graph",
    "parse_volfile",
]

FS_TYPE = "fuse.glusterfs"
"""The GlusterFS FUSE client's type in ``/proc/mounts``."""

VOLFILE = ".meta/graphs/active/volfile"
"""The client's active graph, relative to the mount's root (the meta translator's)."""

VOLFILE_MAX_BYTES = 1 << 20
"""A graph is a few kilobytes; more is not a volfile."""

DATA_CACHES = {
    "performance/io-cache": (
        "GlusterFS io-cache (performance/io-cache in the client's graph) keeps the data this "
        "client read in the glusterfs process's memory, invisible to mincore and to "
        "fadvise(DONTNEED); read with --direct (io-cache passes O_DIRECT reads to the bricks) "
        "or set performance.io-cache off on the volume"
    ),
}
"""Translators that serve file data from the client's memory on later opens, and why that
matters here. (quick-read also does, for files up to its max-file-size, 64 KiB by default:
smaller than any shard.)"""


@dataclass(frozen=True)
class Translator:
    """One ``volume ... end-volume`` block of a volfile."""

    name: str
    type: str
    options: dict[str, str] = field(default_factory=dict)
    subvolumes: tuple[str, ...] = ()


def parse_volfile(text: str) -> list[Translator]:
    """The translators of a volfile (``volume NAME``, ``type T``, ``option KEY VALUE``,
    ``subvolumes A B``, ``end-volume``), in the file's order; lines it does not know (comments)
    are skipped."""
    found: list[Translator] = []
    name: str | None = None
    kind = ""
    options: dict[str, str] = {}
    subvolumes: tuple[str, ...] = ()
    for line in text.splitlines():
        words = line.split(None, 2)
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "volume" and len(words) > 1:
            name, kind, options, subvolumes = words[1], "", {}, ()
        elif name is None:
            continue
        elif words[0] == "type" and len(words) > 1:
            kind = words[1]
        elif words[0] == "option" and len(words) > 1:
            options[words[1]] = words[2].strip() if len(words) > 2 else ""
        elif words[0] == "subvolumes":
            subvolumes = tuple(line.split()[1:])
        elif words[0] == "end-volume":
            found.append(Translator(name, kind, options, subvolumes))
            name = None
    return found


@dataclass(frozen=True)
class GlusterGraph:
    """A client's translator graph, and what it says about the volume."""

    translators: tuple[Translator, ...]

    def of_type(self, kind: str) -> list[Translator]:
        return [t for t in self.translators if t.type == kind]

    def top_down(self) -> list[Translator]:
        """The translators from the top (the one no other lists as a subvolume) down, each
        once, breadth first: the order a call passes them."""
        by_name = {t.name: t for t in self.translators}
        below = {name for t in self.translators for name in t.subvolumes}
        order: list[Translator] = []
        queue = [t for t in self.translators if t.name not in below]
        while queue:
            here = queue.pop(0)
            if here in order:
                continue
            order.append(here)
            queue += [by_name[name] for name in here.subvolumes if name in by_name]
        return order

    @property
    def volume(self) -> str:
        """The volume's name: its io-stats translator's, as glusterd names it."""
        stats = self.of_type("debug/io-stats")
        if stats:
            return stats[0].name
        top = self.top_down()
        return top[0].name if top else "unknown"

    @property
    def bricks(self) -> list[str]:
        """``host:path`` of every brick the client talks to, in graph order."""
        return [
            f"{t.options.get('remote-host', '?')}:{t.options.get('remote-subvolume', '?')}"
            for t in self.of_type("protocol/client")
        ]

    @property
    def volume_type(self) -> str:
        """In ``gluster volume info``'s words: Distribute, Replicate (replica N),
        Distributed-Replicate (K x N), Disperse or Distributed-Disperse."""
        for kind, words in (("cluster/replicate", "Replicate"), ("cluster/disperse", "Disperse")):
            sets = self.of_type(kind)
            if sets:
                width = len(sets[0].subvolumes)
                if len(sets) == 1:
                    return f"{words} (replica {width})" if words == "Replicate" else words
                return f"Distributed-{words} ({len(sets)} x {width})"
        return "Distribute"

    @property
    def translator_types(self) -> list[str]:
        """Every translator type from the top down, each once, without the client's own
        meta translator and the bricks' connections (``bricks`` names those)."""
        types = [t.type for t in self.top_down()]
        skip = {"meta", "protocol/client"}
        return [kind for kind in dict.fromkeys(types) if kind not in skip]

    def placement(self) -> dict[str, str]:
        """The report's ``fs_placement`` for this volume."""
        return {
            "glusterfs.volume": self.volume,
            "glusterfs.type": self.volume_type,
            "glusterfs.bricks": ", ".join(self.bricks),
            "glusterfs.translators": ", ".join(self.translator_types),
        }

    def data_cache(self) -> str | None:
        """Why this client may serve a read from its own memory (``DATA_CACHES``), or None."""
        for kind, words in DATA_CACHES.items():
            if self.of_type(kind):
                return words
        return None


def mount_graph(mount_point: str) -> GlusterGraph | None:
    """The active graph of the GlusterFS client mounted at ``mount_point``, or None where it
    cannot be read (an old client without the meta translator, a hung mount's error): a report
    fact never fails a run."""
    path = os.path.join(mount_point, VOLFILE)
    try:
        with open(path, "rb") as handle:
            text = handle.read(VOLFILE_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    translators = parse_volfile(text)
    return GlusterGraph(tuple(translators)) if translators else None
