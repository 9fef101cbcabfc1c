"""The session's run directory on the target, and the registry of every path the run makes.

A storage suite must never lose anyone's data. The run makes one new directory,
``<target>/ckptgate-<utc>-<host>-<random>``, and every file it writes lies below it. The parent
registers every path before a rank creates it, so cleanup (``ckptgate.rundir.removal``)
removes registered files and then the directories it made, each with a non-recursive call.

Each registration is also appended to the node's manifest in the run directory
(``ckptgate.rundir.manifest``, fsynced before the call returns), with each file's stamp and
size where the caller gives them, so ``ckptgate verify`` can re-check a kept run and
``ckptgate clean`` can remove what a dead run left. Once the run directory exists, the calls
the session makes on the target go through ``ckptgate.rundir.janitor`` (bounded).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import secrets
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from fsspec import AbstractFileSystem

from ckptgate.engine.interrupts import signals_postponed
from ckptgate.rundir.appender import BoundedAppend, ManifestSink, StoreRewrite
from ckptgate.rundir.janitor import Janitor, TargetHung
from ckptgate.rundir.manifest import FileStamp, ManifestWriter, Writer, manifest_name
from ckptgate.storage.errors import TargetError
from ckptgate.storage.fsfacts import is_local

__all__ = ["MANIFEST_STALL_S", "RunDirectory", "StampedFile", "run_dir_name"]

MANIFEST_STALL_S = 60.0
"""How long one append to the manifest may take before the target counts as hung, where the
caller gives no bound of its own (the session gives the profile's ``run.stall_timeout_s``)."""


def run_dir_name(now: dt.datetime | None = None) -> str:
    """``ckptgate-<utc time>-<host>-<random>``: new per session, never a reused name."""
    now = now or dt.datetime.now(dt.UTC)
    host = socket.gethostname().split(".")[0] or "host"
    return f"ckptgate-{now:%Y%m%dT%H%M%SZ}-{host}-{secrets.token_hex(3)}"


class StampedFile(Protocol):
    """A file whose writer and stamp are known (``ckptgate.workloads.write_burst.ShardFile``)."""

    @property
    def path(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def run_id(self) -> int: ...
    @property
    def global_rank(self) -> int: ...
    @property
    def transfer_bytes(self) -> int: ...
    @property
    def payload(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def stamp_offset(self) -> int: ...


class RunDirectory:
    """This session's run directory on one target, and the paths registered in it."""

    def __init__(
        self,
        url: str,
        protocol: str,
        fs: AbstractFileSystem,
        root: str,
        janitor: Janitor,
        *,
        manifest_stall_s: float = MANIFEST_STALL_S,
    ) -> None:
        self.url = url
        self.manifest_stall_s = manifest_stall_s
        """The bound on each manifest append (``ckptgate.rundir.appender``)."""
        self.protocol = protocol
        self.fs = fs
        self.root = root
        self.janitor = janitor
        self.local = is_local(protocol)
        """A filesystem of this node's kernel (made with ``os``, a manifest by ``os`` too)."""
        self.run_dir: str | None = None
        """The run directory (None before node 0 made it or this node joined it)."""
        self.shared = False
        """True when several nodes write into one run directory (MPI); node 0 owns it."""
        self.owns_dirs = True
        """False on a node that joined node 0's run directory: node 0 removes it last."""
        self.files: list[str] = []
        """Registered files not yet removed."""
        self.dirs: list[str] = []
        """Directories the run made (or registered before making them)."""
        self.manifest: ManifestWriter | None = None
        """This node's manifest part (None before the run directory exists)."""
        self.meta_files: list[str] = []
        """The manifest part and the lease: removed after every registered file is gone."""
        self._sink: ManifestSink | None = None

    @property
    def hung(self) -> str | None:
        """Why the target counts as hung (a bounded call on it, or an append to the manifest,
        did not return), or None."""
        if self.janitor.hung is not None:
            return self.janitor.hung
        return None if self._sink is None else self._sink.hung

    def __getstate__(self) -> dict[str, Any]:
        """A rank process gets a copy without the manifest's descriptor (only the session
        registers and removes)."""
        state = dict(self.__dict__)
        state["manifest"] = None
        state["_sink"] = None
        return state

    def create(self, *, run_id: int | None = None, nodes: int = 1) -> str:
        """Make the session's new run directory and node 0's manifest part in it; refuse a
        read-only or unwritable target. ``run_id`` and ``nodes`` go into the manifest."""
        path = f"{self.root}/{run_dir_name()}" if self.root != "/" else f"/{run_dir_name()}"
        try:
            # Made and recorded as one step: a cancel between the two would leave a directory
            # that the cleanup on the way out does not know (seen in CI: a SIGTERM during the
            # probe below). The cancel takes effect once the directory is recorded.
            with signals_postponed():
                if self.local:
                    os.mkdir(path)  # fails if it exists: the directory is ours alone
                else:
                    self.fs.makedirs(path, exist_ok=False)
                self.run_dir = path
                self.dirs.append(path)
            if self.local:
                probe = Path(path, ".ckptgate-probe")
                try:
                    with open(probe, "wb") as handle:
                        handle.write(b"ckptgate")
                finally:  # also on an interrupt: nothing of the probe stays
                    probe.unlink(missing_ok=True)
        except OSError as error:
            reasons: dict[int | None, str | None] = {
                errno.EROFS: "read-only",
                errno.EACCES: "not writable",
                errno.ENOSPC: "full",
                errno.EDQUOT: "over quota",
            }
            reason = reasons.get(error.errno, error.strerror)
            if self.run_dir == path:  # ours, made a moment ago: gone again if still empty
                self.run_dir = None
                self.dirs.remove(path)
                if not os.listdir(path):
                    os.rmdir(path)
            raise TargetError(f"--target {self.url}: {reason} ({error.strerror})") from None
        self._open_manifest(0, run_id, nodes)
        if self.manifest is not None:
            self.manifest.add_dirs([path])
        return path

    def _open_manifest(self, node: int, run_id: int | None, nodes: int) -> None:
        """Start this node's manifest part (``ckptgate.rundir.manifest``)."""
        assert self.run_dir is not None
        if self.local:
            self._sink = BoundedAppend(self.manifest_stall_s)
        else:
            self._sink = StoreRewrite(self.fs.pipe_file)
        # Listed before it exists, as a directory is: an interrupt while it is being created
        # must not leave a part the cleanup does not know (a missing one is no error there).
        self.meta_files.append(f"{self.run_dir}/{manifest_name(node)}")
        try:
            self.manifest = ManifestWriter(
                self.run_dir, node, sink=self._sink, nodes=nodes, run_id=run_id
            )
        except OSError as error:
            self._sink.close(f"{self.run_dir}/{manifest_name(node)}")
            raise TargetError(
                f"--target {self.url}: cannot write the run's manifest in {self.run_dir} "
                f"({error.strerror})"
            ) from None

    def share(self) -> None:
        """Several nodes will write here; this node (node 0) removes the directories last."""
        self.shared = True

    def adopt(
        self, path: str, *, node: int | None = None, run_id: int | None = None, nodes: int = 1
    ) -> None:
        """Join the run directory that node 0 made; the target must be shared by the nodes.

        With ``node`` (this node's index), this node keeps its own manifest part there.
        """
        if not self.fs.isdir(path):
            raise TargetError(
                f"--target {self.url}: run directory {path} made by node 0 is not visible "
                "here; every node must mount the same target"
            )
        self.run_dir = path
        self.shared = True
        self.owns_dirs = False
        if node is not None:
            self._open_manifest(node, run_id, max(nodes, node + 1))

    def path(self, *parts: str) -> str:
        """A path inside the run directory."""
        if self.run_dir is None:
            raise RuntimeError("the run directory is not created yet")
        return "/".join([self.run_dir, *parts])

    def _check_not_hung(self) -> None:
        if self.hung is not None:
            raise TargetHung(
                errno.ETIMEDOUT,
                f"--target {self.url} stopped answering earlier ({self.hung}); "
                "nothing more is tried on it",
            )

    def new_dir(self, *parts: str) -> str:
        """Make a new directory inside the run directory and register it for removal."""
        path = self.path(*parts)
        self._check_not_hung()
        if not self.shared and self.janitor.one("exists", path):
            raise FileExistsError(f"{path} exists already: this run does not adopt directories")
        self.dirs.append(path)  # before it exists: an interrupt in between leaves no orphan
        if self.manifest is not None:
            self.manifest.add_dirs([path])
        # Shared, another node may have made it a moment ago.
        self.janitor.one("makedirs", path, exist_ok=True)
        return path

    def new_local_dir(self, *parts: str) -> str:
        """Like ``new_dir``, for tools that need a POSIX path (PyTorch DCP)."""
        if not self.local:
            raise TargetError(f"--target {self.url}: needs a POSIX path, not {self.protocol}")
        return self.new_dir(*parts)

    def register(
        self,
        paths: list[str] | tuple[str, ...],
        stamps: Sequence[FileStamp | None] | None = None,
        sizes: Sequence[int | None] | None = None,
        *,
        writer: Writer | None = None,
    ) -> None:
        """Record files that the run is about to create, before any rank creates them.

        Only paths inside the run directory: the run writes nowhere else. ``stamps[i]`` is
        what recomputes ``paths[i]``'s bytes (None for a file the suite does not stamp) and
        ``sizes[i]`` its size in bytes (None where not known yet: ``record_content`` later);
        both go into the manifest with ``writer`` (what writes them), fsynced before this
        returns.
        """
        inside = f"{self.run_dir}/" if self.run_dir else None
        outside = [p for p in paths if inside is None or not p.startswith(inside)]
        if outside:
            raise ValueError(f"refusing to write {outside[0]}: outside the run directory")
        for name, given in (("stamps", stamps), ("sizes", sizes)):
            if given is not None and len(given) != len(paths):
                raise ValueError(f"{len(given)} {name} for {len(paths)} paths")
        if self.manifest is not None:
            self.manifest.add_files(list(paths), stamps, sizes, writer=writer)
        self.files.extend(paths)

    def register_shards(self, shards: Sequence[StampedFile], *, writer: Writer) -> None:
        """``register`` for stamped files that know their global rank (``ShardFile``): each
        with its stamp (run id, global rank, transfer size, stamp offset) and its size."""
        self.register(
            [s.path for s in shards],
            stamps=[
                FileStamp(
                    s.run_id,
                    s.global_rank,
                    s.transfer_bytes,
                    s.stamp_offset,
                    s.generation,
                    s.payload,
                )
                for s in shards
            ],
            sizes=[s.bytes for s in shards],
            writer=writer,
        )

    def record_content(self, path: str, head: bytes, stamp: FileStamp | None) -> None:
        """Record a finished file's exact content for ``ckptgate verify``: its ``head`` bytes,
        then bytes stamped by ``stamp`` to its end (``ManifestWriter.add_content``)."""
        if path not in self.files:
            raise ValueError(f"{path}: this run did not register it")
        if self.manifest is not None:
            self.manifest.add_content(path, head, stamp, self.janitor.one("size", path))

    def claim_tree(self, directory: str, *, writer: Writer) -> int:
        """Register what a third-party ``writer`` (PyTorch DCP) made inside a directory of ours.

        Such a writer names its own files, so they cannot be registered before they exist;
        ``directory`` must be one this run made, so everything below it is the run's.
        """
        if directory not in self.dirs:
            raise ValueError(f"refusing to claim {directory}: this run did not make it")
        claimed = 0
        for root, dirs, files in self.fs.walk(directory, detail=True):
            new_dirs = [f"{root}/{name}" for name in dirs]
            new_files = [f"{root}/{name}" for name in files]
            if self.manifest is not None:
                # not stamped by the suite: listed with their sizes, which verify checks
                self.manifest.add_dirs(new_dirs)
                sizes = [int(files[name].get("size") or 0) for name in files]
                self.manifest.add_files(new_files, sizes=sizes, writer=writer)
            self.dirs.extend(new_dirs)
            self.files.extend(new_files)
            claimed += len(files)
        return claimed
