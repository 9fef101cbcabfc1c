"""Every derived number of SPEC.md, defined once: one ``@define`` each (sizing.definition), in
the requirements table's order; each value function's docstring gives its formula and source.

Write rates and retained capacity use the bytes the ranks actually write (``written_bytes``),
which equal the checkpoint bytes except under ``replicas_write: all``, where every dp replica
writes its own copy of the replicated state, and with fixed extra state per rank
(cluster.layout); restart reads need one copy (checkpoint_bytes).

The save ends with DCP's global ``.metadata`` (sizing.metadata), written by one coordinator
after every rank's shards are done: on the critical path, serial. The sync and async write
requirements therefore count it: the aggregate and async rates move ``save_bytes`` (the shards
plus the .metadata) in the window, and the per-rank and per-node rates add the .metadata to
the largest shard and the largest node, since the coordinator writes it after the slowest
rank has finished, at a rank's (a node's) bandwidth: largest / b + metadata / b <= window.
"""

from __future__ import annotations

from ckptgate.sizing import formulas
from ckptgate.sizing.dcp_plan import TORCH_SAVE_FRAMING_BYTES
from ckptgate.sizing.definition import Basis, define
from ckptgate.sizing.distribution import ShardDistribution
from ckptgate.sizing.metadata import (
    DCP_BYTE_ENTRIES,
    DCP_METADATA_BYTES_PER_BYTE_ENTRY,
    DCP_METADATA_BYTES_PER_CHUNK,
    DCP_METADATA_BYTES_PER_RANK,
    DCP_METADATA_BYTES_PER_TENSOR,
    dcp_framing_bytes,
    dcp_metadata_bytes,
    dcp_metadata_chunks,
    dcp_metadata_tensors,
)
from ckptgate.sizing.shards import shard_file_count
from ckptgate.sizing.units import (
    format_bytes,
    format_count,
    format_fraction,
    format_seconds,
    plural,
)

# The checks that measure each requirement, as the sizing table names them: each check's
# pytest marker (its name in the check table, ckptgate.checks.table; the sizing stays pure and
# does not import it, so tests/checks/test_table.py checks that every name here is a check).
TEST_CHECKPOINT_BYTES = "-m write, -m dcp"
TEST_WRITE_BURST = "-m write"
TEST_METADATA_STORM = "-m metadata"
TEST_RESTART_READ = "-m restart"
TEST_RETENTION = "-m retention"

SRC_SPEC = "SPEC.md"
SRC_ZERO = "ZeRO (Rajbhandari et al., 2020): 16Ψ = 2Ψ + 2Ψ + 12Ψ; MLPerf Storage: 14 B/parameter"
SRC_LLAMA3 = "The Llama 3 Herd of Models (Meta, 2024): 419 unexpected interruptions in 54 days"
SRC_YOUNG = "Young (1974), A first order approximation to the optimum checkpoint interval"
SRC_DALY = (
    "Daly (2006), A higher order estimate of the optimum checkpoint interval for restart dumps"
)
SRC_DCP = "PyTorch Distributed Checkpoint: one file per rank plus .metadata"
SRC_DCP_FRAMING = "PyTorch DCP FileSystemWriter: one torch.save per chunk (measured, torch 2.13)"
SRC_DCP_METADATA = (
    "PyTorch DCP pickles one .metadata on the coordinator; bytes per tensor and per chunk "
    "measured on real saves (tests/dcp/test_metadata.py)"
)


def _rank_position(dist: ShardDistribution, rank: int) -> str:
    tp_idx = rank % dist.tp
    dp_idx = rank // dist.tp % dist.dp
    pp_idx = rank // (dist.tp * dist.dp)
    return f"rank {rank}: pp {pp_idx}, dp {dp_idx}, tp {tp_idx}"


b_, s_ = format_bytes, format_seconds


def _written_text(b: Basis) -> str:
    """The bytes written per checkpoint, saying so when replicas add copies."""
    if b["written_bytes"] != b["checkpoint_bytes"]:
        return f"{b_(b['written_bytes'])} written"
    return b_(b["checkpoint_bytes"])


def _headroom_text(b: Basis) -> str:
    return f"{b.profile.checkpoint.async_headroom:g} headroom"


