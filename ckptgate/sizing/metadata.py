"""The size of a PyTorch DCP checkpoint's global ``.metadata``, from the profile's layout.

DCP's ``FileSystemWriter.finish`` pickles one ``Metadata`` object on the coordinator: for every
state tensor a ``TensorStorageMetadata`` (its key, dtype, global size) holding one
``ChunkStorageMetadata`` (offsets, sizes) per saved chunk, and for every chunk a
``MetadataIndex`` -> ``_StorageInfo`` entry (file, offset, length). Its size grows with the
tensors and chunks the ranks save, not with their bytes.

The model, in exact integers:

    .metadata bytes = tensors x DCP_METADATA_BYTES_PER_TENSOR
                    + chunks x DCP_METADATA_BYTES_PER_CHUNK

Parameter tensors: per layer TENSORS_PER_LAYER (two norms, Q, K, V, O, the MLP's three), the
token embedding on stage 0, the output head and the final norm on the last stage (one tensor
per stage without an architecture, a lower bound). Each parameter tensor has one state tensor
per kind of state (sizing.shards' decomposition of K: the optimizer's 12 B are three tensors,
fp32 master, exp_avg and exp_avg_sq; bf16 weights, bf16 gradients and anything further one
each) plus Adam's 0-dim ``step``: ``tensors`` counts them all.

Chunks, per component as cluster.layout places it (sizing.shards.placement): a tensor split
over tp is tp slices (one when tp-replicated); per slice, a state kind that ZeRO shards is
dp_shard chunks (times the dp / dp_shard replica groups under ``replicas_write: all``), a
replicated kind one chunk (DCP's ``dedup_save_plans`` keeps one copy) or dp under ``all``;
each ``step`` is one chunk.

Source of the two constants: real DCP saves measured by tests/dcp/test_metadata.py (torch
2.13, gloo ranks on loopback, Shard(0) DTensors, the suite's DCP model): a least-squares fit
over 1 to 4 ranks and 48 to 375 tensors gave 134 B per tensor and 183 B per chunk, every save
within 8 % of the fit; 4 ranks x 8 layers saved 1,275 chunks in a 281 KB ``.metadata``
(220 B per chunk all in, as ckptgate issue 15 measured: 278 KB for 1,275 chunks). Offsets
beyond 65,535 pickle a few bytes longer, so at 405B scale the figure is a slight underestimate.
"""

from __future__ import annotations

from ckptgate.sizing.architecture import TENSORS_PER_LAYER
from ckptgate.sizing.schema import COMPONENTS, Profile
from ckptgate.sizing.shards import (
    Placement,
    placement,
    profile_layers_per_stage,
    state_bytes_per_parameter,
    zero_sharded_kinds,
)

DCP_METADATA_BYTES_PER_TENSOR = 134
"""Pickled ``.metadata`` bytes per state tensor (its key, properties and size). Measured:
tests/dcp/test_metadata.py."""

DCP_METADATA_BYTES_PER_CHUNK = 183
"""Pickled ``.metadata`` bytes per saved chunk (chunk offsets and sizes plus its storage
entry). Measured: tests/dcp/test_metadata.py."""

OPTIMIZER_TENSORS = 3
"""fp32 master weight, Adam exp_avg, Adam exp_avg_sq: the optimizer's 12 B/parameter."""


def parameter_tensors(profile: Profile) -> dict[str, int]:
    """Parameter tensors of each component over all stages (module docstring)."""
    arch = profile.model.architecture
    if arch is None:
        return {"embedding": 0, "head": 0, "layers": profile.cluster.parallelism.pp}
    layers = sum(profile_layers_per_stage(profile))
    return {"embedding": 1, "head": 2, "layers": TENSORS_PER_LAYER * layers}


def state_tensor_kinds(bytes_per_parameter: int, zero_stage: int) -> tuple[int, int]:
    """(sharded, replicated): state tensors per parameter tensor that ZeRO shards over dp at
    this stage, and those the dp replicas hold in common (sizing.shards' decomposition of K)."""
    parts = state_bytes_per_parameter(bytes_per_parameter)
    tensors = {
        "optimizer": OPTIMIZER_TENSORS if parts["optimizer"] else 0,
        "weights": 1 if parts["weights"] else 0,
        "grads": 1 if parts["grads"] else 0,
        "other": 1 if parts["other"] else 0,
    }
    sharded = sum(tensors[kind] for kind in zero_sharded_kinds(zero_stage))
    return sharded, sum(tensors.values()) - sharded


def _chunks_per_tensor(profile: Profile, place: Placement) -> int:
    """Chunks one parameter tensor's state saves under a placement (without its step)."""
    par = profile.cluster.parallelism
    sharded, replicated = state_tensor_kinds(profile.model.bytes_per_parameter, place.zero_stage)
    every = place.replicas_write == "all"
    groups = par.dp // place.dp_shard
    slices = par.tp if place.tp == "split" else 1
    return slices * (
        sharded * place.dp_shard * (groups if every else 1) + replicated * (par.dp if every else 1)
    )


def dcp_metadata_tensors(profile: Profile) -> int:
    """State tensors the checkpoint's ``.metadata`` lists: each parameter tensor's kinds of
    state plus its Adam step."""
    kinds = sum(state_tensor_kinds(profile.model.bytes_per_parameter, 0))
    return sum(parameter_tensors(profile).values()) * (kinds + 1)


def dcp_metadata_chunks(profile: Profile) -> int:
    """Chunks the whole checkpoint saves, as DCP's ``.metadata`` lists them (module docstring)."""
    counts = parameter_tensors(profile)
    steps = sum(counts.values())
    return steps + sum(
        counts[name] * _chunks_per_tensor(profile, placement(profile, name)) for name in COMPONENTS
    )


def dcp_metadata_bytes(profile: Profile) -> int:
    """Bytes of the checkpoint's global ``.metadata`` as DCP writes it: dcp_metadata_tensors
    x 134 B + dcp_metadata_chunks x 183 B (DCP_METADATA_BYTES_PER_TENSOR and _PER_CHUNK,
    fitted to real DCP saves by tests/dcp/test_metadata.py; ckptgate issue 15 measured 278 KB
    for 1,275 chunks, the model gives 284 KB for that save)."""
    return (
        dcp_metadata_tensors(profile) * DCP_METADATA_BYTES_PER_TENSOR
        + dcp_metadata_chunks(profile) * DCP_METADATA_BYTES_PER_CHUNK
    )
