"""What each DCP rank process runs: a command loop and the steps it can be asked to do.

One job: the rank side of a DCP run. The ranks are the engine's rank processes
(``ckptgate.engine.pool.RankPool``, started once by ``ckptgate.dcp.ranks.DcpRanks``): each
joins the gloo group on loopback once (``join_task``), keeps its state between steps, and runs
the steps it is sent (``step_task``): build the state, save it (sync, async thread, async
process), load it (same ranks, fewer ranks with another sharding, one process). Each timed
step starts at a barrier and returns a ``DcpStep`` of ``time.monotonic()`` stamps
(CLOCK_MONOTONIC, one clock for every process on the node), so the driver can time from the
common start to the last rank's end.

API references: torch.distributed.checkpoint (https://pytorch.org/docs/stable/distributed.checkpoint.html):
``save``, ``async_save`` with ``async_checkpointer_type``, ``load`` (load-time resharding: the
target state dict's DTensor placements decide what each rank reads), ``FileSystemWriter``.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckptgate.dcp.records import DcpStep
from ckptgate.engine.pool import RankContext

#: A step: ``step(state, **kwargs) -> DcpStep``, a module-level function (it is pickled by name).
Step = Callable[..., DcpStep]


def _no_start() -> None:
    return None


@dataclass
class DcpRankState:
    """What a rank keeps between steps: its identity, mesh and the built state; and, for the
    step under way, how it meets the others at the pool's common start (``start``, called once
    its timed part begins) and where it counts its bytes (``counter``)."""

    rank: int
    world_size: int
    mesh: Any
    state: dict[str, Any] = field(default_factory=dict)
    arch: Any = None
    bytes_per_parameter: int = 0
    seed: int = 0
    groups: dict[int, Any] = field(default_factory=dict)
    start: Callable[[], object] = _no_start
    counter: Any = None
    """The step's ``ckptgate.dcp.counting.ByteCounter`` (None outside a step)."""


def _barrier(ctx: DcpRankState, group: Any = None) -> float:
    """The timed part begins: the pool's common start (the live line's clock), then DCP's
    own barrier (the measurement's)."""
    import torch.distributed as dist

    ctx.start()
    dist.barrier(group=group)
    return time.monotonic()


def step_build(
    ctx: DcpRankState,
    architecture: dict[str, int],
    bytes_per_parameter: int,
    seed: int = 0,
    layout: str = "rows",
) -> DcpStep:
    """Build this rank's state for the model (replacing any previous one): Shard(0) DTensors
    (``rows``, FSDP-style), or full plain tensors on every rank (``replicated``)."""
    from ckptgate.dcp import model as m

    ctx.state = {}
    ctx.arch = m.architecture_from(architecture)
    ctx.bytes_per_parameter = bytes_per_parameter
    ctx.seed = seed
    ctx.counter.expect(m.local_state_bytes(ctx.arch, bytes_per_parameter, ctx.mesh, layout))
    ctx.start()
    t0 = time.monotonic()
    ctx.state = m.build_state(
        ctx.arch, bytes_per_parameter, ctx.mesh, layout, True, seed, on_bytes=ctx.counter.add
    )
    local_bytes = sum(
        t.to_local().numel() * t.to_local().element_size()
        for t in _tensors(ctx.state)
        if hasattr(t, "to_local")
    )
    return DcpStep(ctx.rank, start_s=t0, end_s=time.monotonic(), local_tensor_bytes=local_bytes)


