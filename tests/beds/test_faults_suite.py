"""The suite against storage that misbehaves (SPEC.md, "Faults the suite must survive").

Each test drives the suite's own drivers and pool at a faultfs mount (``tests.beds.faultfs``)
and asserts what the suite says: the failure names rank, file and phase (and offset where
there is one), and nothing is left behind except what a hung mount makes impossible. A hang is
waited for through the bed's log and the stall is seen through an injected clock, never a
wall-clock race; every real timeout here is a generous safety net.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.engine.records import detail_as
from ckptgate.rundir.janitor import CALL_STALL_S, TargetHung
from ckptgate.rundir.target import Target
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.readback import run_readback
from ckptgate.workloads.write_burst import ShardFile, WriteDetail, run_write_burst
from tests.beds.faultfs import Fault, FaultFS, faultfs

RANKS = 2
SHARD_BYTES = 3 * 1024 * 1024 + 4096
TRANSFER_BYTES = 1024 * 1024
SAFETY_S = 120.0
LOCAL = BackendSpec("file")


class FakeClock:
    """The pool's clock, moved only by the test."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def shards(directory: Path, run_id: int = 7) -> list[ShardFile]:
    return [
        ShardFile(g, str(directory / f"__{g}_0.distcp"), SHARD_BYTES, run_id, TRANSFER_BYTES)
        for g in range(RANKS)
    ]


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[FaultFS]:
    with faultfs(tmp_path) as mounted:
        yield mounted


@pytest.fixture
def target(bed: FaultFS) -> Iterator[Target]:
    target = Target(str(bed.mount), stall_s=CALL_STALL_S)
    target.create_run_dir()
    yield target
    target.close()


def test_eio_on_write_names_rank_file_and_phase(bed: FaultFS, target: Target) -> None:
    files = shards(Path(target.new_dir("w")))
    bed.set_faults(Fault("write", "error", path="*__1_0.distcp", errno="EIO"))
    target.register([s.path for s in files])
    with RankPool(RANKS) as pool, pytest.raises(RankFailure) as failure:
        run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
    message = str(failure.value)
    assert f"global rank 1 ({files[1].path}): OSError: [Errno 5]" in message
    assert f"(in write of {files[1].path}, at offset 0;" in message  # phase and offset named
    assert failure.value.ranks == (1,)
    assert target.remove_files([s.path for s in files]) == RANKS  # the partial files go
    assert not os.listdir(bed.backing / Path(target.run_dir or "").name / "w")


def test_eio_on_fsync_names_the_rank(bed: FaultFS, target: Target) -> None:
    files = shards(Path(target.new_dir("w")))
    bed.set_faults(Fault("fsync", "error", path="*__0_0.distcp", errno="EIO"))
    with RankPool(RANKS) as pool, pytest.raises(RankFailure, match=r"global rank 0 .*Errno 5") as f:
        run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
    assert [(hit.op, hit.errno) for hit in bed.log()] == [("fsync", "EIO")]
    assert f"(in fsync of {files[0].path}, at offset {files[0].bytes};" in str(f.value)


def test_enospc_on_write_is_named_and_partial_files_are_removed(
    bed: FaultFS, target: Target
) -> None:
    files = shards(Path(target.new_dir("w")))
    target.register([s.path for s in files])
    bed.set_faults(Fault("write", "error", path="*__0_0.distcp", errno="ENOSPC", offset=2**20))
    with (
        RankPool(RANKS) as pool,
        pytest.raises(RankFailure, match=r"global rank 0 .*Errno 28") as f,
    ):
        run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
    assert f"(in write of {files[0].path}, at offset 0;" in str(f.value)  # error rules fire at once
    target.remove_files([s.path for s in files])
    report = target.cleanup()
    assert (report.unremovable, report.left) == ([], [])
    assert not os.listdir(bed.backing)


