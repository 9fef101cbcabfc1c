"""Per-global-rank checkpoint bytes from TP/PP/DP, the ZeRO stage and the replica policy.

The model, in four steps, every step in exact integers:

1. Pipeline stages. With an architecture, stage 0 holds the token embedding, the last stage
   the output head and the final norm, and the layers are split as evenly as possible: the
   L mod pp extra layers go to the middle stages first (stages 1, 2, ...), then to stage 0,
   then to the last stage, so the stages that carry the embedding and head get the fewer
   layers (Llama 3 405B: 126 layers on 16 stages, 7 on the first and last, 8 elsewhere; The
   Llama 3 Herd of Models, Meta 2024). When ``model.parameters`` is given too, the stage
   counts are scaled to exactly Ψ by largest remainder. Without an architecture, Ψ is spread
   evenly over the stages ("uniform: no architecture"), remainder to the lowest stages.
2. Tensor parallelism splits each stage's parameters evenly over tp ranks, remainder one each
   to the lowest tp ranks.
3. Bytes per parameter K decompose as optimizer state min(K, 12) (fp32 master + Adam m, v),
   bf16 weights 2 (K >= 14), bf16 gradients 2 (K >= 16), anything above 16 as further
   replicated state (ZeRO, Rajbhandari et al. 2020: 16 Ψ = 2 Ψ + 2 Ψ + 12 Ψ). ZeRO stage >= 1
   shards the optimizer state over dp, stage >= 2 the gradients too, stage 3 the weights too.
4. State that the dp replicas hold in common is written by replica 0 only ("one"), by every
   replica ("all": the bytes written exceed the checkpoint bytes; both are reported), or
   split evenly over the replicas ("spread", remainder to the lowest dp ranks).

Global rank order is Megatron's: global_rank = pp_idx * (dp * tp) + dp_idx * tp + tp_idx, so
a tp group is consecutive ranks (one node when tp = gpus_per_node).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ckptgate.sizing.architecture import (
    embedding_parameters,
    final_norm_parameters,
    layer_parameters,
    output_head_parameters,
)
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.units import format_count


@dataclass(frozen=True)
class ShardDistribution:
    """Bytes each global rank writes per checkpoint, and the rule that produced them."""

    per_rank_bytes: tuple[int, ...]
    checkpoint_bytes: int
    policy_note: str
    gpus_per_node: int
    tp: int
    pp: int
    dp: int
    stage_parameters: tuple[int, ...]

    @property
    def gpus(self) -> int:
        return len(self.per_rank_bytes)

    @property
    def written_bytes(self) -> int:
        """Bytes all ranks write: checkpoint_bytes, plus the duplicates under replicas 'all'."""
        return sum(self.per_rank_bytes)

    @property
    def largest_bytes(self) -> int:
        return max(self.per_rank_bytes)

    @property
    def largest_rank(self) -> int:
        """The lowest global rank that holds the largest shard."""
        return self.per_rank_bytes.index(self.largest_bytes)

    @property
    def smallest_bytes(self) -> int:
        return min(self.per_rank_bytes)

    @property
    def mean_bytes(self) -> float:
        return self.written_bytes / self.gpus

    def quantile(self, q: float) -> int:
        """Nearest-rank quantile of the per-rank bytes (Hyndman & Fan 1996, definition 1):
        quantile(0) is the smallest shard, quantile(1) the largest."""
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q!r} outside [0, 1]")
        ordered = sorted(self.per_rank_bytes)
        index = max(0, math.ceil(q * len(ordered)) - 1)
        return ordered[index]

    def node_bytes(self, node_index: int, gpus_per_node: int | None = None) -> int:
        """Bytes the ranks of one node write (node i holds ranks i*gpus_per_node onward)."""
        per_node = gpus_per_node or self.gpus_per_node
        start = node_index * per_node
        return sum(self.per_rank_bytes[start : start + per_node])

    @property
    def nodes(self) -> int:
        return self.gpus // self.gpus_per_node

    @property
    def largest_node_bytes(self) -> int:
        return max(self.node_bytes(i) for i in range(self.nodes))

    def summary(self) -> str:
        """One line: largest (rank), p50, mean, smallest, largest node."""
        from ckptgate.sizing.units import format_bytes

        return (
            f"largest {format_bytes(self.largest_bytes)} (rank {self.largest_rank}), "
            f"median {format_bytes(self.quantile(0.5))}, mean {format_bytes(self.mean_bytes)}, "
            f"smallest {format_bytes(self.smallest_bytes)}; "
            f"largest node {format_bytes(self.largest_node_bytes)}"
        )


def _split_even(total: int, parts: int) -> list[int]:
    """total split into parts that differ by at most one, the extra ones to the lowest."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _scale_exact(counts: list[int], total: int) -> list[int]:
    """counts scaled to sum exactly to total (largest remainder; ties to the lowest index)."""
    whole = sum(counts)
    if whole == total:
        return list(counts)
    floors = [c * total // whole for c in counts]
    remainders = [c * total % whole for c in counts]
    short = total - sum(floors)
    order = sorted(range(len(counts)), key=lambda i: (-remainders[i], i))
    for i in order[:short]:
        floors[i] += 1
    return floors


def layers_per_stage(layers: int, pp: int) -> list[int]:
    """Layers on each pipeline stage: even split, extras to the middle stages first, then to
    stage 0, then to the last stage (first and last carry the embedding and the head)."""
    base, extra = divmod(layers, pp)
    counts = [base] * pp
    order = list(range(1, pp - 1)) + [0] + ([pp - 1] if pp > 1 else [])
    for stage in order[:extra]:
        counts[stage] += 1
    return counts


def stage_parameters(profile: Profile) -> tuple[list[int], str]:
    """Parameters on each pipeline stage (summing exactly to Ψ) and how they were placed."""
    psi = profile.parameters
    pp = profile.cluster.parallelism.pp
    arch = profile.model.architecture
    if arch is None:
        return _split_even(psi, pp), f"uniform: no architecture, Ψ split evenly over {pp} stages"
    layer_counts = layers_per_stage(arch.layers, pp)
    raw = [n * layer_parameters(arch) for n in layer_counts]
    raw[0] += embedding_parameters(arch)
    raw[-1] += output_head_parameters(arch) + final_norm_parameters(arch)
    spread = "/".join(str(n) for n in sorted(set(layer_counts), reverse=True))
    note = (
        f"architecture: embedding on stage 0, head on stage {pp - 1}, "
        f"{arch.layers} layers over {pp} stage{'s' if pp > 1 else ''} ({spread} per stage)"
    )
    scaled = _scale_exact(raw, psi)
    if sum(raw) != psi:
        note += f", scaled from {format_count(sum(raw))} to Ψ = {format_count(psi)}"
    return scaled, note


def state_bytes_per_parameter(k: int) -> dict[str, int]:
    """K decomposed: optimizer (fp32 master + Adam m, v), bf16 weights, bf16 grads, other."""
    return {
        "optimizer": min(k, 12),
        "weights": min(max(k - 12, 0), 2),
        "grads": min(max(k - 14, 0), 2),
        "other": max(k - 16, 0),
    }


def sharded_bytes_per_parameter(k: int, zero_stage: int) -> int:
    """Bytes per parameter that ZeRO shards over dp at this stage (the rest is replicated)."""
    parts = state_bytes_per_parameter(k)
    sharded = 0
    if zero_stage >= 1:
        sharded += parts["optimizer"]
    if zero_stage >= 2:
        sharded += parts["grads"]
    if zero_stage >= 3:
        sharded += parts["weights"]
    return sharded


def shard_distribution(profile: Profile) -> ShardDistribution:
    """Per-global-rank bytes for the profile (see the module docstring for the rule)."""
    par = profile.cluster.parallelism
    tp, pp, dp = par.tp, par.pp, par.dp
    k = profile.model.bytes_per_parameter
    sharded_k = sharded_bytes_per_parameter(k, par.zero_stage)
    stages, stage_note = stage_parameters(profile)
    per_rank = [0] * (tp * pp * dp)
    for s, stage_params in enumerate(stages):
        for t, params in enumerate(_split_even(stage_params, tp)):
            sharded = params * sharded_k
            replicated = params * k - sharded
            sharded_parts = _split_even(sharded, dp)
            if par.replicas_write == "one":
                replicated_parts = [replicated] + [0] * (dp - 1)
            elif par.replicas_write == "all":
                replicated_parts = [replicated] * dp
            else:
                replicated_parts = _split_even(replicated, dp)
            for d in range(dp):
                per_rank[s * dp * tp + d * tp + t] = sharded_parts[d] + replicated_parts[d]
    replicated_k = k - sharded_k
    who = {
        "one": "dp replica 0 writes it",
        "all": "every dp replica writes a copy",
        "spread": "split evenly over the dp replicas",
    }[par.replicas_write]
    note = (
        f"{stage_note}; ZeRO-{par.zero_stage} shards {sharded_k} of {k} B/parameter over "
        f"dp {dp}; replicated {replicated_k} B/parameter: {who} ({par.replicas_write})"
    )
    return ShardDistribution(
        per_rank_bytes=tuple(per_rank),
        checkpoint_bytes=profile.parameters * k,
        policy_note=note,
        gpus_per_node=profile.cluster.gpus_per_node,
        tp=tp,
        pp=pp,
        dp=dp,
        stage_parameters=tuple(stages),
    )


def played_ranks(
    dist: ShardDistribution, ranks_per_node: int, node_index: int, nodes: int
) -> list[int]:
    """The global ranks that node ``node_index`` of ``nodes`` plays in an acceptance run.

    Full cluster: when every node runs ``gpus_per_node`` ranks and there are at least as many
    nodes as the profile has, node i plays global ranks i*gpus_per_node ... +gpus_per_node-1,
    so every rank is played exactly once (nodes beyond the profile's play none).

    Otherwise a representative set of k = min(nodes * ranks_per_node, gpus) distinct ranks:
    sort the ranks by shard size, largest first (ties by rank), take the ranks at the evenly
    spaced positions j * (gpus - 1) // (k - 1) for j = 0 .. k-1, so the largest shard (j = 0)
    and, for k >= 2, the smallest are always in, and deal them round-robin: pick j goes to node
    j mod nodes. The largest shard's rank is therefore always on node 0, and each node plays at
    most ``ranks_per_node`` ranks (exactly that many when nodes * ranks_per_node <= gpus).
    """
    if ranks_per_node < 1 or nodes < 1 or not 0 <= node_index < nodes:
        raise ValueError(
            f"played_ranks: need ranks_per_node >= 1, nodes >= 1 and 0 <= node_index < nodes; "
            f"got ranks_per_node={ranks_per_node}, node_index={node_index}, nodes={nodes}"
        )
    gpus, per_node = dist.gpus, dist.gpus_per_node
    if ranks_per_node == per_node and nodes >= dist.nodes:
        start = node_index * per_node
        return list(range(start, min(start + per_node, gpus)))
    k = min(nodes * ranks_per_node, gpus)
    by_size = sorted(range(gpus), key=lambda r: (-dist.per_rank_bytes[r], r))
    positions = [0] if k == 1 else [j * (gpus - 1) // (k - 1) for j in range(k)]
    picks = [by_size[p] for p in positions]
    return picks[node_index::nodes][:ranks_per_node]


def rank_file_bytes(rank_bytes: int, files_per_rank: int) -> list[int]:
    """One rank's shard split over its ``files_per_rank`` files, as DCP's FileSystemWriter does.

    DCP (``torch/distributed/checkpoint/filesystem.py``, ``_split_by_size_and_type``) makes
    ``thread_count`` buckets per rank and fills them greedily: tensors sorted largest first,
    each into the bucket with the fewest bytes so far (LPT), small byte items round-robin; file
    ``i`` is ``__{rank}_{i}.distcp``. With a rank's state in many tensors, each far smaller
    than the shard, LPT ends with buckets equal to within one tensor; the model here takes that
    limit, in bytes: an even split, the ``rank_bytes mod files_per_rank`` extra bytes one each
    to the lowest files (so the sizes sum exactly to ``rank_bytes``).
    """
    if files_per_rank < 1:
        raise ValueError(f"files_per_rank must be at least 1, got {files_per_rank}")
    return _split_even(rank_bytes, files_per_rank)
