"""Content verification of a loaded DCP checkpoint, and the flipped-byte fault.

One job: prove that what came back from storage is what was saved. PyTorch Distributed
Checkpoint keeps no checksums (the .metadata file records each item's file, offset and length,
nothing about its content), so a flipped byte in a .distcp file loads silently. The suite
therefore recomputes every tensor's expected values (ckptgate.dcp.model.expected_block) for
whatever block this rank holds under whatever sharding, and compares bit for bit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ckptgate.dcp import model as m


@dataclass(frozen=True)
class Mismatch:
    """One tensor (or object) whose loaded content differs from the saved content."""

    key: str
    detail: str

    def __str__(self) -> str:
        return f"{self.key}: {self.detail}"


def _local_and_offset(value: Any, shape: tuple[int, ...]) -> tuple[torch.Tensor, tuple[int, ...]]:
    """The local block of a (D)Tensor and its global offset."""
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        local_shape, offset = m.local_block(shape, value.device_mesh, list(value.placements))
        local = value.to_local()
        if tuple(local.shape) != local_shape:
            raise AssertionError(f"local shape {tuple(local.shape)} != expected {local_shape}")
        return local, offset
    return value, (0,) * len(shape)


def verified_bytes(state: dict[str, Any], arch: m.Architecture, bytes_per_parameter: int) -> int:
    """The bytes ``verify_state`` compares in ``state`` (this rank's blocks of every tensor it
    holds): what a load step adds to its read plan's total for the live line."""
    total = 0
    for entry in m.tensor_entries(arch, bytes_per_parameter):
        try:
            local, _ = _local_and_offset(m.get_path(state, entry.path), entry.shape)
        except KeyError:
            continue
        total += local.numel() * local.element_size()
    return total


def verify_state(
    state: dict[str, Any],
    arch: m.Architecture,
    bytes_per_parameter: int,
    seed: int = 0,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Mismatch]:
    """Compare every tensor of a loaded state dict (this rank's blocks) with the expected bits.

    Returns the mismatches (empty when everything verified); the first differing element is
    named by its global index so a corrupted byte can be traced to its place in the tensor.
    ``on_bytes`` gets each compared block's bytes (the step's live progress).
    """
    bad: list[Mismatch] = []
    for entry in m.tensor_entries(arch, bytes_per_parameter):
        try:
            value = m.get_path(state, entry.path)
        except KeyError:
            bad.append(Mismatch(entry.key, "missing from the loaded state"))
            continue
        local, offset = _local_and_offset(value, entry.shape)
        if local.dtype != entry.dtype:
            bad.append(Mismatch(entry.key, f"dtype {local.dtype} != {entry.dtype}"))
            continue
        seed_t = m.tensor_seed(entry.kind, entry.fqn, seed)
        expected = m.expected_block(seed_t, entry.shape, offset, tuple(local.shape), entry.dtype)
        # Compare bit patterns, not values: a flipped bit can make a NaN, and NaN != NaN would
        # hide nothing here but bitwise is the honest statement of "exact".
        a = local.contiguous().view(torch.int16 if entry.dtype == torch.bfloat16 else torch.int32)
        b = expected.view(a.dtype)
        if on_bytes is not None:
            on_bytes(local.numel() * local.element_size())
        if not torch.equal(a, b):
            diff = (a != b).nonzero()
            first = tuple(int(i) + o for i, o in zip(diff[0].tolist(), offset, strict=True))
            bad.append(
                Mismatch(
                    entry.key,
                    f"{diff.shape[0]} element(s) differ; first at global index {first}",
                )
            )
    fqns = list(m.parameter_shapes(arch))
    for fqn in fqns:
        path = ("optim", "state", fqn, "step")
        try:
            step = float(m.get_path(state, path))
        except KeyError:
            bad.append(Mismatch(".".join(path), "missing from the loaded state"))
            continue
        if step != float(m.TRAIN_STEP):
            bad.append(Mismatch(".".join(path), f"{step} != {m.TRAIN_STEP}"))
    if state.get("optim", {}).get("param_groups") != m.param_groups(fqns):
        bad.append(Mismatch("optim.param_groups", "differs from the saved param groups"))
    if state.get("train", {}).get("step") != m.TRAIN_STEP:
        bad.append(Mismatch("train.step", f"{state.get('train')} != {m.TRAIN_STEP}"))
    return bad


@dataclass(frozen=True)
class FlippedByte:
    """Where a byte was flipped: the file, the byte offset in it, and the item it belongs to."""

    file: str
    file_offset: int
    key: str
    chunk_offset: tuple[int, ...]
    mask: int = 0xFF

    def __str__(self) -> str:
        return (
            f"{os.path.basename(self.file)} byte {self.file_offset} (tensor {self.key},"
            f" chunk at {self.chunk_offset})"
        )


def flip_byte(checkpoint_dir: str, file_name: str | None = None) -> FlippedByte:
    """Flip one byte inside the largest tensor item of a .distcp file, in place.

    The .metadata file maps every saved item to (file, offset, length); the byte chosen is the
    middle of the largest item of the file, which for a tensor of any size lies in its raw data
    rather than in the torch.save framing around it. Call ``restore_byte`` to undo it (XOR).
    """
    from torch.distributed.checkpoint import FileSystemReader

    metadata = FileSystemReader(checkpoint_dir).read_metadata()
    items = [
        (info.length, index, info)
        for index, info in metadata.storage_data.items()
        if info.relative_path.endswith(".distcp")
        and (file_name is None or info.relative_path == file_name)
    ]
    if not items:
        raise ValueError(f"no .distcp items found in {checkpoint_dir} (file {file_name})")
    length, index, info = max(items, key=lambda t: t[0])
    path = os.path.join(checkpoint_dir, info.relative_path)
    flipped = FlippedByte(
        file=path,
        file_offset=info.offset + length // 2,
        key=index.fqn,
        chunk_offset=tuple(index.offset) if index.offset is not None else (),
    )
    _xor_byte(flipped)
    return flipped


def restore_byte(flipped: FlippedByte) -> None:
    """Undo ``flip_byte`` (XOR with the same mask)."""
    _xor_byte(flipped)


def _xor_byte(flipped: FlippedByte) -> None:
    with open(flipped.file, "r+b") as f:
        f.seek(flipped.file_offset)
        byte = f.read(1)
        f.seek(flipped.file_offset)
        f.write(bytes([byte[0] ^ flipped.mask]))
        f.flush()
        os.fsync(f.fileno())