def test_a_hung_fsync_is_named_by_the_stall_timeout_and_abandoned(
    bed: FaultFS, target: Target
) -> None:
    files = shards(Path(target.new_dir("w")))
    target.register([s.path for s in files])
    bed.set_faults(Fault("fsync", "hang", path="*__1_0.distcp", max_s=SAFETY_S))
    clock = FakeClock()
    pool = RankPool(RANKS, stall_timeout_s=60, clock=clock)
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        burst = executor.submit(run_write_burst, pool, LOCAL, files, 3600.0)
        bed.wait_for(op="fsync", action="hang", timeout_s=SAFETY_S)
        # The pool dates progress by when it sees it (it looks every POLL_S): the first step
        # of the clock may be the moment it sees the rank's last report, a later one the stall.
        for _ in range(int(SAFETY_S)):
            clock.advance(61)
            if concurrent.futures.wait([burst], timeout=1.0).done:
                break
        with pytest.raises(RankFailure) as failure:
            burst.result(timeout=SAFETY_S)
    message = str(failure.value)
    assert f"global rank 1 ({files[1].path}): no progress for 60 s in fsync on " in message
    assert f"(last {SHARD_BYTES / 1e6:.3g} MB written)" in message
    assert failure.value.hung == (1,)
    # stuck in a FUSE request the server holds: SIGKILL cannot end it until the bed lets go
    assert "abandoned" in message and len(failure.value.abandoned) == 1
    # removal of the hung file is bounded, and what it could not remove is listed
    target.remove_files([s.path for s in files])
    if target.hung:
        assert files[1].path in target.left_behind
    pool.close()
    bed.release()


MANIFEST = "*/.ckptgate-manifest.node0.jsonl"


def test_a_manifest_append_that_hangs_is_bounded_and_names_the_target(tmp_path: Path) -> None:
    """The session writes the manifest itself: an append that never returns (an OSD gone under
    a CephFS run) must end at the bound as ``TargetHung``, register nothing, and leave the
    target's end-of-run calls bounded. Without the bound the register waits out the hang."""
    with faultfs(tmp_path) as bed:
        target = Target(str(bed.mount), stall_s=2.0)
        target.create_run_dir()
        write = target.new_dir("w")
        bed.set_faults(Fault("fsync", "hang", path=MANIFEST, max_s=SAFETY_S))
        with pytest.raises(TargetHung, match=r"append .*did not return within 2 s"):
            target.register([f"{write}/__0_0.distcp"])
        bed.wait_for(op="fsync", action="hang", timeout_s=SAFETY_S)  # the fault really fired
        assert target.run.files == []  # not registered: nothing may create it
        assert target.hung is not None and "append" in target.hung
        with pytest.raises(TargetHung, match="stopped answering earlier"):
            target.new_dir("next")  # nothing more is tried on a hung target
        target.keep()  # its end line cannot be written: skipped, bounded
        target.close()
        assert [hit.detail for hit in bed.log() if hit.action == "hang-end"] == []  # still hung
        bed.release()


def test_a_removal_slower_than_the_default_bound_is_waited_for_up_to_the_stall_timeout(
    tmp_path: Path,
) -> None:
    """A working target's slow unlink is not a hang: the target's calls have the bound the
    session gives (the profile's stall timeout), not the janitor's fixed default. CI saw an
    unlink through ceph-fuse on a busy machine take more than 5 s: that bound called the
    target hung and left a qualified run's directory. The unlink here stands still for longer
    than the default (the second file's: the first of a call also waits out the helper's
    start), then goes on."""
    with faultfs(tmp_path) as bed:
        target = Target(str(bed.mount), stall_s=SAFETY_S)
        target.create_run_dir()
        paths = [s.path for s in shards(Path(target.new_dir("w")))]
        target.register(paths)
        for path in paths:
            Path(path).write_bytes(b"x")
        bed.set_faults(Fault("unlink", "hang", path="*__1_0.distcp", max_s=SAFETY_S))
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            removal = executor.submit(target.remove_files, paths)
            bed.wait_for(op="unlink", action="hang", timeout_s=SAFETY_S)
            time.sleep(CALL_STALL_S + 1.0)  # at least this long, however busy the machine
            bed.release()
            assert removal.result(timeout=SAFETY_S) == 2
        assert (target.hung, target.left_behind) == (None, [])
        report = target.cleanup()
        assert (report.unremovable, report.left, report.failed) == ([], [], [])
        target.close()
        assert not os.listdir(bed.backing)


HANG_STALL_TIMEOUT_S = 3
"""The stall timeout of a session whose fault is a hang: short, so that the test ends soon."""
ERROR_STALL_TIMEOUT_S = 60
"""The stall timeout of a session whose fault is an error: the error ends it at once, and a
short timeout only risks a false stall. With 3 s, a rank of the EIO session below that got no
CPU for 3 s (``.ci/run`` beside two busy loops, 2026-12-07) was named stalled before the EIO
came, and the test failed for the machine's load."""


