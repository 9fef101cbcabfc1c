"""The storm's commit phase: the coordinator writes ``.metadata.tmp`` (the listing, padded to
DCP's size), fsyncs, closes, renames it to ``.metadata`` and syncs the directory."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.datagen import BlockStamper, StampKey
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    PhaseMarks,
    RankResult,
    run_ranks,
)
from ckptgate.rundir.manifest import FileStamp
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm.files import (
    METADATA_STAMP_RANK,
    PADDING_TRANSFER_BYTES,
    WRITE_BYTES,
    FilesDetail,
    StormFile,
    metadata_paths,
)
from ckptgate.workloads.storm.phase import Phase, phase_of

COMMIT_OPS = ("write", "fsync", "close", "rename", "dirsync")


@dataclass(frozen=True)
class CommitDetail(FilesDetail):
    """The coordinator's commit: the backend used and the ``.metadata`` bytes written."""

    io: str
    metadata_bytes: int


def commit_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    directory: str,
    manifest: bytes,
    metadata_bytes: int = 0,
    run_id: int = 0,
    transfer_bytes: int = PADDING_TRANSFER_BYTES,
) -> RankResult:
    """Rank task: write ``.metadata.tmp`` (the manifest, padded to ``metadata_bytes`` when that
    is larger), fsync, close, rename to ``.metadata``, sync the directory."""
    backend = options.spec.open()
    tmp_path, final_path = metadata_paths(directory)
    padding = max(metadata_bytes - len(manifest), 0)
    stamper = (
        BlockStamper(StampKey(run_id, METADATA_STAMP_RANK), transfer_bytes) if padding else None
    )
    clock = time.perf_counter
    progress = ctx.progress
    phases = PhaseMarks.start(ctx)
    progress(phase="create", path=tmp_path)
    t0 = clock()
    handle = backend.create(tmp_path)  # exclusive: someone else's .metadata.tmp fails the commit
    try:
        progress(phase="write")
        backend.write_all(handle, manifest)
        written = len(manifest)
        if stamper is not None:
            step = stamper.step_bytes
            for offset in range(0, padding, step):
                backend.write_all(handle, stamper.fill(offset, min(step, padding - offset)))
                written = len(manifest) + min(offset + step, padding)
                progress(bytes=written)
        t1 = clock()
        progress(phase="fsync")
        backend.fsync(handle)
        t2 = clock()
        progress(phase="close")
    finally:
        backend.close(handle)
    t3 = clock()
    progress(phase="rename", path=final_path)
    backend.rename(tmp_path, final_path)
    t4 = clock()
    # The rename is durable once the directory entry is: sync the directory (where it has one).
    progress(phase="fsync directory", path=directory)
    backend.fsync_dir(directory)
    t5 = clock()
    progress(files=1, phase="done")
    phases.mark("commit")
    stamps = (t0, t1, t2, t3, t4, t5)
    return phases.result(
        0,
        written,
        detail=CommitDetail(files=1, io=backend.name, metadata_bytes=written),
        latencies_s={
            op: np.asarray([stamps[i + 1] - stamps[i]]) for i, op in enumerate(COMMIT_OPS)
        },
    )


def manifest_bytes(files: Sequence[StormFile], write_bytes: int) -> bytes:
    """The global ``.metadata``'s listing: which rank's file holds what (DCP pickles the same
    facts), one line of JSON ended by a newline; the commit pads it to DCP's size."""
    entries = [
        {
            "file": f.path.rsplit("/", 1)[-1],
            "rank": f.global_rank,
            "index": f.index,
            "bytes": write_bytes,
        }
        for f in files
    ]
    return json.dumps({"version": 1, "files": entries}, separators=(",", ":")).encode() + b"\n"


def commit_content(
    files: Sequence[StormFile],
    *,
    write_bytes: int = WRITE_BYTES,
    metadata_bytes: int = 0,
    run_id: int = 0,
    transfer_bytes: int = PADDING_TRANSFER_BYTES,
) -> tuple[bytes, FileStamp | None]:
    """What the commit writes into ``.metadata``: the listing, then (where ``metadata_bytes``
    is larger) stamped padding from stamp offset 0 of (run id, ``METADATA_STAMP_RANK``), as
    ``commit_task`` writes it; the manifest's content line, so ``ckptgate verify`` checks
    every byte of the commit."""
    head = manifest_bytes(files, write_bytes)
    if metadata_bytes <= len(head):
        return head, None
    return head, FileStamp(run_id, METADATA_STAMP_RANK, transfer_bytes, 0)


def read_manifest(data: bytes) -> dict[str, Any]:
    """The listing at the head of a committed ``.metadata`` (the padding after it ignored)."""
    return json.loads(data.split(b"\n", 1)[0])


def run_commit(
    pool: RankPool,
    spec: BackendSpec,
    directory: str,
    files: Sequence[StormFile],
    timeout_s: float,
    *,
    write_bytes: int = WRITE_BYTES,
    metadata_bytes: int = 0,
    run_id: int = 0,
    transfer_bytes: int = PADDING_TRANSFER_BYTES,
) -> Phase:
    """The coordinator's commit once every rank's files are closed: ``.metadata.tmp`` written
    (the listing, padded with stamped bytes to ``metadata_bytes``: DCP's size for the
    profile), fsynced, closed, renamed to ``.metadata``, directory synced (one rank)."""
    manifest, _ = commit_content(
        files, write_bytes=write_bytes, metadata_bytes=metadata_bytes, run_id=run_id,
        transfer_bytes=transfer_bytes,
    )  # fmt: skip
    task = {
        "directory": directory,
        "manifest": manifest,
        "metadata_bytes": metadata_bytes,
        "run_id": run_id,
        "transfer_bytes": transfer_bytes,
    }
    results = run_ranks(
        pool,
        commit_task,
        [task],
        timeout_s,
        [f"local rank 0 (commit of {directory})"],
        options=RunOptions(spec),
    )
    return phase_of("commit", 1, results)
