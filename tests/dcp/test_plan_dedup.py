"""The layout model's replicated saves held to DCP's own planner, at every world size.

A replicated (DDP-style) state is the same on every rank, so DCP's save plan for W ranks is
its local plan W times: here ``DefaultSavePlanner.create_local_plan`` on the suite's built
state, then torch's own ``dedup_save_plans`` and ``_split_by_size_and_type``
(torch/distributed/checkpoint, torch 2.13), in one process, against ``sizing.dcp_plan`` and
``sizing.dcp_scale``: which rank and which file every item lands in, for world sizes 1 to 8 and
thread counts 1 to 8, on a multi-head and a grouped-query shape (the latter also with its head
tied to the embedding) and at K = 12, 14 and 16. The
files' bytes per item are held to real saves by test_plan_fidelity.py. Issue 35's case (a 125M
GQA model at W = 4, thread_count 4, K = 12) is checked at its real size, rank by rank.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

from torch.distributed.checkpoint._dedup_save_plans import dedup_save_plans
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.filesystem import _split_by_size_and_type

from ckptgate.dcp.model import architecture_from, build_state
from ckptgate.sizing.architecture import parameter_shapes
from ckptgate.sizing.dcp_plan import (
    BYTE_ENTRY_BYTES,
    dcp_save_layout,
    names_entry_bytes,
    torch_save_bytes,
)
from ckptgate.sizing.dcp_scale import dcp_rank_file_bytes

SHAPES = {
    "mha": {"hidden": 64, "ffn_hidden": 160, "layers": 2, "heads": 4, "kv_heads": 4, "vocab": 250},
    "gqa": {"hidden": 64, "ffn_hidden": 128, "layers": 3, "heads": 8, "kv_heads": 2, "vocab": 301},
    "gqa-tied": {"hidden": 64, "ffn_hidden": 128, "layers": 3, "heads": 8, "kv_heads": 2,
                 "vocab": 301, "tied_embeddings": True},
}  # fmt: skip
ISSUE_35 = {"hidden": 768, "ffn_hidden": 2048, "layers": 12, "heads": 12, "kv_heads": 4,
            "vocab": 32000}  # fmt: skip
"""A 125M-parameter GQA shape: the replicated save the issue compared, W = 4, 4 threads."""


def dcp_files(state: dict[str, Any], fqns: list[str], world_size: int, threads: int) -> list[int]:
    """Every file's bytes, rank by rank, as DCP plans a replicated ``state`` on
    ``world_size`` ranks: its own local plan, dedup and buckets; each item's bytes as a
    torch.save of it (the framing the fidelity test measures)."""
    planner = DefaultSavePlanner()
    planner.set_up_planner(state, is_coordinator=True)
    local = planner.create_local_plan()
    sizes: list[int] = []
    for plan in dedup_save_plans([local] * world_size):
        for bucket in _split_by_size_and_type(threads, plan.items):
            total = 0
            for item in bucket:
                if item.tensor_data is None:  # BYTE_IO: the param group's names, or a scalar
                    total += (
                        names_entry_bytes(fqns)
                        if item.index.fqn.endswith(".params")
                        else BYTE_ENTRY_BYTES
                    )
                else:
                    data = math.prod(item.tensor_data.size)
                    total += torch_save_bytes(data * item.tensor_data.properties.dtype.itemsize)
            sizes.append(total)
    return sizes


def _model(arch: Any, k: int, world_size: int, threads: int) -> list[int]:
    files = dcp_save_layout(arch, k, world_size, threads, "replicated").files
    return [files[f"__{r}_{i}.distcp"] for r in range(world_size) for i in range(threads)]


@pytest.mark.parametrize("k", [12, 14, 16])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_replicated_saves_land_where_dcp_puts_them_at_every_world_size(shape: str, k: int) -> None:
    arch = architecture_from(SHAPES[shape])
    fqns = list(parameter_shapes(arch))
    state = build_state(arch, k, fill=False)
    for world_size in range(1, 9):
        for threads in range(1, 9):
            real = dcp_files(state, fqns, world_size, threads)
            assert _model(arch, k, world_size, threads) == real, (world_size, threads)
            scaled = dcp_rank_file_bytes(arch, k, world_size, threads, "replicated")
            assert [b for rank in scaled for b in rank] == real, (world_size, threads)


def test_the_issues_125m_replicated_save_per_rank() -> None:
    """Issue 35: DCP wrote 421, 327, 328 and 421 MB a rank where the model said 304, 397, 398
    and 397 (its state in the suite's old order: optimizer first, ``step`` after the moments).
    Plain fp32 AdamW training, K = 12, as ``get_state_dict(model, optimizer)`` lays it out."""
    arch = architecture_from(ISSUE_35)
    fqns = list(parameter_shapes(arch))
    real = dcp_files(build_state(arch, 12, fill=False), fqns, 4, 4)
    per_rank = [sum(real[r * 4 : r * 4 + 4]) for r in range(4)]
    assert [round(b / 1e6) for b in per_rank] == [421, 327, 328, 421]
    assert dcp_save_layout(arch, 12, 4, 4, "replicated").per_rank_bytes == tuple(per_rank)
    assert tuple(map(sum, dcp_rank_file_bytes(arch, 12, 4, 4, "replicated"))) == tuple(per_rank)
