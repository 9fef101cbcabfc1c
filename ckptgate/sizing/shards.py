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

from dataclasses import dataclass

from ckptgate.sizing.apportion import scale_exact, split_even
from ckptgate.sizing.architecture import (
    convention_note,
    count_parameters,
    embedding_parameters,
    final_norm_parameters,
    layer_parameters,
    output_head_parameters,
)
from ckptgate.sizing.dcp_plan import PLANNER_TORCH, tied_copy_bytes
from ckptgate.sizing.dcp_scale import dcp_rank_file_bytes
from ckptgate.sizing.distribution import ShardDistribution
from ckptgate.sizing.dlio import dlio_layers_per_stage, dlio_layout
from ckptgate.sizing.schema import COMPONENTS, DCP_WRITER_STATE, ComponentLayout, Profile
from ckptgate.sizing.units import format_bytes, format_count


def layers_per_stage(layers: int, pp: int) -> list[int]:
    """Layers on each pipeline stage: even split, extras to the middle stages first, then to
    stage 0, then to the last stage (first and last carry the embedding and the head)."""
    base, extra = divmod(layers, pp)
    counts = [base] * pp
    order = list(range(1, pp - 1)) + [0] + ([pp - 1] if pp > 1 else [])
    for stage in order[:extra]:
        counts[stage] += 1
    return counts


def profile_layers_per_stage(profile: Profile) -> list[int]:
    """cluster.layout.layers_per_stage when given, else layers_per_stage(L, pp)."""
    arch = profile.model.architecture
    assert arch is not None
    explicit = profile.cluster.layout.layers_per_stage
    if explicit is not None:
        return list(explicit)
    return layers_per_stage(arch.layers, profile.cluster.parallelism.pp)


@dataclass(frozen=True)
class Placement:
    """One component's effective placement: cluster.layout's entry with parallelism's
    defaults filled in (sizing.schema.ComponentLayout)."""

    tp: str
    zero_stage: int
    replicas_write: str
    dp_shard: int


def placement(profile: Profile, component: str) -> Placement:
    """The effective placement of ``component`` (embedding, head or layers)."""
    par = profile.cluster.parallelism
    given: ComponentLayout = getattr(profile.cluster.layout, component)
    return Placement(
        tp=given.tp,
        zero_stage=par.zero_stage if given.zero_stage is None else given.zero_stage,
        replicas_write=par.replicas_write if given.replicas_write is None else given.replicas_write,
        dp_shard=par.dp if given.dp_shard is None else given.dp_shard,
    )


def component_parameters(profile: Profile) -> list[dict[str, int]]:
    """Parameters of each component on each pipeline stage (exact integers, summing to Ψ).

    With an architecture: the embedding on stage 0, the output head and the final norm
    (``head``) on the last stage, the layers as profile_layers_per_stage says; when
    ``model.parameters`` is given too, every (stage, component) count is scaled to exactly Ψ
    by largest remainder. Components placed alike on a stage are scaled as one entry, so the
    default layout scales per stage as the single-policy model did. Without an architecture,
    Ψ is spread evenly over the stages as ``layers``."""
    psi = profile.parameters
    pp = profile.cluster.parallelism.pp
    arch = profile.model.architecture
    if arch is None:
        return [{"layers": n} for n in split_even(psi, pp)]
    raw: list[dict[str, int]] = [
        {"layers": n * layer_parameters(arch)} for n in profile_layers_per_stage(profile)
    ]
    raw[0]["embedding"] = embedding_parameters(arch)
    raw[-1]["head"] = raw[-1].get("head", 0) + output_head_parameters(arch)
    raw[-1]["head"] += final_norm_parameters(arch)
    # Scale (stage, placement group) entries, then give each group's count back to its
    # components in proportion (exact, largest remainder again).
    groups = [_groups(profile, stage) for stage in raw]
    flat = [sum(stage[c] for c in members) for stage_groups, stage in zip(groups, raw, strict=True)
            for members in stage_groups]  # fmt: skip
    scaled = iter(scale_exact(flat, psi))
    out: list[dict[str, int]] = []
    for stage_groups, stage in zip(groups, raw, strict=True):
        counts: dict[str, int] = {}
        for members in stage_groups:
            total = next(scaled)
            parts = scale_exact([stage[c] for c in members], total)
            counts.update(zip(members, parts, strict=True))
        out.append(counts)
    return out