def checklist_session(
    bed: FaultFS, tmp_path: Path, *options: str, stall_timeout_s: int = HANG_STALL_TIMEOUT_S
) -> tuple[int, str]:
    """The checklist (2 ranks, the stall timeout given) on the bed's mount, bounded by
    ``SAFETY_S``: its exit status and output. Output to a file, and the wait for the process
    itself: an abandoned rank (stuck in the kernel until the bed lets go) may hold a copy of a
    pipe, but not the session."""
    output = tmp_path / "pytest.out"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--profile=tmpfs"]
    argv += [f"--target={bed.mount}", "--set", f"run.stall_timeout_s={stall_timeout_s}"]
    argv += ["--ranks=2", *options]
    argv += ["-m", "not dcp", "-q", "ckptgate/acceptance"]
    with open(output, "w") as out:
        session = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            status = session.wait(timeout=SAFETY_S)
        except subprocess.TimeoutExpired:
            session.kill()
            session.wait()
            pytest.fail(f"the session did not end within {SAFETY_S} s")
    return status, output.read_text()


def test_a_session_whose_manifest_cannot_be_written_ends_with_one_line(tmp_path: Path) -> None:
    """End to end: the manifest's first fsync hangs; the session refuses the target in one line
    naming it and the bound (the profile's stall timeout), and ends by itself."""
    with faultfs(tmp_path) as bed:
        bed.set_faults(Fault("fsync", "hang", path=MANIFEST, max_s=SAFETY_S))
        status, text = checklist_session(bed, tmp_path)
        hangs = [hit for hit in bed.log() if hit.action == "hang"]
        bed.release()
    assert hangs, text[-3000:]
    assert status == 4, text[-3000:]  # a usage error: the target cannot be used
    assert f"--target {bed.mount}: cannot write the run's manifest" in text, text[-3000:]
    assert "did not return within 3 s" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def test_a_refused_removal_at_the_end_is_listed_and_keeps_the_manifest(
    bed: FaultFS, target: Target
) -> None:
    """An object store that stopped answering refuses each removal at once (an error, not a
    hang): the final cleanup must go on, list each file with its error, and keep the manifest
    that names them for ``ckptgate clean``; it raised on the first refusal (a traceback at the
    end of a RADOS Gateway run whose server died)."""
    files = shards(Path(target.new_dir("w")))
    target.register([s.path for s in files])
    with RankPool(RANKS) as pool:
        run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
    bed.set_faults(Fault("unlink", "error", path="*__1_0.distcp", errno="EIO"))
    report = target.cleanup()
    assert report.removed_files == 1
    assert [f.split(": ")[0] for f in report.failed] == [files[1].path]
    assert "Input/output error" in report.failed[0]
    assert target.run.files == [files[1].path]  # still registered
    assert target.manifest is not None  # the manifest stays while it names what stayed
    bed.set_faults()
    again = target.cleanup()  # the store answers again: the file goes, then the rest
    assert (again.removed_files, again.failed) == (1, [])
    assert not os.listdir(bed.backing)
    target.close()


def test_a_failed_round_whose_files_cannot_be_removed_keeps_its_first_failure(
    tmp_path: Path,
) -> None:
    """A write fails, and removing the round's files fails too (RGW gone: both refused): the
    check names the write and lists what stayed; the removal's error once replaced the
    write's failure with a bare OSError."""
    with faultfs(tmp_path) as bed:
        bed.set_faults(
            Fault("write", "error", path="*/write/step-1/__1_0.distcp", errno="EIO"),
            Fault("unlink", "error", path="*/write/step-1/*", errno="EIO"),
        )
        status, text = checklist_session(bed, tmp_path, stall_timeout_s=ERROR_STALL_TIMEOUT_S)
        bed.set_faults()
    assert status == 1, text[-3000:]
    assert "RankFailure: write round 1: " in text, text[-3000:]
    assert "global rank 1" in text and "Errno 5" in text, text[-3000:]
    assert "could not be removed (the target refused)" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def test_a_round_whose_directory_cannot_be_made_fails_as_its_preparation(tmp_path: Path) -> None:
    """The target refuses the next round's directory (RGW gone between rounds): the write check
    fails naming that round's preparation, and the checks that need it say so; the refusal was
    a bare OSError in every later check, each preparing a round again."""
    with faultfs(tmp_path) as bed:
        bed.set_faults(Fault("mkdir", "error", path="*/write/step-2", errno="EIO"))
        status, text = checklist_session(bed, tmp_path, stall_timeout_s=ERROR_STALL_TIMEOUT_S)
        bed.set_faults()
    assert status == 1, text[-3000:]
    assert "RankFailure: preparing write round 2: OSError: [Errno 5]" in text, text[-3000:]
    assert "not measured: what it needs failed in test_write_rounds" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def test_corruption_on_read_names_the_file_and_offset(bed: FaultFS, target: Target) -> None:
    files = shards(Path(target.new_dir("w")))
    offset = 2 * TRANSFER_BYTES + 12345
    with RankPool(RANKS) as pool:
        run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
        bed.set_faults(Fault("read", "corrupt", path="*__0_0.distcp", offset=offset))
        with pytest.raises(RankFailure, match=rf"DataMismatch: .*__0_0.distcp.*{offset}"):
            run_readback(pool, LOCAL, files, SAFETY_S)


