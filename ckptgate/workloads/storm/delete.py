"""The storm's delete phase: every file of an older checkpoint removed (retention), one unlink
per file or, on an object store, in bulk delete requests."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ckptgate.engine.pool import FILES_DONE, RankContext, RankPool
from ckptgate.engine.records import (
    RankResult,
)
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm.files import FilesDetail
from ckptgate.workloads.storm.loops import NATIVE, spec_loop, unlink_files
from ckptgate.workloads.storm.phase import Phase, per_file_phase, timed_each, timed_native


@dataclass(frozen=True)
class DeleteDetail(FilesDetail):
    """A batch-delete rank: its requests and the keys per request."""

    requests: int
    keys: int


def unlink_task(ctx: RankContext, *, options: RunOptions, paths: list[str]) -> RankResult:
    """Rank task: remove ``paths`` from the common start (the retention delete storm).

    Where the backend has a bulk delete (an object store: S3 DeleteObjects through s3fs's
    ``rm``), the paths go in requests of ``batch_delete_keys`` keys, as a checkpoint manager
    deleting a retired step does, and each request is timed (``delete_batch``); elsewhere one
    unlink per file (``unlink``).
    """
    backend = options.spec.open()
    keys = backend.batch_delete_keys
    if not keys and spec_loop(options.spec) == NATIVE:  # one unlink per file, in C
        return timed_native(
            ctx,
            "unlink",
            paths,
            lambda batch, done: (unlink_files(batch, done=done, files_done_at=FILES_DONE), None),
        )[0]
    if not keys:
        return timed_each(ctx, "unlink", paths, backend.unlink)[0]
    batches = [paths[i : i + keys] for i in range(0, len(paths), keys)]
    record = timed_each(ctx, "delete_batch", batches, backend.unlink_batch)[0]
    detail = DeleteDetail(files=len(paths), requests=len(batches), keys=keys)
    return dataclasses.replace(record, detail=detail)


def run_delete_storm(
    pool: RankPool,
    spec: BackendSpec,
    paths: Sequence[str],
    timeout_s: float,
) -> Phase:
    """Unlink ``paths`` (one checkpoint's files), split over the pool's ranks, from a start.

    The caller removes the paths from the target's registry afterwards (they are gone).
    """
    if not paths:
        raise ValueError("a delete storm needs at least one file")
    return per_file_phase(pool, unlink_task, "unlink", spec, paths, timeout_s)[0]