def _groups(profile: Profile, stage: dict[str, int]) -> list[list[str]]:
    """The stage's components grouped by placement, in COMPONENTS order."""
    by_placement: dict[Placement, list[str]] = {}
    for name in COMPONENTS:
        if name in stage:
            by_placement.setdefault(placement(profile, name), []).append(name)
    return list(by_placement.values())


def stage_parameters(profile: Profile) -> tuple[list[int], str]:
    """Parameters on each pipeline stage (summing exactly to Ψ) and how they were placed."""
    psi = profile.parameters
    pp = profile.cluster.parallelism.pp
    arch = profile.model.architecture
    stages = [sum(c.values()) for c in component_parameters(profile)]
    if arch is None:
        return stages, f"uniform: no architecture, Ψ split evenly over {pp} stages"
    layer_counts = profile_layers_per_stage(profile)
    if profile.cluster.layout.layers_per_stage is not None:
        spread = "explicit: " + "/".join(str(n) for n in layer_counts)
    else:
        spread = "/".join(str(n) for n in sorted(set(layer_counts), reverse=True))
    note = (
        f"architecture: embedding on stage 0, head on stage {pp - 1}, "
        f"{arch.layers} layers over {pp} stage{'s' if pp > 1 else ''} ({spread} per stage)"
    )
    convention = convention_note(arch)
    if convention is not None:
        note += f" ({convention})"
    counted = count_parameters(arch)
    if counted != psi:
        note += f", scaled from {format_count(counted)} to Ψ = {format_count(psi)}"
    return stages, note


def state_bytes_per_parameter(k: int) -> dict[str, int]:
    """K decomposed: optimizer (fp32 master + Adam m, v), bf16 weights, bf16 grads, other."""
    return {
        "optimizer": min(k, 12),
        "weights": min(max(k - 12, 0), 2),
        "grads": min(max(k - 14, 0), 2),
        "other": max(k - 16, 0),
    }


ZERO_SHARDS = (("optimizer", 1), ("grads", 2), ("weights", 3))
"""Which state ZeRO shards over dp, from which stage on (Rajbhandari et al. 2020: stage 1 the
optimizer states, 2 the gradients as well, 3 the parameters as well)."""


def zero_sharded_kinds(zero_stage: int) -> tuple[str, ...]:
    """The state kinds (``state_bytes_per_parameter``'s keys) ZeRO shards at ``zero_stage``."""
    return tuple(kind for kind, stage in ZERO_SHARDS if zero_stage >= stage)


def sharded_bytes_per_parameter(k: int, zero_stage: int) -> int:
    """Bytes per parameter that ZeRO shards over dp at this stage (the rest is replicated)."""
    parts = state_bytes_per_parameter(k)
    return sum(parts[kind] for kind in zero_sharded_kinds(zero_stage))


def _written(total: int, parts: int, policy: str) -> list[int]:
    """Who writes ``total`` bytes that ``parts`` holders hold in common: the first ("one"),
    every one ("all"), or split evenly ("spread", remainder to the lowest)."""
    if policy == "one":
        return [total] + [0] * (parts - 1)
    if policy == "all":
        return [total] * parts
    return split_even(total, parts)


def dp_bytes(params: int, k: int, place: Placement, dp: int) -> list[int]:
    """Bytes each dp rank writes for ``params`` parameters of one tp slice of a component.

    Sharded state (sharded_bytes_per_parameter at the placement's ZeRO stage) is split evenly
    over the dp_shard shards; dp rank d holds shard d mod dp_shard in replica group
    d // dp_shard, and the groups' copies of a shard are written per replicas_write.
    Replicated state is written per replicas_write over all dp ranks. Source: ZeRO
    (Rajbhandari et al., 2020); hybrid sharding as PyTorch FSDP's HYBRID_SHARD."""
    sharded = params * sharded_bytes_per_parameter(k, place.zero_stage)
    replicated = params * k - sharded
    groups = dp // place.dp_shard
    out = _written(replicated, dp, place.replicas_write)
    for j, shard in enumerate(split_even(sharded, place.dp_shard)):
        for g, part in enumerate(_written(shard, groups, place.replicas_write)):
            out[g * place.dp_shard + j] += part
    return out


