"""Which rank and which file each tensor of a PyTorch DCP save lands in, as DCP's planner says.

One job: replay DCP's own save planning, in exact integers and without torch, for the suite's
checkpoint state of a transformer (the architecture's tensor list, ``parameter_shapes``), so
that per-rank and per-file bytes come from DCP's rules, not from an even split:

1. Local plans. Every rank lists its write items in the flattened state dict's order
   (``torch/distributed/checkpoint/default_planner.py``, ``create_default_local_save_plan``;
   ``_traverse.py``'s depth-first order), the state laid out as a training script's
   ``get_state_dict(model, optimizer)`` gives it (``state_order``: the model's weights, then
   per parameter AdamW's ``step``, ``exp_avg``, ``exp_avg_sq``): one item per local chunk of a
   sharded tensor (a ``Shard(0)`` DTensor: ``torch.chunk``'s rows, ceil(rows / W) per rank),
   one item per plain (replicated) tensor, one BYTE_IO item per non-tensor leaf (the
   optimizer's param group entries, ``train.step``). The order decides the dedup's choices:
   with the suite's earlier order (optimizer state first, ``step`` last) a replicated save of
   a 125M GQA model at W = 4 came out 304, 397, 398, 397 MB a rank where DCP wrote 421, 327,
   328, 421 (issue 35).
2. Dedup (``_dedup_save_plans.py``, ``dedup_save_plans``): items are visited rank by rank in
   plan order; an item that several ranks hold goes whole to the holder with the fewest
   planned bytes so far (ties to the lowest rank), and every item visited adds its
   ``tensor_storage_size()`` (1 for BYTE_IO) to its holder. That size is the tensor's
   *global* size (``planner.py``: numel of ``tensor_data.size``), also for one shard of it.
   Replicated tensors are therefore not split: one rank writes each whole, and the ranks end
   uneven.
3. Files (``filesystem.py``, ``_split_by_size_and_type``): each rank's items go into
   ``thread_count`` buckets, BYTE_IO items round-robin, tensors sorted largest first (stable)
   each into the bucket with the fewest bytes (LPT), sizes again the global tensor's
   (``_item_size``: ``tensor_data.size``); bucket i is ``__{rank}_{i}.distcp``.
4. Bytes. Each tensor item is one ``torch.save`` in the file: its data plus
   TORCH_SAVE_FRAMING_BYTES less the data's bytes mod 64 (the zip record's 64-byte alignment
   absorbs the tail; an empty chunk EMPTY_TENSOR_SAVE_BYTES); each BYTE_IO item is a
   ``torch.save`` of the object (BYTE_ENTRY_BYTES for a scalar, more for the list of parameter
   names). Both measured on torch 2.13 by
   tests/dcp/test_plan_fidelity.py.

Layouts: ``fsdp`` (every tensor a ``Shard(0)`` DTensor over W ranks, FSDP2's placement) and
``replicated`` (every rank holds every tensor whole, DDP-style). Adam's 0-dim ``step`` is a
plain tensor, replicated in both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ckptgate.sizing.architecture import Architecture, model_state_shapes, parameter_shapes

PLANNER_TORCH = "2.13"
"""The torch release whose DCP planner this module replays (the ``torch`` extra pins
torch==2.13.0; real saves on it hold the replay exact: tests/dcp/test_plan_every_world_size.py).
The sizing's shard line names it, since another release may plan differently."""

KNOWN_BYTES_PER_PARAMETER = (12, 14, 16)
"""Bytes per parameter the suite's DCP state knows: 12 fp32 master + Adam moments, 14 + bf16
weights, 16 + bf16 gradients (ZeRO, Rajbhandari et al. 2020)."""

KIND_ITEMSIZE_BYTES = {"master": 4, "exp_avg": 4, "exp_avg_sq": 4, "weight": 2, "grad": 2}
"""Element size of each kind of state tensor (fp32 optimizer state, bf16 weights and grads)."""

