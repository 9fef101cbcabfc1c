"""The run's manifest: a kept run re-verified byte by byte, a dead run recognised and cleaned,
a live run's lease respected; nothing the manifest does not list is read or removed."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptgate.cli import main
from ckptgate.engine.datagen import StampKey, write_stamped
from ckptgate.rundir.clean import clean_run
from ckptgate.rundir.lease import FORCE_STALE_AFTER_S, LEASE_FRESH_S, LeaseKeeper, read_lease
from ckptgate.rundir.manifest import (
    MANIFEST_FORMAT,
    FileStamp,
    ManifestDamaged,
    ManifestError,
    ProcessId,
    Writer,
    lease_name,
    manifest_name,
    read_manifest,
)
from ckptgate.rundir.runs import find_runs, judge_run
from ckptgate.rundir.target import Target
from ckptgate.rundir.verify import verify_run
from ckptgate.workloads.storm import METADATA_STAMP_RANK
from ckptgate.workloads.write_burst import ShardFile

KiB = 1024
RUN_ID = 77
TRANSFER = 64 * KiB
COMMIT_PADDING = 5000


def _write_stamped(path: str, stamp: FileStamp, size: int) -> None:
    """Write ``size`` bytes as a rank does, with ``stamp``'s key, transfer and offset."""
    key = StampKey(stamp.run_id, stamp.global_rank)
    write_stamped(path, key, stamp.transfer_bytes, size, stamp.offset)


def _kept_run(root: Path) -> Target:
    """A kept run: two shards (one with a ragged tail), a storm file stamped at an offset,
    a DCP-like directory claimed after the fact, and a shard the run removed itself."""
    target = Target(str(root))
    target.create_run_dir(run_id=RUN_ID)
    write = target.new_dir("write")
    shards = [
        ShardFile(0, f"{write}/__0_0.distcp", 3 * TRANSFER, RUN_ID, TRANSFER),
        ShardFile(1, f"{write}/__1_0.distcp", 2 * TRANSFER + 1000, RUN_ID, TRANSFER),
        ShardFile(2, f"{write}/__2_0.distcp", TRANSFER, RUN_ID, TRANSFER),
    ]
    target.register_shards(shards, writer=Writer.WRITE_BURST)
    for shard in shards:
        _write_stamped(shard.path, FileStamp(RUN_ID, shard.global_rank, TRANSFER), shard.bytes)
    target.remove_files([shards[2].path])  # an older checkpoint the run deleted
    storm = target.new_dir("metadata")
    storm_stamp = FileStamp(RUN_ID, 3, 4 * KiB, offset=5 * 4 * KiB)
    target.register(
        [f"{storm}/__3_5.distcp"], stamps=[storm_stamp], sizes=[4 * KiB], writer=Writer.STORM
    )
    _write_stamped(f"{storm}/__3_5.distcp", storm_stamp, 4 * KiB)
    # the storm's commit: a listing, then stamped padding (as commit_task writes it)
    commit = f"{storm}/.metadata"
    target.register([commit], writer=Writer.STORM_COMMIT)
    head, padding = (
        b'{"files":["__3_5.distcp"]}\n',
        FileStamp(RUN_ID, METADATA_STAMP_RANK, TRANSFER),
    )
    _write_stamped(commit, padding, COMMIT_PADDING)
    data = Path(commit).read_bytes()
    Path(commit).write_bytes(head + data)
    target.record_content(commit, head, padding)
    dcp = target.new_local_dir("dcp-0")
    Path(dcp, "__0_0.distcp").write_bytes(b"d" * 5000)
    Path(dcp, ".metadata").write_bytes(b"m" * 300)
    target.claim_tree(dcp, writer=Writer.DCP)
    target.keep()
    return target


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[Path]:
    target = _kept_run(tmp_path)
    assert target.run_dir is not None
    yield Path(target.run_dir)


def test_a_kept_run_verifies_every_listed_byte(kept: Path) -> None:
    report = verify_run(str(kept))
    assert report.ok, [p.line() for p in report.problems]
    assert (report.files, report.stamped_files, report.size_only_files) == (6, 4, 2)
    head = len(b'{"files":["__3_5.distcp"]}\n')
    written = 3 * TRANSFER + 2 * TRANSFER + 1000 + 4 * KiB + head + COMMIT_PADDING
    assert report.verified_bytes == written
    summary = report.summary()
    assert "not stamped by the suite (PyTorch DCP: 2), size checked only" in summary
    assert "(write burst: 2, metadata storm: 1, metadata storm's commit (.metadata): 1, " in summary


