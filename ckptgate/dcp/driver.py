"""The DCP driver: run the checkpoint steps in W local ranks, measure them, gather results.

One job: turn a ``DcpConfig`` into a ``DcpResult`` by driving real PyTorch Distributed
Checkpoint (DCP) saves and loads on a local directory of the target. The ranks are started once
(``ckptgate.dcp.ranks.DcpRanks``: the engine's rank processes on gloo over loopback, running
ckptgate.dcp.worker's steps, each returning a ``DcpStep`` per rank) and run, in order:

1. build the training-checkpoint state (ckptgate.dcp.model) as DTensors, ``Shard(0)``;
2. sync ``dcp.save`` with ``FileSystemWriter(sync_files=True, thread_count=...)``;
   measure the files: count, apparent sizes, bytes on disk (``st_blocks * 512``, what ``du``
   reports) against 12/14/16 Ψ;
3. (the acceptance test then writes the same bytes per rank through the suite's own write
   burst, so the report shows how much of the save is storage and how much is the framework);
4. ``dcp.async_save`` with each checkpointer type (thread, process): the blocking part (until
   the call returns: staging to CPU memory) and the time to completion;
5. loads, every tensor verified exactly: the async checkpoint onto the same ranks; the sync
   checkpoint resharded onto fewer ranks with ``Shard(1)`` (rows to columns: each rank reads
   byte ranges of every file); the sync checkpoint into one process (``no_dist=True``);
6. a flipped byte in a .distcp file, shown to be caught by verification, then undone.

PyTorch DCP docs: https://pytorch.org/docs/stable/distributed.checkpoint.html (at least one
file per rank plus .metadata; async_save stages to CPU memory then saves in a thread or a
process; load-time resharding).

Nothing here imports torch at module import: a config and a result can be built and read
without the ``ckptgate[torch]`` extra.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from ckptgate.dcp import worker as w
from ckptgate.dcp.ranks import STEP_TIMEOUT_S, DcpRanks
from ckptgate.dcp.records import mismatches, span_s
from ckptgate.engine.sampler import Expected, ProgressSampler
from ckptgate.sizing.dcp_plan import KNOWN_BYTES_PER_PARAMETER, dcp_save_layout

CHECKPOINTER_TYPES = ("thread", "process")

_RANK_FILE = re.compile(r"^__(\d+)_(\d+)\.distcp$")


@dataclass(frozen=True)
class DcpConfig:
    """Inputs of one DCP run.

    ``architecture``: the transformer shape (hidden, ffn_hidden, layers, heads, kv_heads, vocab).
    ``bytes_per_parameter``: K, 12, 14 or 16 (what the state holds, see ckptgate.dcp.model).
    ``checkpointer``: the async checkpointer type the acceptance test asserts on; both types
    are measured (``async_types``).
    ``target_dir``: a local (POSIX) directory, new or empty, that the run may fill; DCP's
    FileSystemWriter needs a local path.
    """

    architecture: Mapping[str, int]
    bytes_per_parameter: int
    target_dir: str
    world_size: int = 2
    thread_count: int = 2
    checkpointer: str = "thread"
    async_types: tuple[str, ...] = CHECKPOINTER_TYPES
    seed: int = 0
    step_timeout_s: float = STEP_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.bytes_per_parameter not in KNOWN_BYTES_PER_PARAMETER:
            raise ValueError(
                f"bytes_per_parameter: {self.bytes_per_parameter} is not one of"
                f" {KNOWN_BYTES_PER_PARAMETER}"
            )
        if self.world_size < 1 or self.thread_count < 1:
            raise ValueError(
                f"world_size ({self.world_size}) and thread_count ({self.thread_count})"
                " must be >= 1"
            )
        for kind in (self.checkpointer, *self.async_types):
            if kind not in CHECKPOINTER_TYPES:
                raise ValueError(f"checkpointer: {kind!r} is not one of {CHECKPOINTER_TYPES}")
        if "://" in self.target_dir:
            raise ValueError(
                f"target_dir: {self.target_dir!r} is a URL; DCP's FileSystemWriter needs a"
                " local path"
            )

    @classmethod
    def from_spec(cls, spec: Any, bytes_per_parameter: int, target_dir: str) -> DcpConfig:
        """From a profile's ``dcp`` section (architecture, world_size, thread_count,
        checkpointer) and the model's K."""
        arch = spec.architecture
        # The sizing package may hand a mapping or its own frozen dataclass.
        arch = asdict(arch) if is_dataclass(arch) and not isinstance(arch, type) else dict(arch)
        return cls(
            architecture=arch,
            bytes_per_parameter=int(bytes_per_parameter),
            target_dir=target_dir,
            world_size=int(spec.world_size),
            thread_count=int(spec.thread_count),
            checkpointer=str(spec.checkpointer),
        )


