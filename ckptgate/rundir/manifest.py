"""The run's manifest: what it made, written as it goes, so a kept or dead run can be checked.

Each node of a run keeps one part, ``<run dir>/.ckptgate-manifest.node<N>.jsonl``: append-only
JSON lines, fsynced at every registration point (``Target.register``, ``new_dir``,
``claim_tree``, removals), so a run killed by ``kill -9``, the OOM killer or a power cut leaves
a manifest that lists everything it may have created. Append-only rather than
rewrite-and-rename: a registration costs one small write and one fsync however long the
manifest is, and a torn last line (death mid-append) loses only that line, which the reader
drops and reports.

The first line names the run (run id, node, node count, host, boot id, pid namespace, pid, the
pid's start time, start time, suite version); then one line per directory or file, with paths
relative to the run directory (so a kept run can be checked wherever it is mounted). A file
line carries its size where it is known and its stamp (run id, global rank, transfer size, and
the stamp offset of its first byte), which is enough to recompute every byte
(``ckptgate.engine.datagen``); files the suite does not stamp (PyTorch DCP's) carry their size
alone. Each file line names what wrote it (``Writer``: the write burst, the metadata storm,
PyTorch DCP...). A file whose content is not stamped throughout (the storm's ``.metadata``: a
listing, then stamped padding) gets a ``content`` line once written: its head, compressed, and
the stamp of the rest, so every byte of it is checked too. Removals by the run itself and the
run's end (``kept``) are lines too.
"""

from __future__ import annotations

import base64
import builtins
import datetime as dt
import enum
import json
import os
import re
import socket
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptgate.rundir.appender import ManifestSink


class Writer(enum.StrEnum):
    """What wrote a file the manifest lists (``ckptgate verify`` names it)."""

    WRITE_BURST = "write burst"
    WRITE_COMMIT = "write burst's commit (.metadata)"
    STORM = "metadata storm"
    STORM_COMMIT = "metadata storm's commit (.metadata)"
    CONTENTION = "contention round"
    DATASET = "contention readers' dataset"
    DCP = "PyTorch DCP"
    DCP_SUITE = "suite's write of DCP's shard sizes"
    SWEEP = "scaling sweep"
    BENCHMARK = "benchmark peer (fio, IOR, mdtest)"


MANIFEST_FORMAT = 2
"""2: the payload is a counter-based keystream per checkpoint (issue 53), and a stamp may name
its generation and payload; a run of format 1 wrote a reused random pool that this version does
not recompute (``ckptgate verify`` refuses it in one line, rather than call every byte bad)."""
MANIFEST_PREFIX = ".ckptgate-manifest.node"
LEASE_PREFIX = ".ckptgate-lease.node"


def manifest_name(node: int) -> str:
    """The file name of node ``node``'s manifest part inside the run directory."""
    return f"{MANIFEST_PREFIX}{node}.jsonl"


def lease_name(node: int) -> str:
    """The file name of node ``node``'s lease inside the run directory."""
    return f"{LEASE_PREFIX}{node}.json"


class ManifestError(Exception):
    """A manifest cannot be read; the message is one line naming the file."""


class ManifestDamaged(ManifestError):
    """A manifest whose bytes are not what the run wrote (a line that is not JSON before its
    last, NUL bytes where an OSD's loss left zeros), or that the storage fails to return (EIO,
    ENXIO where its only chunk died): the storage's failure, not the user's."""


