"""Re-verifying a kept run directory: every byte its manifest lists, and nothing else.

A lying fsync cannot be seen from the client that called it: the page cache serves what was
never persisted. A run kept with ``--keep`` can be checked after a power cut or a failover of
the storage instead: ``ckptgate verify RUN_DIR`` reads each node's manifest part (by name: the
directory is never listed), then each listed file, and recomputes every stamped byte from the
stamp (run id, global rank, transfer size; ``ckptgate.engine.datagen``); a file with a content
line (the metadata storm's ``.metadata``: a listing, then stamped padding) is checked byte for
byte against its recorded head, then its stamp. A file the suite did not write (PyTorch DCP's
own) is checked by its size alone, and the summary says how many and what wrote them. Every
problem is one line naming the file, what wrote it and, for a wrong byte, the first bad offset
(of each transfer-sized piece).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ckptgate.engine.datagen import BlockStamper, DataMismatch, StampKey
from ckptgate.rundir.manifest import (
    MANIFEST_FORMAT,
    ListedFile,
    ManifestError,
    read_run_manifests,
)

UNRECORDED = "writer not recorded"
"""A file's writer in a manifest written before writers were recorded."""

MAX_PROBLEMS_PER_FILE = 16
"""A file that is wrong throughout names its first this many bad pieces, then a count."""


@dataclass(frozen=True)
class Problem:
    """One thing that did not verify: the file (relative to the run directory), the offset
    where known, and the words."""

    path: str
    offset: int | None
    what: str
    writer: str | None = None
    """What wrote the file, as the manifest says (None: not recorded)."""

    def line(self) -> str:
        where = f"{self.path} ({self.writer})" if self.writer else self.path
        if self.offset is not None:
            where += f" at offset {self.offset}"
        return f"{where}: {self.what}"