def _counted(b: Basis) -> bool:
    return b.profile.model.parameters is None


@define(
    "Parameters (Ψ)",
    "parameters",
    lambda b: "counted from model.architecture" if _counted(b) else "model.parameters",
    SRC_SPEC,
)
def parameters(b: Basis) -> int:
    """Ψ: model.parameters, or counted from model.architecture (sizing.architecture).
    Source: SPEC.md's counting rule; Llama 3 shapes (Meta, 2024)."""
    return b.profile.parameters


@define(
    "Checkpoint size",
    "B",
    lambda b: (
        f"{format_count(b['parameters'])} parameters x "
        f"{b.profile.model.bytes_per_parameter} B/parameter"
    ),
    SRC_ZERO,
    TEST_CHECKPOINT_BYTES,
)
def checkpoint_bytes(b: Basis) -> int:
    """Ψ · K bytes. Source: ZeRO (Rajbhandari et al., 2020), 16Ψ = 2Ψ + 2Ψ + 12Ψ; MLPerf
    Storage's 14 B/parameter."""
    return b["parameters"] * b.profile.model.bytes_per_parameter


@define(
    "Weights-only (bf16) size",
    "B",
    lambda b: f"{format_count(b['parameters'])} parameters x 2 B/parameter",
    SRC_SPEC,
)
def weights_only_bytes(b: Basis) -> int:
    """Ψ · 2 bytes, the bf16 weights shipped to inference. Source: SPEC.md."""
    return b["parameters"] * 2


def _written_rule(b: Basis) -> str:
    """Whose rule gave the per-rank bytes, for the written bytes' formula."""
    writer = b.profile.cluster.layout.writer
    if writer == "dcp":
        return "sum of every rank's files (DCP's planner)"
    if writer == "dlio":
        return "sum of every rank's files (DLIO's layout)"
    return f"sum of per-rank shards (replicas_write {b.profile.cluster.parallelism.replicas_write})"


@define(
    "Bytes written per checkpoint",
    "B",
    lambda b: (
        _written_rule(b)
        + (f"; {b.dist.written_parts()}" if b["written_bytes"] != b["checkpoint_bytes"] else "")
    ),
    SRC_ZERO,
    TEST_WRITE_BURST,
)
def written_bytes(b: Basis) -> int:
    """Sum of the per-rank shards (sizing.shards): checkpoint_bytes, plus the replicated state
    again for every further dp replica under ``replicas_write: all``, plus every rank's fixed
    extra state (cluster.layout.extra_state_bytes_per_rank). Source: ZeRO (2020)."""
    return b.dist.written_bytes


@define(
    "Mean shard per rank",
    "B",
    lambda b: f"{_written_text(b)} / {plural(b.profile.cluster.gpus, 'GPU')}",
    SRC_SPEC,
)
def mean_shard_bytes(b: Basis) -> float:
    """written_bytes / gpus. Source: SPEC.md."""
    return b.dist.mean_bytes


@define(
    "Largest shard per rank",
    "B",
    lambda b: _rank_position(b.dist, b.dist.largest_rank),
    "shard distribution (sizing.shards)",
)
def largest_shard_bytes(b: Basis) -> int:
    """The largest per-rank shard. Source: the shard distribution (sizing.shards)."""
    return b.dist.largest_bytes


@define(
    "Smallest shard per rank",
    "B",
    lambda b: _rank_position(b.dist, b.dist.per_rank_bytes.index(b.dist.smallest_bytes)),
    "shard distribution (sizing.shards)",
)
def smallest_shard_bytes(b: Basis) -> int:
    """The smallest per-rank shard. Source: the shard distribution (sizing.shards)."""
    return b.dist.smallest_bytes


@define(
    "Mean bytes per node",
    "B",
    lambda b: f"{_written_text(b)} / {plural(b.profile.nodes, 'node')}",
    SRC_SPEC,
)
def per_node_bytes(b: Basis) -> float:
    """written_bytes / nodes. Source: SPEC.md."""
    return b["written_bytes"] / b.profile.nodes


@define(
    "Largest node's bytes",
    "B",
    lambda b: f"sum of {b.profile.cluster.gpus_per_node} ranks' shards on the largest node",
    "shard distribution (sizing.shards)",
)
def largest_node_bytes(b: Basis) -> int:
    """The largest sum of one node's ranks' shards. Source: sizing.shards."""
    return b.dist.largest_node_bytes


