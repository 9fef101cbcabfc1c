"""The training-checkpoint state a DCP run saves: shapes, contents and layout.

One job: say what a mixed-precision Adam checkpoint of a transformer-shaped model holds, and
fill it with values that anyone can recompute from (tensor name, kind, global index), so that
a load on any sharding can be verified exactly without keeping a copy.

What the checkpoint holds, per parameter (ZeRO, Rajbhandari et al. 2020: 2Ψ + 2Ψ + 12Ψ):

    K = 12: fp32 master weight, fp32 Adam exp_avg, fp32 Adam exp_avg_sq
    K = 14: + bf16 weight (the central case; MLPerf Storage checkpointing uses 14)
    K = 16: + bf16 gradient (ZeRO's full in-memory figure)

plus, as torch.optim.Adam keeps them, a 0-dim fp32 ``step`` per parameter and the param groups.
Those are a few bytes per parameter tensor, not per parameter, and land in the overhead.

The parameter count follows SPEC.md's rule: token embedding and a separate output head
(vocab x hidden each), per layer Q and O (hidden x hidden), K and V with grouped-query heads
(kv_heads * head_dim x hidden each), a gated MLP w1/w2/w3 (3 x hidden x ffn), and the norms
(two per layer plus the final one). A tied head (``tied_embeddings``) is the embedding's
parameter: its optimizer state is held once, and the model's state lists its weight again under
``output.weight`` with the embedding's values, as a real tied model's ``get_state_dict`` does.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, astuple, dataclass, fields
from typing import Any

import torch

from ckptgate.sizing import Architecture
from ckptgate.sizing.architecture import model_state_shapes, parameter_shapes, tied_source
from ckptgate.sizing.dcp_plan import (
    GROUP,
    model_weight_kind,
    state_kinds,
    state_order,
    state_path,
)

#: The optimizer step the synthetic state claims to be at.
TRAIN_STEP = 1000

#: Param group settings, every key torch.optim.AdamW (torch 2.13) keeps in a param group but
#: ``params``, so that DCP saves the same byte entries a real optimizer's state dict gives it
#: (one pickled entry per key; sizing.dcp_plan.ADAMW_PARAM_GROUP_ENTRIES counts them).
PARAM_GROUP = {
    "lr": 3.0e-4,
    "betas": (0.9, 0.95),
    "eps": 1.0e-8,
    "weight_decay": 0.1,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": True,
}

_KIND_DTYPE = {
    "master": torch.float32,
    "exp_avg": torch.float32,
    "exp_avg_sq": torch.float32,
    "weight": torch.bfloat16,
    "grad": torch.bfloat16,
}


def architecture_from(arch: Mapping[str, int | None] | Architecture) -> Architecture:
    """The profile's shape (sizing's ``Architecture``, or a mapping of its fields; ``head_dim``
    optional), checked for what building real tensors needs: kv_heads divide heads (where
    heads do not divide hidden, Q is hidden x hidden: sizing.architecture.q_width)."""
    if not isinstance(arch, Architecture):
        optional = {f.name for f in fields(Architecture) if f.default is not MISSING}
        names = [f.name for f in fields(Architecture) if f.name != "tied_embeddings"]
        missing = [name for name in names if name not in arch and name not in optional]
        if missing:
            raise ValueError(f"architecture: missing {missing}; got keys {sorted(arch)}")
        given: dict[str, Any] = {
            name: None if (value := arch.get(name)) is None else int(value) for name in names
        }
        arch = Architecture(**given, tied_embeddings=bool(arch.get("tied_embeddings", False)))
    sizes = [v for v in astuple(arch) if v is not None and not isinstance(v, bool)]
    if min(sizes) < 1:
        raise ValueError(f"architecture: every field must be >= 1, got {arch}")
    if arch.heads % arch.kv_heads:
        raise ValueError(
            f"architecture: heads ({arch.heads}) must divide by kv_heads ({arch.kv_heads})"
        )
    return arch


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a shape (1 for a 0-dim tensor)."""
    n = 1
    for d in shape:
        n *= d
    return n


def parameter_count(arch: Architecture) -> int:
    """Ψ by SPEC.md's counting rule (the same tensors the checkpoint holds)."""
    return sum(numel(s) for s in parameter_shapes(arch).values())


def kind_dtype(kind: str) -> torch.dtype:
    """dtype of one kind of state tensor."""
    return _KIND_DTYPE[kind]


@dataclass(frozen=True)
class TensorEntry:
    """One state tensor: where it sits, what it is, and its global shape."""

    path: tuple[str, ...]
    fqn: str
    kind: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def key(self) -> str:
        """The flattened key DCP uses in .metadata (path joined by dots)."""
        return ".".join(self.path)


