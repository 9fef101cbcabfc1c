"""``cluster.layout.writer: dcp``: each rank's bytes and files as DCP's planner gives them.

The shard distribution of a profile whose layout says DCP (FSDP state at zero_stage 3,
replicated at 0, checkpoint.files_per_rank as thread_count) is sizing.dcp_plan's files, the
model held to real DCP saves by tests/dcp/test_plan_fidelity.py, not an even split.
"""

from __future__ import annotations

import pytest

from ckptgate.sizing import ProfileError, derive, load_profile
from ckptgate.sizing.dcp_plan import dcp_save_layout
from ckptgate.sizing.dcp_scale import dcp_chunk_count, dcp_rank_file_bytes
from ckptgate.sizing.metadata import dcp_metadata_chunks

DCP_TMPFS = [
    "model.parameters=null",
    "cluster.parallelism.tp=1",
    "cluster.parallelism.pp=1",
    "cluster.parallelism.dp=4",
    "cluster.layout.writer=dcp",
    "cluster.parallelism.zero_stage=3",
]
"""The tmpfs profile as a 4-rank FSDP job saved by DCP."""


@pytest.mark.parametrize(("zero_stage", "layout"), [(3, "fsdp"), (0, "replicated")])
@pytest.mark.parametrize("files", [1, 3])
def test_the_ranks_write_dcps_files_rank_by_rank(zero_stage: int, layout: str, files: int) -> None:
    profile = load_profile(
        "tmpfs",
        [
            *DCP_TMPFS,
            f"cluster.parallelism.zero_stage={zero_stage}",
            f"checkpoint.files_per_rank={files}",
        ],
    )
    arch = profile.model.architecture
    assert arch is not None
    dist = derive(profile).distribution
    assert dist is not None and dist.rank_files is not None
    planned = dcp_save_layout(arch, 14, 4, files, layout).files
    assert {name: size for rank in dist.rank_files for name, size in rank} == planned
    assert dist.per_rank_bytes == tuple(sum(size for _, size in rank) for rank in dist.rank_files)
    # the framing and small entries are the only bytes beyond Ψ x K
    assert dist.written_bytes == dist.checkpoint_bytes + dist.framing_bytes
    assert 0 < dist.framing_bytes < 0.01 * dist.checkpoint_bytes
    assert "DCP's planner as torch 2.13 plans" in dist.policy_note


def test_replicated_state_leaves_the_ranks_uneven_as_dcps_dedup_does() -> None:
    profile = load_profile("tmpfs", [*DCP_TMPFS, "cluster.parallelism.zero_stage=0"])
    dist = derive(profile).distribution
    assert dist is not None
    # whole tensors to the least-loaded rank: not the even split the spread policy gives
    assert dist.largest_bytes > 1.05 * dist.mean_bytes


def test_405b_fsdp_plans_every_rank_from_the_tensor_list() -> None:
    profile = load_profile("405b-fsdp")
    arch = profile.model.architecture
    assert arch is not None
    s = derive(profile)
    dist = s.distribution
    assert dist is not None and dist.rank_files is not None
    files = dcp_rank_file_bytes(arch, 14, 2048, 4, "fsdp")
    assert dist.rank_files[7] == tuple((f"__7_{i}.distcp", b) for i, b in enumerate(files[7]))
    assert dist.per_rank_bytes == tuple(sum(f) for f in files)
    assert s.files_per_checkpoint == 2048 * 4 + 1
    assert s.dcp_framing_bytes == 0  # already in the files' bytes


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["cluster.parallelism.tp=2", "cluster.parallelism.dp=2"], "cluster.parallelism"),
        (["cluster.parallelism.zero_stage=1"], "cluster.parallelism.zero_stage"),
        (["model.parameters=17e6"], "model.parameters"),
    ],
    ids=["tp=2", "zero_stage=1", "parameters"],
)
def test_a_layout_dcp_cannot_plan_is_refused_by_name(overrides: list[str], key: str) -> None:
    with pytest.raises(ProfileError) as refused:
        load_profile("tmpfs", [*DCP_TMPFS, *overrides])
    assert key in str(refused.value) and "allowed" in str(refused.value)


@pytest.mark.parametrize(
    "key", ["cluster.parallelism.replicas_write", "cluster.layout.embedding.replicas_write"]
)
@pytest.mark.parametrize("policy", ["one", "all"])
def test_replicas_write_other_than_dcps_own_is_refused_naming_both_keys(
    key: str, policy: str
) -> None:
    """Issue 35 item 4: under writer dcp, DCP's dedup decides who writes replicated state (it
    spreads it); ``replicas_write`` keeps only that meaning, ``spread``."""
    with pytest.raises(ProfileError) as refused:
        load_profile("tmpfs", [*DCP_TMPFS, "cluster.parallelism.zero_stage=0", f"{key}={policy}"])
    message = str(refused.value)
    assert key in message and "cluster.layout.writer: dcp" in message and "allowed" in message
    spread = load_profile("tmpfs", [*DCP_TMPFS, f"{key}=spread"])
    assert spread.cluster.layout.writer == "dcp"


def test_the_metadata_counts_the_chunks_the_planner_keeps() -> None:
    """FSDP at 2,048 ranks: K and V (1,024 rows) have 1,024 empty chunks each, which DCP's
    dedup keeps once; the per-placement count listed all 2,048 (1.59 GB, now 1.42 GB)."""
    fsdp = load_profile("405b-fsdp")
    arch = fsdp.model.architecture
    assert arch is not None
    chunks = dcp_metadata_chunks(fsdp)
    assert chunks == dcp_chunk_count(arch, 14, 2048, "fsdp")
    kv = 126 * 2 * 4  # K and V of every layer, four kinds of state each
    assert chunks < 5685 * 2048 - kv * 1000
    replicated = load_profile("405b-fsdp", ["cluster.parallelism.zero_stage=0"])
    assert dcp_metadata_chunks(replicated) == 5685 <= chunks