@define(
    "DCP .metadata (one coordinator, at commit)",
    "B",
    lambda b: (
        "none: DLIO writes no .metadata (cluster.layout.writer: dlio)"
        if b.profile.cluster.layout.writer == "dlio"
        else f"{format_count(dcp_metadata_tensors(b.profile))} tensors x "
        f"{DCP_METADATA_BYTES_PER_TENSOR} B + {format_count(dcp_metadata_chunks(b.profile))} "
        f"chunks x {DCP_METADATA_BYTES_PER_CHUNK} B + {DCP_BYTE_ENTRIES} byte entries x "
        f"{DCP_METADATA_BYTES_PER_BYTE_ENTRY} B + {format_count(b.profile.cluster.gpus)} ranks x "
        f"{DCP_METADATA_BYTES_PER_RANK} B"
    ),
    SRC_DCP_METADATA,
    TEST_METADATA_STORM,
    name="dcp_metadata_bytes",
)
def dcp_metadata_bytes_(b: Basis) -> int:
    """sizing.metadata.dcp_metadata_bytes: tensors x 160 B + chunks x 171 B + byte entries
    x 56 B + ranks x 260 B, chunks from the layout. Source: real DCP saves,
    tests/dcp/test_metadata.py."""
    return dcp_metadata_bytes(b.profile)


@define(
    "DCP framing in the data files (torch.save per chunk)",
    "B",
    lambda b: (
        "in the shards' bytes (DCP's planner, cluster.layout.writer: dcp)"
        if b.profile.cluster.layout.writer == "dcp"
        else f"{format_count(dcp_metadata_chunks(b.profile))} chunks x "
        f"{TORCH_SAVE_FRAMING_BYTES} B + {DCP_BYTE_ENTRIES} byte entries"
    ),
    SRC_DCP_FRAMING,
    name="dcp_framing_bytes",
)
def dcp_framing_bytes_(b: Basis) -> int:
    """sizing.metadata.dcp_framing_bytes: one torch.save per chunk and per byte entry.
    Source: torch 2.13, tests/dcp/test_plan_fidelity.py."""
    return dcp_framing_bytes(b.profile)


@define(
    "Bytes per save (shards + .metadata)",
    "B",
    lambda b: f"{_written_text(b)} + {b_(b['dcp_metadata_bytes'])} .metadata",
    SRC_DCP,
)
def save_bytes(b: Basis) -> int:
    """written_bytes + dcp_metadata_bytes: the state and the commit, what the rates move.
    Source: PyTorch DCP."""
    return b["written_bytes"] + b["dcp_metadata_bytes"]


@define(
    "Bytes per save on disk (+ framing)",
    "B",
    lambda b: f"{b_(b['save_bytes'])} + {b_(b['dcp_framing_bytes'])} framing",
    SRC_DCP_FRAMING,
)
def save_bytes_on_disk(b: Basis) -> int:
    """save_bytes + dcp_framing_bytes: what ``du`` sees of one DCP save. The rates leave the
    framing out (0.1 % at 405b). Source: PyTorch DCP; tests/dcp/test_metadata.py."""
    return b["save_bytes"] + b["dcp_framing_bytes"]


def _with_metadata(b: Basis, what: str) -> str:
    return f"({what} + {b_(b['dcp_metadata_bytes'])} .metadata after it)"


@define(
    "Job MTBF",
    "s",
    lambda b: (
        f"{s_(b.profile.failures.window_s)} / {b.profile.failures.interruptions} "
        f"interruptions x {format_count(b.profile.failures.observed_gpus)} observed GPUs / "
        f"{format_count(b.profile.cluster.gpus)} GPUs"
    ),
    SRC_LLAMA3,
    name="mtbf_s",
)
def mtbf_s_(b: Basis) -> float:
    """mtbf_s() for the profile's failure record and GPU count. Source: SPEC.md; Llama 3."""
    fail = b.profile.failures
    return formulas.mtbf_s(
        fail.interruptions, fail.window_s, fail.observed_gpus, b.profile.cluster.gpus
    )


