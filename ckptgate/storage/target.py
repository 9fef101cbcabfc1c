"""The target: its filesystem, the session's run directory, and removal of what the run made.

A storage suite must never lose anyone's data. The run makes one new directory,
``<target>/ckptgate-<utc>-<host>-<random>``, and every file it writes lies below it. The parent
registers every path before a rank creates it, so cleanup removes registered files and then the
directories it made, each with a non-recursive call: a file that someone else put in the run
directory survives, and the directory stays with a warning.

Once the run directory exists, every call the session's process makes on the target (make a
directory, remove a file or a directory) goes through ``ckptgate.storage.janitor``: bounded,
so a hung target fails the run instead of holding it. What a hung target made impossible to
remove is listed in ``left_behind`` (the report's notes), never retried.

Each registration is also appended to the node's manifest in the run directory
(``ckptgate.storage.manifest``, fsynced before the call returns), with each file's stamp and
size where the caller gives them, so ``ckptgate verify`` can re-check a kept run and
``ckptgate clean`` can remove what a dead run left; ``start_lease`` keeps a lease there that
tells other runs this one is live (``ckptgate.storage.lease``).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import fsspec
from fsspec import AbstractFileSystem

from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.janitor import Janitor, TargetHung
from ckptgate.storage.lease import LEASE_PERIOD_S, LeaseKeeper, lease_path
from ckptgate.storage.manifest import FileStamp, ManifestWriter
from ckptgate.storage.object_store import ObjectStore, PartSize, object_store, part_size

__all__ = ["CleanupReport", "FsFacts", "Target", "TargetError", "TargetHung"]

MEMORY_BACKED_FS_TYPES = frozenset({"tmpfs", "ramfs", "memory"})


class TargetError(Exception):
    """The target cannot take this run; the message is one line for the user."""


@dataclass(frozen=True)
class FsFacts:
    """What the report says about the filesystem under the target."""

    fs_type: str
    mount_point: str
    free_bytes: int | None
    total_bytes: int | None
    read_only: bool = False
    """Mounted read-only (statvfs ST_RDONLY): no room figure means anything then."""

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
    return FsFacts(
        fs_type=fs_type,
        mount_point=mount_point,
        free_bytes=stats.f_bavail * stats.f_frsize,
        total_bytes=stats.f_blocks * stats.f_frsize,
        read_only=bool(stats.f_flag & os.ST_RDONLY),
    )


def run_dir_name(now: dt.datetime | None = None) -> str:
    """``ckptgate-<utc time>-<host>-<random>``: new per session, never a reused name."""
    now = now or dt.datetime.now(dt.UTC)
    host = socket.gethostname().split(".")[0] or "host"
    return f"ckptgate-{now:%Y%m%dT%H%M%SZ}-{host}-{secrets.token_hex(3)}"


@dataclass
class CleanupReport:
    removed_files: int = 0
    removed_dirs: int = 0
    left: list[str] = field(default_factory=list)
    """Directories left because they hold what the run did not create."""
    unremovable: list[str] = field(default_factory=list)
    """Files and directories a hung target made impossible to remove (never retried)."""
    hung: str | None = None


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
    def stamp_offset(self) -> int: ...


class Target:
    """The target URL, its fsspec filesystem, and the run directory this session owns."""

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        transfer_bytes: int | None = None,
    ) -> None:
        """``transfer_bytes``: on an object store, the upload part size is tied to it unless
        ``storage_options`` set it (``ckptgate.storage.object_store.part_size``)."""
        self.url = url
        options = dict(storage_options or {})
        self.part: PartSize | None = None
        """The upload part size on an object store (None elsewhere, or not asked)."""
        try:
            filesystem, root = fsspec.core.url_to_fs(url, **options)
            protocol = filesystem.protocol
            name = protocol if isinstance(protocol, str) else protocol[0]
            if transfer_bytes is not None:
                tied, self.part = part_size(name, options, transfer_bytes)
                if tied != options:  # the filesystem again, with the part size it will use
                    options = tied
                    filesystem, root = fsspec.core.url_to_fs(url, **options)
        except (ValueError, ImportError, TypeError) as error:
            raise TargetError(f"--target {url!r}: {error}") from None
        self.store: ObjectStore | None = object_store(name)
        """The object store under the target (None for a filesystem): what the report labels."""
        # what rank processes get to reach the target (the backend is chosen from the protocol)
        self.fs_spec = BackendSpec(name, options)
        self.fs: AbstractFileSystem = filesystem
        self.root = root.rstrip("/") or "/"
        self.run_dir: str | None = None
        self.shared = False
        """True when several nodes write into one run directory (MPI); node 0 owns it."""
        self.owns_dirs = True
        self._files: list[str] = []
        self._dirs: list[str] = []
        self.janitor = Janitor(filesystem)
        """Bounded calls on the target (see the module docstring)."""
        self.left_behind: list[str] = []
        """What the run created and a hung target made impossible to remove."""
        self.manifest: ManifestWriter | None = None
        """This node's manifest part (None before the run directory exists)."""
        self.lease: LeaseKeeper | None = None
        self._meta_files: list[str] = []
        """The manifest part and the lease: removed after every registered file is gone."""
        self.facts = self._facts()

    def __getstate__(self) -> dict[str, Any]:
        """A rank process gets a copy without the manifest's descriptor or the lease's thread
        (only the session registers and removes)."""
        state = dict(self.__dict__)
        state["manifest"] = None
        state["lease"] = None
        return state

    @property
    def hung(self) -> str | None:
        """Why the target counts as hung (a call on it did not return), or None."""
        return self.janitor.hung

    def _check_not_hung(self) -> None:
        if self.janitor.hung is not None:
            raise TargetHung(
                errno.ETIMEDOUT,
                f"--target {self.url} stopped answering earlier ({self.janitor.hung}); "
                "nothing more is tried on it",
            )

    @property
    def is_local(self) -> bool:
        return self.fs_spec.is_local

    def _facts(self) -> FsFacts:
        if self.is_local:
            if not os.path.exists(self.root):
                raise TargetError(f"--target {self.url}: no such directory")
            if not os.path.isdir(self.root):
                raise TargetError(f"--target {self.url}: is a file, not a directory")
            return local_fs_facts(self.root)
        return FsFacts(self.fs_spec.protocol, self.root, None, None)

    def check_writable(self) -> None:
        """Refuse a read-only or unwritable target as such (before the room is judged: a
        read-only mount reports no free blocks, which is not the same as being full)."""
        if not self.is_local:
            return
        if self.facts.read_only:
            raise TargetError(
                f"--target {self.url}: read-only ({self.facts.fs_type} at "
                f"{self.facts.mount_point} is mounted read-only)"
            )
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise TargetError(f"--target {self.url}: not writable by this user")

    def check_room(self, needed_bytes: int, what: str) -> None:
        """Refuse the run before it starts when the target lacks the room it needs."""
        free = self.facts.free_bytes
        if free is not None and free < needed_bytes:
            raise TargetError(
                f"--target {self.url}: {free / 1e9:.3g} GB free, this run needs "
                f"{needed_bytes / 1e9:.3g} GB ({what}); shrink it with --set run.shard_bytes_cap"
            )

    def create_run_dir(self, *, run_id: int | None = None, nodes: int = 1) -> str:
        """Make the session's new run directory and node 0's manifest part in it; refuse a
        read-only or unwritable target. ``run_id`` and ``nodes`` go into the manifest."""
        path = f"{self.root}/{run_dir_name()}" if self.root != "/" else f"/{run_dir_name()}"
        made = False
        try:
            if self.is_local:
                os.mkdir(path)  # fails if it exists: the directory is ours alone
                made = True
                probe = Path(path, ".ckptgate-probe")
                with open(probe, "wb") as handle:
                    handle.write(b"ckptgate")
                probe.unlink()
            else:
                self.fs.makedirs(path, exist_ok=False)
        except OSError as error:
            reason = {
                errno.EROFS: "read-only",
                errno.EACCES: "not writable",
                errno.ENOSPC: "full",
                errno.EDQUOT: "over quota",
            }.get(error.errno, error.strerror)
            if made and not os.listdir(path):
                os.rmdir(path)  # ours, made a moment ago, and empty
            raise TargetError(f"--target {self.url}: {reason} ({error.strerror})") from None
        self.run_dir = path
        self._dirs.append(path)
        self._open_manifest(0, run_id, nodes)
        if self.manifest is not None:
            self.manifest.add_dirs([path])
        return path

    def _open_manifest(self, node: int, run_id: int | None, nodes: int) -> None:
        """Start this node's manifest part (``ckptgate.storage.manifest``)."""
        assert self.run_dir is not None
        store = None if self.is_local else self.fs.pipe_file
        try:
            self.manifest = ManifestWriter(
                self.run_dir, node, nodes=nodes, run_id=run_id, store=store
            )
        except OSError as error:
            raise TargetError(
                f"--target {self.url}: cannot write the run's manifest in {self.run_dir} "
                f"({error.strerror})"
            ) from None
        self._meta_files.append(self.manifest.path)

    @property
    def lease_words(self) -> str | None:
        """What the header says when no lease protects the target (None when one does)."""
        if self.is_local:
            return None
        return (
            f"no lease protects the target: {self.fs_spec.protocol} is not a POSIX target, so "
            "this run keeps no lease and does not look for other live runs on it; run one "
            "ckptgate at a time on this prefix"
        )

    def start_lease(self, *, period_s: float = LEASE_PERIOD_S) -> None:
        """Keep this node's lease fresh in the run directory (local targets) until
        ``cleanup`` or ``keep``: other runs on the target see this one is live."""
        if self.run_dir is None or self.manifest is None or not self.is_local:
            return
        lease = LeaseKeeper(
            self.run_dir, self.manifest.node, run_id=self.manifest.header["run_id"],
            period_s=period_s,
        )  # fmt: skip
        path = lease_path(self.run_dir, self.manifest.node)
        self.manifest.add_files([path, f"{path}.tmp"], kind="meta")
        self._meta_files.extend([lease.tmp_path, path])
        lease.start()
        self.lease = lease

    def keep(self) -> None:
        """``--keep``: stop the lease and end the manifest saying the files stay for
        ``ckptgate verify``."""
        if self.lease is not None:
            self.lease.stop(ended=True)
            self.lease = None
        if self.manifest is not None:
            self.manifest.ended(kept=True)
            self.manifest.close()

    def share(self) -> None:
        """Several nodes will write here; this node (node 0) removes the directories last."""
        self.shared = True

    def adopt_run_dir(
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
        """Node 0 made the run directory and removes it last; this node only its own parts."""
        if node is not None:
            self._open_manifest(node, run_id, max(nodes, node + 1))

    def path(self, *parts: str) -> str:
        """A path inside the run directory."""
        if self.run_dir is None:
            raise RuntimeError("the run directory is not created yet")
        return "/".join([self.run_dir, *parts])

    def new_dir(self, *parts: str) -> str:
        """Make a new directory inside the run directory and register it for removal."""
        path = self.path(*parts)
        self._check_not_hung()
        if not self.shared and self.janitor.one("exists", path):
            raise FileExistsError(f"{path} exists already: this run does not adopt directories")
        self._dirs.append(path)  # before it exists: an interrupt in between leaves no orphan
        if self.manifest is not None:
            self.manifest.add_dirs([path])
        # Shared, another node may have made it a moment ago.
        self.janitor.one("makedirs", path, exist_ok=True)
        return path

    def new_local_dir(self, *parts: str) -> str:
        """Like ``new_dir``, for tools that need a POSIX path (PyTorch DCP)."""
        if not self.is_local:
            protocol = self.fs_spec.protocol
            raise TargetError(f"--target {self.url}: needs a POSIX path, not {protocol}")
        return self.new_dir(*parts)

    def register(
        self,
        paths: list[str] | tuple[str, ...],
        stamps: Sequence[FileStamp | None] | None = None,
        sizes: Sequence[int | None] | None = None,
    ) -> None:
        """Record files that the run is about to create, before any rank creates them.

        Only paths inside the run directory: the run writes nowhere else. ``stamps[i]`` is
        what recomputes ``paths[i]``'s bytes (None for a file the suite does not stamp) and
        ``sizes[i]`` its size in bytes (None where not known yet: ``record_sizes`` later);
        both go into the manifest, fsynced before this returns.
        """
        inside = f"{self.run_dir}/" if self.run_dir else None
        outside = [p for p in paths if inside is None or not p.startswith(inside)]
        if outside:
            raise ValueError(f"refusing to write {outside[0]}: outside the run directory")
        for name, given in (("stamps", stamps), ("sizes", sizes)):
            if given is not None and len(given) != len(paths):
                raise ValueError(f"{len(given)} {name} for {len(paths)} paths")
        if self.manifest is not None:
            self.manifest.add_files(list(paths), stamps, sizes)
        self._files.extend(paths)

    def register_shards(self, shards: Sequence[StampedFile]) -> None:
        """``register`` for stamped files that know their writer (``ShardFile``): each with
        its stamp (run id, global rank, transfer size, stamp offset) and its size."""
        self.register(
            [s.path for s in shards],
            stamps=[
                FileStamp(s.run_id, s.global_rank, s.transfer_bytes, s.stamp_offset) for s in shards
            ],
            sizes=[s.bytes for s in shards],
        )

    def record_sizes(self, paths: list[str] | tuple[str, ...]) -> None:
        """Record in the manifest the sizes of registered files the run has finished, whose
        size was not known at registration (the storm's ``.metadata``)."""
        registered = set(self._files)
        unknown = [p for p in paths if p not in registered]
        if unknown:
            raise ValueError(f"{unknown[0]}: this run did not register it")
        if self.manifest is not None:
            self.manifest.add_sizes(list(paths), [self.fs.size(p) for p in paths])

    def claim_tree(self, directory: str) -> int:
        """Register what a third-party writer (PyTorch DCP) made inside a directory of ours.

        Such a writer names its own files, so they cannot be registered before they exist;
        ``directory`` must be one this run made, so everything below it is the run's.
        """
        if directory not in self._dirs:
            raise ValueError(f"refusing to claim {directory}: this run did not make it")
        claimed = 0
        for root, dirs, files in self.fs.walk(directory, detail=True):
            new_dirs = [f"{root}/{name}" for name in dirs]
            new_files = [f"{root}/{name}" for name in files]
            if self.manifest is not None:
                # not stamped by the suite: listed with their sizes, which verify checks
                self.manifest.add_dirs(new_dirs)
                sizes = [int(files[name].get("size") or 0) for name in files]
                self.manifest.add_files(new_files, sizes=sizes)
            self._dirs.extend(new_dirs)
            self._files.extend(new_files)
            claimed += len(files)
        return claimed

    def remove_files(self, paths: list[str] | tuple[str, ...]) -> int:
        """Remove registered files that exist; returns how many were removed.

        A path that does not exist stays registered: a rank still running may yet create it,
        and the final cleanup, after the ranks have stopped, tries again. Each removal is
        bounded (``ckptgate.storage.janitor``); when one hangs, it and the rest are moved to
        ``left_behind`` and not tried again.
        """
        removed = self._remove(paths)
        if self.manifest is not None:
            self.manifest.removed(sorted(removed))
        return len(removed)

    def _remove(self, paths: list[str] | tuple[str, ...]) -> set[str]:
        registered = set(self._files)
        for path in paths:
            if path not in registered:
                raise ValueError(f"refusing to remove {path}: this run did not register it")
        outcome = self.janitor.call("rm_file", list(paths))
        removed = set(outcome.done)
        abandoned = set(outcome.left)
        self.left_behind.extend(p for p in outcome.left if p not in self.left_behind)
        self._files = [p for p in self._files if p not in removed and p not in abandoned]
        if outcome.errors:
            raise next(iter(outcome.errors.values()))
        return removed

    def forget_removed(self, paths: list[str] | tuple[str, ...]) -> list[str]:
        """Drop from the registry files the run's own workload deleted (a delete storm);
        returns those of ``paths`` still there (they stay registered)."""
        if hasattr(self.fs, "invalidate_cache"):
            self.fs.invalidate_cache()  # s3fs lists from a cache: ask the store itself
        gone = {p for p in paths if not self.fs.exists(p)}
        if self.manifest is not None:
            self.manifest.removed(sorted(gone & set(self._files)))
        self._files = [p for p in self._files if p not in gone]
        return [p for p in paths if p not in gone]

    def cleanup(self, files: bool = True, directories: bool = True) -> CleanupReport:
        """Remove exactly what the run created: registered files, then its own directories.

        Many nodes remove their own files first and node 0 the directories after a barrier.
        The lease stops and, once every registered file is gone, the manifest part and the
        lease go too (a file that could not be removed raises, and the manifest stays for
        ``ckptgate clean``).
        """
        report = CleanupReport()
        if files:
            if self.lease is not None:
                self.lease.stop()
                self.lease = None
            report.removed_files = len(self._remove(list(dict.fromkeys(self._files))))
            if not self.left_behind:
                self._remove_meta()  # the manifest stays while anything it lists stays
        if directories:
            ordered = sorted(set(self._dirs), key=lambda d: d.count("/"), reverse=True)
            outcome = self.janitor.call("rmdir", ordered)
            report.removed_dirs = len(outcome.done)
            report.left = [d for d in ordered if d in outcome.errors]
            self.left_behind.extend(d for d in outcome.left if d not in self.left_behind)
            self._dirs = [d for d in self._dirs if d in report.left]
        report.unremovable = list(self.left_behind)
        report.hung = self.hung
        return report

    def close(self) -> None:
        """Stop the helper process of the bounded calls (bounded)."""
        self.janitor.close()

    def _remove_meta(self) -> None:
        """The manifest part and the lease, last of this node's files (bounded calls)."""
        if self.manifest is not None:
            self.manifest.close()
            self.manifest = None
        if self._meta_files:
            outcome = self.janitor.call("rm_file", list(self._meta_files))
            self.left_behind.extend(p for p in outcome.left if p not in self.left_behind)
        self._meta_files = []