def _tensors(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    return [obj] if hasattr(obj, "dtype") else []


def step_save(ctx: DcpRankState, path: str, thread_count: int) -> DcpStep:
    """Synchronous ``dcp.save`` with FileSystemWriter(sync_files=True), timed from a barrier;
    its files count their bytes as they are written (``counting.CountingFileSystem``)."""
    import torch.distributed.checkpoint as dcp

    writer = _writer(path, thread_count)
    start = _barrier(ctx)
    dcp.save(ctx.state, storage_writer=writer)
    end = time.monotonic()
    return DcpStep(ctx.rank, start_s=start, end_s=end)


def step_async_save(ctx: DcpRankState, path: str, thread_count: int, checkpointer: str) -> DcpStep:
    """``dcp.async_save``: the call returns once the state is staged to CPU memory (the stall);
    the future completes when the files are written (sync_files on) and .metadata committed."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict_saver import (
        AsyncCheckpointerType,
        AsyncSaveResponse,
    )

    from ckptgate.dcp.counting import wait_polling_files

    kind = AsyncCheckpointerType(checkpointer)
    writer = _writer(path, thread_count)
    start = _barrier(ctx)
    response = dcp.async_save(ctx.state, storage_writer=writer, async_checkpointer_type=kind)
    returned = time.monotonic()
    future = response.upload_completion if isinstance(response, AsyncSaveResponse) else response
    if kind == AsyncCheckpointerType.PROCESS:  # torch's own process writes: no counting stream
        wait_polling_files(future, path, ctx.rank, ctx.counter)
    else:
        future.result()
    completed = time.monotonic()
    return DcpStep(ctx.rank, start_s=start, end_s=completed, returned_s=returned)


def _writer(path: str, thread_count: int) -> Any:
    """DCP's FileSystemWriter (fsync on), its data files counted as they are written."""
    import torch.distributed.checkpoint as dcp

    from ckptgate.dcp.counting import CountingFileSystem

    writer = dcp.FileSystemWriter(path, sync_files=True, thread_count=thread_count)
    writer.fs = CountingFileSystem()
    return writer


def _reader(path: str) -> Any:
    """DCP's FileSystemReader, reporting its read plan's bytes and each item as it is read."""
    from ckptgate.dcp.counting import CountingReader

    return CountingReader(path)


def _group_of(ctx: DcpRankState, ranks: int) -> Any:
    """A process group of the first ``ranks`` ranks (created collectively, cached)."""
    import torch.distributed as dist

    if ranks == ctx.world_size:
        return None
    if ranks not in ctx.groups:
        # new_group is collective over the whole world, members or not.
        ctx.groups[ranks] = dist.new_group(ranks=list(range(ranks)))
    return ctx.groups[ranks]


def step_load(
    ctx: DcpRankState, path: str, layout: str = "rows", ranks: int | None = None
) -> DcpStep:
    """``dcp.load`` onto the first ``ranks`` ranks with a layout ("rows" = Shard(0), "cols" =
    Shard(1) for 2-D tensors), then verify every tensor of this rank's blocks exactly."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import DeviceMesh

    from ckptgate.dcp import model as m
    from ckptgate.dcp.verify import verified_bytes, verify_state

    ranks = ctx.world_size if ranks is None else ranks
    group = _group_of(ctx, ranks)
    if ctx.rank >= ranks:
        ctx.start()  # the members meet at the common start: every rank of the pool must
        return DcpStep(ctx.rank, member=False)
    mesh = ctx.mesh if group is None else DeviceMesh.from_group(group, "cpu")
    target = m.build_state(ctx.arch, ctx.bytes_per_parameter, mesh, layout, False, ctx.seed)
    ctx.counter.more_bytes = verified_bytes(target, ctx.arch, ctx.bytes_per_parameter)
    start = _barrier(ctx, group)
    dcp.load(target, storage_reader=_reader(path), process_group=group)
    end = time.monotonic()
    bad = verify_state(target, ctx.arch, ctx.bytes_per_parameter, ctx.seed, ctx.counter.add)
    verify_end = time.monotonic()
    return DcpStep(
        ctx.rank,
        start_s=start,
        end_s=end,
        verify_s=verify_end - end,
        mismatches=tuple(str(b) for b in bad),
    )


def step_single_load(ctx: DcpRankState, path: str) -> DcpStep:
    """Load the whole checkpoint into one process (``no_dist=True``, plain full tensors) on
    rank 0, as an inference or conversion job would, and verify it."""
    import torch.distributed.checkpoint as dcp

    from ckptgate.dcp import model as m
    from ckptgate.dcp.verify import verified_bytes, verify_state

    if ctx.rank != 0:
        ctx.start()
        return DcpStep(ctx.rank, member=False)
    target = m.build_state(ctx.arch, ctx.bytes_per_parameter, None, "rows", False, ctx.seed)
    ctx.counter.more_bytes = verified_bytes(target, ctx.arch, ctx.bytes_per_parameter)
    ctx.start()
    start = time.monotonic()
    with warnings.catch_warnings():
        # DCP warns that it assumes a single process; that is the point of this step.
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(target, storage_reader=_reader(path), no_dist=True)
    end = time.monotonic()
    bad = verify_state(target, ctx.arch, ctx.bytes_per_parameter, ctx.seed, ctx.counter.add)
    return DcpStep(ctx.rank, start_s=start, end_s=end, mismatches=tuple(str(b) for b in bad))


def step_release(ctx: DcpRankState) -> DcpStep:
    """Drop the built state (frees memory between models)."""
    ctx.state = {}
    return DcpStep(ctx.rank)


_STATE: DcpRankState | None = None
"""This rank process's DCP state: set by ``join_task``, kept between steps (the pool reuses
its processes), gone with the process."""


def join_task(ctx: RankContext, *, port: int, world_size: int, torch_threads: int) -> DcpStep:
    """Rank task: join the gloo group on loopback as rank ``ctx.local_rank``, once per process.

    The rank processes are the engine's (``RankPool``): they die with the driver's process
    (``ckptgate.engine.lifeline``: PR_SET_PDEATHSIG and a parent-pid watchdog), also in the
    middle of a save, so a killed pytest leaves no DCP rank writing. Process-based async
    save's own checkpoint processes are torch's children of this rank and are not covered.

    Loopback only: MASTER_ADDR is 127.0.0.1 (process-based async save starts its own
    checkpoint process group from MASTER_ADDR and would otherwise use the host's FQDN), and
    gloo is pinned to the loopback interface.
    """
    global _STATE
    rank = ctx.local_rank
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        GLOO_SOCKET_IFNAME="lo",
    )
    ctx.progress(phase="join", path=f"127.0.0.1:{port}")
    ctx.start()  # the live line times the join (torch's import, the group) from here
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(torch_threads)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    _STATE = DcpRankState(rank, world_size, init_device_mesh("cpu", (world_size,)))
    return DcpStep(rank)


def leave_task(ctx: RankContext) -> DcpStep:
    """Rank task: drop the state and leave the gloo group (before the pool stops the ranks)."""
    global _STATE
    import torch.distributed as dist

    if _STATE is not None:
        _STATE.state = {}
        _STATE = None
        dist.destroy_process_group()
    return DcpStep(ctx.local_rank)


def step_task(ctx: RankContext, *, step: Step, **kwargs: Any) -> DcpStep:
    """Rank task: run one DCP ``step`` on this rank's state. The step's name and path are its
    phase and file (a rank past the deadline is named in them); its bytes are counted as DCP
    writes or reads them (``ckptgate.dcp.counting``), into the slot the live line reads.

    A step that calls ``state.start`` (the pool's common start, where its timed part begins)
    must have every rank call it once, members of a smaller group or not: the pool releases
    the ranks when all are ready."""
    from ckptgate.dcp.counting import counting

    state = _STATE
    if state is None:
        raise RuntimeError(f"DCP rank {ctx.local_rank} has not joined the process group")
    ctx.progress(phase=step.__name__.removeprefix("step_"), path=str(kwargs.get("path", "")))
    with counting(ctx.progress) as counter:
        state.start, state.counter = ctx.start, counter
        try:
            return step(state, **kwargs)
        finally:
            state.start, state.counter = _no_start, None