def tensor_entries(arch: Architecture, bytes_per_parameter: int) -> Iterator[TensorEntry]:
    """Every sharded state tensor of the checkpoint (not the 0-dim steps); a tied head's
    model-state copy with its ``fqn`` the embedding's, whose values it holds."""
    kinds = state_kinds(bytes_per_parameter)
    params = parameter_shapes(arch)
    for fqn, shape in params.items():
        for kind in kinds:
            path = state_path(kind, fqn, bytes_per_parameter)
            yield TensorEntry(path, fqn, kind, shape, kind_dtype(kind))
    weight = model_weight_kind(bytes_per_parameter)  # a copy has no optimizer state of its own
    for name, shape in model_state_shapes(arch).items():
        if name not in params:
            path = state_path(weight, name, bytes_per_parameter)
            yield TensorEntry(path, tied_source(arch, name), weight, shape, kind_dtype(weight))


# Multiply-xorshift mixing on 32-bit values held in int64: every product stays below 2**63,
# so no signed overflow happens anywhere and the values are identical on every build.
_M32 = 0xFFFFFFFF
_C1 = 0x5BD1E995
_C2 = 0x27D4EB2F


def tensor_seed(kind: str, fqn: str, seed: int = 0) -> int:
    """A per-tensor seed. bf16 weights share the master's seed: weight = bf16(master)."""
    source = "master" if kind == "weight" else kind
    return zlib.crc32(f"{seed}/{source}/{fqn}".encode())


def expected_block(
    seed: int,
    global_shape: tuple[int, ...],
    offset: tuple[int, ...],
    local_shape: tuple[int, ...],
    dtype: torch.dtype,
) -> torch.Tensor:
    """The values of a block of a tensor, computed from global element indices.

    fp32 values are k / 2**24 - 0.5 for a 24-bit hash k, so they are exact in fp32 (24-bit
    significand); bf16 tensors are the fp32 values rounded, which is deterministic. Any shard of
    any sharding recomputes to the same bits, which is what makes verification after a
    resharded load exact.
    """
    idx = torch.zeros((), dtype=torch.int64)
    stride = 1
    # Global flat index = sum over dims of (offset + local index) * global stride.
    for dim in reversed(range(len(global_shape))):
        r = torch.arange(offset[dim], offset[dim] + local_shape[dim], dtype=torch.int64)
        view = [1] * len(global_shape)
        view[dim] = local_shape[dim]
        idx = idx + (r * stride).view(view)
        stride *= global_shape[dim]
    h = (idx + seed) & _M32
    h = (h * _C1) & _M32
    h ^= h >> 15
    h = (h * _C2) & _M32
    h ^= h >> 13
    values = (h & 0xFFFFFF).to(torch.float32) * (2.0**-24) - 0.5
    return values.reshape(local_shape).to(dtype)


def param_groups(fqns: list[str]) -> list[dict[str, Any]]:
    """The optimizer's param groups as Adam's state_dict gives them (params by name)."""
    return [{**PARAM_GROUP, "params": list(fqns)}]


def set_path(state: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set a nested value, creating the intermediate dicts."""
    node = state
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def get_path(state: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """Read a nested value."""
    node: Any = state
    for key in path:
        node = node[key]
    return node


def state_skeleton(
    fqns: list[str], bytes_per_parameter: int, model_fqns: list[str] | None = None
) -> dict[str, Any]:
    """The state's nested dicts with every leaf's key in place, in the order DCP flattens them
    (``sizing.dcp_plan.state_order``, which the layout model replays), each None until built: a
    dict keeps a key where it was first inserted, so filling the leaves in any order keeps it."""
    state: dict[str, Any] = {}
    for kind, name in state_order(fqns, bytes_per_parameter, model_fqns):
        if kind == GROUP:
            state["optim"].setdefault("param_groups", None)
        else:
            set_path(state, state_path(kind, name, bytes_per_parameter), None)
    return state


def _local_blocks(
    arch: Architecture, bytes_per_parameter: int, mesh: Any | None, layout: str
) -> Iterator[tuple[TensorEntry, tuple[int, ...], tuple[int, ...], list[Any] | None]]:
    """Each tensor of the state with this rank's block of it: (entry, local shape, global
    offset, DTensor placements or None for a plain full tensor)."""
    for entry in tensor_entries(arch, bytes_per_parameter):
        if mesh is None or layout == "replicated":
            yield entry, entry.shape, (0,) * len(entry.shape), None
        else:
            placements = placements_for(entry.shape, layout)
            local_shape, offset = local_block(entry.shape, mesh, placements)
            yield entry, local_shape, offset, placements


def local_state_bytes(
    arch: Architecture, bytes_per_parameter: int, mesh: Any | None = None, layout: str = "rows"
) -> int:
    """The bytes ``build_state`` makes on this rank (its blocks of every tensor, not the
    0-dim steps), without making them: the build's total for the live line."""
    return sum(
        math.prod(shape) * entry.dtype.itemsize
        for entry, shape, _, _ in _local_blocks(arch, bytes_per_parameter, mesh, layout)
    )


