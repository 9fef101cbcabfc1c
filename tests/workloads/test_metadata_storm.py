"""The metadata storm: exactly the files, an atomic commit, a full listing, an exact delete."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptgate.campaigns.context import CheckContext
from ckptgate.checks.metadata import MetadataRun, delete_storm
from ckptgate.cluster.plan import plan_node
from ckptgate.engine.datagen import BlockStamper, StampKey
from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.sizing import derive, load_profile, shard_distribution
from ckptgate.storage.backend import BackendName, BackendSpec
from ckptgate.storage.object_store import ObjectStore, object_store
from ckptgate.workloads.storm import (
    METADATA_NAME,
    METADATA_STAMP_RANK,
    METADATA_TMP_NAME,
    WRITE_BYTES,
    Phase,
    manifest_bytes,
    read_manifest,
    run_commit,
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    split,
    storm_files,
)
from ckptgate.workloads.write_burst import shard_file_name
from tests.native import require_native
from tests.s3server import S3Server

RANKS = 3
RUN_ID = 20261129


@pytest.fixture(params=["native", "python"])
def local(request: pytest.FixtureRequest) -> BackendSpec:
    """This machine's filesystem, through each storm loop: the C loop (where this install
    built it; skipped, and said, where not) and the Python one, on the same plan."""
    loop: str = request.param
    if loop == "native":
        require_native()
    return BackendSpec("file", loop=loop)


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Three rank processes for this module; stopped at its end."""
    with RankPool(RANKS) as rank_pool:
        yield rank_pool


def checkpoint(tmp_path: Path, name: str = "step-1") -> str:
    directory = tmp_path / name
    directory.mkdir()
    return str(directory)


@pytest.mark.parametrize("backend", ["posix", "fsspec"])
def test_storm_creates_exactly_the_files_and_commits_the_metadata(
    pool: RankPool, tmp_path: Path, backend: BackendName
) -> None:
    directory = checkpoint(tmp_path)
    files = storm_files(directory, 25, files_per_rank=2)
    spec = BackendSpec("file", backend=backend)
    result = run_metadata_storm(pool, spec, directory, files, 60, run_id=RUN_ID)
    names = {shard_file_name(g, i) for g in range(13) for i in range(2)} - {shard_file_name(12, 1)}
    assert set(os.listdir(directory)) == names | {METADATA_NAME}
    assert result.metadata_path == f"{directory}/{METADATA_NAME}"
    assert (result.create.ops, result.committed_files, result.io) == (25, 26, backend)
    assert {op: s.count for op, s in result.create.latencies.items()} == dict.fromkeys(
        ("create", "write", "fsync", "close"), 25
    )
    manifest = json.loads(Path(directory, METADATA_NAME).read_bytes())
    assert sorted(e["file"] for e in manifest["files"]) == sorted(names)
    for file in files:  # every file holds its own stamped 4 KiB block
        stamper = BlockStamper(StampKey(RUN_ID, file.global_rank, file.generation), WRITE_BYTES)
        stamper.verify(Path(file.path).read_bytes(), file.index * WRITE_BYTES, file.path)


def test_the_commit_writes_a_metadata_of_dcps_size(
    pool: RankPool, local: BackendSpec, tmp_path: Path
) -> None:
    """One coordinator writes the .metadata at DCP's size: the listing, then stamped padding
    (incompressible, verifiable) in transfers, fsynced and renamed."""
    directory = checkpoint(tmp_path)
    files = storm_files(directory, 5, files_per_rank=1)
    run_metadata_storm(pool, local, directory, files, 60, run_id=RUN_ID, commit=False)
    metadata_bytes, transfer_bytes = 300_001, 64 * 1024
    commit = run_commit(
        pool, local, directory, files, 60,
        metadata_bytes=metadata_bytes, run_id=RUN_ID, transfer_bytes=transfer_bytes,
    )  # fmt: skip
    data = Path(directory, METADATA_NAME).read_bytes()
    assert len(data) == metadata_bytes == commit.burst.ranks[0].bytes
    listing = manifest_bytes(files, WRITE_BYTES)
    assert data.startswith(listing) and listing.endswith(b"\n")
    assert sorted(e["file"] for e in read_manifest(data)["files"]) == sorted(
        Path(f.path).name for f in files
    )
    stamper = BlockStamper(StampKey(RUN_ID, METADATA_STAMP_RANK), transfer_bytes)
    stamper.verify(data[len(listing) :], 0, METADATA_NAME)
    assert {op: s.count for op, s in commit.latencies.items()} == dict.fromkeys(
        ("write", "fsync", "close", "rename", "dirsync"), 1
    )
    assert not Path(directory, METADATA_TMP_NAME).exists()