ADAMW_PARAM_GROUP_KEYS = (
    "lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable",
    "differentiable", "fused", "decoupled_weight_decay", "params",
)  # fmt: skip
"""The keys of one torch.optim.AdamW param group (torch 2.13): DCP saves each as a BYTE_IO
entry (12 per param group), which the .metadata and the files both carry."""

TORCH_SAVE_FRAMING_BYTES = 1577
"""Bytes ``torch.save`` adds to a tensor whose data is a multiple of 64 B (zip records, the
pickle, the alignment padding); measured on torch 2.13 by tests/dcp/test_plan_fidelity.py."""

EMPTY_TENSOR_SAVE_BYTES = 1513
"""Bytes of ``torch.save`` of a tensor with no data (an empty ``Shard(0)`` chunk: torch.chunk
leaves the last ranks none where W x ceil(rows / W) passes the rows, e.g. 16 key rows on 5 or 7
ranks): the zip writes no data record to align, 64 B less than a tensor with data; measured on
torch 2.13 by tests/dcp/test_plan_fidelity.py."""

BYTE_ENTRY_BYTES = 1261
"""Bytes of ``torch.save`` of a small non-tensor object (a float, tuple, bool or None):
measured on torch 2.13 by tests/dcp/test_plan_fidelity.py."""

LAYOUTS = ("fsdp", "replicated")


def state_kinds(bytes_per_parameter: int) -> tuple[str, ...]:
    """The per-parameter tensors a checkpoint at K bytes per parameter holds."""
    if bytes_per_parameter not in KNOWN_BYTES_PER_PARAMETER:
        raise ValueError(
            f"bytes_per_parameter: {bytes_per_parameter} is not one of"
            f" {KNOWN_BYTES_PER_PARAMETER} (12 fp32 master + Adam moments, 14 + bf16 weights,"
            " 16 + bf16 gradients)"
        )
    kinds: tuple[str, ...] = ("master", "exp_avg", "exp_avg_sq")
    if bytes_per_parameter >= 14:
        kinds += ("weight",)
    if bytes_per_parameter >= 16:
        kinds += ("grad",)
    return kinds


STEP = "step"
"""The kind of Adam's 0-dim fp32 ``step`` tensor, one per parameter (replicated in every layout)."""
GROUP = "group"
"""The kind of a param group entry (a BYTE_IO leaf; its name is the group's key)."""
TRAIN = "train"
"""The kind of the training loop's own state (``train.step``, a BYTE_IO leaf)."""


def state_path(kind: str, fqn: str, bytes_per_parameter: int) -> tuple[str, ...]:
    """Where a leaf sits in the nested state dict: the layout of ``get_state_dict(model,
    optimizer)`` (``torch/distributed/checkpoint/state_dict.py``, torch 2.13) saved as
    ``{"model": ..., "optim": ...}``, plus the grads and the loop's step. The model holds the
    weights: fp32 at K = 12 (they are the master weights), bf16 at K >= 14, where the fp32
    master is the optimizer's (``optim.state.FQN.master_weight``)."""
    if kind == "weight" or (kind == "master" and bytes_per_parameter == 12):
        return ("model", fqn)
    if kind == "master":
        return ("optim", "state", fqn, "master_weight")
    if kind == "grad":
        return ("grads", fqn)
    if kind == GROUP:
        return ("optim", "param_groups", "0", fqn)
    if kind == TRAIN:
        return ("train", fqn)
    return ("optim", "state", fqn, kind)


def model_weight_kind(bytes_per_parameter: int) -> str:
    """The kind of state the model's own state dict holds (``state_path``): the bf16 weights
    at K >= 14, the fp32 master at K = 12."""
    return "weight" if "weight" in state_kinds(bytes_per_parameter) else "master"


def tied_copy_bytes(arch: Architecture, bytes_per_parameter: int) -> int:
    """The data of a tied head's second copy in the model's state (``model_state_shapes``):
    vocab x hidden at the model weights' element size (fp32 at K = 12, bf16 at K >= 14); 0
    where the head is untied."""
    if not arch.tied_embeddings:
        return 0
    return arch.vocab * arch.hidden * KIND_ITEMSIZE_BYTES[model_weight_kind(bytes_per_parameter)]