@define("Checkpoint interval (T)", "s", lambda b: "checkpoint.interval_s", SRC_SPEC)
def interval_s(b: Basis) -> float:
    """T, the basis's interval: checkpoint.interval_s for derive. Source: SPEC.md."""
    return b.interval_s


@define(
    "Lost work at T",
    "fraction",
    lambda b: f"{s_(b['interval_s'])} / 2 / {s_(b['mtbf_s'])} MTBF",
    f"{SRC_SPEC}, first order",
    name="lost_work_fraction",
)
def lost_work_fraction_(b: Basis) -> float:
    """lost_work_fraction() at T: the work recomputed after a failure. Source: SPEC.md."""
    return formulas.lost_work_fraction(b["interval_s"], b["mtbf_s"])


@define(
    "Restart cost per failure",
    "s",
    lambda b: (
        f"{s_(b.profile.failures.restart_s)} relaunch (failures.restart_s) + "
        f"{s_(b.profile.restart.read_s)} checkpoint read (restart.read_s)"
    ),
    SRC_SPEC,
)
def restart_cost_s(b: Basis) -> float:
    """failures.restart_s (relaunch) + restart.read_s (loading the checkpoint), seconds of
    wall clock per failure besides the lost work. Source: SPEC.md; Daly (2006)'s R."""
    return b.profile.failures.restart_s + b.profile.restart.read_s


@define(
    "Restart loss",
    "fraction",
    lambda b: f"{s_(b['restart_cost_s'])} restart cost / {s_(b['mtbf_s'])} MTBF",
    f"{SRC_SPEC}, first order",
    name="restart_loss_fraction",
)
def restart_loss_fraction_(b: Basis) -> float:
    """restart_loss_fraction() for the restart cost. Source: SPEC.md; Daly (2006)."""
    return formulas.restart_loss_fraction(b["restart_cost_s"], b["mtbf_s"])


@define(
    "Young's optimal interval",
    "s",
    lambda b: f"sqrt(2 x {s_(b.chosen['stall_budget_s'])} stall x {s_(b['mtbf_s'])} MTBF)",
    SRC_YOUNG,
)
def optimal_interval_s(b: Basis) -> float:
    """young_interval_s() for a stall that does not scale with the interval: the stall budget
    at the profile's chosen interval (overhead_budget x checkpoint.interval_s), so that the
    optimum does not move with the interval it is meant to choose. Source: Young (1974)."""
    return formulas.young_interval_s(b.chosen["stall_budget_s"], b["mtbf_s"])


def _daly_formula(b: Basis) -> str:
    d, m = s_(b.chosen["stall_budget_s"]), s_(b["mtbf_s"])
    return f"sqrt(2 x {d} x {m}) x (1 + sqrt({d} / (2 x {m})) / 3 + {d} / (2 x {m}) / 9) - {d}"


@define("Daly's optimal interval", "s", _daly_formula, SRC_DALY, name="daly_interval_s")
def daly_interval_s_(b: Basis) -> float:
    """daly_interval_s() for the same fixed stall as Young's. Source: Daly (2006)."""
    return formulas.daly_interval_s(b.chosen["stall_budget_s"], b["mtbf_s"])


@define(
    "Stall budget per checkpoint",
    "s",
    lambda b: (
        f"{format_fraction(b.profile.checkpoint.overhead_budget)} overhead budget x "
        f"{s_(b['interval_s'])}"
    ),
    SRC_SPEC,
    name="stall_budget_s",
)
def stall_budget_s_(b: Basis) -> float:
    """stall_budget_s() at T. Source: SPEC.md."""
    return formulas.stall_budget_s(b.profile.checkpoint.overhead_budget, b["interval_s"])


def _goodput_formula(b: Basis) -> str:
    ckpt = b.profile.checkpoint
    budget = f"; budget {format_fraction(ckpt.goodput_budget)}" if ckpt.goodput_budget else ""
    return (
        f"{format_fraction(b['lost_work_fraction'])} lost work + "
        f"{format_fraction(b['restart_loss_fraction'])} restart + "
        f"{format_fraction(ckpt.overhead_budget)} stall{budget}"
    )


