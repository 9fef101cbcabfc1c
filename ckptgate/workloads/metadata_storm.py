"""The metadata storm (checklist item 6): a checkpoint commit, a restore's listing, a deletion.

A framework's checkpoint is many small-to-large files in one directory plus one global
``.metadata``. PyTorch DCP's FileSystemWriter names them ``__{rank}_{index}.distcp``, writes
them from every rank, and once all ranks are done the coordinator writes ``.metadata.tmp`` and
renames it to ``.metadata``: the rename is the commit, so a reader sees a whole checkpoint or
none. This module drives the metadata side of that at full rank count (every global rank's
files, spread over this node's rank processes), in four phases, each from a common start:

- ``create``: per file create (O_CREAT|O_EXCL), a small write of stamped data, fsync, close;
- ``commit``: one rank writes ``.metadata.tmp``, fsyncs and closes it, renames it to
  ``.metadata`` and fsyncs the directory (the rename is durable only then). The file is as
  large as DCP's would be (``metadata_bytes``: ckptgate.sizing.dcp_metadata_bytes, per
  tensor and per chunk of the profile's layout): a one-line JSON listing of the files (what
  DCP's pickle records), a newline, then stamped incompressible padding up to the size
  (``read_manifest`` reads the listing back);
- ``list`` and ``stat``: what a restore does first: list the directory (one rank), then stat
  every file (split over the ranks);
- ``unlink``: the retention delete storm: every file of an older checkpoint removed (on an
  object store in bulk delete requests, S3 DeleteObjects through s3fs, each request timed).

Every operation is timed on its own (``time.perf_counter``), so each phase reports its rate
over the common span and per-operation latency percentiles (``ckptgate.engine.latency``).

I/O path: every task is one loop written against the backend's operations
(``ckptgate.storage.backend``), and the target's spec chooses the backend: POSIX on a local
target, fsspec elsewhere, or fsspec forced with ``BackendSpec(..., backend="fsspec")``. The
POSIX backend's calls are thin ``os`` calls, bound to locals in the per-file loop: measured on
tmpfs with 2 ranks, fsspec's ``open``/``info``/``rm_file`` wrap each call in several Python
layers (``LocalFileOpener``, path normalisation, a ``dict`` per ``info``) and cut the create
rate to about half of the os loop's, which sets Python, not the filesystem, as the limit (the
benchmark asks for 0.8 of fio's filecreate on tmpfs). ``StormResult.io`` names the backend.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.engine.datagen import BLOCK_BYTES, BlockStamper, DataMismatch, StampKey
from ckptgate.engine.latency import LatencySummary, summarize
from ckptgate.engine.pool import FILES_DONE, RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankDetail,
    RankResult,
    RankReturn,
    detail_as,
    merge_nodes,
    per_second,
    records_from_results,
    returned_as,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import FilePlan, shard_file_name
from ckptgate.workloads.options import RunOptions

METADATA_NAME = ".metadata"
METADATA_TMP_NAME = ".metadata.tmp"
METADATA_STAMP_RANK = 2**63 - 1
"""The stamp key's rank for the .metadata padding: no global rank's shard bytes repeat it."""
PADDING_TRANSFER_BYTES = 16 * 2**20
"""The padding is written in transfers of this size (the default run.transfer_bytes)."""
WRITE_BYTES = BLOCK_BYTES
"""The small write per file: one stamped 4 KiB block (a tiny shard, as small ranks save)."""

CREATE_OPS = ("create", "write", "fsync", "close")


def create_ops(write_bytes: int, fsync: bool) -> tuple[str, ...]:
    """The operations each file of a storm gets, in order: a pure create+close (mdtest's
    ``-C``, fio's ``filecreate``) times no write and no fsync it does not make."""
    return tuple(
        op for op in CREATE_OPS if (op != "write" or write_bytes > 0) and (op != "fsync" or fsync)
    )


COMMIT_OPS = ("write", "fsync", "close", "rename", "dirsync")


@dataclass(frozen=True)
class StormFile:
    """One file of the storm: which global rank writes it, its index, and its path."""

    global_rank: int
    index: int
    path: str


def storm_files(directory: str, files: int, files_per_rank: int) -> list[StormFile]:
    """The first ``files`` files of the checkpoint in global order (rank, index), one directory.

    At full count (``gpus x files_per_rank``) that is every rank's files, as DCP lays them out.
    """
    if files < 1 or files_per_rank < 1:
        raise ValueError(f"a storm needs files >= 1 and files_per_rank >= 1, got {files}")
    return [
        StormFile(
            n // files_per_rank,
            n % files_per_rank,
            _join(directory, shard_file_name(n // files_per_rank, n % files_per_rank)),
        )
        for n in range(files)
    ]


def planned_storm_files(directory: str, plan: FilePlan) -> list[StormFile]:
    """A file plan's shard files as storm files in ``directory`` (a replayed tree's relative
    paths and ranks; ``.metadata`` is the commit's)."""
    return [StormFile(f.global_rank, f.index, _join(directory, f.name)) for f in plan.files]


def metadata_paths(directory: str) -> tuple[str, str]:
    """The commit's two paths: ``.metadata.tmp`` (written) and ``.metadata`` (renamed to)."""
    return _join(directory, METADATA_TMP_NAME), _join(directory, METADATA_NAME)


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """``items`` in ``parts`` contiguous chunks whose sizes differ by at most one."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for part in range(parts):
        end = start + size + (1 if part < extra else 0)
        chunks.append(list(items[start:end]))
        start = end
    return chunks


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def _payloads(files: Sequence[StormFile], run_id: int, write_bytes: int) -> list[bytes]:
    """Each file's stamped bytes, made before the start so the timed loop only does I/O."""
    if write_bytes == 0:
        return [b""] * len(files)
    stampers: dict[int, BlockStamper] = {}
    payloads = []
    for file in files:
        stamper = stampers.get(file.global_rank)
        if stamper is None:
            stamper = stampers[file.global_rank] = BlockStamper(
                StampKey(run_id, file.global_rank), write_bytes
            )
        payloads.append(bytes(stamper.fill(file.index * stamper.step_bytes, write_bytes)))
    return payloads


# --- rank tasks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilesDetail(RankDetail):
    """A metadata rank's files (or listings) done."""

    files: int


@dataclass(frozen=True)
class CreateDetail(FilesDetail):
    """A create-storm rank: whether an fsync made anything durable, and the backend used."""

    fsynced: bool
    io: str


@dataclass(frozen=True)
class CommitDetail(FilesDetail):
    """The coordinator's commit: the backend used and the ``.metadata`` bytes written."""

    io: str
    metadata_bytes: int


@dataclass(frozen=True)
class Listed(RankReturn):
    """A listing's names, sorted."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Statted(RankReturn):
    """Each statted path's size, in the chunk's order."""

    sizes_bytes: np.ndarray


@dataclass(frozen=True)
class DeleteDetail(FilesDetail):
    """A batch-delete rank: its requests and the keys per request."""

    requests: int
    keys: int


def create_task(
    ctx: RankContext,
    *,
    options: RunOptions,
    files: list[StormFile],
    run_id: int,
    write_bytes: int = WRITE_BYTES,
) -> RankResult:
    """Rank task: create, write, fsync (``options.fsync``) and close each of ``files`` from
    the common start."""
    fsync = options.fsync
    backend = options.spec.open()
    payloads = _payloads(files, run_id, write_bytes)
    paths = [f.path for f in files]
    ops = create_ops(write_bytes, fsync)
    clock = time.perf_counter
    # One clock read after each operation into a list made beforehand (a store into a numpy
    # array costs more); an operation's latency runs from the stamp before it, so a file's
    # create also holds the loop's own step since the previous close (a store, tens of ns).
    stamps = [0.0] * (len(ops) * len(paths) + 1)
    durable = False
    write = write_bytes > 0
    # Bound to locals: the loop runs thousands of times per rank, and an attribute lookup per
    # call shows in the create rate (the POSIX backend's close is os.close itself).
    create, write_all, sync, close = backend.create, backend.write_all, backend.fsync, backend.close
    # Progress once per file, before its first call: the count of files done (one store, see
    # RankContext.files_done), from which a hang is named by its file (the chunk's next one;
    # the label names the chunk); an error names its own file.
    done = ctx.files_done()
    phases = PhaseMarks.start(ctx)
    ctx.progress(phase=", ".join(ops), path=paths[0] if paths else "")
    stamps[0] = clock()
    k = 0
    for n, (path, payload) in enumerate(zip(paths, payloads, strict=True)):
        done[FILES_DONE] = n
        try:  # free unless it raises (Python 3.11): then the error names its file
            handle = create(path)  # exclusive: a storm never overwrites a file
            k += 1
            stamps[k] = clock()
            if write:
                write_all(handle, payload)
                k += 1
                stamps[k] = clock()
            if fsync:
                durable = sync(handle) or durable
                k += 1
                stamps[k] = clock()
            close(handle)
        except OSError as error:
            if error.filename:
                raise
            raise OSError(error.errno, error.strerror, path) from error
        k += 1
        stamps[k] = clock()
    ctx.progress(files=len(paths), phase="done")
    phases.mark("create")
    latencies = np.diff(np.asarray(stamps, dtype=np.float64)).reshape(len(paths), len(ops))
    return phases.result(
        files[0].global_rank if files else -1,
        write_bytes * len(paths),
        detail=CreateDetail(files=len(paths), fsynced=durable, io=backend.name),
        latencies_s={op: latencies[:, i] for i, op in enumerate(ops)},
    )


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


def list_task(ctx: RankContext, *, options: RunOptions, directory: str) -> RankResult:
    """Rank task: list ``directory`` once, as a restore's coordinator does; returns the names."""
    backend = options.spec.open()
    phases = PhaseMarks.start(ctx)
    ctx.progress(phase="list", path=directory)
    t0 = time.perf_counter()
    names = backend.listdir(directory)
    t1 = time.perf_counter()
    phases.mark("list")
    return phases.result(
        0,
        0,
        detail=FilesDetail(files=1),
        latencies_s={"list": np.asarray([t1 - t0])},
        returned=Listed(tuple(sorted(names))),
    )


def _timed_each(
    ctx: RankContext, op: str, paths: Sequence[Any], call: Callable[[Any], Any]
) -> tuple[RankResult, list[Any]]:
    """Apply ``call`` to each path from the common start, reading the clock after each call.

    Returns the rank's result (one mark, every call's latency) and the calls' results. The loop
    does nothing else, so each latency is the operation's own, plus one clock read: the stamps
    go into a list made beforehand (a store into a numpy array costs more), and progress is
    the count of files done, one store per file, as in ``create_task`` (a hang is named by the
    chunk's next file: the label names the chunk; an error names its own file).
    """
    clock = time.perf_counter
    stamps = [0.0] * (len(paths) + 1)
    results: list[Any] = [None] * len(paths)
    progress = ctx.progress
    done = ctx.files_done()
    phases = PhaseMarks.start(ctx)
    first = paths[0] if paths else ""
    progress(phase=op, path=first if isinstance(first, str) else first[0])  # a batch: its key
    stamps[0] = clock()
    for n, path in enumerate(paths):
        done[FILES_DONE] = n
        try:  # free unless it raises (Python 3.11): then the error names its file
            results[n] = call(path)
        except OSError as error:
            if error.filename:
                raise
            named = path if isinstance(path, str) else path[0]  # a batch: its first key
            raise OSError(error.errno, error.strerror, named) from error
        stamps[n + 1] = clock()
    progress(files=len(paths), phase="done")
    phases.mark(op)
    record = phases.result(
        -1,
        0,
        detail=FilesDetail(files=len(paths)),
        latencies_s={op: np.diff(np.asarray(stamps, dtype=np.float64))},
    )
    return record, results


def stat_task(ctx: RankContext, *, options: RunOptions, paths: list[str]) -> RankResult:
    """Rank task: stat each of ``paths`` from the common start; returns their sizes."""
    record, sizes = _timed_each(ctx, "stat", paths, options.spec.open().size)
    return dataclasses.replace(record, returned=Statted(np.asarray(sizes, dtype=np.int64)))


def unlink_task(ctx: RankContext, *, options: RunOptions, paths: list[str]) -> RankResult:
    """Rank task: remove ``paths`` from the common start (the retention delete storm).

    Where the backend has a bulk delete (an object store: S3 DeleteObjects through s3fs's
    ``rm``), the paths go in requests of ``batch_delete_keys`` keys, as a checkpoint manager
    deleting a retired step does, and each request is timed (``delete_batch``); elsewhere one
    unlink per file (``unlink``).
    """
    backend = options.spec.open()
    keys = backend.batch_delete_keys
    if not keys:
        return _timed_each(ctx, "unlink", paths, backend.unlink)[0]
    batches = [paths[i : i + keys] for i in range(0, len(paths), keys)]
    record = _timed_each(ctx, "delete_batch", batches, backend.unlink_batch)[0]
    detail = DeleteDetail(files=len(paths), requests=len(batches), keys=keys)
    return dataclasses.replace(record, detail=detail)


# --- results and drivers ----------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """One phase of the storm over every rank: its span, its rate, its per-op latencies."""

    name: str
    ops: int
    """Files handled (each file is one create+write+fsync+close, one stat, one unlink)."""
    burst: BurstResult
    raw_s: dict[str, np.ndarray]
    """Every operation's latency in seconds, by operation, over every rank."""

    @property
    def latencies(self) -> dict[str, LatencySummary]:
        return {op: summarize(values) for op, values in self.raw_s.items()}

    @property
    def span_s(self) -> float:
        """Common start to the last rank's end."""
        return self.burst.span_s

    @property
    def rate_per_s(self) -> float:
        """Files per second over the common span."""
        return per_second(self.ops, self.span_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "ops": self.ops,
            "ranks": len(self.burst.ranks),
            "span_s": self.span_s,
            "rate_per_s": self.rate_per_s,
            "latency_s": {op: s.to_json() for op, s in self.latencies.items()},
        }


def combine_phases(phases: Sequence[Phase]) -> Phase:
    """One phase from every node's part of it (the nodes started together)."""
    first = phases[0]
    burst = merge_nodes(first.burst.kind, [p.burst for p in phases])
    raw = {op: np.concatenate([p.raw_s[op] for p in phases]) for op in first.raw_s}
    return Phase(first.name, sum(p.ops for p in phases), burst, raw)


def _phase(name: str, ops: int, results: list[RankResult]) -> Phase:
    raw = {
        op: np.concatenate([np.asarray(r.latencies_s[op], dtype=np.float64) for r in results])
        for op in results[0].latencies_s
    }
    burst = BurstResult(f"metadata-{name}", tuple(records_from_results(results)))
    return Phase(name, ops, burst, raw)


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
            "span_s": self.span_s,
            "checkpoint_rate_per_s": self.checkpoint_rate_per_s,
            "create": self.create.to_json(),
            "commit": self.commit.to_json() if self.commit else None,
        }


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


def read_manifest(data: bytes) -> dict[str, Any]:
    """The listing at the head of a committed ``.metadata`` (the padding after it ignored)."""
    return json.loads(data.split(b"\n", 1)[0])


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
    used = detail_as(results[0], CreateDetail).io
    create = _phase("create", len(files), results)
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
    return StormResult(
        directory, tuple(f.path for f in files), metadata_path, used, create, committed
    )


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
    manifest = manifest_bytes(files, write_bytes)
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
    return _phase("commit", 1, results)


@dataclass(frozen=True)
class RestoreListing:
    """What a restore does first: one listing of the directory, then a stat of every file."""

    names: tuple[str, ...]
    sizes: dict[str, int]
    list: Phase
    stat: Phase

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": len(self.names),
            "list": self.list.to_json(),
            "stat": self.stat.to_json(),
        }


def run_restore_listing(
    pool: RankPool,
    spec: BackendSpec,
    directory: str,
    timeout_s: float,
    *,
    part: tuple[int, int] = (0, 1),
) -> RestoreListing:
    """List ``directory`` on one rank, then stat every entry, split over the pool's ranks.

    ``part=(index, count)``: with many nodes, this node stats only its share of the entries.
    """
    listed = run_ranks(
        pool,
        list_task,
        [{"directory": directory}],
        timeout_s,
        [f"local rank 0 (listing {directory})"],
        options=RunOptions(spec),
    )
    names = returned_as(listed[0], Listed).names
    list_phase = _phase("list", 1, listed)
    if not names:
        raise ValueError(f"restore listing: {directory} is empty")
    index, count = part
    shares = split(list(names), count)
    paths = [_join(directory, name) for name in (shares[index] if index < len(shares) else [])]
    stat_phase, chunks, results = _per_file_phase(pool, stat_task, "stat", spec, paths, timeout_s)
    sizes: dict[str, int] = {}
    for chunk, result in zip(chunks, results, strict=True):
        sizes.update(
            (p.rsplit("/", 1)[-1], int(s))
            for p, s in zip(chunk, returned_as(result, Statted).sizes_bytes, strict=True)
        )
    return RestoreListing(names, sizes, list_phase, stat_phase)


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
    return _per_file_phase(pool, unlink_task, "unlink", spec, paths, timeout_s)[0]


def _per_file_phase(
    pool: RankPool,
    task: Callable[..., RankResult],
    op: str,
    spec: BackendSpec,
    paths: Sequence[str],
    timeout_s: float,
) -> tuple[Phase, list[list[str]], list[RankResult]]:
    """Run a per-file task (stat, unlink) over ``paths`` split across the pool's ranks.

    Returns the phase, and each rank's chunk with its result (for what the task returned).
    """
    chunks, results = _split_run(
        pool,
        task,
        paths,
        "paths",
        lambda c: f"{op} of {len(c)} files",
        timeout_s,
        options=RunOptions(spec),
        phase=f"{op} storm",
    )
    return _phase(op, len(paths), results), chunks, results


def _split_run(
    pool: RankPool,
    task: Callable[..., RankResult],
    items: Sequence[Any],
    key: str,
    words: Callable[[list[Any]], str],
    timeout_s: float,
    *,
    options: RunOptions,
    phase: str,
    each: dict[str, Any] | None = None,
) -> tuple[list[list[Any]], list[RankResult]]:
    """Run ``task`` with ``items`` split over the pool's ranks (each rank's chunk as ``key``,
    beside the keyword arguments ``each`` every rank gets), each rank labelled
    ``local rank i (words(chunk))``; returns the chunks and the results."""
    chunks = split(list(items), pool.ranks)
    results = run_ranks(
        pool,
        task,
        [{**(each or {}), key: c} for c in chunks],
        timeout_s,
        [f"local rank {i} ({words(c)})" for i, c in enumerate(chunks)],
        options=options,
        expect=Expected(phase, rank_files=tuple(len(c) for c in chunks)),
    )
    return chunks, results


def verify_task(
    ctx: RankContext, *, options: RunOptions, files: list[StormFile], run_id: int, write_bytes: int
) -> RankResult:
    """Rank task (untimed): read each storm file back and check every byte of its stamped
    block; a corruption raises ``DataMismatch`` naming the file and the offset."""
    backend = options.spec.open()
    buffer = memoryview(bytearray(write_bytes))
    array = np.frombuffer(buffer, dtype=np.uint8)
    stampers: dict[int, BlockStamper] = {}
    phases = PhaseMarks.start(ctx)
    for done, file in enumerate(files, start=1):
        ctx.progress(files=done - 1, phase="verify", path=file.path)
        stamper = stampers.get(file.global_rank)
        if stamper is None:
            stamper = stampers[file.global_rank] = BlockStamper(
                StampKey(run_id, file.global_rank), write_bytes
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
    _, results = _split_run(
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
