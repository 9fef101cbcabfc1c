"""The storm's verification (untimed): every file read back and each stamped byte checked."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ckptgate.engine.datagen import BlockStamper, DataMismatch, StampKey
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    PhaseMarks,
    RankResult,
)
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm.files import WRITE_BYTES, FilesDetail, StormFile
from ckptgate.workloads.storm.phase import split_run


def verify_task(
    ctx: RankContext, *, options: RunOptions, files: list[StormFile], run_id: int, write_bytes: int
) -> RankResult:
    """Rank task (untimed): read each storm file back and check every byte of its stamped
    block; a corruption raises ``DataMismatch`` naming the file and the offset."""
    backend = options.spec.open()
    buffer = memoryview(bytearray(write_bytes))
    array = np.frombuffer(buffer, dtype=np.uint8)
    stampers: dict[tuple[int, int], BlockStamper] = {}
    phases = PhaseMarks.start(ctx)
    for done, file in enumerate(files, start=1):
        ctx.progress(files=done - 1, phase="verify", path=file.path)
        stamper = stampers.get((file.global_rank, file.generation))
        if stamper is None:
            stamper = stampers[file.global_rank, file.generation] = BlockStamper(
                StampKey(run_id, file.global_rank, file.generation), write_bytes
            )
        opened = backend.open_read(file.path)
        try:
            got = backend.read_into(opened, buffer, 0)
        finally:
            backend.close(opened.handle)
        if got != write_bytes:
            raise DataMismatch(f"{file.path}: {got} bytes, the storm wrote {write_bytes}")
        stamper.verify(array, file.index * stamper.step_bytes, file.path)
        ctx.progress(files=done)
    phases.mark("verify")
    return phases.result(-1, write_bytes * len(files), detail=FilesDetail(files=len(files)))


def verify_storm(
    pool: RankPool,
    spec: BackendSpec,
    files: Sequence[StormFile],
    timeout_s: float,
    *,
    run_id: int,
    write_bytes: int = WRITE_BYTES,
) -> int:
    """Read back and verify every storm file (untimed, split over the ranks); the bytes
    verified. Every byte the run writes is read back at least once."""
    if not files or write_bytes == 0:
        return 0
    _, results = split_run(
        pool,
        verify_task,
        files,
        "files",
        lambda c: f"verify of {len(c)} files from {c[0].path}",
        timeout_s,
        options=RunOptions(spec),
        phase="verify storm",
        each={"run_id": run_id, "write_bytes": write_bytes},
    )
    return sum(r.bytes for r in results)
