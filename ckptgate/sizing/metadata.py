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

Besides the tensors and chunks, the .metadata lists the BYTE_IO entries (one per key of each
optimizer param group, 12 for AdamW, plus ``train.step``: DCP_BYTE_ENTRIES) and grows by a
fixed amount per rank (each rank's plan and storage entries arrive pickled apart, so fewer of
their strings are shared). The model:

    .metadata bytes = tensors x 160 B + chunks x 171 B + byte entries x 56 B + ranks x 260 B

Source of the constants: a least-squares fit over 24 real DCP saves (torch 2.13, gloo ranks on
loopback, the suite's DCP state at K = 14: world size 2, 4 and 8, Shard(0) DTensors and
replicated tensors, thread_count 1 and 4, 105 and 375 tensors): every save within 3 % of the
fit (tests/dcp/test_metadata.py holds saves to it). The 13 byte entries were the same in every
save, so their 56 B each is the fit's intercept shared out, not a separate measurement.
Offsets beyond 65,535 pickle a few bytes longer, so at 405B scale the figure is a slight
underestimate.

The data files carry framing besides the state's bytes: every chunk is one ``torch.save``
(TORCH_SAVE_FRAMING_BYTES, 1,577 B, for data that is a multiple of 64 B; an Adam step's 4 B
fit inside it) and every byte entry one small ``torch.save`` (sizing.dcp_plan);
dcp_framing_bytes counts them.
"""

from __future__ import annotations

from ckptgate.sizing.architecture import TENSORS_PER_LAYER, parameter_shapes
from ckptgate.sizing.dcp_plan import (
    ADAMW_PARAM_GROUP_KEYS,
    BYTE_ENTRY_BYTES,
    TORCH_SAVE_FRAMING_BYTES,
    names_entry_bytes,
)
from ckptgate.sizing.dcp_scale import dcp_chunk_count
from ckptgate.sizing.schema import COMPONENTS, DCP_WRITER_STATE, Profile
from ckptgate.sizing.shards import (
    Placement,
    placement,
    profile_layers_per_stage,
    state_bytes_per_parameter,
    zero_sharded_kinds,
)

DCP_METADATA_BYTES_PER_TENSOR = 160
"""Pickled ``.metadata`` bytes per state tensor (its key, properties and size). Fitted:
tests/dcp/test_metadata.py."""

DCP_METADATA_BYTES_PER_CHUNK = 171
"""Pickled ``.metadata`` bytes per saved chunk (chunk offsets and sizes plus its storage
entry). Fitted: tests/dcp/test_metadata.py."""

DCP_METADATA_BYTES_PER_BYTE_ENTRY = 56
"""Pickled ``.metadata`` bytes per BYTE_IO entry (module docstring: the fit's intercept over
the 13 entries every fitted save had)."""

DCP_METADATA_BYTES_PER_RANK = 260
"""Pickled ``.metadata`` bytes per saving rank. Fitted: tests/dcp/test_metadata.py."""

DCP_BYTE_ENTRIES = len(ADAMW_PARAM_GROUP_KEYS) + 1
"""BYTE_IO entries of one save: AdamW's 12 param group keys (one param group) + train.step."""

OPTIMIZER_TENSORS = 3
"""fp32 master weight, Adam exp_avg, Adam exp_avg_sq: the optimizer's 12 B/parameter."""


def parameter_tensors(profile: Profile) -> dict[str, int]:
    """Parameter tensors of each component over all stages (module docstring)."""
    arch = profile.model.architecture
    if arch is None:
        return {"embedding": 0, "head": 0, "layers": profile.cluster.parallelism.pp}
    layers = sum(profile_layers_per_stage(profile))
    head = 1 if arch.tied_embeddings else 2  # the final norm, and the output head if untied
    return {"embedding": 1, "head": head, "layers": TENSORS_PER_LAYER * layers}


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
    state plus its Adam step, and a tied head's weight in the model's state."""
    kinds = sum(state_tensor_kinds(profile.model.bytes_per_parameter, 0))
    arch = profile.model.architecture
    tied = 1 if arch is not None and arch.tied_embeddings else 0
    return sum(parameter_tensors(profile).values()) * (kinds + 1) + tied


def dcp_metadata_chunks(profile: Profile) -> int:
    """Chunks the whole checkpoint saves, as DCP's ``.metadata`` lists them (module docstring;
    under ``cluster.layout.writer: dcp`` the planner's count, sizing.dcp_scale)."""
    arch, par = profile.model.architecture, profile.cluster.parallelism
    if profile.cluster.layout.writer == "dcp" and arch is not None:  # the planner's own count
        state = DCP_WRITER_STATE[par.zero_stage]
        return dcp_chunk_count(arch, profile.model.bytes_per_parameter, par.dp, state)
    counts = parameter_tensors(profile)
    steps = sum(counts.values())
    return steps + sum(
        counts[name] * _chunks_per_tensor(profile, placement(profile, name)) for name in COMPONENTS
    )


def dcp_metadata_bytes(profile: Profile) -> int:
    """Bytes of the checkpoint's global ``.metadata`` as DCP writes it: dcp_metadata_tensors
    x 160 B + dcp_metadata_chunks x 171 B + DCP_BYTE_ENTRIES x 56 B + gpus x 260 B (fitted
    to 24 real DCP saves by tests/dcp/test_metadata.py, each within 3 %). 0 under
    ``cluster.layout.writer: dlio``: DLIO writes no .metadata."""
    if profile.cluster.layout.writer == "dlio":
        return 0
    return (
        dcp_metadata_tensors(profile) * DCP_METADATA_BYTES_PER_TENSOR
        + dcp_metadata_chunks(profile) * DCP_METADATA_BYTES_PER_CHUNK
        + DCP_BYTE_ENTRIES * DCP_METADATA_BYTES_PER_BYTE_ENTRY
        + profile.cluster.gpus * DCP_METADATA_BYTES_PER_RANK
    )


def dcp_framing_bytes(profile: Profile) -> int:
    """Bytes the data files hold besides the state's Ψ x K: one torch.save per chunk
    (dcp_metadata_chunks x 1,577 B; an Adam step's 4 B fit inside its framing) and one per
    byte entry (1,261 B each; the param group's list of names more). Source: torch 2.13,
    measured by tests/dcp/test_plan_fidelity.py (sizing.dcp_plan). 0 under
    ``cluster.layout.writer: dlio`` (DLIO's per-file framing is not modelled) and ``dcp``
    (the planner's file bytes already hold it: ShardDistribution.framing_bytes)."""
    if profile.cluster.layout.writer in ("dlio", "dcp"):
        return 0
    arch = profile.model.architecture
    names = list(parameter_shapes(arch)) if arch is not None else []
    return (
        dcp_metadata_chunks(profile) * TORCH_SAVE_FRAMING_BYTES
        + (DCP_BYTE_ENTRIES - 1) * BYTE_ENTRY_BYTES
        + names_entry_bytes(names)
    )