def _tp_slices(params: int, tp: int, how: str) -> list[int]:
    """A component's parameters over the tp ranks: split evenly, or whole on tp rank 0."""
    return split_even(params, tp) if how == "split" else [params] + [0] * (tp - 1)


def shard_distribution(profile: Profile) -> ShardDistribution:
    """Per-global-rank bytes for the profile (see the module docstring for the rule; with
    ``cluster.layout.writer: dlio``, DLIO's layout, sizing.dlio)."""
    if profile.cluster.layout.writer == "dlio":
        return _dlio_distribution(profile)
    if profile.cluster.layout.writer == "dcp":
        return _dcp_distribution(profile)
    par = profile.cluster.parallelism
    tp, pp, dp = par.tp, par.pp, par.dp
    k = profile.model.bytes_per_parameter
    extra = profile.cluster.layout.extra_state_bytes_per_rank
    components = component_parameters(profile)
    stages, stage_note = stage_parameters(profile)
    per_rank = [extra] * (tp * pp * dp)
    for s, stage in enumerate(components):
        for members in _groups(profile, stage):
            place = placement(profile, members[0])
            params = sum(stage[c] for c in members)
            for t, slice_params in enumerate(_tp_slices(params, tp, place.tp)):
                for d, written in enumerate(dp_bytes(slice_params, k, place, dp)):
                    per_rank[s * dp * tp + d * tp + t] += written
    note = f"{stage_note}; " + "; ".join(_placement_notes(profile))
    if extra:
        note += f"; {format_bytes(extra)} extra state per rank (RNG, dataloader, scheduler)"
    return ShardDistribution(
        per_rank_bytes=tuple(per_rank),
        checkpoint_bytes=profile.parameters * k,
        policy_note=note,
        gpus_per_node=profile.cluster.gpus_per_node,
        tp=tp,
        pp=pp,
        dp=dp,
        stage_parameters=tuple(stages),
        extra_state_bytes=extra * tp * pp * dp,
    )


def _dlio_distribution(profile: Profile) -> ShardDistribution:
    """The shard distribution of DLIO's layout (sizing.dlio.dlio_layout)."""
    par = profile.cluster.parallelism
    arch = profile.model.architecture
    assert arch is not None  # dlio_layout refuses a profile without one
    layout = dlio_layout(profile)
    counts = dlio_layers_per_stage(arch.layers, par.pp)
    spread = "/".join(str(n) for n in sorted(set(counts), reverse=True))
    note = (
        f"DLIO's layout (cluster.layout.writer: dlio): {arch.layers} layers over {par.pp} "
        f"stages ({spread} per stage, extras to the first); the model (2 B/parameter) from dp "
        f"rank 0 only, one file per layer per tp rank; the optimizer "
        f"({profile.model.bytes_per_parameter - 2} B/parameter) split evenly over all "
        f"{format_count(par.tp * par.pp * par.dp)} ranks; {format_count(layout.file_count)} "
        "files, no .metadata"
    )
    convention = convention_note(arch)
    if convention is not None:
        note += f" ({convention})"
    per_stage = [n * layer_parameters(arch) for n in counts]
    per_stage[0] += embedding_parameters(arch)
    per_stage[-1] += final_norm_parameters(arch) + output_head_parameters(arch)
    return _named_distribution(
        profile, tuple(tuple(files.items()) for files in layout.files), note, per_stage
    )


def _named_distribution(
    profile: Profile,
    rank_files: tuple[tuple[tuple[str, int], ...], ...],
    note: str,
    stage_parameters: list[int],
    tied_copy_bytes: int = 0,
) -> ShardDistribution:
    """The distribution of a writer that names every rank's files (dlio, dcp): each rank's
    bytes its files' sum; whatever exceeds Ψ x K and a tied head's second copy is the
    writer's framing."""
    par = profile.cluster.parallelism
    per_rank = tuple(sum(size for _, size in files) for files in rank_files)
    checkpoint = profile.parameters * profile.model.bytes_per_parameter
    return ShardDistribution(
        per_rank_bytes=per_rank,
        checkpoint_bytes=checkpoint,
        policy_note=note,
        gpus_per_node=profile.cluster.gpus_per_node,
        tp=par.tp,
        pp=par.pp,
        dp=par.dp,
        stage_parameters=tuple(stage_parameters),
        framing_bytes=sum(per_rank) - checkpoint - tied_copy_bytes,
        tied_copy_bytes=tied_copy_bytes,
        rank_files=rank_files,
    )


