"""Other runs whose target overlaps this one's, beyond the runs beside it in the same target.

Two runs on nested targets (``X`` and ``X/sub``) or on two directories of one filesystem share
the storage's bandwidth exactly as two runs on one directory do, and ``find_runs(target)``
sees neither. They are found three ways, and each found run is judged as ``rundir.runs``
judges any other (manifest and lease: ``live``, ``dead``, ``stale``, ``ended``):

- ``contains``: a run directory in an ancestor of the target, up to the target's mount point
  (the ancestors whose device is the target's): a run whose target contains this one. The
  lease makes this work across hosts of a shared target.
- ``inside``: a run directory below the target, found by a bounded walk (``BELOW_DIRS``
  directories listed at most, ``BELOW_DEPTH`` levels, never across a mount, never into a run
  directory): a run whose target lies inside this one. Where the walk stopped at its bound
  the search says so (``OverlapSearch.notes``).
- ``same filesystem``: a live run on this host whose target is on the target's filesystem (the
  same device number, or the same statvfs filesystem id and type), found in the host registry
  (``HostRegistry``: one small file per live run in a runtime directory of this host, never on
  the target). Nested targets found there count as ``contains`` / ``inside``.

A run on another directory of the same filesystem but another host cannot be seen without
walking the whole filesystem; the registry covers one host, the walks cover nested targets on
every host.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ckptgate.rundir.manifest import Manifest, ProcessId
from ckptgate.rundir.runs import (
    RUN_DIR_PREFIX,
    RunState,
    find_runs,
    judge_part,
    judge_run,
    same_machine,
)

BELOW_DIRS = 2000
"""The most directories the walk below the target lists (a few seconds on a busy parallel
filesystem's metadata server; a target is normally a near-empty directory)."""

BELOW_DEPTH = 4
"""The deepest level below the target the walk lists."""

REGISTRY_ENV = "CKPTGATE_REGISTRY"
"""Environment variable naming the host registry's directory (tests use their own)."""


@dataclass(frozen=True)
class FsIdentity:
    """Which filesystem a path is on, as this host sees it: ``st_dev`` and statvfs
    ``f_fsid`` (statvfs(3)); with the type, since some filesystems report a zero id."""

    device: int
    fsid: int
    fs_type: str

    def same_as(self, other: FsIdentity) -> bool:
        if self.device == other.device:
            return True
        return self.fsid != 0 and self.fsid == other.fsid and self.fs_type == other.fs_type

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "fsid": self.fsid, "fs_type": self.fs_type}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FsIdentity:
        return cls(int(data["device"]), int(data["fsid"]), str(data["fs_type"]))


def fs_identity(path: str, fs_type: str) -> FsIdentity:
    """The identity of the filesystem under ``path`` (``fs_type`` from /proc/mounts)."""
    return FsIdentity(os.stat(path).st_dev, int(os.statvfs(path).f_fsid), fs_type)


def relation(theirs: str, mine: str) -> str:
    """How target ``theirs`` lies to target ``mine``: ``same target``, ``contains`` (an
    ancestor of mine), ``inside`` (below mine) or ``apart``; both real paths."""
    theirs, mine = theirs.rstrip("/") or "/", mine.rstrip("/") or "/"
    if theirs == mine:
        return "same target"
    if mine.startswith(theirs.rstrip("/") + "/"):
        return "contains"
    if theirs.startswith(mine.rstrip("/") + "/"):
        return "inside"
    return "apart"


def run_target(run: RunState) -> str:
    """The target a run directory was made in (its parent)."""
    return os.path.dirname(run.run_dir.rstrip("/")) or "/"


@dataclass
class OverlapSearch:
    """The overlapping runs found, each with its ``relation`` set, and what limited the
    search (for the report header and JSON)."""

    runs: list[RunState] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def ancestors(root: str) -> list[str]:
    """The target's ancestors on its own filesystem, nearest first, up to its mount point."""
    found: list[str] = []
    here = os.path.realpath(root)
    try:
        device = os.stat(here).st_dev
    except OSError:
        return found
    while here != "/":
        parent = os.path.dirname(here)
        try:
            if os.stat(parent).st_dev != device:
                break
        except OSError:
            break
        found.append(parent)
        here = parent
    return found


def runs_above(root: str) -> list[RunState]:
    """Runs made in an ancestor of the target on its filesystem (relation ``contains``)."""
    runs = []
    for parent in ancestors(root):
        for run in find_runs(parent):
            run.relation = "contains"
            runs.append(run)
    return runs


def runs_below(
    root: str, *, max_dirs: int = BELOW_DIRS, max_depth: int = BELOW_DEPTH
) -> tuple[list[RunState], str | None]:
    """Runs made in a directory below the target (relation ``inside``), by a bounded walk that
    lists subdirectories only, never follows a link, never crosses a mount and never enters a
    run directory; the note says where the bound stopped it (None: searched whole)."""
    top = os.path.realpath(root)
    try:
        device = os.stat(top).st_dev
    except OSError:
        return [], None
    runs: list[RunState] = []
    level = [top]
    listed = 0
    for depth in range(max_depth + 1):
        deeper: list[str] = []
        for directory in level:
            if listed >= max_dirs:
                return runs, (
                    f"searched {listed} directories below {root} for runs on targets inside it "
                    f"(the bound); deeper ones were not searched"
                )
            listed += 1
            try:
                with os.scandir(directory) as entries:
                    subdirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for path in sorted(subdirs):
                if os.path.basename(path).startswith(RUN_DIR_PREFIX):
                    if depth > 0:  # the target's own run directories are find_runs'
                        judged = judge_run(path)
                        if judged is not None:
                            judged.relation = "inside"
                            runs.append(judged)
                    continue
                with contextlib.suppress(OSError):
                    if os.stat(path, follow_symlinks=False).st_dev == device:
                        deeper.append(path)
        level = deeper
        if not level:
            return runs, None
    return runs, (
        f"searched {max_depth} levels below {root} for runs on targets inside it; deeper "
        "ones were not searched"
    )