@dataclass(frozen=True)
class FileInfo:
    """One file of a checkpoint: name, apparent size and bytes on disk (st_blocks * 512)."""

    name: str
    apparent_bytes: int
    disk_bytes: int


@dataclass(frozen=True)
class AsyncTiming:
    """One async save: blocking part (call returned) and completion, from the common barrier."""

    checkpointer: str
    block_s: float
    complete_s: float
    per_rank_block_s: tuple[float, ...]
    per_rank_complete_s: tuple[float, ...]
    first_complete_s: float | None = None  # process type: the save that started the daemon


@dataclass(frozen=True)
class DcpResult:
    """What a DCP run measured. Seconds are from the common barrier to the last rank's end."""

    parameters: int
    world_size: int
    thread_count: int
    bytes_per_parameter_config: int
    save_s: float
    per_rank_save_s: tuple[float, ...]
    async_block_s: float
    async_complete_s: float
    checkpointer: str
    async_runs: tuple[AsyncTiming, ...]
    load_s: float
    reshard_load_s: float
    reshard_ranks: int
    single_process_load_s: float
    bytes_on_disk: int
    apparent_bytes: int
    metadata_bytes: int
    bytes_per_parameter: float
    matched_k: int
    overhead_bytes: int
    files: int
    file_list: tuple[FileInfo, ...]
    per_rank_bytes: tuple[int, ...]
    verified: bool
    mismatches: tuple[str, ...] = ()
    corruption_detected: bool | None = None
    corruption_detail: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The report's ``dcp`` object (plain JSON types)."""
        out = asdict(self)
        out["file_list"] = [asdict(f) for f in self.file_list]
        out["async_runs"] = {a.checkpointer: asdict(a) for a in self.async_runs}
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out


# ---------------------------------------------------------------------------------------------
# Measurement helpers


def measure_files(directory: str) -> list[FileInfo]:
    """Every file of a checkpoint directory, sorted by name, with apparent and on-disk bytes.

    ``st_blocks * 512`` is what ``du`` sums (POSIX counts st_blocks in 512-byte units).
    """
    infos = []
    for name in sorted(os.listdir(directory)):
        st = os.stat(os.path.join(directory, name))
        infos.append(FileInfo(name, st.st_size, st.st_blocks * 512))
    return infos


def per_rank_file_bytes(files: Sequence[FileInfo], world_size: int) -> list[list[int]]:
    """The sizes of the .distcp files each rank wrote (DCP names them ``__{rank}_{n}.distcp``)."""
    out: list[list[int]] = [[] for _ in range(world_size)]
    for f in files:
        match = _RANK_FILE.match(f.name)
        if match:
            out[int(match.group(1))].append(f.apparent_bytes)
    return out


def match_k(bytes_on_disk: int, parameters: int) -> int:
    """The K among 12/14/16 nearest to the measured bytes per parameter."""
    measured = bytes_on_disk / parameters
    return min(KNOWN_BYTES_PER_PARAMETER, key=lambda k: abs(measured - k))


# ---------------------------------------------------------------------------------------------
# The run


