"""The storm's create phase, and the save it begins: every shard file created, written, fsynced
and closed from a common start (``create_task``), then the commit (``run_metadata_storm``)."""

from __future__ import annotations

import time
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.datagen import BlockStamper, StampKey
from ckptgate.engine.pool import FILES_DONE, RankContext, RankPool
from ckptgate.engine.records import (
    PhaseMarks,
    RankResult,
    detail_as,
    per_second,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.operations import Backend
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm.commit import run_commit
from ckptgate.workloads.storm.files import (
    WRITE_BYTES,
    FilesDetail,
    StormFile,
    metadata_paths,
    split,
)
from ckptgate.workloads.storm.loops import NATIVE, PathBatch, create_files, spec_loop
from ckptgate.workloads.storm.phase import Phase, phase_of

CREATE_OPS = ("create", "write", "fsync", "close")


@dataclass(frozen=True)
class CreateDetail(FilesDetail):
    """A create-storm rank: whether an fsync made anything durable, and the backend used."""

    fsynced: bool
    io: str
    loop: str
    """The storm loop that ran (``native`` or ``python``: ckptgate.workloads.storm.loops)."""


def create_ops(write_bytes: int, fsync: bool) -> tuple[str, ...]:
    """The operations each file of a storm gets, in order: a pure create+close (mdtest's
    ``-C``, fio's ``filecreate``) times no write and no fsync it does not make."""
    return tuple(
        op for op in CREATE_OPS if (op != "write" or write_bytes > 0) and (op != "fsync" or fsync)
    )


def _payloads(files: Sequence[StormFile], run_id: int, write_bytes: int) -> list[bytes]:
    """Each file's stamped bytes, made before the start so the timed loop only does I/O."""
    if write_bytes == 0:
        return [b""] * len(files)
    stampers: dict[tuple[int, int], BlockStamper] = {}
    payloads = []
    for file in files:
        stamper = stampers.get((file.global_rank, file.generation))
        if stamper is None:
            stamper = stampers[file.global_rank, file.generation] = BlockStamper(
                StampKey(run_id, file.global_rank, file.generation), write_bytes
            )
        payloads.append(bytes(stamper.fill(file.index * stamper.step_bytes, write_bytes)))
    return payloads


def create_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    files: list[StormFile],
    run_id: int,
    write_bytes: int = WRITE_BYTES,
) -> RankResult:
    """Rank task: create, write, fsync (``options.fsync``) and close each of ``files`` from
    the common start, in the spec's storm loop (``ckptgate.workloads.storm.loops``: C or Python)."""
    fsync = options.fsync
    backend = options.spec.open()
    loop = spec_loop(options.spec)
    payloads = _payloads(files, run_id, write_bytes)
    paths = [f.path for f in files]
    ops = create_ops(write_bytes, fsync)
    batch = PathBatch.of(paths) if loop == NATIVE else None
    # Progress once per file, before its first call: the count of files done (one store, see
    # RankContext.files_done), from which a hang is named by its file (the chunk's next one;
    # the label names the chunk); an error names its own file.
    done = ctx.files_done()
    phases = PhaseMarks.start(ctx)
    ctx.progress(phase=", ".join(ops), path=paths[0] if paths else "")
    if batch is not None:
        stamps = create_files(
            batch, payloads, fsync=fsync, ops=len(ops), done=done, files_done_at=FILES_DONE
        )
        durable = fsync and bool(paths)  # the POSIX backend's fsync: durable once it returns
    else:
        stamps, durable = _python_create(backend, paths, payloads, fsync, done)
    ctx.progress(files=len(paths), phase="done")
    phases.mark("create")
    latencies = np.diff(stamps).reshape(len(paths), len(ops))
    detail = CreateDetail(files=len(paths), fsynced=durable, io=backend.name, loop=loop)
    return phases.result(
        files[0].global_rank if files else -1,
        write_bytes * len(paths),
        detail=detail,
        latencies_s={op: latencies[:, i] for i, op in enumerate(ops)},
    )