@pytest.mark.parametrize("offset", [7, 40, 3000], ids=["in-listing", "in-padding", "deep"])
def test_a_flipped_byte_in_the_storms_commit_is_named_with_file_writer_and_offset(
    kept: Path, offset: int
) -> None:
    path = kept / "metadata" / ".metadata"
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(data)
    (problem,) = verify_run(str(kept)).problems
    assert (problem.path, problem.offset) == ("metadata/.metadata", offset)
    assert problem.line().startswith(
        f"metadata/.metadata (metadata storm's commit (.metadata)) at offset {offset}: byte "
    )


def test_the_manifest_lists_stamps_sizes_and_who_ran(kept: Path) -> None:
    manifest = read_manifest(str(kept / manifest_name(0)))
    here = ProcessId.current()
    assert (manifest.header["run_id"], manifest.header["pid"]) == (RUN_ID, os.getpid())
    assert manifest.header["host"] == here.host and manifest.header["suite_version"]
    shard = manifest.files["write/__1_0.distcp"]
    assert shard.bytes == 2 * TRANSFER + 1000
    assert shard.stamp == FileStamp(RUN_ID, 1, TRANSFER)
    assert "write/__2_0.distcp" in manifest.removed and manifest.end == {
        **manifest.end,  # type: ignore[dict-item]
        "kept": True,
    }
    assert manifest.files["dcp-0/.metadata"].stamp is None


