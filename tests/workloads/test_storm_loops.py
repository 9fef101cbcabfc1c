"""The storm's C loops (``ckptgate.workloads.storm._loops``) and their choice
(``ckptgate.workloads.storm.loops``): each call made and timed, the files done stored where the
stall watch reads them, the first error raised with its file named, and the same storm as the
Python loop's on the same plan."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, MutableSequence
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from ckptgate.engine.datagen import BlockStamper, StampKey
from ckptgate.engine.pool import RankPool
from ckptgate.rundir.target import Target
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.storm import (
    WRITE_BYTES,
    StormFile,
    loops,
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    storm_files,
    verify_storm,
)
from ckptgate.workloads.storm.loops import (
    NATIVE,
    PYTHON,
    PathBatch,
    create_files,
    loop_words,
    native_module,
    resolve_loop,
    spec_loop,
    spec_loop_words,
    stat_files,
    unlink_files,
)
from tests.native import require_native

needs_c = pytest.mark.usefixtures("built")
FILES_DONE_AT = 2
RUN_ID = 20261203


@pytest.fixture
def built() -> None:
    """The C loop of this install, or the test skipped (failed where CI requires it)."""
    require_native()


def _slot() -> MutableSequence[float]:
    """A progress slot like the pool's: doubles in shared memory, seen through a memoryview
    (a mutable sequence of floats; typeshed does not say so)."""
    return cast(MutableSequence[float], memoryview(bytearray(8 * 4)).cast("d"))


def _paths(directory: Path, count: int) -> list[str]:
    return [str(directory / f"f{n}") for n in range(count)]


@needs_c
def test_create_files_makes_each_call_and_times_it(tmp_path: Path) -> None:
    paths = _paths(tmp_path, 5)
    payloads = [bytes([n]) * 4096 for n in range(5)]
    slot = _slot()
    stamps = create_files(
        PathBatch.of(paths), payloads, fsync=True, ops=4, done=slot, files_done_at=FILES_DONE_AT
    )
    for path, payload in zip(paths, payloads, strict=True):
        assert Path(path).read_bytes() == payload
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644 & ~_umask()
    assert stamps.shape == (1 + 5 * 4,)
    assert np.all(np.diff(stamps) >= 0) and stamps[-1] > stamps[0]
    assert slot[FILES_DONE_AT] == 4  # stored before the last file's first call
    assert slot[0] == slot[1] == slot[3] == 0  # nothing else touched


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@needs_c
def test_the_clock_is_perf_counters(tmp_path: Path) -> None:
    """CLOCK_MONOTONIC, as ``time.perf_counter`` on Linux: the C stamps fall between two
    Python reads."""
    import time

    module = native_module()
    assert module is not None
    before = time.perf_counter()
    native = module.monotonic_s()
    after = time.perf_counter()
    assert before <= native <= after


@needs_c
def test_create_is_exclusive_and_an_error_names_its_file(tmp_path: Path) -> None:
    paths = _paths(tmp_path, 4)
    Path(paths[2]).write_bytes(b"precious")
    slot = _slot()
    with pytest.raises(FileExistsError) as raised:
        create_files(
            PathBatch.of(paths), [b"x"] * 4, fsync=False, ops=3, done=slot,
            files_done_at=FILES_DONE_AT,
        )  # fmt: skip
    assert raised.value.filename == paths[2] and raised.value.errno == errno.EEXIST
    assert Path(paths[2]).read_bytes() == b"precious"
    assert [Path(p).exists() for p in paths] == [True, True, True, False]
    assert slot[FILES_DONE_AT] == 2


@needs_c
def test_a_pure_create_writes_nothing(tmp_path: Path) -> None:
    paths = _paths(tmp_path, 3)
    stamps = create_files(
        PathBatch.of(paths), [b""] * 3, fsync=False, ops=2, done=[0.0] * 3, files_done_at=2
    )
    assert stamps.shape == (1 + 3 * 2,)
    assert [os.stat(p).st_size for p in paths] == [0, 0, 0]


@needs_c
def test_stat_files_returns_each_size_and_names_a_missing_file(tmp_path: Path) -> None:
    paths = _paths(tmp_path, 4)
    for n, path in enumerate(paths):
        Path(path).write_bytes(b"y" * (n * 1000))
    slot = _slot()
    stamps, sizes = stat_files(PathBatch.of(paths), done=slot, files_done_at=FILES_DONE_AT)
    assert sizes.tolist() == [0, 1000, 2000, 3000] and stamps.shape == (5,)
    os.unlink(paths[1])
    with pytest.raises(FileNotFoundError) as raised:
        stat_files(PathBatch.of(paths), done=slot, files_done_at=FILES_DONE_AT)
    assert raised.value.filename == paths[1]


@needs_c
def test_unlink_files_removes_each_and_names_the_first_it_cannot(tmp_path: Path) -> None:
    paths = _paths(tmp_path, 3)
    for path in paths:
        Path(path).touch()
    stamps = unlink_files(PathBatch.of(paths[:2]), done=_slot(), files_done_at=FILES_DONE_AT)
    assert stamps.shape == (3,) and [Path(p).exists() for p in paths] == [False, False, True]
    with pytest.raises(FileNotFoundError) as raised:
        unlink_files(PathBatch.of(paths), done=_slot(), files_done_at=FILES_DONE_AT)
    assert raised.value.filename == paths[0]


@needs_c
def test_a_buffer_too_short_is_refused_before_any_call(tmp_path: Path) -> None:
    module = native_module()
    assert module is not None
    path = os.fsencode(tmp_path / "never")
    short = np.empty(2, dtype=np.float64)  # one create+close needs 1 + 2 stamps
    with pytest.raises(ValueError, match="stamps: too short"):
        module.create_files([path], [b""], False, short, np.zeros(3), 2)
    with pytest.raises(ValueError, match="slot: no double"):
        module.unlink_files([path], np.empty(2), np.zeros(2), 2)
    assert not (tmp_path / "never").exists()


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    with RankPool(2) as rank_pool:
        yield rank_pool


@needs_c
def test_the_native_storm_is_the_python_storms_on_the_same_plan(
    pool: RankPool, tmp_path: Path
) -> None:
    """Create, stat and unlink of the same plan through each loop: the same files with the
    same bytes (verified), the same counts and sizes, the same operations timed per file."""
    seen = {}
    for loop in (NATIVE, PYTHON):
        directory = tmp_path / loop
        directory.mkdir()
        files = storm_files(str(directory), 9, files_per_rank=2)
        spec = BackendSpec("file", loop=loop)
        storm = run_metadata_storm(pool, spec, str(directory), files, 60, run_id=RUN_ID)
        verify_storm(pool, spec, files, 60, run_id=RUN_ID)
        listing = run_restore_listing(pool, spec, str(directory), 60)
        # each storm's files are its directory's generation: compare them as that stream's
        # bytes (the same (rank, index) blocks), and the commit's .metadata as written
        generation = files[0].generation
        contents = {
            p.name: p.read_bytes().replace(
                _stream_block(files, p.name, generation), b"<its own stream's block>"
            )
            for p in directory.iterdir()
        }
        unlink = run_delete_storm(pool, spec, [f.path for f in files], 60)
        assert sorted(p.name for p in directory.iterdir()) == [".metadata"]
        seen[loop] = (
            storm.loop,
            {op: len(v) for op, v in storm.create.raw_s.items()},
            storm.create.ops,
            listing.sizes,
            {op: len(v) for op, v in listing.stat.raw_s.items()},
            {op: len(v) for op, v in unlink.raw_s.items()},
            contents,
        )
        latencies = [*storm.create.raw_s.values(), *listing.stat.raw_s.values()]
        assert all(np.all(v > 0) for v in [*latencies, *unlink.raw_s.values()])
    assert seen[NATIVE][0] == NATIVE and seen[PYTHON][0] == PYTHON
    assert seen[NATIVE][1:] == seen[PYTHON][1:]
    assert seen[NATIVE][1] == {"create": 9, "write": 9, "fsync": 9, "close": 9}


@needs_c
def test_the_choice_is_checked_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"--storm-loop 'fast': choose one of auto, native"):
        spec_loop(BackendSpec("file", loop="fast"))
    with pytest.raises(ValueError, match="the fsspec backend's operations are Python calls"):
        spec_loop(BackendSpec("file", backend="fsspec", loop="native"))
    assert spec_loop(BackendSpec("file", backend="fsspec")) == PYTHON
    assert spec_loop(BackendSpec("file")) == NATIVE
    assert spec_loop_words(BackendSpec("file", loop="python")) == "python (--storm-loop python)"


def test_without_the_c_loop_auto_runs_python_and_native_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An install without a compiler: auto falls back and says why; native is a one-line
    refusal of the target, naming the option."""
    monkeypatch.setattr(loops, "_loaded", lambda: (None, "the C loop is not built (test)"))
    assert resolve_loop("auto", "posix") == PYTHON
    assert loop_words("auto", "posix") == "python (the C loop is not built (test))"
    with pytest.raises(ValueError, match=r"^--storm-loop native cannot run here: the C loop"):
        spec_loop(Target(str(tmp_path), storm_loop="native").spec)


def _stream_block(files: list[StormFile], name: str, generation: int) -> bytes:
    """The bytes the storm wrote to ``name`` by its stream (b"" for the commit's .metadata)."""
    match = [f for f in files if f.path.endswith("/" + name)]
    if not match:
        return b"\x00<none>"
    stamper = BlockStamper(StampKey(RUN_ID, match[0].global_rank, generation), WRITE_BYTES)
    return bytes(stamper.fill(match[0].index * stamper.step_bytes, WRITE_BYTES))