def run_dcp(
    cfg: DcpConfig,
    ranks: DcpRanks | None = None,
    check_corruption: bool = True,
    loads: bool = True,
    sampler: ProgressSampler | None = None,
) -> DcpResult:
    """Run every DCP step for ``cfg`` in ``ranks`` (started here, with ``sampler`` for the
    live progress, and closed at the end when not given) and return the measurements.
    ``loads=False`` keeps only the sync save and its measurement plus the async saves (a
    quick bytes-per-parameter check).

    The live line's totals: the sync save's each rank's bytes as DCP's planner replayed
    plans them (``sizing.dcp_plan``, within 2 % of a real save), the async saves' the sync
    save's files as measured (the same state, the same plan), a load's what each rank's read
    plan holds and then the blocks it verifies (the ranks report it:
    ``ckptgate.dcp.counting``)."""
    from ckptgate.dcp import model as m

    arch = m.architecture_from(cfg.architecture)
    parameters = m.parameter_count(arch)
    os.makedirs(cfg.target_dir, exist_ok=True)
    timings: dict[str, float] = {}
    own = ranks is None
    t_run = time.monotonic()
    pool = DcpRanks(cfg.world_size, sampler=sampler) if ranks is None else ranks
    if pool.world_size != cfg.world_size:
        raise ValueError(f"ranks has {pool.world_size} ranks, config asks {cfg.world_size}")
    timings["start_ranks_s"] = time.monotonic() - t_run
    try:
        t0 = time.monotonic()
        pool.run(
            w.step_build,
            timeout_s=cfg.step_timeout_s,
            architecture=dict(cfg.architecture),
            bytes_per_parameter=cfg.bytes_per_parameter,
            seed=cfg.seed,
        )
        timings["build_s"] = time.monotonic() - t0
        sync_dir = os.path.join(cfg.target_dir, "sync")
        planned = dcp_save_layout(
            arch, cfg.bytes_per_parameter, cfg.world_size, cfg.thread_count, "fsdp"
        )
        saved = pool.run(
            w.step_save,
            cfg.step_timeout_s,
            expect=Expected("DCP save", planned.per_rank_bytes),
            path=sync_dir,
            thread_count=cfg.thread_count,
        )
        files = measure_files(sync_dir)
        rank_bytes = tuple(sum(b) for b in per_rank_file_bytes(files, cfg.world_size))
        async_runs = [_async_save(pool, cfg, kind, rank_bytes) for kind in cfg.async_types]
        primary = next((a for a in async_runs if a.checkpointer == cfg.checkpointer), None)
        checked = _loads(pool, cfg, sync_dir, primary, check_corruption) if loads else None
        pool.run(w.step_release)
    finally:
        if own:
            pool.close()
    timings["run_s"] = time.monotonic() - t_run
    bytes_on_disk = sum(f.disk_bytes for f in files)
    k = match_k(bytes_on_disk, parameters)
    nan = float("nan")
    return DcpResult(
        parameters=parameters,
        world_size=cfg.world_size,
        thread_count=cfg.thread_count,
        bytes_per_parameter_config=cfg.bytes_per_parameter,
        save_s=span_s(saved),
        per_rank_save_s=tuple(s.total_s for s in saved),
        async_block_s=primary.block_s if primary else nan,
        async_complete_s=primary.complete_s if primary else nan,
        checkpointer=cfg.checkpointer,
        async_runs=tuple(async_runs),
        load_s=checked.load_s if checked else nan,
        reshard_load_s=checked.reshard_s if checked else nan,
        reshard_ranks=_reshard_ranks(cfg),
        single_process_load_s=checked.single_s if checked else nan,
        bytes_on_disk=bytes_on_disk,
        apparent_bytes=sum(f.apparent_bytes for f in files),
        metadata_bytes=sum(f.disk_bytes for f in files if f.name == ".metadata"),
        bytes_per_parameter=bytes_on_disk / parameters,
        matched_k=k,
        overhead_bytes=bytes_on_disk - k * parameters,
        files=len(files),
        file_list=tuple(files),
        per_rank_bytes=rank_bytes,
        verified=checked is not None and not checked.mismatches,
        mismatches=checked.mismatches if checked else (),
        corruption_detected=checked.detected if checked else None,
        corruption_detail=checked.detail if checked else "",
        timings=timings,
    )