def test_a_corrupted_byte_is_named_with_file_and_offset(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = kept / "write" / "__0_0.distcp"
    data = bytearray(shard.read_bytes())
    data[TRANSFER + 4097] ^= 0xFF
    shard.write_bytes(data)
    assert main(["verify", str(kept)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        f"ckptgate verify: write/__0_0.distcp (write burst) at offset {TRANSFER + 4097}: "
    )
    assert "FAILED: 1 problem(s)" in out[-1]


def test_a_corrupted_byte_in_a_file_stamped_at_an_offset_is_named_at_its_file_offset(
    kept: Path,
) -> None:
    path = kept / "metadata" / "__3_5.distcp"
    data = bytearray(path.read_bytes())
    data[40] ^= 1  # inside the stamp's offset word
    path.write_bytes(data)
    (problem,) = verify_run(str(kept)).problems
    assert (problem.path, problem.offset) == ("metadata/__3_5.distcp", 40)


def test_a_missing_and_a_truncated_file_are_named(kept: Path) -> None:
    (kept / "write" / "__0_0.distcp").unlink()
    with open(kept / "write" / "__1_0.distcp", "r+b") as handle:
        handle.truncate(TRANSFER + 10)
    (kept / "dcp-0" / ".metadata").write_bytes(b"short")
    lines = [p.line() for p in verify_run(str(kept)).problems]
    assert lines == [
        "write/__0_0.distcp (write burst): missing (the manifest lists it)",
        f"write/__1_0.distcp (write burst) at offset {TRANSFER + 10}: truncated: file ends at "
        "65,546 B, wrote 132,072 B",
        "dcp-0/.metadata (PyTorch DCP): size 5 B, the run wrote 300 B",
    ]


def test_verify_reads_nothing_outside_the_manifest(kept: Path) -> None:
    (kept / "write" / "foreign.bin").write_bytes(b"not ours")
    (kept / "notes.txt").write_text("someone else's")
    seen: list[tuple[str, Any]] = []
    recording = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if recording[0] and event in ("open", "os.listdir", "os.scandir"):
            seen.append((event, args[0]))

    sys.addaudithook(hook)  # audit hooks cannot be removed: the flag turns this one off
    try:
        report = verify_run(str(kept))
    finally:
        recording[0] = False
    assert report.ok
    opened = {os.path.relpath(str(p), kept) for e, p in seen if e == "open" and str(p)[0] == "/"}
    opened = {p for p in opened if not p.startswith("..")}
    listed = read_manifest(str(kept / manifest_name(0))).files
    stamped = {p for p, f in listed.items() if f.stamp is not None or f.head is not None}
    assert opened == stamped | {manifest_name(0)}  # the others are stat'ed for their size
    assert not [p for e, p in seen if e != "open" and str(kept) in str(p)]


def test_verify_of_a_directory_without_a_manifest_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such manifest" in err
    assert main(["verify", str(tmp_path / "absent")]) == 2
    assert main(["verify"]) == 2
    assert "RUN_DIR" in capsys.readouterr().err


# --- dead, live and stale runs ------------------------------------------------------------------


def _dead_run(root: Path, *, host: str | None = None, lease_time: float | None = None) -> Path:
    """A run directory as ``kill -9`` leaves it: files, a manifest without an end line, and a
    lease; its process is this pid with another start time (a reused pid), or another host."""
    target = Target(str(root))
    target.create_run_dir(run_id=RUN_ID)
    assert target.run_dir is not None and target.manifest is not None
    write = target.new_dir("write")
    shard = ShardFile(0, f"{write}/__0_0.distcp", TRANSFER, RUN_ID, TRANSFER)
    target.register_shards([shard], writer=Writer.WRITE_BURST)
    _write_stamped(shard.path, FileStamp(RUN_ID, 0, TRANSFER), TRANSFER)
    lease = LeaseKeeper(target.run_dir, 0, clock=lambda: lease_time or 1_000.0)
    lease.write()
    target.manifest.close()  # the process dies here: nothing more is written
    run_dir = Path(target.run_dir)
    manifest = run_dir / manifest_name(0)
    lines = manifest.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    if host is not None:
        header["host"] = host
    else:
        header["pid_start_ticks"] = (header["pid_start_ticks"] or 0) + 1
    manifest.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    return run_dir


def test_a_dead_run_on_this_host_is_provably_dead(tmp_path: Path) -> None:
    run_dir = _dead_run(tmp_path)
    (run,) = find_runs(str(tmp_path), now=2_000.0)
    assert run.run_dir == str(run_dir) and run.state == "dead" and run.provably_dead
    assert "another process now" in run.describe()
    assert f"pid {os.getpid()}" in run.describe()


def test_a_run_of_another_host_is_live_while_its_lease_is_fresh_then_stale(
    tmp_path: Path,
) -> None:
    _dead_run(tmp_path, host="elsewhere", lease_time=1_000.0)
    (fresh,) = find_runs(str(tmp_path), now=1_000.0 + LEASE_FRESH_S - 1)
    (stale,) = find_runs(str(tmp_path), now=1_000.0 + LEASE_FRESH_S + 1)
    assert fresh.state == "live"
    assert stale.state == "stale" and not stale.provably_dead
    assert "not provably dead (another host)" in stale.describe()


def test_a_running_process_on_this_host_is_live_whatever_its_lease(tmp_path: Path) -> None:
    target = Target(str(tmp_path))
    run_dir = target.create_run_dir(run_id=RUN_ID)
    run = judge_run(run_dir, now=10.0**12)
    assert run is not None and run.state == "live"
    target.cleanup()


def test_clean_removes_exactly_a_dead_runs_files_and_leaves_a_foreign_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _dead_run(tmp_path)
    foreign = run_dir / "write" / "someone-elses.pt"
    foreign.write_bytes(b"precious")
    neighbour = tmp_path / "neighbour"
    neighbour.mkdir()
    assert main(["clean", str(tmp_path)]) == 1  # something stayed: said so
    out = capsys.readouterr().out
    assert "removed 3 files and 0 directories" in out  # shard, lease, manifest
    assert f"left in place (holds what the run did not list): {run_dir}/write" in out
    assert "someone-elses.pt" in out
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == sorted(["neighbour", run_dir.name, f"{run_dir.name}/write",
                           f"{run_dir.name}/write/someone-elses.pt"])  # fmt: skip
    assert foreign.read_bytes() == b"precious"


def test_clean_of_a_dead_run_leaves_nothing(tmp_path: Path) -> None:
    _dead_run(tmp_path)
    assert main(["clean", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


def test_clean_refuses_a_live_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = Target(str(tmp_path))
    run_dir = target.create_run_dir(run_id=RUN_ID)
    target.start_lease()
    try:
        assert main(["clean", str(tmp_path)]) == 1
        assert "the run is live" in capsys.readouterr().out
        assert Path(run_dir, lease_name(0)).exists()
    finally:
        target.cleanup()
    assert list(tmp_path.iterdir()) == []


def test_clean_refuses_another_hosts_run_without_force_stale(tmp_path: Path) -> None:
    _dead_run(tmp_path, host="elsewhere", lease_time=1_000.0)
    (run,) = find_runs(str(tmp_path), now=1_000.0 + FORCE_STALE_AFTER_S + 1)
    refused = clean_run(run)
    assert refused.refused is not None and "not provably dead" in refused.refused
    (run,) = find_runs(str(tmp_path), now=1_000.0 + FORCE_STALE_AFTER_S - 1)
    too_young = clean_run(run, force_stale=True)
    assert too_young.refused is not None and "needs a lease older than" in too_young.refused
    assert len(list(tmp_path.rglob("*"))) == 5  # run dir, write/, shard, manifest, lease
    (run,) = find_runs(str(tmp_path), now=1_000.0 + FORCE_STALE_AFTER_S + 1)
    done = clean_run(run, force_stale=True)
    assert done.refused is None and list(tmp_path.iterdir()) == []


def test_clean_leaves_a_kept_run_unless_asked(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["clean", str(kept.parent)]) == 0
    assert "kept:" in capsys.readouterr().out and kept.exists()
    assert main(["clean", str(kept.parent), "--include-kept"]) == 0
    assert list(kept.parent.iterdir()) == []


def test_a_torn_last_manifest_line_is_dropped(tmp_path: Path) -> None:
    run_dir = _dead_run(tmp_path)
    with open(run_dir / manifest_name(0), "ab") as handle:
        handle.write(b'{"kind":"file","path":"write/__9')  # died mid-append
    manifest = read_manifest(str(run_dir / manifest_name(0)))
    assert manifest.torn and "write/__0_0.distcp" in manifest.files


def test_the_lease_is_rewritten_with_the_clock_it_is_given(tmp_path: Path) -> None:
    times = iter([100.0, 105.0])
    lease = LeaseKeeper(str(tmp_path), 0, run_id=RUN_ID, clock=lambda: next(times))
    lease.write()
    assert read_lease(lease.path)["time"] == 100.0  # type: ignore[index]
    lease.write(ended=True)
    written = read_lease(lease.path)
    assert written is not None and (written["time"], written["ended"]) == (105.0, True)
    assert written["pid"] == os.getpid() and not Path(lease.tmp_path).exists()


def test_cleanup_removes_the_manifest_and_the_lease(tmp_path: Path) -> None:
    target = Target(str(tmp_path))
    target.create_run_dir(run_id=RUN_ID)
    target.start_lease()
    report = target.cleanup()
    assert report.left == [] and list(tmp_path.iterdir()) == []


def test_a_manifest_the_storage_zeroed_fails_verify_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An OSD of an unreplicated pool lost the manifest's object: it reads back as NUL bytes.
    verify says the run's record is gone (exit 1: the storage failed), not a traceback (json
    took the NULs for UTF-32 and raised UnicodeDecodeError)."""
    run_dir = _dead_run(tmp_path)
    part = run_dir / manifest_name(0)
    part.write_bytes(b"\x00" * part.stat().st_size)
    assert main(["verify", str(run_dir)]) == 1
    out = capsys.readouterr().out
    assert f"ckptgate verify {run_dir}: FAILED: {part}: line 1 is not JSON (NUL bytes" in out
    assert "nothing in it can be vouched for" in out


@pytest.mark.parametrize(
    ("error", "code"),
    [(errno.EIO, 1), (errno.ENXIO, 1), (errno.ENOTCONN, 1), (errno.EACCES, 2)],
)
def test_a_manifest_the_storage_cannot_return_is_a_failure_and_one_the_user_cannot_read_is_not(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    error: int,
    code: int,
) -> None:
    run_dir = _dead_run(tmp_path)
    part = str(run_dir / manifest_name(0))
    real_open = open

    def failing_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path) == part:
            raise OSError(error, os.strerror(error), path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", failing_open)
    assert main(["verify", str(run_dir)]) == code
    out, err = capsys.readouterr()
    said = f"{part}: cannot read ({os.strerror(error)})"
    if code == 1:  # the storage's: verify FAILED, nothing vouched for
        assert f"ckptgate verify {run_dir}: FAILED: {said}" in out
        assert "nothing in it can be vouched for" in out
    else:  # the user's (permissions): a usage error, one line
        assert said in err and err.count("\n") == 1


def test_a_line_that_is_not_json_before_the_last_is_damage(tmp_path: Path) -> None:
    run_dir = _dead_run(tmp_path)
    part = run_dir / manifest_name(0)
    lines = part.read_bytes().splitlines(keepends=True)
    part.write_bytes(lines[0] + b"\xff\xfe garbage\n" + b"".join(lines[1:]))
    with pytest.raises(ManifestDamaged, match="line 2 is not JSON"):
        read_manifest(str(part))


def test_verify_with_several_jobs_reports_what_one_job_does_in_the_same_order(
    kept: Path,
) -> None:
    """Files checked four at a time: the same counts, bytes and problems, in manifest order."""
    (kept / "write" / "__0_0.distcp").unlink()
    with open(kept / "write" / "__1_0.distcp", "r+b") as handle:
        handle.truncate(TRANSFER + 10)
    commit = kept / "metadata" / ".metadata"
    data = bytearray(commit.read_bytes())
    data[3000] ^= 0x10
    commit.write_bytes(data)
    heard: list[str] = []
    one = verify_run(str(kept))
    four = verify_run(str(kept), jobs=4, on_problem=lambda p: heard.append(p.line()))
    assert [p.line() for p in four.problems] == [p.line() for p in one.problems] == heard
    assert len(heard) == 3
    for name in ("files", "stamped_files", "size_only_files", "verified_bytes", "writers"):
        assert getattr(four, name) == getattr(one, name), name


def test_verify_jobs_below_one_is_a_usage_error(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--jobs", "0", str(kept)]) == 2
    assert capsys.readouterr().err.strip() == "ckptgate verify: --jobs 0: allowed: 1 or more"


def test_a_kept_run_whose_manifest_refuses_its_end_line_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GlusterFS brick holding the manifest died before the run ended: the append fails with
    ENOTCONN. ``keep`` says why the end line is missing instead of raising (the session's
    finish ended in a traceback), and the kept run still verifies what the manifest lists."""
    target = Target(str(tmp_path))
    target.create_run_dir(run_id=RUN_ID)
    write = target.new_dir("write")
    shard = ShardFile(0, f"{write}/__0_0.distcp", 2 * TRANSFER, RUN_ID, TRANSFER)
    target.register_shards([shard], writer=Writer.WRITE_BURST)
    _write_stamped(shard.path, FileStamp(RUN_ID, 0, TRANSFER), shard.bytes)
    assert target.manifest is not None
    manifest = target.manifest

    def refused(kept: bool) -> None:
        raise OSError(errno.ENOTCONN, os.strerror(errno.ENOTCONN), manifest.path)

    monkeypatch.setattr(manifest, "ended", refused)
    problem = target.keep()
    assert problem is not None
    assert "end line was not written (Transport endpoint is not connected" in problem
    assert manifest_name(0) in problem
    assert target.run_dir is not None
    assert verify_run(target.run_dir).ok


def test_a_run_kept_by_an_older_payload_is_refused_in_one_line_not_called_corrupt(
    tmp_path: Path,
) -> None:
    """Format 1 wrote a reused random pool that this version does not recompute: its bytes are
    refused with the format named, never reported wrong one by one (issue 53's review)."""
    run_dir = _kept_run(tmp_path).run_dir
    assert run_dir is not None
    manifest = next(Path(run_dir).glob(".ckptgate-manifest.node*"))
    lines = manifest.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == MANIFEST_FORMAT == 2
    manifest.write_text("\n".join([json.dumps({**header, "format": 1}), *lines[1:]]) + "\n")
    with pytest.raises(ManifestError, match="kept by a ckptgate of manifest format 1"):
        verify_run(run_dir)


def test_a_stamp_with_an_unknown_payload_is_a_damaged_manifest_line() -> None:
    with pytest.raises(ValueError, match="stamp payload 'zeros': allowed: random, realistic-K"):
        FileStamp.from_json(
            {"run_id": 1, "global_rank": 0, "transfer_bytes": 4096, "payload": "zeros"}
        )
