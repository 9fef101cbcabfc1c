"""The write campaign's file plan: the profile's DCP split, or a replayed tree's share."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ckptgate.checks.campaign import file_plan
from ckptgate.cluster.nodes import SingleNode
from ckptgate.cluster.plan import plan_node
from ckptgate.sizing import dcp_metadata_bytes, load_profile


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