def _python_create(
    backend: Backend[Any],
    paths: list[str],
    payloads: list[bytes],
    fsync: bool,
    done: MutableSequence[float],
) -> tuple[np.ndarray, bool]:
    """The create loop in Python (any backend): the clock stamps (one before the first call,
    one after each operation) and whether an fsync made anything durable."""
    clock = time.perf_counter
    # One clock read after each operation, appended to a list (no index to keep per call; a
    # store into a numpy array costs more); an operation's latency runs from the stamp before
    # it, so a file's create also holds the loop's own step since the previous close (a
    # store, tens of ns).
    stamps: list[float] = []
    stamp = stamps.append
    durable = False
    write = bool(payloads) and len(payloads[0]) > 0
    # Bound to locals: the loop runs thousands of times per rank, and an attribute lookup per
    # call shows in the create rate (the POSIX backend's close is os.close itself).
    create, write_all, sync, close = backend.create, backend.write_all, backend.fsync, backend.close
    stamp(clock())
    for n, path in enumerate(paths):
        done[FILES_DONE] = n
        try:  # free unless it raises (Python 3.11): then the error names its file
            handle = create(path)  # exclusive: a storm never overwrites a file
            stamp(clock())
            if write:
                write_all(handle, payloads[n])
                stamp(clock())
            if fsync:
                durable = sync(handle) or durable
                stamp(clock())
            close(handle)
        except OSError as error:
            if error.filename:
                raise
            raise OSError(error.errno, error.strerror, path) from error
        stamp(clock())
    return np.asarray(stamps, dtype=np.float64), durable


@dataclass(frozen=True)
class StormResult:
    """A checkpoint's metadata storm: the per-file create phase and the commit."""

    directory: str
    files: tuple[str, ...]
    """The shard files created (not ``.metadata``)."""
    metadata_path: str | None
    """``.metadata`` after the commit, or None where the storm ran without one."""
    io: str
    """The backend the storm ran on (``posix`` or ``fsspec``)."""
    loop: str
    """The per-file loop it ran (``native`` or ``python``)."""
    create: Phase
    commit: Phase | None

    @property
    def span_s(self) -> float:
        """Create phase plus commit: the time from the common start to a committed checkpoint.

        The gap between the two (the parent gathering results) is not counted: a framework's
        barrier between its ranks' writes and the coordinator's commit costs far less.
        """
        return self.create.span_s + (self.commit.span_s if self.commit else 0.0)

    @property
    def committed_files(self) -> int:
        return len(self.files) + (1 if self.commit else 0)

    @property
    def create_close_rate_per_s(self) -> float:
        """Files per second of the create phase alone (fio filecreate's figure)."""
        return self.create.rate_per_s

    @property
    def checkpoint_rate_per_s(self) -> float:
        """Files (shards and ``.metadata``) per second from the start to the commit."""
        return per_second(self.committed_files, self.span_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "files": len(self.files),
            "io": self.io,
            "loop": self.loop,
            "span_s": self.span_s,
            "checkpoint_rate_per_s": self.checkpoint_rate_per_s,
            "create": self.create.to_json(),
            "commit": self.commit.to_json() if self.commit else None,
        }


def run_metadata_storm(
    pool: RankPool,
    spec: BackendSpec,
    directory: str,
    files: Sequence[StormFile],
    timeout_s: float,
    *,
    run_id: int,
    write_bytes: int = WRITE_BYTES,
    fsync: bool = True,
    commit: bool = True,
    metadata_bytes: int = 0,
    ranks: int | None = None,
) -> StormResult:
    """Create ``files`` (spread over the pool's ranks, or its first ``ranks``) from a common
    start, then commit.

    The caller registers every path (``files``, and ``metadata_paths(directory)`` when
    committing) with the target first. ``write_bytes=0, fsync=False, commit=False`` is a pure
    create+close storm, fio's ``ioengine=filecreate``. ``metadata_bytes``: the committed
    ``.metadata``'s size (the listing padded; 0 for the listing alone).
    """
    if not files:
        raise ValueError("a metadata storm needs at least one file")
    chunks = split(list(files), ranks or pool.ranks)
    labels = [f"local rank {i} ({len(c)} files from {c[0].path})" for i, c in enumerate(chunks)]
    kwargs = [{"files": c, "run_id": run_id, "write_bytes": write_bytes} for c in chunks]
    options = RunOptions(spec, fsync=fsync)
    expect = Expected("create storm", rank_files=tuple(len(c) for c in chunks))
    results = run_ranks(
        pool, create_task, kwargs, timeout_s, labels, options=options, expect=expect
    )
    used = detail_as(results[0], CreateDetail)
    create = phase_of("create", len(files), results)
    committed = None
    if commit:
        committed = run_commit(
            pool,
            spec,
            directory,
            files,
            timeout_s,
            write_bytes=write_bytes,
            metadata_bytes=metadata_bytes,
            run_id=run_id,
        )
    metadata_path = metadata_paths(directory)[1] if commit else None
    paths = tuple(f.path for f in files)
    return StormResult(directory, paths, metadata_path, used.io, used.loop, create, committed)