@dataclass(frozen=True)
class FileStamp:
    """What recomputes a stamped file's bytes: byte ``i`` of the file is byte
    ``offset + i`` of ``BlockStamper(StampKey(run_id, global_rank, generation, payload),
    transfer_bytes)``."""

    run_id: int
    global_rank: int
    transfer_bytes: int
    offset: int = 0
    """The stamp offset of the file's first byte: 0 for a shard; ``index x 4096`` for the
    metadata storm's ``index``-th file of a rank."""
    generation: int = 0
    """``StampKey.generation``: the checkpoint's own stream (written only where not 0)."""
    payload: str = "random"
    """``StampKey.payload``: ``random``, or ``realistic-K`` (written only where not random, so
    a manifest of a random run reads as before). Plain words here: the manifest is read by
    helpers that must not import numpy (``rundir.janitor``: a helper with numpy's threads
    can take a signal meant for the job)."""

    def to_json(self) -> dict[str, int | str]:
        data: dict[str, int | str] = {
            "run_id": self.run_id,
            "global_rank": self.global_rank,
            "transfer_bytes": self.transfer_bytes,
            "offset": self.offset,
        }
        if self.generation:
            data["generation"] = self.generation
        if self.payload != "random":
            data["payload"] = self.payload
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileStamp:
        payload = str(data.get("payload", "random"))
        if payload != "random" and not re.fullmatch(r"realistic-\d+", payload):
            raise ValueError(f"stamp payload {payload!r}: allowed: random, realistic-K")
        return cls(
            int(data["run_id"]),
            int(data["global_rank"]),
            int(data["transfer_bytes"]),
            int(data.get("offset", 0)),
            int(data.get("generation", 0)),
            payload,
        )


# --- who is running ---------------------------------------------------------------------------


def boot_id() -> str | None:
    """The kernel's boot id: a pid names the same process only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def pid_namespace() -> str | None:
    """This process's pid namespace (``pid:[inode]``): pids compare only within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat`` field
    22, proc(5)); None where there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def hostname() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class ProcessId:
    """A process as another one can recognise it later: host, boot, pid namespace, pid and the
    pid's start time (a reused pid has another start time)."""

    host: str
    pid: int
    start_ticks: int | None
    boot_id: str | None
    pid_namespace: str | None

    @classmethod
    def current(cls) -> ProcessId:
        pid = os.getpid()
        return cls(hostname(), pid, process_start_ticks(pid), boot_id(), pid_namespace())

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "pid_start_ticks": self.start_ticks,
            "boot_id": self.boot_id,
            "pid_namespace": self.pid_namespace,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessId:
        ticks = data.get("pid_start_ticks")
        return cls(
            str(data.get("host", "?")),
            int(data.get("pid", -1)),
            None if ticks is None else int(ticks),
            data.get("boot_id"),
            data.get("pid_namespace"),
        )


# --- writing ---------------------------------------------------------------------------------


