"""The checkpoint DLIO writes (MLPerf Storage's checkpointing workload), rank by rank and file
by file.

One job: DLIO's layout rules, in exact integers, for a profile with an architecture:

1. Pipeline stages get ``layers // pp`` transformer layers each, the ``layers mod pp`` extra
   ones to the first stages (stage 0, 1, ...).
2. The model (2 B per parameter, or K where K < 2) is written only by data-parallel rank 0
   of each (tp, pp) rank, one file per layer it holds, each layer's tensor-parallel slice (an
   even split over tp): the token embedding on the first stage, the final norm and the output
   head on the last stage, each a file of its own.
3. The optimizer state (the other K - 2 B per parameter) is split evenly over all ranks,
   whatever the ZeRO stage: one file per rank.
4. No ``.metadata``: each rank writes 1 to 6 files.

Names follow DeepSpeed's, as DLIO writes them: ``layer_{i:02d}-model_{tp:02d}-model_states.pt``
(layer 0 the embedding, 1 .. L the transformer layers, L + 1 the final norm, L + 2 the head)
and ``zero_pp_rank_{dp}_mp_rank_{pp * tp_size + tp:02d}_optim_states.pt``.

Source: the issue's reading of DLIO's checkpointing code (dlio_benchmark's checkpointing
module; ckptgate issue 25): for MLPerf's 405B config (TP 8, PP 32, 512 ranks) it writes 13.23
GB on the first stage's dp rank 0 and 9.51 GB on a dp rank 1, 1,544 files. Global rank order
is Megatron's (sizing.shards): pp_idx * (dp * tp) + dp_idx * tp + tp_idx.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptgate.sizing.apportion import scale_exact, split_even
from ckptgate.sizing.architecture import (
    embedding_parameters,
    final_norm_parameters,
    layer_parameters,
    output_head_parameters,
)
from ckptgate.sizing.schema import Profile

MODEL_BYTES_PER_PARAMETER = 2
"""The model's bytes per parameter in DLIO's checkpoint (fp16/bf16 weights)."""


def dlio_layers_per_stage(layers: int, pp: int) -> list[int]:
    """Transformer layers on each stage: layers // pp, the extras to the first stages."""
    return split_even(layers, pp)


@dataclass(frozen=True)
class DlioLayout:
    """Every file DLIO writes, by global rank: ``files[rank]`` maps file name -> bytes."""

    files: tuple[dict[str, int], ...]

    @property
    def per_rank_bytes(self) -> tuple[int, ...]:
        return tuple(sum(f.values()) for f in self.files)

    @property
    def file_count(self) -> int:
        return sum(len(f) for f in self.files)

    @property
    def total_bytes(self) -> int:
        return sum(self.per_rank_bytes)


def dlio_layout(profile: Profile) -> DlioLayout:
    """DLIO's files for the profile (module docstring). Needs model.architecture."""
    arch = profile.model.architecture
    if arch is None:
        raise ValueError(f"{profile.name}: the dlio layout needs model.architecture")

    par = profile.cluster.parallelism
    tp, pp, dp = par.tp, par.pp, par.dp
    gpus = tp * pp * dp
    k = profile.model.bytes_per_parameter
    psi = profile.parameters
    model_k = min(k, MODEL_BYTES_PER_PARAMETER)
    optimizer = split_even(psi * (k - model_k), gpus)
    files: list[dict[str, int]] = [{} for _ in range(gpus)]
    counts = dlio_layers_per_stage(arch.layers, pp)
    # (stage, layer index, parameters) of every model file, scaled to exactly Ψ when
    # model.parameters is given beside the architecture (largest remainder: sizing.apportion)
    entries: list[tuple[int, int, int]] = [(0, 0, embedding_parameters(arch))]
    first_layer = 1
    for stage, count in enumerate(counts):
        entries += [(stage, first_layer + i, layer_parameters(arch)) for i in range(count)]
        first_layer += count
    entries.append((pp - 1, arch.layers + 1, final_norm_parameters(arch)))
    entries.append((pp - 1, arch.layers + 2, output_head_parameters(arch)))
    scaled = scale_exact([params for _, _, params in entries], psi)
    for (stage, index, _), params in zip(entries, scaled, strict=True):
        for t, size in enumerate(split_even(params * model_k, tp)):
            writer = stage * dp * tp + t  # dp rank 0
            files[writer][f"layer_{index:02d}-model_{t:02d}-model_states.pt"] = size
    for stage in range(pp):
        for d in range(dp):
            for t in range(tp):
                rank = stage * dp * tp + d * tp + t
                name = f"zero_pp_rank_{d}_mp_rank_{stage * tp + t:02d}_optim_states.pt"
                files[rank][name] = optimizer[rank]
    return DlioLayout(tuple(files))
