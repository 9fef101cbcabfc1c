"""The cluster profile's schema: one frozen dataclass per YAML section (SPEC.md, "The profile").

Each field's type and ``meta(...)`` say what the generic reader (sizing.reader) accepts for it.
The checks that tie several fields together (tp*pp*dp = gpus, heads and kv_heads) are written
out by hand in ``cross_check``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptgate.sizing.architecture import Architecture, count_parameters
from ckptgate.sizing.reader import Context, ProfileError, meta
from ckptgate.sizing.units import GB, MiB

_POSITIVE = meta(gt=0)


@dataclass(frozen=True)
class ModelSpec:
    """Ψ (or the shape to count it from) and K, the checkpoint bytes per parameter."""

    parameters: int | None = field(metadata=_POSITIVE)
    bytes_per_parameter: int = field(metadata=_POSITIVE)
    architecture: Architecture | None


REPLICA_POLICIES = ("one", "all", "spread")
WRITERS = ("megatron", "dlio", "dcp")
DCP_WRITER_STATE = {3: "fsdp", 0: "replicated"}
"""cluster.parallelism.zero_stage -> the DCP state layout of ``writer: dcp`` (FSDP2's Shard(0)
of every tensor; DDP's replicated tensors)."""


@dataclass(frozen=True)
class Parallelism:
    """3D parallelism and who writes state that data-parallel replicas hold in common."""

    tp: int = field(metadata=_POSITIVE)
    pp: int = field(metadata=_POSITIVE)
    dp: int = field(metadata=_POSITIVE)
    zero_stage: int = field(default=1, metadata=meta(ge=0, le=3))
    replicas_write: str = field(default="spread", metadata=meta(choices=REPLICA_POLICIES))


@dataclass(frozen=True)
class ComponentLayout:
    """How one component's state (token embedding, output head with the final norm, or the
    transformer layers) is placed over TP and DP, and who writes what replicas hold in common.

    ``tp``: ``split`` (each tp rank holds 1/tp, Megatron's vocab- and tensor-parallel layers) or
    ``replicate`` (every tp rank holds it whole; tp rank 0 writes it, as DCP's deduplication of
    replicated data keeps one copy). ``zero_stage`` and ``replicas_write`` default to
    ``cluster.parallelism``'s. ``dp_shard`` (default dp): the dp ranks that ZeRO shards this
    component's sharded state over, as hybrid sharding (HSDP, torchtitan's
    ``data_parallel_shard_degree``) does: dp rank d is shard d mod dp_shard of replica group
    d // dp_shard, and the dp / dp_shard groups' copies of a shard are written as
    ``replicas_write`` says."""

    tp: str = field(default="split", metadata=meta(choices=("split", "replicate")))
    zero_stage: int | None = field(default=None, metadata=meta(ge=0, le=3))
    replicas_write: str | None = field(default=None, metadata=meta(choices=REPLICA_POLICIES))
    dp_shard: int | None = field(default=None, metadata=_POSITIVE)


_DEFAULT_COMPONENT = ComponentLayout()


@dataclass(frozen=True)
class Layout:
    """The checkpoint layout per component (section ``cluster.layout``; every key optional).

    The defaults reproduce the single-policy model: every component split over tp, sharded
    and written as ``cluster.parallelism`` says, no extra state, layers per stage by
    sizing.shards.layers_per_stage. ``extra_state_bytes_per_rank``: state every rank saves
    besides the model and optimizer (RNG, dataloader, LR scheduler), added to each shard.
    ``layers_per_stage``: explicit transformer layers on each pipeline stage (pp entries
    summing to model.architecture.layers; 0 allowed)."""

    embedding: ComponentLayout = _DEFAULT_COMPONENT
    head: ComponentLayout = _DEFAULT_COMPONENT
    layers: ComponentLayout = _DEFAULT_COMPONENT
    extra_state_bytes_per_rank: int = field(default=0, metadata=meta("bytes", ge=0))
    layers_per_stage: tuple[int, ...] | None = field(default=None, metadata=meta(ge=0))
    writer: str = field(default="megatron", metadata=meta(choices=WRITERS))
    """Who writes what: ``megatron`` (the per-component rules above, sizing.shards),
    ``dlio`` (DLIO's own layout, as MLPerf Storage runs it: sizing.dlio) or ``dcp`` (PyTorch
    DCP's planner over the architecture's tensors, sizing.dcp_scale: data parallel only, FSDP
    state at zero_stage 3, replicated at 0, checkpoint.files_per_rank as its thread_count;
    replicated state goes where DCP's dedup puts it, so ``replicas_write`` is ``spread`` there,
    its default, and any other value is refused naming both keys)."""


COMPONENTS = ("embedding", "head", "layers")


@dataclass(frozen=True)
class ClusterSpec:
    gpus: int = field(metadata=_POSITIVE)
    gpus_per_node: int = field(metadata=_POSITIVE)
    parallelism: Parallelism
    layout: Layout = field(default_factory=Layout)


@dataclass(frozen=True)
class FailureSpec:
    """Observed unexpected interruptions over a window at a GPU count (YAML: window_days).

    ``restart_s`` is the relaunch time per failure (requeue, process start, communicator
    set-up), not the checkpoint read, which is restart.read_s; a restart costs both."""

    interruptions: int = field(metadata=_POSITIVE)
    window_s: float = field(metadata=meta("days", gt=0, key="window_days"))
    observed_gpus: int = field(metadata=_POSITIVE)
    restart_s: float = field(default=0.0, metadata=meta("seconds", ge=0))


@dataclass(frozen=True)
class CheckpointSpec:
    interval_s: float = field(metadata=meta("seconds", gt=0))
    overhead_budget: float = field(metadata=meta(gt=0, lt=1))
    mode: str = field(metadata=meta(choices=("sync", "async")))
    async_headroom: float = field(metadata=meta(ge=1))
    staging_buffers: int = field(metadata=_POSITIVE)
    files_per_rank: int = field(metadata=_POSITIVE)
    goodput_budget: float | None = field(default=None, metadata=meta(gt=0, lt=1))
    replay: str | None = None
    """An existing checkpoint directory whose files (names and sizes, never content) the
    write burst, readback, reshard and storm replay instead of the profile's DCP split
    (``ckptgate.workloads.replay``); None: the profile's own files."""


@dataclass(frozen=True)
class RestartSpec:
    read_s: float = field(metadata=meta("seconds", gt=0))


@dataclass(frozen=True)
class RetentionSpec:
    count: int = field(metadata=_POSITIVE)
    protection_overhead: float = field(metadata=meta(ge=0))


@dataclass(frozen=True)
class RunSpec:
    """How the suite drives I/O on each node (section ``run:``; every key optional)."""

    transfer_bytes: int = field(default=16 * MiB, metadata=meta("bytes", gt=0))
    shard_bytes_cap: int | None = field(default=None, metadata=meta("bytes", gt=0))
    rounds: int = field(default=3, metadata=_POSITIVE)
    direct_io: bool = False
    reshard_fraction: float = field(default=0.5, metadata=meta(gt=0, le=1))
    metadata_files: int | None = field(default=None, metadata=_POSITIVE)
    readers: int = field(default=2, metadata=meta(ge=0))
    reader_bytes: int = field(default=1 * GB, metadata=meta("bytes", gt=0))
    max_reader_slowdown: float | None = field(default=None, metadata=meta(ge=0, le=1))
    payload: str = field(default="random", metadata=meta(choices=("random", "realistic")))
    """``random``: bytes no data reduction can fold (the default, what qualifies a storage);
    ``realistic``: a real checkpoint's reducibility at the profile's K, for a storage that
    compresses (``ckptgate.engine.realistic``); the verdict line names it."""
    payload_sample_bytes: int = field(default=64 * MiB, metadata=meta("bytes", gt=0))
    """Bytes of the latest round each node reads back to measure how reducible its payload
    is (``ckptgate.checks.payload``): spread over its ranks and files."""
    timeout_floor_s: float = field(default=60.0, metadata=meta("seconds", gt=0))
    stall_timeout_s: float = field(default=60.0, metadata=meta("seconds", gt=0))
    """A rank that makes no progress (no transfer, no file, no new phase) for this long is
    declared hung and named with its phase and file; the burst's deadline stays the outer
    bound. 60 s names a hung rank within about a minute at any profile size, where the
    deadline (ten budget windows) may be many minutes; ranks report every transfer and every
    file, so only one operation that itself takes longer (an fsync of a multi-GB shard on
    slow storage) needs a larger value."""


_DCP_ARCHITECTURE = Architecture(
    hidden=512, ffn_hidden=1408, layers=8, heads=8, kv_heads=8, vocab=32000
)


@dataclass(frozen=True)
class DcpSpec:
    """A small real model for PyTorch DCP runs (section ``dcp:``; every key optional)."""

    architecture: Architecture = _DCP_ARCHITECTURE
    world_size: int = field(default=2, metadata=_POSITIVE)
    thread_count: int = field(default=2, metadata=_POSITIVE)
    checkpointer: str = field(
        default="thread", metadata=meta(choices=("sync", "thread", "process"))
    )


@dataclass(frozen=True)
class Profile:
    """A cluster profile. ``source`` says where it was read from, ``given_keys`` which keys
    its YAML and ``--set`` gave (dotted paths, sections included; the rest are defaults);
    neither is compared."""

    name: str
    description: str
    source: str = field(compare=False, metadata={"internal": True})
    model: ModelSpec
    cluster: ClusterSpec
    failures: FailureSpec
    checkpoint: CheckpointSpec
    restart: RestartSpec
    retention: RetentionSpec
    run: RunSpec = field(default_factory=RunSpec)
    dcp: DcpSpec = field(default_factory=DcpSpec)
    given_keys: frozenset[str] = field(
        default=frozenset(), compare=False, repr=False, metadata={"internal": True}
    )

    @property
    def parameters(self) -> int:
        """Ψ: model.parameters when given, else counted from model.architecture."""
        if self.model.parameters is not None:
            return self.model.parameters
        assert self.model.architecture is not None  # guaranteed by validation
        return count_parameters(self.model.architecture)

    @property
    def nodes(self) -> int:
        return self.cluster.gpus // self.cluster.gpus_per_node


def cross_check(ctx: Context, profile: Profile) -> None:
    """The checks that tie several fields together."""
    model, cluster = profile.model, profile.cluster
    par = cluster.parallelism
    if model.parameters is None and model.architecture is None:
        raise ProfileError(
            f"{ctx.where('model')}: model: neither parameters nor architecture given; "
            "allowed: model.parameters (e.g. 405e9), or model.architecture "
            "(hidden, ffn_hidden, layers, heads, kv_heads, vocab), or both"
        )
    for arch_path, arch in (
        ("model.architecture", model.architecture),
        ("dcp.architecture", profile.dcp.architecture),
    ):
        if arch is None:
            continue
        if arch.heads % arch.kv_heads:
            raise ctx.error(
                f"{arch_path}.kv_heads",
                arch.kv_heads,
                f"does not divide {arch_path}.heads ({arch.heads})",
                "a divisor of heads (grouped-query attention)",
            )
    if cluster.gpus % cluster.gpus_per_node:
        raise ProfileError(
            f"{ctx.where('cluster.gpus', 'cluster.gpus_per_node')}: cluster.gpus = "
            f"{cluster.gpus} is not a multiple of cluster.gpus_per_node = "
            f"{cluster.gpus_per_node}; allowed: whole nodes only"
        )
    if par.tp * par.pp * par.dp != cluster.gpus:
        raise ProfileError(
            f"{ctx.where('cluster.parallelism', 'cluster.gpus')}: cluster.parallelism "
            f"tp*pp*dp = {par.tp}*{par.pp}*{par.dp} = {par.tp * par.pp * par.dp} "
            f"!= cluster.gpus = {cluster.gpus}; allowed: tp*pp*dp equal to gpus"
        )
    layout = cluster.layout
    tied = model.architecture is not None and model.architecture.tied_embeddings
    if tied and layout.writer != "dcp":
        raise ctx.error(
            "model.architecture.tied_embeddings",
            True,
            f"with cluster.layout.writer: {layout.writer}, whose layout does not model a tied "
            "head (Megatron keeps the head's copy, with its optimizer state, on the last "
            "pipeline stage)",
            "false, or cluster.layout.writer: dcp (DCP saves the tied weight under both names "
            "and its optimizer state once)",
        )
    if layout.writer == "dcp":
        _check_dcp_writer(ctx, profile)
    for name in COMPONENTS:
        shard = getattr(layout, name).dp_shard
        if shard is not None and par.dp % shard:
            raise ctx.error(
                f"cluster.layout.{name}.dp_shard",
                shard,
                f"does not divide cluster.parallelism.dp ({par.dp})",
                f"a divisor of dp ({par.dp}): dp ranks per replica group",
            )
    if layout.layers_per_stage is not None:
        stages = layout.layers_per_stage
        key = "cluster.layout.layers_per_stage"
        if model.architecture is None:
            raise ctx.error(key, list(stages), "given without model.architecture", "null")
        if len(stages) != par.pp:
            raise ctx.error(
                key,
                list(stages),
                f"{len(stages)} stages, cluster.parallelism.pp is {par.pp}",
                f"a list of {par.pp} layer counts (one per pipeline stage)",
            )
        if sum(stages) != model.architecture.layers:
            raise ctx.error(
                key,
                list(stages),
                f"sums to {sum(stages)} layers, model.architecture.layers is "
                f"{model.architecture.layers}",
                f"layer counts summing to {model.architecture.layers}",
            )
    elif model.architecture is not None and par.pp > model.architecture.layers:
        raise ctx.error(
            "cluster.parallelism.pp",
            par.pp,
            f"more pipeline stages than model.architecture.layers ({model.architecture.layers})",
            "pp <= layers",
        )


def _check_dcp_writer(ctx: Context, profile: Profile) -> None:
    """``cluster.layout.writer: dcp`` plans DCP's save of a data-parallel job's tensors."""
    refusals = dcp_writer_refusals(profile)
    if refusals:
        first = refusals[0]
        raise ctx.error(first.key, first.value, first.problem, first.allowed)


@dataclass(frozen=True)
class DcpWriterRefusal:
    """Why ``cluster.layout.writer: dcp`` cannot plan this profile: the key, its value, the
    problem and what is allowed (a ``Context.error``'s parts)."""

    key: str
    value: Any
    problem: str
    allowed: str


def dcp_writer_refusals(profile: Profile) -> tuple[DcpWriterRefusal, ...]:
    """Every reason ``cluster.layout.writer: dcp`` would be refused for this profile, in the
    order the loader checks them (it names the first); empty where dcp applies. DCP's planner
    plans a data-parallel save of the architecture's own tensors."""
    model, par = profile.model, profile.cluster.parallelism
    if model.architecture is None:
        return (
            DcpWriterRefusal(
                "cluster.layout.writer", "dcp", "needs model.architecture (its tensors)", "megatron"
            ),
        )
    refusals = []
    if par.tp != 1 or par.pp != 1:
        refusals.append(
            DcpWriterRefusal(
                "cluster.parallelism",
                f"tp {par.tp}, pp {par.pp}",
                "writer dcp plans a data-parallel save",
                "tp 1 and pp 1 (or cluster.layout.writer: megatron)",
            )
        )
    for where, policy in [("cluster.parallelism", par.replicas_write)] + [
        (f"cluster.layout.{name}", getattr(profile.cluster.layout, name).replicas_write)
        for name in COMPONENTS
    ]:
        if policy not in (None, "spread"):
            refusals.append(
                DcpWriterRefusal(
                    f"{where}.replicas_write",
                    policy,
                    "given with cluster.layout.writer: dcp, whose planner decides who writes "
                    "replicated state (dedup_save_plans: each replicated item to the rank with "
                    "the fewest bytes planned so far, which spreads it)",
                    "spread (the default), or cluster.layout.writer: megatron",
                )
            )
    if par.zero_stage not in DCP_WRITER_STATE:
        refusals.append(
            DcpWriterRefusal(
                "cluster.parallelism.zero_stage",
                par.zero_stage,
                "has no DCP state layout under cluster.layout.writer: dcp",
                "3 (FSDP, every tensor Shard(0)) or 0 (replicated)",
            )
        )
    counted = count_parameters(model.architecture)
    if model.parameters is not None and model.parameters != counted:
        refusals.append(
            DcpWriterRefusal(
                "model.parameters",
                model.parameters,
                f"differs from the {counted:,} the architecture counts; writer dcp plans the "
                "architecture's own tensors",
                f"omitted, or {counted}",
            )
        )
    if model.bytes_per_parameter not in (12, 14, 16):
        refusals.append(
            DcpWriterRefusal(
                "model.bytes_per_parameter",
                model.bytes_per_parameter,
                "has no DCP state under cluster.layout.writer: dcp",
                "12, 14 or 16",
            )
        )
    return tuple(refusals)
