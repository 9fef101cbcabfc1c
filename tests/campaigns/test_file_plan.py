"""The write campaign's file plan: the profile's DCP split, or a replayed tree's share."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ckptgate.campaigns.write import file_plan
from ckptgate.cluster.nodes import SingleNode
from ckptgate.cluster.plan import plan_node
from ckptgate.engine.pool import RankPool
from ckptgate.sizing import dcp_metadata_bytes, load_profile, shard_distribution
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import shard_files
from ckptgate.workloads.write_burst import run_write_burst


def _ctx(*overrides: str) -> SimpleNamespace:
    profile = load_profile("tmpfs", overrides=list(overrides))
    return SimpleNamespace(profile=profile, plan=plan_node(profile, 4), nodes=SingleNode())


def test_the_profile_plan_splits_every_played_shard_and_adds_the_metadata() -> None:
    ctx = _ctx("checkpoint.files_per_rank=3")
    plan = file_plan(ctx)  # type: ignore[arg-type]
    assert len(plan.files) == 4 * 3
    assert plan.shard_bytes == ctx.plan.played_bytes
    assert plan.metadata_bytes == dcp_metadata_bytes(ctx.profile)


def test_a_trial_cap_holds_for_the_coordinators_metadata_too() -> None:
    ctx = _ctx("run.shard_bytes_cap=64 kB")
    plan = file_plan(ctx)  # type: ignore[arg-type]
    assert dcp_metadata_bytes(ctx.profile) > 64_000
    assert plan.metadata_bytes == 64_000


def test_a_replay_plan_is_the_trees_own(tmp_path: Path) -> None:
    (tmp_path / "__0_0.distcp").write_bytes(b"x" * 10)
    (tmp_path / ".metadata").write_bytes(b"m")
    plan = file_plan(_ctx(f"checkpoint.replay={tmp_path}"))  # type: ignore[arg-type]
    assert (plan.source, plan.file_count, plan.total_bytes) == (str(tmp_path), 2, 11)


H, FFN, VOCAB, LAYERS = 16384, 53248, 128256, 126
LAYER_405B = 2 * H * H + 2 * H * 8 * 128 + 3 * H * FFN + 2 * H
PSI_405B = 2 * VOCAB * H + LAYERS * LAYER_405B + H


def dlio_405b_files(rank: int) -> dict[str, int]:
    """What DLIO writes for MLPerf's 405B (TP 8, PP 32, DP 2; Megatron's rank order), by hand:
    every rank its 1/512 of the 12 B/parameter optimizer state; dp rank 0 the model's 2 B per
    parameter, one file per layer per tp rank (126 layers: 4 on stages 0-29, 3 on 30 and 31),
    the embedding (layer 00) on stage 0, the final norm (127) and the head (128) on stage 31."""
    stage, dp, tp = rank // 16, rank // 8 % 2, rank % 8
    files = {
        f"zero_pp_rank_{dp}_mp_rank_{stage * 8 + tp:02d}_optim_states.pt": PSI_405B * 12 // 512
    }
    if dp == 0:
        first, count = (1 + 4 * stage, 4) if stage < 30 else (121 + 3 * (stage - 30), 3)
        layers = {i: LAYER_405B for i in range(first, first + count)}
        if stage == 0:
            layers[0] = VOCAB * H
        if stage == 31:
            layers |= {127: H, 128: VOCAB * H}
        for i, params in layers.items():
            files[f"layer_{i:02d}-model_{tp:02d}-model_states.pt"] = params * 2 // 8
    return files


def _close(planned: dict[str, int], expected: dict[str, int]) -> bool:
    """Same names; bytes within the one byte an even split's remainder gives."""
    return planned.keys() == expected.keys() and all(
        abs(planned[n] - expected[n]) <= 1 for n in expected
    )


def test_under_dlio_every_rank_writes_dlios_files_and_no_metadata() -> None:
    profile = load_profile("mlperf-405b")
    ctx = SimpleNamespace(profile=profile, plan=plan_node(profile, 8), nodes=SingleNode())
    plan = file_plan(ctx)  # type: ignore[arg-type]
    assert plan.metadata_name is None and plan.metadata_bytes == 0
    for rank in ctx.plan.global_ranks:
        mine = {f.name: f.bytes for f in plan.files if f.global_rank == rank}
        assert _close(mine, dlio_405b_files(rank)), rank
    assert plan.file_count == len(plan.files)
    assert plan.shard_bytes == ctx.plan.played_bytes


def test_dlios_files_rank_by_rank_over_the_whole_405b_cluster() -> None:
    every = shard_distribution(load_profile("mlperf-405b")).rank_files
    assert every is not None and len(every) == 512
    assert all(_close(dict(files), dlio_405b_files(r)) for r, files in enumerate(every))
    assert sum(len(files) for files in every) == 1544
    assert {len(files) for files in every} == {1, 4, 5, 6}


def test_a_trial_cap_cuts_a_named_ranks_files_in_proportion() -> None:
    profile = load_profile("mlperf-405b", ["run.shard_bytes_cap=64 kB"])
    ctx = SimpleNamespace(profile=profile, plan=plan_node(profile, 8), nodes=SingleNode())
    plan = file_plan(ctx)  # type: ignore[arg-type]
    for rank in ctx.plan.global_ranks:
        mine = [f for f in plan.files if f.global_rank == rank]
        assert sum(f.bytes for f in mine) == 64_000
        assert {f.name for f in mine} == set(dlio_405b_files(rank))


def test_under_dcp_the_files_are_the_planners_with_the_metadata() -> None:
    profile = load_profile("405b-fsdp")
    ctx = SimpleNamespace(profile=profile, plan=plan_node(profile, 8), nodes=SingleNode())
    plan = file_plan(ctx)  # type: ignore[arg-type]
    assert plan.metadata_name == ".metadata"
    assert plan.metadata_bytes == dcp_metadata_bytes(profile)
    assert ctx.plan.rank_files is not None
    for rank, files in zip(ctx.plan.global_ranks, ctx.plan.rank_files, strict=True):
        mine = tuple((f.name, f.bytes) for f in plan.files if f.global_rank == rank)
        assert mine == files and [n for n, _ in mine] == [f"__{rank}_{i}.distcp" for i in range(4)]
    # whole tensors in size-balanced buckets: not the even split of each shard
    sizes = [f.bytes for f in plan.files if f.global_rank == ctx.plan.global_ranks[0]]
    assert max(sizes) != min(sizes)


def test_the_burst_writes_dlios_files_on_the_target(tmp_path: Path) -> None:
    """Two played ranks of MLPerf's 405B (the largest shard's and the smallest's), capped for
    a trial: the target holds exactly DLIO's file names for them, each at its planned bytes."""
    profile = load_profile("mlperf-405b", ["run.shard_bytes_cap=64 kB"])
    ctx = SimpleNamespace(profile=profile, plan=plan_node(profile, 2), nodes=SingleNode())
    plan = file_plan(ctx)  # type: ignore[arg-type]
    shards = shard_files(plan, str(tmp_path), 7, 2**16)
    with RankPool(2) as pool:
        burst = run_write_burst(pool, BackendSpec("file"), shards, 120)
    expected = {n for r in ctx.plan.global_ranks for n in dlio_405b_files(r)}
    assert {p.name for p in tmp_path.iterdir()} == expected
    assert len(expected) == 6 + 1  # stage 0's dp rank 0 (6 files) and a dp rank 1 (1)
    assert all((tmp_path / f.name).stat().st_size == f.bytes for f in plan.files)
    assert burst.total_bytes == plan.shard_bytes