def test_create_close_only_is_fios_filecreate(
    pool: RankPool, local: BackendSpec, tmp_path: Path
) -> None:
    directory = checkpoint(tmp_path)
    files = storm_files(directory, 7, files_per_rank=1)
    result = run_metadata_storm(
        pool, local, directory, files, 60, run_id=RUN_ID, write_bytes=0, fsync=False, commit=False
    )
    assert result.commit is None and result.metadata_path is None
    assert sorted(os.listdir(directory)) == sorted(shard_file_name(g, 0) for g in range(7))
    assert all(os.path.getsize(f.path) == 0 for f in files)
    assert result.create_close_rate_per_s == 7 / result.create.span_s
    # only what was done is timed: no write and no fsync are reported for a pure create
    latencies = result.create.latencies
    assert {op: s.count for op, s in latencies.items()} == {"create": 7, "close": 7}
    # each latency runs from the stamp before it: together they fit in the ranks' phases
    assert all(s.max_s > 0 for s in latencies.values())
    assert sum(result.create.raw_s["create"]) + sum(result.create.raw_s["close"]) <= sum(
        r.phases_s["create"] for r in result.create.burst.ranks
    )


def test_a_reader_never_sees_a_partial_metadata_file(
    pool: RankPool, local: BackendSpec, tmp_path: Path
) -> None:
    """The commit is a rename: a restore polling for .metadata sees all of it or nothing."""
    directory = checkpoint(tmp_path)
    files = storm_files(directory, 3000, files_per_rank=1)  # a ~200 KB manifest
    final = Path(directory, METADATA_NAME)
    seen: list[int] = []
    stop = threading.Event()

    def restore_poller() -> None:
        while not stop.is_set():
            try:
                seen.append(len(json.loads(final.read_bytes())["files"]))
            except FileNotFoundError:
                continue

    poller = threading.Thread(target=restore_poller)
    poller.start()
    try:
        run_metadata_storm(pool, local, directory, files, 60, run_id=RUN_ID, fsync=False)
        for _ in range(1000):  # let the poller catch the committed file at least once
            if seen:
                break
            threading.Event().wait(0.01)
    finally:
        stop.set()
        poller.join()
    assert seen and set(seen) == {3000}
    assert not Path(directory, METADATA_TMP_NAME).exists()


def test_a_failed_commit_leaves_no_metadata(
    pool: RankPool, local: BackendSpec, tmp_path: Path
) -> None:
    directory = checkpoint(tmp_path)
    Path(directory, METADATA_TMP_NAME).write_bytes(b"someone else's")
    files = storm_files(directory, 4, files_per_rank=1)
    with pytest.raises(RankFailure, match=r"commit of .*FileExistsError"):
        run_metadata_storm(pool, local, directory, files, 60, run_id=RUN_ID)
    assert not Path(directory, METADATA_NAME).exists()
    assert Path(directory, METADATA_TMP_NAME).read_bytes() == b"someone else's"


def test_the_storm_never_overwrites_an_existing_file(
    pool: RankPool, local: BackendSpec, tmp_path: Path
) -> None:
    directory = checkpoint(tmp_path)
    files = storm_files(directory, 6, files_per_rank=1)
    Path(files[4].path).write_bytes(b"precious")
    with pytest.raises(RankFailure, match="FileExistsError"):
        run_metadata_storm(pool, local, directory, files, 60, run_id=RUN_ID)
    assert Path(files[4].path).read_bytes() == b"precious"


@pytest.mark.parametrize("backend", ["posix", "fsspec"])
def test_the_restore_listing_sees_and_stats_every_file(
    pool: RankPool, local: BackendSpec, tmp_path: Path, backend: BackendName
) -> None:
    directory = checkpoint(tmp_path)
    files = storm_files(directory, 40, files_per_rank=1)
    storm = run_metadata_storm(pool, local, directory, files, 60, run_id=RUN_ID, fsync=False)
    listing = run_restore_listing(pool, BackendSpec("file", backend=backend), directory, 60)
    expected = {Path(p).name for p in storm.files} | {METADATA_NAME}
    assert set(listing.names) == expected
    assert set(listing.sizes) == expected
    assert all(listing.sizes[Path(p).name] == WRITE_BYTES for p in storm.files)
    assert listing.stat.ops == listing.stat.latencies["stat"].count == 41
    assert len(listing.stat.burst.ranks) == RANKS


@pytest.mark.parametrize("backend", ["posix", "fsspec"])
def test_the_delete_storm_removes_only_that_checkpoints_files(
    pool: RankPool, local: BackendSpec, tmp_path: Path, backend: BackendName
) -> None:
    older, newer = checkpoint(tmp_path, "step-1"), checkpoint(tmp_path, "step-2")
    kept: list[list[str]] = []
    for directory in (older, newer):
        files = storm_files(directory, 10, files_per_rank=1)
        storm = run_metadata_storm(pool, local, directory, files, 60, run_id=RUN_ID, fsync=False)
        assert storm.metadata_path is not None
        kept.append([*storm.files, storm.metadata_path])
    neighbour = Path(older, "notes.txt")
    neighbour.write_text("not ours")
    phase = run_delete_storm(pool, BackendSpec("file", backend=backend), kept[0], 60)
    assert (phase.ops, phase.latencies["unlink"].count) == (11, 11)
    assert os.listdir(older) == ["notes.txt"]
    assert all(os.path.exists(p) for p in kept[1])