class ManifestWriter:
    """Appends one node's manifest lines, each batch durable before the call returns, through
    ``sink`` (``ckptgate.rundir.appender``: a bounded helper on a local path, a rewrite of the
    whole part on an object store)."""

    def __init__(
        self,
        run_dir: str,
        node: int,
        *,
        sink: ManifestSink,
        nodes: int = 1,
        run_id: int | None = None,
        now: dt.datetime | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.node = node
        self.path = f"{run_dir}/{manifest_name(node)}"
        self._sink = sink
        self._open = True
        self.process = ProcessId.current()
        started = now or dt.datetime.now(dt.UTC)
        from ckptgate import __version__

        self.header: dict[str, Any] = {
            "kind": "run",
            "format": MANIFEST_FORMAT,
            "run_id": run_id,
            "node": node,
            "nodes": nodes,
            **self.process.to_json(),
            "started_at": started.isoformat(timespec="microseconds"),
            "started_unix": started.timestamp(),
            "suite_version": __version__,
        }
        sink.create(self.path, _lines([self.header]))

    def relative(self, path: str) -> str:
        prefix = f"{self.run_dir}/"
        if path == self.run_dir:
            return "."
        if not path.startswith(prefix):
            raise ValueError(f"{path}: outside the run directory {self.run_dir}")
        return path[len(prefix) :]

    def _append(self, records: Iterable[dict[str, Any]]) -> None:
        data = _lines(records)
        if not data:
            return
        if not self._open:
            raise RuntimeError(f"{self.path}: the manifest is closed")
        self._sink.append(self.path, data)

    def add_dirs(self, paths: Sequence[str]) -> None:
        self._append({"kind": "dir", "path": self.relative(p)} for p in paths)

    def add_files(
        self,
        paths: Sequence[str],
        stamps: Sequence[FileStamp | None] | None = None,
        sizes: Sequence[int | None] | None = None,
        *,
        kind: str = "file",
        writer: Writer | None = None,
    ) -> None:
        """Record files about to be created (``kind="file"``) or the run's own bookkeeping
        (``kind="meta"``: the lease, never verified); ``writer`` says what writes them
        (``WRITERS``), for ``ckptgate verify``'s words."""
        records = []
        for i, path in enumerate(paths):
            record: dict[str, Any] = {"kind": kind, "path": self.relative(path)}
            if writer is not None:
                record["writer"] = writer
            size = sizes[i] if sizes is not None else None
            stamp = stamps[i] if stamps is not None else None
            if size is not None:
                record["bytes"] = int(size)
            if stamp is not None:
                record["stamp"] = stamp.to_json()
            records.append(record)
        self._append(records)

    def add_content(self, path: str, head: bytes, stamp: FileStamp | None, size: int) -> None:
        """Record a finished file's exact content: ``head`` (its first bytes, stored
        compressed), then, where ``stamp`` is given, stamped bytes up to ``size``: byte
        ``len(head) + i`` is stamp byte ``stamp.offset + i`` (the storm's ``.metadata``: its
        listing, then stamped padding)."""
        record: dict[str, Any] = {
            "kind": "content",
            "path": self.relative(path),
            "bytes": int(size),
            "head_bytes": len(head),
            "head_zlib": base64.b64encode(zlib.compress(head, 6)).decode("ascii"),
        }
        if stamp is not None:
            record["stamp"] = stamp.to_json()
        self._append([record])

    def removed(self, paths: Sequence[str]) -> None:
        """The run itself removed these (a retention delete, a dropped round)."""
        if paths:
            self._append([{"kind": "removed", "paths": [self.relative(p) for p in paths]}])

    def ended(self, kept: bool) -> None:
        """The run ended normally; ``kept``: its files stay for ``ckptgate verify``."""
        now = dt.datetime.now(dt.UTC)
        self._append([{"kind": "end", "kept": kept, "at": now.isoformat(timespec="seconds")}])

    def close(self) -> None:
        """Close the part (bounded; never raises: see ``BoundedAppend.close``)."""
        if self._open:
            self._open = False
            self._sink.close(self.path)


def _lines(records: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


# --- reading ---------------------------------------------------------------------------------


@dataclass
class ListedFile:
    """One file as the manifest lists it."""

    path: str
    """Relative to the run directory."""
    bytes: int | None = None
    stamp: FileStamp | None = None
    meta: bool = False
    writer: str | None = None
    """What wrote it (``WRITERS``); None in a manifest from before writers were recorded."""
    head: builtins.bytes | None = None
    """Its first bytes exactly as written (``add_content``); the stamp covers the rest."""
    """The run's bookkeeping (the lease): removed by ``clean``, never verified."""


@dataclass
class Manifest:
    """One node's manifest part, as read back."""

    path: str
    header: dict[str, Any]
    files: dict[str, ListedFile] = field(default_factory=dict)
    """Every file the part lists and the run did not remove itself, by relative path."""
    removed: set[str] = field(default_factory=set)
    dirs: list[str] = field(default_factory=list)
    end: dict[str, Any] | None = None
    torn: bool = False
    """The last line was cut short (the run died while appending it): dropped."""

    @property
    def node(self) -> int:
        return int(self.header.get("node", 0))

    @property
    def nodes(self) -> int:
        return int(self.header.get("nodes", 1))

    @property
    def process(self) -> ProcessId:
        return ProcessId.from_json(self.header)

    @property
    def started_unix(self) -> float:
        return float(self.header.get("started_unix", 0.0))


def parse_manifest(path: str, lines: Iterable[bytes]) -> Manifest:
    """A manifest part from its lines; a torn last line is dropped, any other bad line fails."""
    manifest: Manifest | None = None
    pending: list[bytes] = list(lines)
    for number, raw in enumerate(pending, start=1):
        try:
            record = json.loads(raw)
        except ValueError:  # JSONDecodeError, or UnicodeDecodeError for bytes no JSON holds
            zeros = not raw.strip(b"\x00\n")
            torn = number == len(pending) and not raw.endswith(b"\n") and not zeros
            if torn and manifest is not None:
                manifest.torn = True
                break
            why = " (NUL bytes: the storage returned zeros where the run wrote it)" if zeros else ""
            raise ManifestDamaged(f"{path}: line {number} is not JSON{why}") from None
        kind = record.get("kind") if isinstance(record, dict) else None
        if manifest is None:
            if kind != "run":
                raise ManifestError(f"{path}: not a ckptgate manifest (no run line first)")
            manifest = Manifest(path=path, header=record)
            continue
        _apply(manifest, record, path, number)
    if manifest is None:
        raise ManifestError(f"{path}: empty manifest")
    return manifest


def _inside(relative: Any) -> bool:
    """A listed path must stay inside the run directory: relative, without ``..``."""
    return (
        isinstance(relative, str)
        and bool(relative)
        and not relative.startswith("/")
        and ".." not in relative.split("/")
    )


def _apply(manifest: Manifest, record: dict[str, Any], path: str, number: int) -> None:
    kind = record.get("kind")
    listed = [record.get("path")] if "path" in record else list(record.get("paths", []))
    if not all(_inside(p) for p in listed):
        raise ManifestError(f"{path}: line {number}: a path outside the run directory")
    if kind == "dir":
        manifest.dirs.append(record["path"])
    elif kind in ("file", "meta"):
        stamp = record.get("stamp")
        try:
            read_stamp = FileStamp.from_json(stamp) if stamp else None
        except (ValueError, KeyError, TypeError) as error:
            raise ManifestDamaged(f"{path}: line {number}: {error}") from None
        manifest.files[record["path"]] = ListedFile(
            record["path"],
            record.get("bytes"),
            read_stamp,
            meta=kind == "meta",
            writer=record.get("writer"),
        )
        manifest.removed.discard(record["path"])
    elif kind == "content":
        entry = manifest.files.get(record["path"])
        if entry is not None:
            try:
                head = zlib.decompress(base64.b64decode(record["head_zlib"]))
            except (ValueError, zlib.error, KeyError):
                raise ManifestError(f"{path}: line {number}: unreadable content record") from None
            stamp = record.get("stamp")
            entry.head = head
            entry.stamp = FileStamp.from_json(stamp) if stamp else None
            entry.bytes = int(record["bytes"])
    elif kind == "size":  # written by suites before content lines
        entry = manifest.files.get(record["path"])
        if entry is not None:
            entry.bytes = int(record["bytes"])
    elif kind == "removed":
        for gone in record["paths"]:
            if manifest.files.pop(gone, None) is not None:
                manifest.removed.add(gone)
    elif kind == "end":
        manifest.end = record
    else:
        raise ManifestError(f"{path}: line {number}: unknown kind {kind!r}")


def read_manifest(path: str) -> Manifest:
    """Read one manifest part from a local path."""
    try:
        with open(path, "rb") as handle:
            return parse_manifest(path, handle.readlines())
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such manifest") from None
    except (PermissionError, IsADirectoryError) as error:  # the user's: who runs it, or where
        raise ManifestError(f"{path}: cannot read ({error.strerror})") from None
    except OSError as error:  # EIO, ENXIO, ENOTCONN: the storage did not give it back
        raise ManifestDamaged(f"{path}: cannot read ({error.strerror})") from None


def read_run_manifests(run_dir: str) -> tuple[list[Manifest], list[str]]:
    """Every node's manifest part of a run directory, by name (node 0's tells the count), and
    one line per part that is missing. Reads only the parts, never lists the directory."""
    run_dir = run_dir.rstrip("/") or "/"
    first = read_manifest(f"{run_dir}/{manifest_name(0)}")
    parts, missing = [first], []
    for node in range(1, first.nodes):
        try:
            parts.append(read_manifest(f"{run_dir}/{manifest_name(node)}"))
        except ManifestError as error:
            missing.append(str(error))
    return parts, missing