def _dcp_distribution(profile: Profile) -> ShardDistribution:
    """The shard distribution of DCP's planner over the architecture's tensors
    (``cluster.layout.writer: dcp``; sizing.dcp_scale, exactly sizing.dcp_plan's files)."""
    par = profile.cluster.parallelism
    arch = profile.model.architecture
    assert arch is not None  # schema's check of writer dcp
    k = profile.model.bytes_per_parameter
    threads = profile.checkpoint.files_per_rank
    state = DCP_WRITER_STATE[par.zero_stage]
    per_file = dcp_rank_file_bytes(arch, k, par.dp, threads, state)
    held = (
        "every tensor Shard(0) over the ranks (FSDP2), each rank its own chunk"
        if state == "fsdp"
        else "every tensor replicated (DDP), each whole to the least-loaded rank (DCP's dedup)"
    )
    note = (
        f"DCP's planner as torch {PLANNER_TORCH} plans (cluster.layout.writer: dcp, "
        f"zero_stage {par.zero_stage}: {state}): "
        f"{held}; each rank's tensors in {threads} file{'s' if threads != 1 else ''} by size "
        "(DCP's buckets, checkpoint.files_per_rank as thread_count); bytes with torch.save's "
        "framing"
    )
    rank_files = tuple(
        tuple((f"__{r}_{i}.distcp", size) for i, size in enumerate(files))
        for r, files in enumerate(per_file)
    )
    tied = tied_copy_bytes(arch, k)
    return _named_distribution(profile, rank_files, note, [profile.parameters], tied)


_WHO = {
    "one": "dp replica 0 writes it",
    "all": "every dp replica writes a copy",
    "spread": "split evenly over the dp replicas",
}


def _placement_notes(profile: Profile) -> list[str]:
    """One phrase per distinct placement: which components, ZeRO, who writes replicas."""
    k = profile.model.bytes_per_parameter
    dp = profile.cluster.parallelism.dp
    by_placement: dict[Placement, list[str]] = {}
    present = COMPONENTS if profile.model.architecture is not None else ("layers",)
    for name in present:
        by_placement.setdefault(placement(profile, name), []).append(name)
    notes = []
    for place, names in by_placement.items():
        sharded_k = sharded_bytes_per_parameter(k, place.zero_stage)
        over = f"dp {dp}" if place.dp_shard == dp else f"dp_shard {place.dp_shard} of dp {dp}"
        text = (
            f"ZeRO-{place.zero_stage} shards {sharded_k} of {k} B/parameter over {over}; "
            f"replicated {k - sharded_k} B/parameter: {_WHO[place.replicas_write]} "
            f"({place.replicas_write})"
        )
        if place.tp == "replicate":
            text = "tp-replicated, tp rank 0 writes; " + text
        if len(by_placement) > 1:
            text = f"{'/'.join(names)}: {text}"
        notes.append(text)
    return notes


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
    return split_even(rank_bytes, files_per_rank)


def shard_file_count(profile: Profile) -> int:
    """Files of one checkpoint besides the coordinator's: DLIO's files under
    ``cluster.layout.writer: dlio`` (1,544 at MLPerf's 405B), else gpus x files_per_rank (one
    per DCP bucket: sizing.dcp_plan)."""
    if profile.cluster.layout.writer == "dlio":
        return dlio_layout(profile).file_count
    return profile.cluster.gpus * profile.checkpoint.files_per_rank


def storm_file_count(profile: Profile) -> int:
    """Files the metadata storm creates per checkpoint: ``run.metadata_files`` when given
    (fewer, for a trial), else every shard file of a checkpoint (shard_file_count)."""
    return profile.run.metadata_files or shard_file_count(profile)