@define("Goodput loss (lost work + restart + stalls)", "fraction", _goodput_formula, SRC_YOUNG)
def goodput_loss_fraction(b: Basis) -> float:
    """first_order_waste() at T with the stall budget at T and the restart cost (relaunch and
    checkpoint read). Source: Young (1974); Daly (2006)."""
    return formulas.first_order_waste(
        b["interval_s"], b["stall_budget_s"], b["restart_cost_s"], b["mtbf_s"]
    )


@define(
    "Waste at the chosen interval's stall",
    "fraction",
    lambda b: f"{s_(b.chosen['stall_budget_s'])} stall / {s_(b['interval_s'])} + lost work",
    SRC_YOUNG,
    in_table=False,
)
def waste_at_fixed_stall_fraction(b: Basis) -> float:
    """first_order_waste() at T with the stall held at the chosen interval's budget: the waste
    that Young's interval minimizes. Source: Young (1974)."""
    return formulas.first_order_waste(
        b["interval_s"], b.chosen["stall_budget_s"], b["restart_cost_s"], b["mtbf_s"]
    )


@define(
    "Sync write bandwidth (aggregate)",
    "B/s",
    lambda b: f"{b_(b['save_bytes'])} per save / {s_(b['stall_budget_s'])} stall budget",
    SRC_SPEC,
    TEST_WRITE_BURST,
)
def sync_write_bytes_per_s(b: Basis) -> float:
    """save_bytes / stall_budget_s: the shards and the .metadata within the stall.
    Source: SPEC.md; PyTorch DCP (the .metadata ends the save)."""
    return b["save_bytes"] / b["stall_budget_s"]


@define(
    "Sync write bandwidth per node (shards only)",
    "B/s",
    lambda b: (
        f"{b_(b['largest_node_bytes'])} largest node / {s_(b['stall_budget_s'])} stall budget"
    ),
    SRC_SPEC,
    TEST_WRITE_BURST,
)
def sync_write_shards_bytes_per_s_per_node(b: Basis) -> float:
    """largest_node_bytes / stall_budget_s: the node's shards alone, the figure of the seed's
    worked example (SPEC.md's per-node rate) and of peers that leave the commit out. The row
    below adds the coordinator's .metadata, which DCP writes after the slowest node. Source:
    SPEC.md."""
    return b["largest_node_bytes"] / b["stall_budget_s"]


@define(
    "Sync write bandwidth per node (with the .metadata commit)",
    "B/s",
    lambda b: (
        f"{_with_metadata(b, b_(b['largest_node_bytes']) + ' largest node')} / "
        f"{s_(b['stall_budget_s'])} stall budget"
    ),
    SRC_SPEC,
    TEST_WRITE_BURST,
)
def sync_write_bytes_per_s_per_node(b: Basis) -> float:
    """(largest_node_bytes + dcp_metadata_bytes) / stall_budget_s: the coordinator's .metadata
    follows the slowest node. Source: SPEC.md; PyTorch DCP."""
    return (b["largest_node_bytes"] + b["dcp_metadata_bytes"]) / b["stall_budget_s"]


@define(
    "Sync write bandwidth per rank",
    "B/s",
    lambda b: (
        f"{_with_metadata(b, b_(b['largest_shard_bytes']) + ' largest shard')} / "
        f"{s_(b['stall_budget_s'])} stall budget"
    ),
    SRC_SPEC,
    TEST_WRITE_BURST,
)
def sync_write_bytes_per_s_per_rank(b: Basis) -> float:
    """(largest_shard_bytes + dcp_metadata_bytes) / stall_budget_s: the coordinator writes the
    .metadata once the slowest rank is done. Source: SPEC.md; PyTorch DCP."""
    return (b["largest_shard_bytes"] + b["dcp_metadata_bytes"]) / b["stall_budget_s"]


@define(
    "Async persist bandwidth (minimum)",
    "B/s",
    lambda b: f"{b_(b['save_bytes'])} per save / {s_(b['interval_s'])}",
    SRC_SPEC,
    TEST_WRITE_BURST,
)
def async_persist_min_bytes_per_s(b: Basis) -> float:
    """save_bytes / T: each checkpoint (shards and .metadata) persisted before the next
    starts. Source: SPEC.md; PyTorch DCP."""
    return b["save_bytes"] / b["interval_s"]


