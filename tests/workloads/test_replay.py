"""Replay a real checkpoint: names and sizes read with stat only, the pattern played exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.fileplan import commit_files, lanes, shard_files
from ckptgate.workloads.readback import run_readback
from ckptgate.workloads.replay import ReplayError, node_share, scan_checkpoint
from ckptgate.workloads.write_burst import run_write_burst

MB = 10**6
LOCAL = BackendSpec("file")
TRANSFER_BYTES = 1 << 20


def sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no room (truncate): a fake checkpoint is cheap."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)


@pytest.fixture
def dcp_tree(tmp_path: Path) -> Path:
    """A DCP save of 3 ranks, 2 files each (FileSystemWriter thread_count=2), and .metadata."""
    root = tmp_path / "dcp" / "step-100"
    for rank in range(3):
        for index in range(2):
            sparse(root / f"__{rank}_{index}.distcp", (rank + 1) * MB + index * 4097)
    sparse(root / ".metadata", 278_000)
    return root


@pytest.fixture
def megatron_tree(tmp_path: Path) -> Path:
    """A Megatron save: TP 2 x PP 2 rank directories, and the tracker file beside iter_*/."""
    root = tmp_path / "megatron"
    for tp in range(2):
        for pp in range(2):
            sparse(root / "iter_0000100" / f"mp_rank_{tp:02d}_{pp:03d}" / "model_optim_rng.pt",
                   (2 + tp + 2 * pp) * MB)  # fmt: skip
    (root / "latest_checkpointed_iteration.txt").write_text("100")
    return root


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry's (size, mtime_ns): what a scan must leave as it found it."""
    return {
        str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_a_dcp_tree_keeps_its_ranks_indices_and_metadata(dcp_tree: Path) -> None:
    before = snapshot(dcp_tree)
    plan = scan_checkpoint(str(dcp_tree))
    assert [(f.name, f.global_rank, f.index) for f in plan.files] == [
        (f"__{r}_{i}.distcp", r, i) for r in range(3) for i in range(2)
    ]
    assert plan.metadata_name == ".metadata" and plan.metadata_bytes == 278_000
    assert plan.ranks == 3 and plan.file_count == 7
    assert plan.total_bytes == sum(s for s, _ in before.values())
    assert plan.source == str(dcp_tree)
    assert snapshot(dcp_tree) == before  # nothing read, nothing changed


def test_a_megatron_tree_is_one_rank_per_mp_rank_directory_in_megatrons_order(
    megatron_tree: Path,
) -> None:
    plan = scan_checkpoint(str(megatron_tree))
    names = [f.name.split("/")[1] for f in plan.files]
    # global rank = pp x tp_size + tp
    assert names == ["mp_rank_00_000", "mp_rank_01_000", "mp_rank_00_001", "mp_rank_01_001"]
    assert [f.global_rank for f in plan.files] == [0, 1, 2, 3]
    assert plan.metadata_name == "latest_checkpointed_iteration.txt" and plan.metadata_bytes == 3
    assert plan.subdirectories() == [("iter_0000100",)] + [
        ("iter_0000100", n) for n in sorted(names)
    ]


def test_a_deepspeed_tree_groups_each_ranks_files_by_the_rank_that_wrote_them(
    tmp_path: Path,
) -> None:
    # ZeRO over dp 3, mp 2: each (mp, dp) rank writes its optimizer shard; dp rank 0 of each
    # mp rank also writes that mp rank's model states.
    root = tmp_path / "global_step100"
    for mp in range(2):
        sparse(root / f"mp_rank_{mp:02d}_model_states.pt", 7 * MB)
        for dp in range(3):
            sparse(root / f"bf16_zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt", 3 * MB)
    sparse(tmp_path / "latest", 16)
    plan = scan_checkpoint(str(tmp_path))
    by_rank: dict[int, list[str]] = {}
    for f in plan.files:
        by_rank.setdefault(f.global_rank, []).append(f.name.rsplit("/", 1)[-1])
    assert plan.ranks == 1 + 6  # `latest` is a file of its own
    writers = [names for names in by_rank.values() if len(names) > 1 or "latest" not in names]
    assert writers == [
        ["mp_rank_00_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"],
        ["bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"],
        ["bf16_zero_pp_rank_2_mp_rank_00_optim_states.pt"],
        ["mp_rank_01_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_01_optim_states.pt"],
        ["bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt"],
        ["bf16_zero_pp_rank_2_mp_rank_01_optim_states.pt"],
    ]


def test_a_nested_dcp_metadata_is_the_coordinators_not_a_shallower_tracker(
    tmp_path: Path,
) -> None:
    sparse(tmp_path / "ckpt" / "__0_0.distcp", MB)
    sparse(tmp_path / "ckpt" / ".metadata", 4096)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("100")
    plan = scan_checkpoint(str(tmp_path))
    assert plan.metadata_name == "ckpt/.metadata" and plan.metadata_bytes == 4096
    # the tracker is a coordinator file too, not a shard written mid-burst; the nested
    # .metadata after its directory's shards, the tracker beside ckpt/ after it
    assert [f.name for f in plan.files] == ["ckpt/__0_0.distcp"]
    assert plan.commits == [("ckpt/.metadata", 4096), ("latest_checkpointed_iteration.txt", 3)]
    assert plan.file_count == 3 and plan.total_bytes == MB + 4096 + 3


def test_every_directorys_coordinator_file_is_written_after_the_shards(
    pool: RankPool, tmp_path: Path
) -> None:
    """A tree of two DCP saves and Megatron's tracker: the burst writes only shards, then the
    commit writes both .metadata files (deepest first) and the tracker, by one coordinator,
    each verifying as written."""
    source = tmp_path / "source"
    for sub in ("model", "optim"):
        sparse(source / "ckpt" / sub / "__0_0.distcp", MB)
        sparse(source / "ckpt" / sub / "__1_0.distcp", MB // 2)
        sparse(source / "ckpt" / sub / ".metadata", 5000)
    sparse(source / "ckpt" / ".metadata", 7000)
    (source / "latest_checkpointed_iteration.txt").write_text("100")
    plan = scan_checkpoint(str(source))
    assert all(not f.name.endswith((".metadata", ".txt")) for f in plan.files)
    assert [name for name, _ in plan.commits] == [
        "ckpt/model/.metadata",
        "ckpt/optim/.metadata",
        "ckpt/.metadata",
        "latest_checkpointed_iteration.txt",
    ]
    target = tmp_path / "target"
    target.mkdir()
    for parts in plan.subdirectories():
        (target / Path(*parts)).mkdir()
    run_write_burst(pool, LOCAL, shard_files(plan, str(target), 99, TRANSFER_BYTES), 60)
    assert not list(target.rglob(".metadata"))  # none mid-burst
    commit = commit_files(plan, str(target), 99, TRANSFER_BYTES)
    written = run_write_burst(pool, LOCAL, commit, 60)
    assert len(written.ranks) == 1  # one coordinator
    assert sum(p.stat().st_size for p in target.rglob("*") if p.is_file()) == plan.total_bytes
    read = run_readback(pool, LOCAL, commit, 60)
    assert read.burst.total_bytes == 5000 + 5000 + 7000 + 3


def test_any_other_tree_is_a_rank_per_file_and_symlinks_are_skipped(tmp_path: Path) -> None:
    sparse(tmp_path / "a" / "model.safetensors", 5 * MB)
    sparse(tmp_path / "b.bin", 1)
    (tmp_path / "link").symlink_to(tmp_path / "b.bin")
    plan = scan_checkpoint(str(tmp_path))
    assert sorted(f.name for f in plan.files) == ["a/model.safetensors", "b.bin"]
    assert plan.ranks == 2 and plan.metadata_name is None
    assert "1 symbolic link(s) or special file(s) skipped" in plan.rule


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p / "missing", "no such directory"),
        (lambda p: (p / "f").write_text("x") and p / "f", "not a directory"),
        (lambda p: p, "holds no regular file"),
    ],
    ids=["missing", "a-file", "empty"],
)
def test_a_bad_replay_directory_is_one_line_naming_the_key_and_what_is_allowed(
    tmp_path: Path, make: object, words: str
) -> None:
    directory = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(ReplayError) as error:
        scan_checkpoint(str(directory))
    message = str(error.value)
    assert message.startswith(f"checkpoint.replay {str(directory)!r}: {words}; allowed: ")
    assert "\n" not in message