@dataclass
class VerifyReport:
    """What ``verify_run`` found."""

    run_dir: str
    problems: list[Problem] = field(default_factory=list)
    files: int = 0
    stamped_files: int = 0
    size_only_files: int = 0
    unchecked_files: int = 0
    """Listed with neither stamp nor size: only their existence was checked."""
    verified_bytes: int = 0
    parts: int = 0
    notes: list[str] = field(default_factory=list)
    writers: dict[str, int] = field(default_factory=dict)
    """Files per writer (``rundir.manifest.Writer``; ``unrecorded`` for an older manifest)."""
    size_only_writers: dict[str, int] = field(default_factory=dict)
    """The size-only files per writer."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        verdict = "verified" if self.ok else f"FAILED: {len(self.problems)} problem(s)"
        written = ", ".join(f"{w}: {n}" for w, n in self.writers.items())
        words = [
            f"ckptgate verify {self.run_dir}: {verdict}",
            f"{self.files} files in {self.parts} manifest part(s)"
            + (f" ({written})" if written else ""),
            f"{self.stamped_files} stamped, every byte checked ({self.verified_bytes:,} B)",
        ]
        if self.size_only_files:
            by = ", ".join(f"{w}: {n}" for w, n in self.size_only_writers.items())
            words.append(
                f"{self.size_only_files} not stamped by the suite ({by}), size checked only"
            )
        if self.unchecked_files:
            words.append(f"{self.unchecked_files} with no recorded size, existence checked only")
        return "; ".join(words)


@dataclass
class _FileCheck:
    """One listed file's verification, made on its own (in a worker thread with ``jobs``) and
    added to the report in manifest order."""

    kind: str = "stamped"
    """``missing``, ``unchecked`` (no size recorded), ``size only`` or ``stamped``."""
    verified_bytes: int = 0
    problems: list[tuple[int | None, str]] = field(default_factory=list)
    """(offset or None, what) in the order found."""

    def problem(self, offset: int | None, what: str) -> None:
        self.problems.append((offset, what))


DEFAULT_JOBS = min(8, os.cpu_count() or 1)
"""Files verified at once by default: one stream reads at one stream's speed (a client's
reads of a big checkpoint want several in flight); reading releases Python's GIL, so threads
overlap the storage's latency and each other's hashing."""


def verify_run(
    run_dir: str,
    *,
    on_problem: Callable[[Problem], None] | None = None,
    jobs: int = 1,
) -> VerifyReport:
    """Check every file the manifest parts of ``run_dir`` list, ``jobs`` at a time; raise
    ``ManifestError`` where node 0's part cannot be read. ``on_problem`` hears each problem as
    it is added (in manifest order, whatever ``jobs``)."""
    if jobs < 1:
        raise ValueError(f"jobs: {jobs}: allowed: 1 or more")
    run_dir = os.path.abspath(run_dir)
    parts, missing = read_run_manifests(run_dir)
    older = sorted({int(p.header.get("format", 1)) for p in parts} - {MANIFEST_FORMAT})
    if older:
        raise ManifestError(
            f"{run_dir}: kept by a ckptgate of manifest format {older[0]}, whose payload this "
            f"version (format {MANIFEST_FORMAT}) does not recompute: verify it with the ckptgate "
            "that wrote it (its suite_version is in the manifest's first line)"
        )
    report = VerifyReport(run_dir, parts=len(parts))

    def problem(path: str, offset: int | None, what: str, writer: str | None) -> None:
        found = Problem(path, offset, what, writer)
        report.problems.append(found)
        if on_problem is not None:
            on_problem(found)

    for line in missing:
        problem(
            line.split(":", 1)[0], None, "manifest part missing (that node's files unchecked)", None
        )
    listed_files: list[ListedFile] = []
    for part in parts:
        if part.torn:
            report.notes.append(f"{part.path}: last line cut short (the run died writing it)")
        if part.end is None:
            report.notes.append(
                f"{part.path}: the run did not end normally: files it was writing when it "
                "died may be short"
            )
        listed_files.extend(listed for listed in part.files.values() if not listed.meta)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        checks: Iterable[_FileCheck] = (
            map(functools.partial(_verify_file, run_dir), listed_files)
            if jobs == 1
            else pool.map(functools.partial(_verify_file, run_dir), listed_files)
        )
        for listed, check in zip(listed_files, checks, strict=True):
            _add(report, listed, check)
            for offset, what in check.problems:
                problem(listed.path, offset, what, listed.writer)
    return report


def _add(report: VerifyReport, listed: ListedFile, check: _FileCheck) -> None:
    """One file's check into the report's counts."""
    report.files += 1
    writer = listed.writer or UNRECORDED
    report.writers[writer] = report.writers.get(writer, 0) + 1
    if check.kind == "unchecked":
        report.unchecked_files += 1
    elif check.kind == "size only":
        report.size_only_files += 1
        report.size_only_writers[writer] = report.size_only_writers.get(writer, 0) + 1
    elif check.kind == "stamped":
        report.stamped_files += 1
    report.verified_bytes += check.verified_bytes


def _verify_file(run_dir: str, listed: ListedFile) -> _FileCheck:
    path = f"{run_dir}/{listed.path}"
    check = _FileCheck()
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        check.kind = "missing"
        check.problem(None, "missing (the manifest lists it)")
        return check
    except OSError as error:
        check.kind = "missing"
        check.problem(None, f"cannot stat ({error.strerror})")
        return check
    if listed.stamp is None and listed.head is None:
        if listed.bytes is None:
            check.kind = "unchecked"
        else:
            check.kind = "size only"
            if size != listed.bytes:
                check.problem(None, f"size {size:,} B, the run wrote {listed.bytes:,} B")
        return check
    expected = listed.bytes if listed.bytes is not None else size
    if size < expected:
        check.problem(size, f"truncated: file ends at {size:,} B, wrote {expected:,} B")
    elif size > expected:
        check.problem(expected, f"longer than written: {size:,} B, wrote {expected:,} B")
    start = 0
    if listed.head is not None:
        start = _verify_head(path, listed.head, check)
        if start < 0:
            return check
    if listed.stamp is not None:
        _verify_bytes(path, listed, start, min(size, expected), check)
    return check


def _verify_head(path: str, head: bytes, check: _FileCheck) -> int:
    """Compare the file's first bytes with the recorded ``head``; return where the stamped
    rest begins (-1 where the file could not be read)."""
    try:
        with open(path, "rb") as handle:
            got = handle.read(len(head))
    except OSError as error:
        check.problem(None, f"cannot read ({error.strerror})")
        return -1
    if got == head:
        check.verified_bytes += len(head)
        return len(head)
    width = min(len(got), len(head))
    differs = np.flatnonzero(
        np.frombuffer(got[:width], np.uint8) != np.frombuffer(head[:width], np.uint8)
    )
    if differs.size:
        first = int(differs[0])
        check.problem(
            first,
            f"byte differs from what the run wrote (read 0x{got[first]:02x}, wrote "
            f"0x{head[first]:02x}; {differs.size} byte(s) of its first {len(head):,} differ)",
        )
    else:
        check.problem(len(got), "read ended early (file shrank?)")
    return len(head)


def _verify_bytes(
    path: str, listed: ListedFile, start: int, length: int, check: _FileCheck
) -> None:
    """Read ``[start, length)`` in transfer-sized pieces on the stamp grid and verify each
    (byte ``start + i`` is stamp byte ``stamp.offset + i``)."""
    stamp = listed.stamp
    assert stamp is not None
    key = StampKey(stamp.run_id, stamp.global_rank, stamp.generation, stamp.payload)
    stamper = BlockStamper(key, stamp.transfer_bytes)
    step = stamper.step_bytes
    buffer = bytearray(step)
    view = memoryview(buffer)
    array = np.frombuffer(buffer, dtype=np.uint8)
    bad = 0
    try:
        handle = open(path, "rb", buffering=0)  # noqa: SIM115 (closed in finally)
    except OSError as error:
        check.problem(None, f"cannot open ({error.strerror})")
        return
    try:
        handle.seek(start)
        position = start
        while position < length:
            # pieces end on the stamp grid (the stamp offset of the file's first byte may lie
            # off it); each is compared with its bytes generated again (``verify``)
            stamp_at = stamp.offset + position - start
            take = min(step - stamp_at % step, length - position)
            got = handle.readinto(view[:take]) or 0
            if got < take:
                check.problem(position + got, "read ended early (file shrank?)")
                return
            try:
                stamper.verify(array[:take], stamp_at, listed.path)
            except DataMismatch:
                want = stamper.expected(stamp_at, take)
                first = int(np.flatnonzero(array[:take] != want)[0])
                bad += 1
                if bad <= MAX_PROBLEMS_PER_FILE:
                    check.problem(
                        position + first,
                        f"byte differs from what global rank {stamp.global_rank} wrote "
                        f"(read 0x{int(array[first]):02x}, wrote 0x{int(want[first]):02x})",
                    )
            else:
                check.verified_bytes += take
            position += take
    except OSError as error:
        check.problem(position, f"read failed ({error.strerror})")
    finally:
        handle.close()
    if bad > MAX_PROBLEMS_PER_FILE:
        check.problem(None, f"{bad - MAX_PROBLEMS_PER_FILE} more bad pieces not named")


__all__ = ["DEFAULT_JOBS", "ManifestError", "Problem", "VerifyReport", "verify_run"]