@given(items=st.integers(min_value=0, max_value=200), parts=st.integers(1, 16))
def test_split_keeps_order_and_balances_within_one(items: int, parts: int) -> None:
    chunks = split(list(range(items)), parts)
    assert [x for chunk in chunks for x in chunk] == list(range(items))
    sizes = [len(c) for c in chunks]
    assert max(sizes) - min(sizes) <= 1
    assert len(chunks) == max(1, min(parts, items))


@given(files=st.integers(1, 500), per_rank=st.integers(1, 4))
def test_storm_files_follow_dcps_names_in_global_order(files: int, per_rank: int) -> None:
    planned = storm_files("/ckpt", files, per_rank)
    assert len({f.path for f in planned}) == files
    assert [(f.global_rank, f.index) for f in planned] == [
        divmod(n, per_rank) for n in range(files)
    ]
    assert all(f.path == f"/ckpt/__{f.global_rank}_{f.index}.distcp" for f in planned)


def test_on_s3_the_delete_storm_sends_batch_deletes_and_removes_every_key(
    pool: RankPool, s3: S3Server
) -> None:
    """An object store deletes in bulk (S3 DeleteObjects through s3fs's rm): one timed request
    per rank's batch, not one per key, and every key of the checkpoint is gone after."""
    spec = BackendSpec("s3", s3.storage_options)
    fs = s3.filesystem()
    directory = f"{s3.bucket}/storm-{RUN_ID}"
    paths = [f"{directory}/{shard_file_name(rank, 0)}" for rank in range(31)]
    kept = f"{directory}/kept"
    for path in [*paths, kept]:
        fs.pipe_file(path, b"x")
    try:
        phase = run_delete_storm(pool, spec, paths, 60)
        assert phase.ops == 31
        assert set(phase.latencies) == {"delete_batch"}
        assert phase.latencies["delete_batch"].count == RANKS  # one request per rank's batch
        fs.invalidate_cache()
        assert fs.ls(directory, detail=False) == [kept]
        # The check names the batch delete in its row, and fails a storm that left keys (a
        # quiet DeleteObjects reports no per-key error: the check looks after it).
        done = delete_storm(_metadata_run(phase, store=object_store("s3")))
        assert done.passed and done.title.endswith("[batch delete, 10 keys per request]")
        assert "batch delete, up to 1000 keys per request (S3 DeleteObjects" in done.detail
        left = delete_storm(_metadata_run(phase, object_store("s3"), left=(paths[0],)))
        assert (
            left.passed is False
            and f"1 files still there after the delete, e.g. {paths[0]}" in left.detail
        )
    finally:
        fs.rm(directory, recursive=True)


def _metadata_run(
    phase: Phase, store: ObjectStore | None, left: tuple[str, ...] = ()
) -> MetadataRun:
    """A metadata run around a measured delete phase (the other phases are not read)."""
    profile = load_profile("tmpfs")
    fields = SimpleNamespace(  # the few the delete judgement reads
        profile=profile,
        sizing=derive(profile),
        target=SimpleNamespace(store=store),
        plan=plan_node(profile, RANKS, 0, 1),
    )
    ctx = cast(CheckContext, fields)
    return MetadataRun(ctx=ctx, files=phase.ops, rounds=[], listed_names=(), stat_sizes={},
                       listing=phase, stat=phase, delete=phase, deleted=[],
                       metadata_bytes=0, left_after_delete=left)  # fmt: skip


def test_a_named_writers_storm_creates_its_files_by_their_names(tmp_path: Path) -> None:
    """Under dlio the storm's files are DLIO's, in rank order (it made ``__{rank}_0.distcp``,
    one a rank, 512 for a 1,544-file checkpoint)."""
    dist = shard_distribution(load_profile("mlperf-405b"))
    assert dist.rank_files is not None
    names = [[n for n, _ in rank] for rank in dist.rank_files]
    planned = storm_files(str(tmp_path), 1544, 1, names)
    assert len({f.path for f in planned}) == 1544
    assert all(f.path.endswith(".pt") for f in planned)
    first = [(f.global_rank, Path(f.path).name) for f in planned[:7]]
    assert first[0] == (0, "layer_00-model_00-model_states.pt")
    assert first[5] == (0, "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    assert first[6] == (1, "layer_00-model_01-model_states.pt")
    assert len(storm_files(str(tmp_path), 7, 1, names)) == 7  # a trial's first files