def test_a_corrupted_write_is_found_when_read_back(tmp_path: Path) -> None:
    with faultfs(tmp_path, direct_io=True) as bed:  # no page cache keeps the good bytes
        target = Target(str(bed.mount))
        target.create_run_dir()
        files = shards(Path(target.new_dir("w")))
        offset = TRANSFER_BYTES + 777
        bed.set_faults(Fault("write", "corrupt", path="*__1_0.distcp", offset=offset, times=1))
        with RankPool(RANKS) as pool:
            run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
            with pytest.raises(RankFailure, match=rf"DataMismatch: .*__1_0.distcp.*{offset}"):
                run_readback(pool, LOCAL, files, SAFETY_S)
        target.close()


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "o-direct"])
def test_readback_on_a_mount_without_page_cache(tmp_path: Path, direct: bool) -> None:
    with faultfs(tmp_path, direct_io=True) as bed:
        target = Target(str(bed.mount))
        target.create_run_dir()
        files = shards(Path(target.new_dir("w")))
        with RankPool(RANKS) as pool:
            run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
            read = run_readback(pool, LOCAL, files, SAFETY_S, direct=direct)
        target.close()
    assert read.resident_fraction is None  # not applicable: nothing can come from a cache
    assert read.cache_free
    assert read.burst.total_bytes == RANKS * SHARD_BYTES
    if direct:
        assert read.direct or read.direct_refused  # O_DIRECT used, or the reason it was not


def test_a_noop_fsync_is_not_detectable_from_one_client(bed: FaultFS, target: Target) -> None:
    """A lying fsync: the burst passes and every byte reads back; only the bed's log knows.
    What the suite can honestly say is that one client cannot tell (SPEC.md: re-verify a
    kept run directory after a power cut instead)."""
    files = shards(Path(target.new_dir("w")))
    bed.set_faults(Fault("fsync", "noop"))
    with RankPool(RANKS) as pool:
        burst = run_write_burst(pool, LOCAL, files, timeout_s=SAFETY_S)
        run_readback(pool, LOCAL, files, SAFETY_S)
    assert all(detail_as(record, WriteDetail).fsynced for record in burst.ranks)
    assert {hit.action for hit in bed.log()} == {"noop"}


def test_the_session_ends_soon_after_a_hung_fsync(tmp_path: Path) -> None:
    """End to end: pytest on a mount whose first round's fsync hangs ends, non-zero, with the
    hung rank named, within the stall timeout plus a bound (60 s: generous for a busy host;
    without liveness the hang would hold it for the hang's 300 s)."""
    with faultfs(tmp_path) as bed:
        bed.set_faults(Fault("fsync", "hang", path="*/write/step-1/__1_0.distcp", max_s=300))
        report = tmp_path / "report.json"
        started = time.monotonic()
        status, text = checklist_session(bed, tmp_path, f"--report-json={report}")
        elapsed_s = time.monotonic() - started
        hangs = [hit for hit in bed.log() if hit.action == "hang"]
    assert status != 0, text[-3000:]
    assert hangs, text[-3000:]
    assert "global rank 1" in text and "no progress for 3 s in fsync" in text, text[-3000:]
    assert elapsed_s < 60, text[-3000:]
    data = json.loads(report.read_text())
    assert data["exit_status"] != 0