def test_an_unreadable_replay_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory the scan may not list (EACCES; as root no chmod refuses, so the listing
    call itself is made to refuse)."""
    sparse(tmp_path / "ok" / "__0_0.distcp", 10)

    def refuse(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr("ckptgate.workloads.replay.os.scandir", refuse)
    with pytest.raises(ReplayError, match=r"cannot be read \(Permission denied: .*\); allowed"):
        scan_checkpoint(str(tmp_path))


def test_nodes_split_a_replay_by_rank_and_node_0_keeps_the_metadata(dcp_tree: Path) -> None:
    plan = scan_checkpoint(str(dcp_tree))
    shares = [node_share(plan, i, 2) for i in range(2)]
    assert [sorted({f.global_rank for f in s.files}) for s in shares] == [[0, 2], [1]]
    assert [s.metadata_name for s in shares] == [".metadata", None]
    assert sum(s.total_bytes for s in shares) == plan.total_bytes


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Three rank processes: fewer than the Megatron tree's four ranks."""
    with RankPool(3) as ranks:
        yield ranks


@pytest.mark.parametrize("tree", ["dcp_tree", "megatron_tree"])
def test_a_replay_reproduces_the_sources_files_and_bytes_on_the_target(
    pool: RankPool, tree: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source: Path = request.getfixturevalue(tree)
    plan = scan_checkpoint(str(source))
    target = tmp_path / "target"
    target.mkdir()
    for parts in plan.subdirectories():
        (target / Path(*parts)).mkdir()
    files = shard_files(plan, str(target), 99, TRANSFER_BYTES)
    commit = commit_files(plan, str(target), 99, TRANSFER_BYTES)
    assert len(commit) == 1
    burst = run_write_burst(pool, LOCAL, files, 60)
    run_write_burst(pool, LOCAL, commit, 60)
    assert len(lanes(files, pool.ranks)) == min(plan.ranks, pool.ranks)
    on_target = [p for p in target.rglob("*") if p.is_file()]
    assert len(on_target) == plan.file_count == len([p for p in source.rglob("*") if p.is_file()])
    assert sum(p.stat().st_size for p in on_target) == plan.total_bytes
    assert {str(p.relative_to(target)) for p in on_target} == {
        str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()
    }
    assert burst.total_bytes == plan.shard_bytes
    read = run_readback(pool, LOCAL, [*files, *commit], 60)  # every byte as written
    assert read.burst.total_bytes == plan.total_bytes