@define(
    "Async persist bandwidth (planned)",
    "B/s",
    lambda b: f"{b_(b['save_bytes'])} per save / {s_(b['interval_s'])} x {_headroom_text(b)}",
    SRC_SPEC,
    TEST_WRITE_BURST,
)
def async_persist_planned_bytes_per_s(b: Basis) -> float:
    """save_bytes / T x async_headroom (contention with training I/O). Source: SPEC.md."""
    return b["save_bytes"] / b["interval_s"] * b.profile.checkpoint.async_headroom


def _staging_formula(b: Basis) -> str:
    n = b.profile.checkpoint.staging_buffers
    return f"{b_(b['largest_node_bytes'])} largest node x {n} staging buffer{'s' if n != 1 else ''}"


@define(
    "Host staging memory per node",
    "B",
    _staging_formula,
    f"{SRC_SPEC}; PyTorch DCP async_save stages to CPU memory",
)
def staging_bytes_per_node(b: Basis) -> int:
    """largest_node_bytes x staging_buffers. Source: SPEC.md; PyTorch DCP async_save."""
    return b["largest_node_bytes"] * b.profile.checkpoint.staging_buffers


@define(
    "Files per checkpoint",
    "files",
    lambda b: (
        f"DLIO's files: {format_count(b.profile.cluster.gpus)} optimizer files + a model file "
        "per layer and tp rank, no .metadata"
        if b.profile.cluster.layout.writer == "dlio"
        else f"{format_count(b.profile.cluster.gpus)} GPUs x "
        f"{b.profile.checkpoint.files_per_rank} file/rank + 1 .metadata"
    ),
    SRC_DCP,
    TEST_METADATA_STORM,
)
def files_per_checkpoint(b: Basis) -> int:
    """gpus x files_per_rank + 1 global .metadata; under ``cluster.layout.writer: dlio`` the
    files DLIO writes. Source: PyTorch Distributed Checkpoint; sizing.dlio."""
    files = shard_file_count(b.profile)
    return files if b.profile.cluster.layout.writer == "dlio" else files + 1


@define(
    "File-create window",
    "s",
    lambda b: (
        f"{s_(b['stall_budget_s'])} stall budget (sync)"
        if b.profile.checkpoint.mode == "sync"
        else f"{s_(b['interval_s'])} / {_headroom_text(b)} (async)"
    ),
    SRC_SPEC,
    name="create_window_s",
)
def create_window_s_(b: Basis) -> float:
    """create_window_s() at T. Source: SPEC.md."""
    ckpt = b.profile.checkpoint
    return formulas.create_window_s(
        ckpt.mode, b["stall_budget_s"], b["interval_s"], ckpt.async_headroom
    )


@define(
    "File-create rate",
    "1/s",
    lambda b: f"{format_count(b['files_per_checkpoint'])} files / {s_(b['create_window_s'])}",
    SRC_SPEC,
    TEST_METADATA_STORM,
)
def create_rate_per_s(b: Basis) -> float:
    """files_per_checkpoint / create_window_s. Source: SPEC.md."""
    return b["files_per_checkpoint"] / b["create_window_s"]


@define(
    "Restart read bandwidth",
    "B/s",
    lambda b: f"{b_(b['checkpoint_bytes'])} / {s_(b.profile.restart.read_s)} restart.read_s",
    SRC_SPEC,
    TEST_RESTART_READ,
)
def restart_read_bytes_per_s(b: Basis) -> float:
    """checkpoint_bytes / restart.read_s: a restore reads one copy. Source: SPEC.md."""
    return b["checkpoint_bytes"] / b.profile.restart.read_s


@define(
    "Retained capacity (hot tier)",
    "B",
    lambda b: (
        f"{_written_text(b)} x {b.profile.retention.count} checkpoints x "
        f"(1 + {b.profile.retention.protection_overhead:g} protection)"
    ),
    SRC_SPEC,
    TEST_RETENTION,
)
def retained_bytes(b: Basis) -> int:
    """written_bytes x retention.count x (1 + protection_overhead), rounded to the byte.
    Source: SPEC.md."""
    retention = b.profile.retention
    return round(b["written_bytes"] * retention.count * (1 + retention.protection_overhead))
