"""The faultfs bed itself: passthrough, each fault seen by a plain client, bounded teardown.

No test waits on a wall-clock race: a test that needs a client blocked waits for the bed's
``hang`` log entry (the server wakes it); every timeout here is a safety net, generous and
bounded, never what a test's outcome depends on.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.beds.faultfs import Fault, FaultFS, faultfs, is_mounted, unavailable

#: Safety net for a client process that should end: far above what it needs on a loaded host.
CLIENT_TIMEOUT_S = 60.0
DATA = os.urandom(3 * 65536 + 123)

# A plain client in its own process, so a test can never be stuck with it: write DATA to a new
# file, fsync, close; print {"ok": true} or {"errno": N}.
CLIENT = """
import json, os, sys
path, size = sys.argv[1], int(sys.argv[2])
try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, os.urandom(size))
    print(json.dumps({"phase": "fsync"}), flush=True)
    os.fsync(fd)
    os.close(fd)
    print(json.dumps({"ok": True}), flush=True)
except OSError as exc:
    print(json.dumps({"errno": exc.errno}), flush=True)
"""


def start_client(path: Path, size: int = 4096) -> subprocess.Popen[str]:
    """A client process writing ``size`` bytes to ``path`` and fsyncing it."""
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(path), str(size)], stdout=subprocess.PIPE, text=True
    )


def client_result(client: subprocess.Popen[str]) -> dict[str, object]:
    """The client's last line, once it ended (killed, and the test failed, past the net)."""
    try:
        out, _ = client.communicate(timeout=CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        client.kill()
        client.communicate()
        pytest.fail(f"the client did not end within {CLIENT_TIMEOUT_S} s")
    return json.loads(out.strip().splitlines()[-1])


def write_file(path: Path, data: bytes, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` in 64 KiB writes, fsync, close (an OSError propagates)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start in range(0, len(data), 65536):
            os.write(fd, data[start : start + 65536])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("direct_io", [False, True], ids=["page-cache", "direct-io"])
def test_passthrough_round_trip(tmp_path: Path, direct_io: bool) -> None:
    with faultfs(tmp_path, direct_io=direct_io) as fs:
        run = fs.mount / "run"
        run.mkdir()
        write_file(run / "shard.tmp", DATA)
        (run / "shard.tmp").rename(run / "shard.bin")
        assert os.listdir(run) == ["shard.bin"]
        assert (run / "shard.bin").stat().st_size == len(DATA)
        assert (run / "shard.bin").read_bytes() == DATA
        assert (fs.backing / "run" / "shard.bin").read_bytes() == DATA
        assert os.statvfs(fs.mount).f_blocks == os.statvfs(fs.backing).f_blocks
        (run / "shard.bin").unlink()
        run.rmdir()
        assert os.listdir(fs.mount) == []
        assert fs.log() == []
    assert not is_mounted(fs.mount)
    assert not fs.mount.exists()


def test_eio_on_write_only_on_matching_paths(faultfs_mount: FaultFS) -> None:
    fs = faultfs_mount
    fs.set_faults(Fault("write", "error", path="/bad-*", errno="EIO"))
    write_file(fs.mount / "good.bin", DATA)
    with pytest.raises(OSError) as raised:
        write_file(fs.mount / "bad-rank-1.bin", DATA)
    assert raised.value.errno == errno.EIO
    [hit] = fs.log()
    assert (hit.op, hit.action, hit.path, hit.errno, hit.offset) == (
        "write",
        "error",
        "/bad-rank-1.bin",
        "EIO",
        0,
    )


def test_enospc_on_fsync(faultfs_mount: FaultFS) -> None:
    fs = faultfs_mount
    fs.set_faults(Fault("fsync", "error", errno="ENOSPC"))
    with pytest.raises(OSError) as raised:
        write_file(fs.mount / "shard.bin", DATA)
    assert raised.value.errno == errno.ENOSPC
    assert [(hit.op, hit.errno) for hit in fs.log()] == [("fsync", "ENOSPC")]
    fs.set_faults()  # the plan changes while mounted
    write_file(fs.mount / "shard.bin", DATA)
    assert len(fs.log()) == 1


@pytest.mark.parametrize("direct_io", [False, True], ids=["page-cache", "direct-io"])
def test_corrupted_read_leaves_the_file_intact(tmp_path: Path, direct_io: bool) -> None:
    offset = 65536 + 77
    with faultfs(tmp_path, direct_io=direct_io) as fs:
        (fs.backing / "shard.bin").write_bytes(DATA)  # on "disk", never in the client's cache
        fs.set_faults(Fault("read", "corrupt", path="/shard.bin", offset=offset))
        got = (fs.mount / "shard.bin").read_bytes()
        assert len(got) == len(DATA)
        assert [i for i in range(len(DATA)) if got[i] != DATA[i]] == [offset]
        assert got[offset] == DATA[offset] ^ 0xFF
        assert (fs.backing / "shard.bin").read_bytes() == DATA
        assert {(hit.op, hit.action, hit.offset) for hit in fs.log()} == {
            ("read", "corrupt", offset)
        }


def test_corrupted_single_write(faultfs_mount: FaultFS) -> None:
    fs = faultfs_mount
    offset = 2 * 65536 + 5
    fs.set_faults(Fault("write", "corrupt", offset=offset, times=1))
    write_file(fs.mount / "first.bin", DATA)  # the client sees success
    write_file(fs.mount / "second.bin", DATA)  # the fault is spent
    stored = (fs.backing / "first.bin").read_bytes()
    assert [i for i in range(len(DATA)) if stored[i] != DATA[i]] == [offset]
    assert (fs.backing / "second.bin").read_bytes() == DATA
    # Opened again, the file's cached pages are dropped: the client now reads what was stored.
    assert (fs.mount / "first.bin").read_bytes() == stored
    [hit] = fs.log()
    assert (hit.op, hit.action, hit.path, hit.offset) == ("write", "corrupt", "/first.bin", offset)


def test_noop_fsync_reports_success_and_is_logged(faultfs_mount: FaultFS) -> None:
    fs = faultfs_mount
    fs.set_faults(Fault("fsync", "noop", path="/lying/*"))
    (fs.mount / "lying").mkdir()
    write_file(fs.mount / "lying" / "shard.bin", DATA)
    write_file(fs.mount / "honest.bin", DATA)
    assert [(hit.op, hit.action, hit.path) for hit in fs.log()] == [
        ("fsync", "noop", "/lying/shard.bin")
    ]


def test_hung_fsync_blocks_the_client_until_released(faultfs_mount: FaultFS) -> None:
    fs = faultfs_mount
    fs.set_faults(Fault("fsync", "hang", path="/shard.bin", max_s=120))
    client = start_client(fs.mount / "shard.bin")
    try:
        [hang] = fs.wait_for(op="fsync", action="hang")
        assert hang.path == "/shard.bin"
        assert client.poll() is None  # blocked in the kernel, and logged so, not yet released
        assert fs.release("/other*") == 0
        assert fs.release() == 1
        assert client_result(client) == {"ok": True}
    finally:
        fs.release()
        client.kill()
        client.communicate()
    assert [hit.detail for hit in fs.log() if hit.action == "hang-end"] == ["released"]


def test_hung_fsync_ends_at_its_bound_then_fails_with_its_errno(faultfs_mount: FaultFS) -> None:
    fs = faultfs_mount
    fs.set_faults(Fault("fsync", "hang", errno="EIO", max_s=0.2))
    started = time.monotonic()
    with pytest.raises(OSError) as raised:
        write_file(fs.mount / "shard.bin", DATA)  # nobody releases it: the bound does
    assert raised.value.errno == errno.EIO
    assert time.monotonic() - started >= 0.2
    assert [(hit.action, hit.detail) for hit in fs.log()] == [
        ("hang", None),
        ("hang-end", "expired"),
        ("error", None),
    ]


def test_direct_io_mount_has_no_page_cache(tmp_path: Path) -> None:
    """mmap needs the page cache: a direct_io mount refuses it, as the suite saw in the wild
    ("mmap for mincore: No such device"); the cached mount maps the same file."""
    for direct_io in (False, True):
        with faultfs(tmp_path, direct_io=direct_io) as fs:
            (fs.backing / "shard.bin").write_bytes(DATA)
            fd = os.open(fs.mount / "shard.bin", os.O_RDONLY)
            try:
                if direct_io:
                    with pytest.raises(OSError) as raised:
                        mmap.mmap(fd, len(DATA), prot=mmap.PROT_READ)
                    assert raised.value.errno == errno.ENODEV
                else:
                    with mmap.mmap(fd, len(DATA), prot=mmap.PROT_READ) as mapped:
                        assert mapped[:] == DATA
            finally:
                os.close(fd)


def test_teardown_unmounts_while_a_client_is_stuck_in_a_hung_fsync(tmp_path: Path) -> None:
    client = None
    try:
        with faultfs(tmp_path) as fs:
            fs.set_faults(Fault("fsync", "hang", max_s=300))
            client = start_client(fs.mount / "shard.bin")
            fs.wait_for(op="fsync", action="hang")
            assert client.poll() is None
            started = time.monotonic()
        elapsed = time.monotonic() - started
        assert not is_mounted(fs.mount)
        assert fs.process.poll() is not None
        assert elapsed < 30, f"teardown took {elapsed:.1f} s"
        # The server died with the fsync unanswered: the kernel aborted it, as for a dead server
        # (ECONNABORTED for a request in flight; a later call on the open file gets ENOTCONN).
        assert client_result(client) == {"errno": errno.ECONNABORTED}
        assert [hit.action for hit in fs.log()] == ["hang"]  # never released, never ended
    finally:
        if client is not None:
            client.kill()
            client.communicate()


# A reader in its own process: open the file, say so, read it once told to on stdin.
READER = """
import json, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("opened", flush=True)
sys.stdin.readline()
try:
    os.read(fd, 4096)
    print(json.dumps({"ok": True}), flush=True)
except OSError as exc:
    print(json.dumps({"errno": exc.errno}), flush=True)
"""


def test_teardown_of_a_frozen_server_is_bounded(tmp_path: Path) -> None:
    reader = None
    try:
        with faultfs(tmp_path) as fs:
            (fs.backing / "shard.bin").write_bytes(DATA)
            reader = subprocess.Popen(
                [sys.executable, "-c", READER, str(fs.mount / "shard.bin")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert reader.stdout is not None and reader.stdin is not None
            assert reader.stdout.readline() == "opened\n"
            fs.freeze()
            reader.stdin.write("read\n")
            reader.stdin.flush()
            started = time.monotonic()
        elapsed = time.monotonic() - started
        assert not is_mounted(fs.mount)
        assert elapsed < 30, f"teardown took {elapsed:.1f} s"
        # The client never hangs. Its read fails when it was in flight at the abort, or came
        # after it; on a busy machine the read can also reach the server (or the page cache its
        # open read ahead into) before the freeze takes hold, and then it succeeds: which of the
        # three happens is the scheduler's, so each is allowed, and only a hang fails.
        result = client_result(reader)
        assert result.get("ok") is True or result.get("errno") in (
            errno.ECONNABORTED,
            errno.ENOTCONN,
        ), result
    finally:
        if reader is not None:
            reader.kill()
            reader.communicate()


def test_faults_are_validated_before_they_reach_the_server() -> None:
    with pytest.raises(ValueError, match="action"):
        Fault("write", "explode")
    with pytest.raises(ValueError, match="applies to"):
        Fault("read", "noop")
    with pytest.raises(ValueError, match="errno"):
        Fault("write", "error")
    with pytest.raises(ValueError, match="errno name"):
        Fault("write", "error", errno="ENOTANERROR")
    with pytest.raises(ValueError, match="max_s"):
        Fault("fsync", "hang", max_s=0)


def test_unavailable_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert unavailable() == "faultfs needs root"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: None)
    reason = unavailable()
    assert reason is not None
    assert "fusermount3" in reason or "/dev/fuse" in reason or "FUSE" in reason