def state_order(
    fqns: Sequence[str], bytes_per_parameter: int, model_fqns: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Every leaf of the state as (kind, name), in the order DCP flattens it
    (``_traverse.py``: depth first, in the dicts' insertion order), which is the order its
    dedup visits the items in. As a training script's ``get_state_dict`` gives it: the model's
    weights (``model_fqns``, the model's state dict: a tied head under its own name too;
    default ``fqns``); then per parameter (``fqns``, each once) the optimizer's state in the
    order ``torch.optim.AdamW`` creates it (``step``, ``exp_avg``, ``exp_avg_sq``; the fp32
    master after them at K >= 14); the param group; the grads (K = 16); the loop's
    ``train.step``."""
    kinds = state_kinds(bytes_per_parameter)
    weight = model_weight_kind(bytes_per_parameter)
    order = [(weight, fqn) for fqn in (fqns if model_fqns is None else model_fqns)]
    moments = [STEP, "exp_avg", "exp_avg_sq"] + (["master"] if weight == "weight" else [])
    order += [(kind, fqn) for fqn in fqns for kind in moments]
    order += [(GROUP, key) for key in ADAMW_PARAM_GROUP_KEYS]
    if "grad" in kinds:
        order += [("grad", fqn) for fqn in fqns]
    order.append((TRAIN, "step"))
    return order


def torch_save_bytes(data_bytes: int) -> int:
    """Bytes one tensor's ``torch.save`` takes in a DCP file: data + 1,577 B - data mod 64;
    EMPTY_TENSOR_SAVE_BYTES for no data."""
    if data_bytes == 0:
        return EMPTY_TENSOR_SAVE_BYTES
    return data_bytes + TORCH_SAVE_FRAMING_BYTES - data_bytes % 64


def names_entry_bytes(fqns: Sequence[str]) -> int:
    """Bytes of the param group's ``params`` entry (torch.save of the list of names): a small
    object's BYTE_ENTRY_BYTES plus the pickled names (each its length + 5 B of opcodes and
    memo) rounded up to the zip's 64-byte records."""
    pickled = sum(len(name) + 5 for name in fqns) + 8
    return BYTE_ENTRY_BYTES + 64 * -(-pickled // 64)


@dataclass(frozen=True)
class WriteItem:
    """One item of a local save plan: its key and chunk, the bytes the dedup and the buckets
    count (the whole tensor's, DCP's ``tensor_storage_size``; 0 for BYTE_IO), and the bytes
    it takes in a file (the chunk's data and framing)."""

    key: str
    chunk: int
    storage_bytes: int
    file_bytes: int
    is_tensor: bool
    replicated: bool

    @property
    def index(self) -> tuple[str, int]:
        """What identifies the item across ranks (DCP's MetadataIndex: key and chunk offset)."""
        return (self.key, self.chunk)


def _rows(rows: int, world_size: int, rank: int) -> tuple[int, int]:
    """(first row, rows) of ``rank``'s Shard(0) chunk: torch.chunk's ceil(rows / W) each."""
    per = -(-rows // world_size)
    first = min(rows, per * rank)
    return first, min(rows, first + per) - first


def local_plan(
    arch: Architecture, bytes_per_parameter: int, world_size: int, rank: int, layout: str
) -> list[WriteItem]:
    """Rank ``rank``'s write items in the flattened state dict's order (``state_order``), as
    ckptgate.dcp.model builds the state."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: {layout!r} is not one of {LAYOUTS}")
    params, shapes = list(parameter_shapes(arch)), model_state_shapes(arch)
    items: list[WriteItem] = []
    for kind, name in state_order(params, bytes_per_parameter, list(shapes)):
        key = ".".join(state_path(kind, name, bytes_per_parameter))
        if kind == STEP:
            items.append(WriteItem(key, 0, 4, torch_save_bytes(4), True, True))
        elif kind in (GROUP, TRAIN):
            names = kind == GROUP and name == "params"
            size = names_entry_bytes(params) if names else BYTE_ENTRY_BYTES
            items.append(WriteItem(key, 0, 0, size, False, True))
        else:
            shape = shapes[name]
            per_row = KIND_ITEMSIZE_BYTES[kind] * math.prod(shape[1:])
            if layout == "replicated":
                first, rows = 0, shape[0]
            else:
                first, rows = _rows(shape[0], world_size, rank)
            whole = shape[0] * per_row
            data = torch_save_bytes(rows * per_row)
            items.append(WriteItem(key, first, whole, data, True, layout == "replicated"))
    return items


def dedup_save_plans(plans: Sequence[Sequence[WriteItem]]) -> list[list[WriteItem]]:
    """Each item held by several ranks kept on one: DCP's ``dedup_save_plans`` (torch
    ``distributed/checkpoint/_dedup_save_plans.py``, save_to_lowest_rank=False), step for step:
    items in first-seen order (rank 0's plan, then rank 1's new items, ...), each to the
    holder with the fewest planned bytes so far, ties to the lowest rank; every item adds its
    storage bytes, or 1 for a BYTE_IO item, to the rank that keeps it."""
    holders: dict[tuple[str, int], list[int]] = {}
    sizes: dict[tuple[str, int], int] = {}
    for rank, plan in enumerate(plans):
        for item in plan:
            holders.setdefault(item.index, []).append(rank)
            sizes[item.index] = item.storage_bytes if item.is_tensor else 0
    planned = [0] * len(plans)
    keeper: dict[tuple[str, int], int] = {}
    for index, ranks in holders.items():
        chosen = min(ranks, key=lambda r: planned[r])
        planned[chosen] += sizes[index] or 1
        keeper[index] = chosen
    return [
        [item for item in plan if keeper[item.index] == rank] for rank, plan in enumerate(plans)
    ]


def split_by_size_and_type(bins: int, items: Sequence[WriteItem]) -> list[list[WriteItem]]:
    """One rank's items in ``bins`` files: DCP's ``_split_by_size_and_type`` (torch
    ``distributed/checkpoint/filesystem.py``): BYTE_IO items round-robin, tensors largest first
    (a stable sort) each into the bucket with the fewest tensor bytes so far, lowest on ties."""
    if bins == 1:
        return [list(items)]
    buckets: list[list[WriteItem]] = [[] for _ in range(bins)]
    filled = [0] * bins
    for i, item in enumerate(it for it in items if not it.is_tensor):
        buckets[i % bins].append(item)
    tensors = sorted((it for it in items if it.is_tensor), key=lambda it: -it.storage_bytes)
    for item in tensors:
        idx = min(range(bins), key=lambda b: filled[b])
        buckets[idx].append(item)
        filled[idx] += item.storage_bytes
    return buckets


@dataclass(frozen=True)
class DcpSaveLayout:
    """Bytes of every data file a DCP save writes (``__{rank}_{i}.distcp``), per rank."""

    world_size: int
    thread_count: int
    files: dict[str, int]

    def rank_bytes(self, rank: int) -> int:
        """Bytes of rank ``rank``'s files."""
        return sum(size for name, size in self.files.items() if name.startswith(f"__{rank}_"))

    @property
    def per_rank_bytes(self) -> tuple[int, ...]:
        return tuple(self.rank_bytes(r) for r in range(self.world_size))

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())


def dcp_save_layout(
    arch: Architecture, bytes_per_parameter: int, world_size: int, thread_count: int, layout: str
) -> DcpSaveLayout:
    """The files a DCP save of the suite's state writes (module docstring: plans, dedup,
    buckets, bytes), with their sizes."""
    if world_size < 1 or thread_count < 1:
        raise ValueError(
            f"world_size and thread_count must be >= 1, got {world_size} and {thread_count}"
        )
    plans = [
        local_plan(arch, bytes_per_parameter, world_size, r, layout) for r in range(world_size)
    ]
    files: dict[str, int] = {}
    for rank, plan in enumerate(dedup_save_plans(plans)):
        for i, bucket in enumerate(split_by_size_and_type(thread_count, plan)):
            files[f"__{rank}_{i}.distcp"] = sum(item.file_bytes for item in bucket)
    return DcpSaveLayout(world_size, thread_count, files)
