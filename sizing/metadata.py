"""The size of a PyTorch DCP checkpoint's global ``.metadata``, from the profile's layout.

DCP's ``FileSystemWriter.finish`` pickles one ``Metadata`` object on the coordinator: for every
state tensor a ``TensorStorageMetadata`` with one ``ChunkStorageMetadata`` (offsets, sizes) per
saved chunk, and for every chunk a ``MetadataIndex`` -> ``_StorageInfo`` entry (file, offset,
length). Its size therefore grows with the number of chunks the ranks save, not with bytes.

The model, in exact integers:

    chunks = sum over parameter tensors of the chunks of each state kind + one Adam step each
    .metadata bytes = chunks x DCP_METADATA_BYTES_PER_CHUNK

A parameter tensor is one of the architecture's tensors (per layer: two norms, Q, K, V, O and
the gated MLP's three; plus the token embedding, the output head and the final norm) on its
pipeline stage. Split over tp it is tp tensors, each of which DCP sees as its own chunk.
A state kind that ZeRO shards over dp (``sharded_bytes_per_parameter``) adds dp chunks per
tp slice; a replicated kind adds one chunk (DCP's ``dedup_save_plans`` keeps one copy of
replicated data), or dp chunks under ``replicas_write: all``. The optimizer's 12 B/parameter
are three tensors (fp32 master, exp_avg, exp_avg_sq); bf16 weights, bf16 gradients and any
further state are one tensor each. Adam's 0-dim ``step`` is one chunk per parameter tensor.
Without an architecture a stage is taken to hold one parameter tensor (a lower bound).

Source of the bytes per chunk: measured by tests/dcp/test_metadata.py on real DCP saves
(torch 2.13, 2 gloo ranks, Shard(0) DTensors): about 219 B per chunk (278 KB for 1,275 chunks,
547 KB for 2,499 chunks; ckptgate issue 15).
"""

from __future__ import annotations

from ckptgate.sizing.architecture import TENSORS_PER_LAYER
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.shards import layers_per_stage, state_bytes_per_parameter

DCP_METADATA_BYTES_PER_CHUNK = 219
"""Bytes of pickled ``.metadata`` per saved chunk (chunk metadata plus its storage entry, the
per-tensor entries amortized). Measured: tests/dcp/test_metadata.py; ckptgate issue 15."""

OPTIMIZER_TENSORS = 3
"""fp32 master weight, Adam exp_avg, Adam exp_avg_sq: the optimizer's 12 B/parameter."""


def parameter_tensors_per_stage(profile: Profile) -> list[int]:
    """Parameter tensors on each pipeline stage: TENSORS_PER_LAYER per layer on the stage, the
    token embedding on stage 0, the output head and the final norm on the last stage; one per
    stage without an architecture."""
    pp = profile.cluster.parallelism.pp
    arch = profile.model.architecture
    if arch is None:
        return [1] * pp
    counts = [TENSORS_PER_LAYER * n for n in layers_per_stage(arch.layers, pp)]
    counts[0] += 1
    counts[-1] += 2
    return counts


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
    sharded = 0
    if zero_stage >= 1:
        sharded += tensors["optimizer"]
    if zero_stage >= 2:
        sharded += tensors["grads"]
    if zero_stage >= 3:
        sharded += tensors["weights"]
    return sharded, sum(tensors.values()) - sharded


def dcp_metadata_chunks(profile: Profile) -> int:
    """Chunks the whole checkpoint saves, as DCP's ``.metadata`` lists them (module docstring)."""
    par = profile.cluster.parallelism
    k = profile.model.bytes_per_parameter
    sharded, replicated = state_tensor_kinds(k, par.zero_stage)
    replica_chunks = par.dp if par.replicas_write == "all" else 1
    per_slice = sharded * par.dp + replicated * replica_chunks
    tensors = sum(parameter_tensors_per_stage(profile))
    steps = tensors
    return tensors * par.tp * per_slice + steps


def dcp_metadata_bytes(profile: Profile) -> int:
    """Bytes of the checkpoint's global ``.metadata`` as DCP writes it:
    dcp_metadata_chunks(profile) x DCP_METADATA_BYTES_PER_CHUNK (219 B, measured on real DCP
    saves by tests/dcp/test_metadata.py; ckptgate issue 15: 278 KB for 1,275 chunks)."""
    return dcp_metadata_chunks(profile) * DCP_METADATA_BYTES_PER_CHUNK