def default_registry_dir() -> str:
    """``$CKPTGATE_REGISTRY``, else ``/run/ckptgate`` for root, else a shared folder in the
    temporary directory (mode 1777 like /tmp: every user's runs see each other's)."""
    chosen = os.environ.get(REGISTRY_ENV)
    if chosen:
        return chosen
    if os.geteuid() == 0 and os.path.isdir("/run"):
        return "/run/ckptgate"
    return os.path.join(tempfile.gettempdir(), "ckptgate-runs")


class HostRegistry:
    """This host's live runs: ``<dir>/<run dir name>.node<N>.json`` per live run's node,
    holding its manifest header (host, pid, start), its target and filesystem identity.

    Written (temporary file, then rename) once the run's lease starts, removed when the run
    ends. An entry whose process is provably gone (this host, no such process, or another one
    under its pid: a run killed by SIGKILL, a node ended by its watchdog) is the suite's own
    bookkeeping of a dead process, not a run's file: the next run removes it (``forget``),
    as a stale pid file goes; a run's files on the target stay for ``ckptgate clean``.
    """

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or default_registry_dir()
        self.path: str | None = None
        """This run's entry, once entered."""

    def enter(
        self, run_dir: str, node: int, target: str, identity: FsIdentity, header: dict[str, Any]
    ) -> None:
        """Record this run's node; a registry that cannot be written is skipped (the lease
        still protects the target itself)."""
        name = f"{os.path.basename(run_dir)}.node{node}.json"
        path = os.path.join(self.directory, name)
        record = {
            "run_dir": run_dir,
            "target": os.path.realpath(target),
            "fs": identity.to_json(),
            "header": header,
        }
        try:
            if not os.path.isdir(self.directory):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.directory)
                    os.chmod(self.directory, 0o1777)
            with open(f"{path}.tmp", "w", encoding="utf-8") as handle:
                json.dump(record, handle)
            os.replace(f"{path}.tmp", path)
        except OSError:
            return
        self.path = path

    def leave(self) -> None:
        """Remove this run's entry (idempotent)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None

    def forget(self, entry: str) -> None:
        """Remove the entry of a provably dead run's node (its file name in the registry)."""
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.directory, entry))

    def others(self, mine: str) -> list[dict[str, Any]]:
        """Every readable entry of a run other than the one whose run directory is named
        ``mine`` (its other nodes share this host's registry in a test bed)."""
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return []
        found = []
        for name in names:
            if not name.endswith(".json") or name.startswith(f"{mine}."):
                continue
            try:
                with open(os.path.join(self.directory, name), "rb") as handle:
                    record = json.loads(handle.read())
                found.append({**record, "fs": FsIdentity.from_json(record["fs"]), "entry": name})
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found


def registry_runs(
    registry: HostRegistry, run_dir: str, target: str, identity: FsIdentity
) -> list[RunState]:
    """The live runs of this host whose target overlaps this one's or shares its filesystem,
    judged by their process (an entry's process on this host is live or provably dead)."""
    here = ProcessId.current()
    mine = os.path.realpath(target)
    runs = []
    for entry in registry.others(os.path.basename(run_dir)):
        theirs = str(entry.get("target", ""))
        how = relation(theirs, mine)
        if how == "apart" and not entry["fs"].same_as(identity):
            continue
        manifest = Manifest(f"{registry.directory}/{entry['entry']}", dict(entry["header"]))
        if not same_machine(manifest.process, here):
            continue  # another host's (sharing this directory): its lease speaks for it
        part = judge_part(manifest, None, now=time.time(), here=here)
        if part.state == "dead":
            registry.forget(str(entry["entry"]))  # provably dead: it shares nothing now
        if part.state != "live":
            continue
        run = RunState(str(entry["run_dir"]), [part], [manifest])
        run.relation = "same filesystem" if how == "apart" else how
        runs.append(run)
    return runs


def overlapping_runs(
    root: str,
    run_dir: str,
    identity: FsIdentity,
    registry: HostRegistry,
    *,
    walk: bool = True,
) -> OverlapSearch:
    """The runs on targets that contain this one, lie inside it or share its filesystem on
    this host (``walk``: also the walks above and below, done by one node of a shared target).
    A run found twice (by a walk and in the registry) counts once."""
    search = OverlapSearch()
    found: dict[str, RunState] = {}
    if walk:
        for run in runs_above(root):
            found.setdefault(run.run_dir, run)
        below, note = runs_below(root)
        for run in below:
            found.setdefault(run.run_dir, run)
        if note:
            search.notes.append(note)
    for run in registry_runs(registry, run_dir, root, identity):
        found.setdefault(run.run_dir, run)
    search.runs = list(found.values())
    return search
