"""What each DCP rank process runs: a command loop and the steps it can be asked to do.

One job: the rank side of a DCP run. The driver (ckptgate.dcp.driver) starts W of these once,
over gloo on loopback, and sends steps by queue: build the state, save it (sync, async thread,
async process), load it (same ranks, fewer ranks with another sharding, one process), write the
same bytes with plain file I/O. Each timed step starts at a barrier and returns
``time.monotonic()`` stamps (CLOCK_MONOTONIC, one clock for every process on the node), so the
driver can time from the common start to the last rank's end.

API references: torch.distributed.checkpoint (https://pytorch.org/docs/stable/distributed.checkpoint.html):
``save``, ``async_save`` with ``async_checkpointer_type``, ``load`` (load-time resharding: the
target state dict's DTensor placements decide what each rank reads), ``FileSystemWriter``.
"""

from __future__ import annotations

import os
import queue
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A step: ``step(ctx, **kwargs) -> dict`` of plain picklable values.
Step = Callable[..., dict[str, Any]]


@dataclass
class RankContext:
    """What a rank keeps between steps: its identity, mesh and the built state."""

    rank: int
    world_size: int
    mesh: Any
    state: dict[str, Any] = field(default_factory=dict)
    arch: Any = None
    bytes_per_parameter: int = 0
    seed: int = 0
    groups: dict[int, Any] = field(default_factory=dict)


def _barrier(group: Any = None) -> float:
    import torch.distributed as dist

    dist.barrier(group=group)
    return time.monotonic()


def step_build(
    ctx: RankContext, architecture: dict[str, int], bytes_per_parameter: int, seed: int = 0
) -> dict[str, Any]:
    """Build this rank's Shard(0) state for the model (replacing any previous one)."""
    from ckptgate.dcp import model as m

    ctx.state = {}
    ctx.arch = m.architecture_from(architecture)
    ctx.bytes_per_parameter = bytes_per_parameter
    ctx.seed = seed
    t0 = time.monotonic()
    ctx.state = m.build_state(ctx.arch, bytes_per_parameter, ctx.mesh, "rows", True, seed)
    local_bytes = sum(
        t.to_local().numel() * t.to_local().element_size()
        for t in _tensors(ctx.state)
        if hasattr(t, "to_local")
    )
    return {"build_s": time.monotonic() - t0, "local_tensor_bytes": local_bytes}