def _async_save(
    pool: DcpRanks, cfg: DcpConfig, kind: str, rank_bytes: tuple[int, ...]
) -> AsyncTiming:
    """One ``dcp.async_save`` with checkpointer ``kind``, timed: its blocking part and its
    completion from the common barrier (``rank_bytes``: each rank's files, for the live
    line)."""
    first = None
    if kind == "process":
        # The first process-based save spawns a checkpoint process per rank (torch import,
        # process group init); a training job pays that once, so it is reported apart and
        # the steady-state save is the one measured.
        warm = pool.run(
            w.step_async_save,
            cfg.step_timeout_s,
            expect=Expected(f"DCP async save ({kind}, first)", rank_bytes),
            path=os.path.join(cfg.target_dir, "async-process-warmup"),
            thread_count=cfg.thread_count,
            checkpointer=kind,
        )
        first = span_s(warm)  # its files stay: the caller's cleanup owns the tree
    res = pool.run(
        w.step_async_save,
        cfg.step_timeout_s,
        expect=Expected(f"DCP async save ({kind})", rank_bytes),
        path=os.path.join(cfg.target_dir, f"async-{kind}"),
        thread_count=cfg.thread_count,
        checkpointer=kind,
    )
    return AsyncTiming(
        checkpointer=kind,
        block_s=span_s(res, returned=True),
        complete_s=span_s(res),
        per_rank_block_s=tuple(s.block_s for s in res),
        per_rank_complete_s=tuple(s.total_s for s in res),
        first_complete_s=first,
    )


@dataclass(frozen=True)
class _Loads:
    """The three verified loads and the corruption check."""

    load_s: float
    reshard_s: float
    single_s: float
    mismatches: tuple[str, ...]
    detected: bool | None
    detail: str


def _reshard_ranks(cfg: DcpConfig) -> int:
    """The resharded load runs on half the ranks (at least one)."""
    return max(1, cfg.world_size // 2)


def _loads(
    pool: DcpRanks,
    cfg: DcpConfig,
    sync_dir: str,
    primary: AsyncTiming | None,
    check_corruption: bool,
) -> _Loads:
    """The async checkpoint onto the same ranks and sharding (proves async wrote it all), the
    sync checkpoint resharded onto fewer ranks, and into one process; then a flipped byte."""
    from ckptgate.dcp.verify import flip_byte, restore_byte

    timeout_s = cfg.step_timeout_s
    source = os.path.join(cfg.target_dir, f"async-{cfg.checkpointer}") if primary else sync_dir
    same = pool.run(
        w.step_load, timeout_s, expect=Expected("DCP load and verify"), path=source, layout="rows"
    )
    resharded = pool.run(
        w.step_load,
        timeout_s,
        expect=Expected("DCP resharded load and verify"),
        path=sync_dir,
        layout="cols",
        ranks=_reshard_ranks(cfg),
    )
    single = pool.run(
        w.step_single_load,
        timeout_s,
        expect=Expected("DCP single-process load and verify"),
        path=sync_dir,
    )
    detected: bool | None = None
    detail = ""
    if check_corruption:
        flipped = flip_byte(sync_dir)
        try:
            res = pool.run(
                w.step_single_load,
                timeout_s,
                expect=Expected("DCP load and verify, a byte flipped"),
                path=sync_dir,
            )
        finally:
            restore_byte(flipped)
        caught = mismatches(res)
        detected = any(x.startswith(flipped.key + ":") for x in caught)
        detail = f"flipped {flipped}; verification reported {caught}"
    return _Loads(
        load_s=span_s(same),
        reshard_s=span_s(resharded),
        single_s=span_s(single),
        mismatches=tuple(mismatches(same) + mismatches(resharded) + mismatches(single)),
        detected=detected,
        detail=detail,
    )
