"""The profile as run: a verdict names what it proved, overrides and file digest included."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ckptgate.sizing import derive, load_profile
from ckptgate.sizing.as_run import ProfileAsRun, profile_as_run


def _as_run(name: str, *overrides: str) -> ProfileAsRun:
    run = load_profile(name, overrides)
    return profile_as_run(load_profile(name), run, derive(run))


def test_a_shipped_profile_unchanged_is_named_by_its_name_and_size() -> None:
    as_run = _as_run("tmpfs")
    assert as_run.shipped and not as_run.modified and as_run.sha256 is None
    assert as_run.label() == "tmpfs"
    assert as_run.words() == "tmpfs: Ψ 16.0 M parameters, checkpoint 224 MB, 4 GPUs on 1 node"


def test_a_set_that_sizes_the_job_makes_it_modified_naming_every_key_and_both_values() -> None:
    as_run = _as_run("7b", "cluster.gpus=4", "cluster.gpus_per_node=4",
                     "cluster.parallelism.dp=4", "model.parameters=16e6")  # fmt: skip
    assert as_run.modified
    assert as_run.label() == (
        "7b modified (cluster.gpus 64 -> 4; cluster.gpus_per_node 8 -> 4; "
        "cluster.parallelism.dp 64 -> 4; model.parameters 7000000000 -> 16000000)"
    )
    assert (as_run.parameters, as_run.checkpoint_bytes, as_run.gpus, as_run.nodes) == (
        16_000_000, 224_000_000, 4, 1,
    )  # fmt: skip


def test_a_requirement_setting_is_a_modification_and_a_suite_setting_is_not() -> None:
    budget = _as_run("tmpfs", "checkpoint.interval_s=120")
    assert budget.modified and "checkpoint.interval_s 60.0 -> 120.0" in budget.label()
    suite = _as_run("tmpfs", "run.rounds=1", "run.shard_bytes_cap=2 MB")
    assert not suite.modified and suite.label() == "tmpfs"
    assert [c.words() for c in suite.settings] == [
        "run.rounds 3 -> 1",
        "run.shard_bytes_cap None -> 2000000",
    ]


def test_a_profile_file_is_named_by_its_path_and_short_sha256(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "ckptgate/sizing/profiles/tmpfs.yaml").read_bytes()
    path = tmp_path / "mine.yaml"
    path.write_bytes(text)
    digest = hashlib.sha256(text).hexdigest()
    run = load_profile(path)
    as_run = profile_as_run(run, run, derive(run), digest)
    assert not as_run.shipped and as_run.sha256 == digest[:12]
    assert as_run.label() == f"{path} (sha256 {digest[:12]})"