def _tensors(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    return [obj] if hasattr(obj, "dtype") else []


def step_save(ctx: RankContext, path: str, thread_count: int) -> dict[str, Any]:
    """Synchronous ``dcp.save`` with FileSystemWriter(sync_files=True), timed from a barrier."""
    import torch.distributed.checkpoint as dcp

    writer = dcp.FileSystemWriter(path, sync_files=True, thread_count=thread_count)
    start = _barrier()
    dcp.save(ctx.state, storage_writer=writer)
    end = time.monotonic()
    return {"start": start, "end": end}


def step_async_save(
    ctx: RankContext, path: str, thread_count: int, checkpointer: str
) -> dict[str, Any]:
    """``dcp.async_save``: the call returns once the state is staged to CPU memory (the stall);
    the future completes when the files are written (sync_files on) and .metadata committed."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict_saver import (
        AsyncCheckpointerType,
        AsyncSaveResponse,
    )

    kind = AsyncCheckpointerType(checkpointer)
    writer = dcp.FileSystemWriter(path, sync_files=True, thread_count=thread_count)
    start = _barrier()
    response = dcp.async_save(ctx.state, storage_writer=writer, async_checkpointer_type=kind)
    returned = time.monotonic()
    future = response.upload_completion if isinstance(response, AsyncSaveResponse) else response
    future.result()
    completed = time.monotonic()
    return {"start": start, "returned": returned, "end": completed}


def _group_of(ctx: RankContext, ranks: int) -> Any:
    """A process group of the first ``ranks`` ranks (created collectively, cached)."""
    import torch.distributed as dist

    if ranks == ctx.world_size:
        return None
    if ranks not in ctx.groups:
        # new_group is collective over the whole world, members or not.
        ctx.groups[ranks] = dist.new_group(ranks=list(range(ranks)))
    return ctx.groups[ranks]


def step_load(
    ctx: RankContext, path: str, layout: str = "rows", ranks: int | None = None
) -> dict[str, Any]:
    """``dcp.load`` onto the first ``ranks`` ranks with a layout ("rows" = Shard(0), "cols" =
    Shard(1) for 2-D tensors), then verify every tensor of this rank's blocks exactly."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import DeviceMesh

    from ckptgate.dcp import model as m
    from ckptgate.dcp.verify import verify_state

    ranks = ctx.world_size if ranks is None else ranks
    group = _group_of(ctx, ranks)
    if ctx.rank >= ranks:
        return {"member": False}
    mesh = ctx.mesh if group is None else DeviceMesh.from_group(group, "cpu")
    target = m.build_state(ctx.arch, ctx.bytes_per_parameter, mesh, layout, False, ctx.seed)
    start = _barrier(group)
    dcp.load(target, storage_reader=dcp.FileSystemReader(path), process_group=group)
    end = time.monotonic()
    bad = verify_state(target, ctx.arch, ctx.bytes_per_parameter, ctx.seed)
    verify_end = time.monotonic()
    return {
        "member": True,
        "start": start,
        "end": end,
        "verify_s": verify_end - end,
        "mismatches": [str(b) for b in bad],
    }


def step_single_load(ctx: RankContext, path: str) -> dict[str, Any]:
    """Load the whole checkpoint into one process (``no_dist=True``, plain full tensors) on
    rank 0, as an inference or conversion job would, and verify it."""
    import torch.distributed.checkpoint as dcp

    from ckptgate.dcp import model as m
    from ckptgate.dcp.verify import verify_state

    if ctx.rank != 0:
        return {"member": False}
    target = m.build_state(ctx.arch, ctx.bytes_per_parameter, None, "rows", False, ctx.seed)
    start = time.monotonic()
    with warnings.catch_warnings():
        # DCP warns that it assumes a single process; that is the point of this step.
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(target, storage_reader=dcp.FileSystemReader(path), no_dist=True)
    end = time.monotonic()
    bad = verify_state(target, ctx.arch, ctx.bytes_per_parameter, ctx.seed)
    return {"member": True, "start": start, "end": end, "mismatches": [str(b) for b in bad]}


def step_release(ctx: RankContext) -> dict[str, Any]:
    """Drop the built state (frees memory between models)."""
    ctx.state = {}
    return {}


STEPS: dict[str, Step] = {
    "build": step_build,
    "save": step_save,
    "async_save": step_async_save,
    "load": step_load,
    "single_load": step_single_load,
    "release": step_release,
}


def rank_main(
    rank: int,
    world_size: int,
    port: int,
    commands: Any,
    results: Any,
    torch_threads: int,
    parent_pid: int | None = None,
    pdeathsig: bool = True,
) -> None:
    """Entry point of a rank process: join the gloo group on loopback, then serve steps.

    It dies with the driver's process (``ckptgate.engine.lifeline``: PR_SET_PDEATHSIG and a
    parent-pid watchdog), also in the middle of a save, so a killed pytest leaves no DCP rank
    writing. Process-based async save's own checkpoint processes are torch's children of
    this rank and are not covered.

    Loopback only: MASTER_ADDR is 127.0.0.1 (process-based async save starts its own
    checkpoint process group from MASTER_ADDR and would otherwise use the host's FQDN), and
    gloo is pinned to the loopback interface.
    """
    if parent_pid is not None:
        from ckptgate.engine.lifeline import die_with_parent

        die_with_parent(parent_pid, pdeathsig=pdeathsig)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        GLOO_SOCKET_IFNAME="lo",
    )
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(torch_threads)
    parent = os.getppid()
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        ctx = RankContext(rank, world_size, init_device_mesh("cpu", (world_size,)))
        results.put((rank, True, {"ready": True, "pid": os.getpid()}))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
        return
    try:
        while True:
            try:
                command = commands.get(timeout=1.0)
            except queue.Empty:
                if os.getppid() != parent:  # the driver died: do not linger
                    return
                continue
            if command is None:
                return
            name, kwargs = command
            try:
                results.put((rank, True, STEPS[name](ctx, **kwargs)))
            except BaseException:
                results.put((rank, False, traceback.format_exc()))
    finally:
        ctx.state = {}
        dist.destroy_process_group()
