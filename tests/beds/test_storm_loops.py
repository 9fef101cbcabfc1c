"""The storm's C loop against the Python loop on storage that fails: the same plan on a faultfs
mount (``tests.beds.faultfs``) through each loop, and the same words.

Each test runs the same storm twice, once per loop, each in a directory of its own with the
same names, and asserts what the suite says is the same once the directory is read as a
placeholder: the failure's rank, file, operation and errno (EIO, ENOSPC), and, for a hang, the
stall watch's words, which it reads from the files-done count that the C loop stores as the
Python loop does. A hang is waited for through the bed's log and the stall is seen through an
injected clock, never a wall-clock race.
"""

from __future__ import annotations

import concurrent.futures
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.storm import (
    StormFile,
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    storm_files,
)
from ckptgate.workloads.storm.loops import NATIVE, PYTHON
from tests.beds.faultfs import Fault, FaultFS, faultfs
from tests.beds.test_faults_suite import FakeClock
from tests.native import require_native

RANKS = 2
FILES = 12
RUN_ID = 20261203
SAFETY_S = 120.0
LOOPS = (NATIVE, PYTHON)


@pytest.fixture(autouse=True)
def _native_built() -> None:
    require_native()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[FaultFS]:
    with faultfs(tmp_path) as mounted:
        yield mounted


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    with RankPool(RANKS) as rank_pool:
        yield rank_pool


def _plan(bed: FaultFS, loop: str) -> tuple[str, list[StormFile]]:
    directory = bed.mount / loop
    directory.mkdir()
    return str(directory), storm_files(str(directory), FILES, files_per_rank=1)


def _failure_words(run: Callable[[], object], directory: str) -> str:
    """The suite's words for a storm that fails, with its directory as ``DIR``."""
    with pytest.raises(RankFailure) as failure:
        run()
    return str(failure.value).replace(directory, "DIR")


@pytest.mark.parametrize(
    ("op", "errno"), [("fsync", "EIO"), ("write", "ENOSPC"), ("create", "EIO")]
)
def test_a_create_storms_error_is_named_alike_by_both_loops(
    bed: FaultFS, pool: RankPool, op: str, errno: str
) -> None:
    """An EIO or ENOSPC on the 6th file (global rank 5): the same rank, file, operation and
    errno in both loops' words, and the bed saw the fault once per loop."""
    words = {}
    for loop in LOOPS:
        directory, files = _plan(bed, loop)
        bed.set_faults(Fault(op, "error", path=f"/{loop}/__5_0.distcp", errno=errno))
        spec = BackendSpec("file", loop=loop)
        words[loop] = _failure_words(
            partial(
                run_metadata_storm,
                pool,
                spec,
                directory,
                files,
                SAFETY_S,
                run_id=RUN_ID,
                commit=False,
            ),
            directory,
        )
    assert words[NATIVE] == words[PYTHON]
    assert "DIR/__5_0.distcp" in words[NATIVE]
    strerror = {"EIO": "Input/output error", "ENOSPC": "No space left on device"}[errno]
    assert strerror in words[NATIVE]
    hits = [(hit.op, hit.errno, hit.path.split("/")[1]) for hit in bed.log()]
    assert hits == [(op, errno, NATIVE), (op, errno, PYTHON)]


@pytest.mark.parametrize("op", ["getattr", "unlink"])
def test_a_stat_or_unlink_error_is_named_alike_by_both_loops(
    bed: FaultFS, pool: RankPool, op: str
) -> None:
    """The restore's stat and the retention's unlink: an EIO on one file, named the same."""
    words = {}
    for loop in LOOPS:
        directory, files = _plan(bed, loop)
        spec = BackendSpec("file", loop=loop)
        run_metadata_storm(pool, spec, directory, files, SAFETY_S, run_id=RUN_ID, commit=False)
        bed.set_faults(Fault(op, "error", path=f"/{loop}/__7_0.distcp", errno="EIO"))
        if op == "getattr":
            words[loop] = _failure_words(
                partial(run_restore_listing, pool, spec, directory, SAFETY_S), directory
            )
        else:
            paths = [f.path for f in files]
            words[loop] = _failure_words(
                partial(run_delete_storm, pool, spec, paths, SAFETY_S), directory
            )
        bed.set_faults()
    assert words[NATIVE] == words[PYTHON]
    assert "DIR/__7_0.distcp" in words[NATIVE] and "Input/output error" in words[NATIVE]


def test_a_hung_create_is_named_alike_by_the_stall_watch_of_both_loops(bed: FaultFS) -> None:
    """Global rank 8's create hangs (the ninth file of one rank's twelve: one rank, as the
    bed's server answers one request at a time, so a second rank would block at a point
    that depends on timing): the stall watch names the rank, the phase and the files done,
    read from the count the C loop stores before each file as the Python loop does; then
    the bed lets go and the storm fails on the stall."""
    words = {}
    for loop in LOOPS:
        directory, files = _plan(bed, loop)
        bed.set_faults(Fault("create", "hang", path=f"/{loop}/__8_0.distcp", max_s=SAFETY_S))
        spec = BackendSpec("file", loop=loop)
        clock = FakeClock()
        with (
            RankPool(1, stall_timeout_s=60, clock=clock) as pool,
            concurrent.futures.ThreadPoolExecutor(1) as executor,
        ):
            storm = executor.submit(
                run_metadata_storm, pool, spec, directory, files, 3600.0, run_id=RUN_ID,
                commit=False,
            )  # fmt: skip
            bed.wait_for(op="create", action="hang", path=f"/{loop}/*", timeout_s=SAFETY_S)
            for _ in range(int(SAFETY_S)):
                clock.advance(61)
                if concurrent.futures.wait([storm], timeout=1.0).done:
                    break
            bed.release()
            with pytest.raises(RankFailure) as failure:
                storm.result(timeout=SAFETY_S)
        # the processes' ids differ from run to run, the rest may not
        words[loop] = re.sub(r"pid \d+", "pid N", str(failure.value).replace(directory, "DIR"))
        bed.set_faults()
    assert words[NATIVE] == words[PYTHON]
    assert "no progress for 60 s in create, write, fsync, close" in words[NATIVE]
    assert "(last 8 files done)" in words[NATIVE]