def build_state(
    arch: Architecture,
    bytes_per_parameter: int,
    mesh: Any | None = None,
    layout: str = "rows",
    fill: bool = True,
    seed: int = 0,
    on_bytes: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Build the checkpoint's state dict for this rank (``on_bytes`` gets each local block's
    bytes as it is made: the build's live progress).

    With a DeviceMesh, every tensor is a DTensor (``Shard(0)`` for ``layout="rows"``;
    ``Shard(1)`` for 2-D tensors with ``layout="cols"``), built from this rank's block only, so
    no rank ever holds a full tensor; ``layout="replicated"`` gives every rank the full plain
    tensors (DDP-style replicated state, which DCP's ``dedup_save_plans`` saves once, each
    tensor whole on one rank). Without a mesh, tensors are plain full tensors (the
    single-process load). ``fill=False`` allocates the load targets without computing values.

    Local blocks are fresh contiguous tensors, never views into a bigger storage: async staging
    on torch 2.13 fails on shards that are views with a non-zero storage offset.
    """
    fqns = list(parameter_shapes(arch))
    # The model's names are the parameters' own string objects, a tied head's added: the
    # .metadata pickle memoises a string it has seen (test_metadata.py's fit is of that size).
    model_fqns = fqns + [name for name in model_state_shapes(arch) if name not in fqns]
    state = state_skeleton(fqns, bytes_per_parameter, model_fqns)
    for entry, local_shape, offset, placements in _local_blocks(
        arch, bytes_per_parameter, mesh, layout
    ):
        tseed = tensor_seed(entry.kind, entry.fqn, seed)
        if fill:
            local = expected_block(tseed, entry.shape, offset, local_shape, entry.dtype)
        else:
            local = torch.empty(local_shape, dtype=entry.dtype)
        value = local if placements is None else to_dtensor(local, mesh, placements, entry.shape)
        set_path(state, entry.path, value)
        if on_bytes is not None:
            on_bytes(local.numel() * local.element_size())
    for fqn in fqns:
        # torch.optim.Adam keeps step as a 0-dim fp32 tensor; not sharded, saved once.
        step = torch.tensor(float(TRAIN_STEP) if fill else 0.0, dtype=torch.float32)
        set_path(state, ("optim", "state", fqn, "step"), step)
    if fill:
        state["optim"]["param_groups"] = param_groups(fqns)
    else:
        # Same structure, wrong values: DCP loads into the target's structure (lists and dicts
        # are flattened to keys), and verification must see the saved values come back.
        placeholder: dict[str, Any] = {key: 0.0 for key in PARAM_GROUP} | {"betas": (0.0, 0.0)}
        placeholder |= {key: None for key, value in PARAM_GROUP.items() if value is None}
        state["optim"]["param_groups"] = [{**placeholder, "params": [""] * len(fqns)}]
    state["train"] = {"step": TRAIN_STEP if fill else -1}
    return state


def placements_for(shape: tuple[int, ...], layout: str) -> list[Any]:
    """DTensor placements for a layout: "rows" = Shard(0); "cols" = Shard(1) for 2-D tensors."""
    from torch.distributed.tensor import Shard

    if layout == "rows" or len(shape) < 2:
        return [Shard(0)]
    if layout == "cols":
        return [Shard(1)]
    raise ValueError(f"layout: {layout!r} is not 'rows' or 'cols'")


def local_block(
    shape: tuple[int, ...], mesh: Any, placements: list[Any]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """This rank's (local_shape, global_offset), by DTensor's own rule (torch.chunk, uneven)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    local_shape, offset = compute_local_shape_and_global_offset(shape, mesh, placements)
    return tuple(local_shape), tuple(offset)


def to_dtensor(
    local: torch.Tensor, mesh: Any, placements: list[Any], shape: tuple[int, ...]
) -> Any:
    """Wrap a local block as a DTensor; shape and stride given so uneven shards are right."""
    from torch.distributed.tensor import DTensor

    stride = []
    acc = 1
    for d in reversed(shape):
        stride.append(acc)
        acc *= d
    return DTensor.from_local(
        local,
        mesh,
        placements,
        run_check=False,
        shape=torch.Size(shape),
        stride=tuple(reversed(stride)),
    )
