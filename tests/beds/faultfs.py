"""faultfs: a fault-injecting FUSE test bed, for testing the suite against storage that lies.

A passthrough filesystem over a backing directory, served by its own process
(``faultfs_server.py``: mfusepy over Debian's libfuse 3), so a fault that blocks the server
blocks the client inside the kernel as hung storage does. The fault plan can change while
mounted; every injection is logged (path, operation, offset), so a test asserts that the fault
it planned really happened::

    from tests.beds.faultfs import Fault, faultfs

    def test_rank_names_the_failed_fsync(tmp_path):
        with faultfs(tmp_path, direct_io=False) as fs:          # fs.mount: the mount point
            fs.set_faults(Fault("fsync", "error", path="/run/*/rank-3*", errno="ENOSPC"))
            ...                                                 # drive the suite at fs.mount
            [hit] = fs.log()                                    # what the bed injected
            assert (hit.op, hit.path) == ("fsync", "/run/x/rank-3.bin")

``faultfs(base, direct_io=False)`` makes a new directory under ``base`` holding ``backing/``
(the data, readable directly: what "reached the disk"), ``mnt/`` (the mount point),
``injections.jsonl`` and ``server.stderr``. With ``direct_io=True`` the mount has no page cache:
every read and write reaches the server, and ``mmap`` fails with ``ENODEV``. The pytest
fixture ``faultfs_mount`` is the same with ``direct_io=False`` under ``tmp_path``.

The bed (:class:`FaultFS`):

- ``set_faults(*faults)`` replaces the plan (``set_faults()`` clears it); the first rule that
  matches an operation applies. A :class:`Fault` is ``Fault(op, action, path="*", errno=None,
  offset=None, times=None, max_s=60.0)``:

  ============================================  =============================================
  ``Fault("write", "error", errno="EIO")``      write fails with EIO (any op; ENOSPC alike)
  ``Fault("fsync", "hang", max_s=60)``          fsync blocks until ``release()`` or 60 s, then
                                                syncs (with ``errno``: fails with it instead)
  ``Fault("read", "corrupt", offset=N)``        reads covering file offset N return that byte
                                                inverted (XOR 0xFF); the file is intact
  ``Fault("write", "corrupt", offset=N,         the first write covering N stores that byte
  times=1)``                                    inverted, once: silent corruption on disk
  ``Fault("fsync", "noop")``                    fsync reports success and syncs nothing
  ============================================  =============================================

  ``path`` is a glob (``fnmatch``; ``*`` crosses ``/``) on the path inside the mount, which
  starts with ``/``. ``times`` bounds how often a rule fires (``None``: every time).
  ``offset=None`` on a corrupt rule means the first byte of each operation it fires on.
- ``wait_for(op=None, action=None, path="*", count=1, timeout_s=30)`` blocks until ``count``
  matching injections are logged (no sleeping and polling: the server wakes it) and returns
  them; ``TimeoutError`` after ``timeout_s``. Wait for ``action="hang"`` before asserting a
  client is blocked, or before ``release()``: a release finds only hangs already begun.
- ``release(path="*")`` unblocks the hung operations on matching paths; how many.
- ``freeze()`` stops the whole server (``SIGSTOP``), a hung server: every operation that
  reaches it blocks, and so do the bed's own commands, until ``thaw()`` (or ``close()``).
- ``log()`` returns every :class:`Injection` so far (``op``, ``action``, ``path``, ``offset``,
  ``size``, ``errno``, ``detail``), read from ``injections.jsonl``, so it still works after
  the bed is closed. A hang logs ``hang`` when it begins and ``hang-end`` (``detail``
  ``released`` or ``expired``) when it ends; a hang with ``errno`` then logs the ``error``.
- ``close()``, also on leaving the ``with``, bounded in time even with a client stuck in a hung
  operation: ``fusermount3 -u``, ``-uz`` (lazy) if busy, then the server is told to exit
  (``SIGKILL`` after a grace), which aborts the connection: an operation blocked in it fails
  with ``ECONNABORTED``, later calls on files still open with ``ENOTCONN``.
  It raises if the mount is still there afterwards, and removes the mount point.

Mind the page cache without ``direct_io``: writes are written through to the server, but reads
the cache holds never reach it (the kernel drops a file's pages when it is opened again), and
after a corrupted write the writer's cache still holds the good bytes until then.

The calling test is skipped, with the reason, where root, ``/dev/fuse``, the kernel's FUSE,
``fusermount3`` or the binding (mfusepy and libfuse3) is missing.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from tests.beds import bed_missing
from tests.beds.faultfs_server import parse_rule

SERVER = Path(__file__).with_name("faultfs_server.py")
#: Seconds each teardown step may take (fusermount3 -u, -uz, the server's exit after SIGKILL).
STEP_TIMEOUT_S = 10.0
#: Seconds the server has to exit once told to (it takes milliseconds) before it is killed.
EXIT_GRACE_S = 5.0


@dataclass(frozen=True)
class Fault:
    """One rule of the fault plan (see the module docstring); validated on construction."""

    op: str
    action: str
    path: str = "*"
    errno: str | None = None
    offset: int | None = None
    times: int | None = None
    max_s: float = 60.0

    def __post_init__(self) -> None:
        parse_rule(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The rule as the server reads it."""
        return asdict(self)


@dataclass(frozen=True)
class Injection:
    """One logged injection: what the bed did, to which path, where in the file."""

    seq: int
    time: float
    op: str
    action: str
    path: str
    offset: int | None = None
    size: int | None = None
    errno: str | None = None
    detail: str | None = None
    max_s: float | None = None

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> Injection:
        """An injection from one log line (unknown keys ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in entry.items() if key in known})


def unavailable() -> str | None:
    """Why a faultfs cannot be mounted here, or None when it can."""
    if os.geteuid() != 0:
        return "faultfs needs root"
    if not os.path.exists("/dev/fuse"):
        return "faultfs needs /dev/fuse"
    try:
        with open("/proc/filesystems", encoding="ascii") as listing:
            if not any(line.split()[-1:] == ["fuse"] for line in listing):
                return "faultfs needs FUSE in the kernel (no 'fuse' in /proc/filesystems)"
    except OSError as exc:
        return f"faultfs cannot read /proc/filesystems: {exc}"
    if shutil.which("fusermount3") is None:
        return "faultfs needs fusermount3 (Debian package fuse3)"
    try:
        importlib.import_module("mfusepy")
    except (ImportError, OSError) as exc:  # mfusepy raises OSError without libfuse
        return f"faultfs needs mfusepy with libfuse3 (pip install -e '.[dev]', fuse3): {exc}"
    return None


def is_mounted(point: Path) -> bool:
    """Whether ``point``, an absolute path without symbolic links, is a mount point now.

    Read from /proc/self/mountinfo: nothing looks up ``point`` itself, which would block on a
    hung server.
    """
    target = str(point)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
        for line in info:
            field = line.split()[4]  # spaces and the like are written as octal escapes
            if re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field) == target:
                return True
    return False


class FaultFS:
    """A mounted faultfs: ``mount``, ``backing``, and the methods of the module docstring."""

    def __init__(self, root: Path, direct_io: bool, start_timeout_s: float) -> None:
        self.root = Path(os.path.realpath(root))  # resolved now: a hung mount can't be looked up
        self.backing = root / "backing"
        self.mount = root / "mnt"
        self.log_path = root / "injections.jsonl"
        self.stderr_path = root / "server.stderr"
        self.direct_io = direct_io
        self.backing.mkdir()
        self.mount.mkdir()
        self.log_path.touch()
        self._lock = threading.Lock()
        self._buffer = b""
        self._closed = False
        cmd_r, self._cmd_w = os.pipe()
        self._reply_r, reply_w = os.pipe()
        argv = [sys.executable, str(SERVER), str(self.backing), str(self.mount)]
        argv += ["--log", str(self.log_path), "--cmd-fd", str(cmd_r), "--reply-fd", str(reply_w)]
        if direct_io:
            argv.append("--direct-io")
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                pass_fds=(cmd_r, reply_w),
                start_new_session=True,  # a Ctrl-C meant for pytest lets the bed tear down
            )
        os.close(cmd_r)
        os.close(reply_w)
        try:
            ready = self._read_reply(start_timeout_s)
            if not ready.get("ready"):
                raise RuntimeError(f"faultfs server said {ready} instead of ready")
        except BaseException:
            self.close()
            raise

    # The control channel.
    def _read_reply(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._reply_r], [], [], left)[0]:
                raise TimeoutError(f"faultfs server silent for {timeout_s} s{self._stderr()}")
            chunk = os.read(self._reply_r, 65536)
            if not chunk:
                raise RuntimeError(f"faultfs server exited ({self.process.poll()}){self._stderr()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _call(self, command: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        if self._closed:
            raise RuntimeError("this faultfs is closed")
        with self._lock:
            os.write(self._cmd_w, (json.dumps(command) + "\n").encode())
            reply = self._read_reply(timeout_s)
        if not reply.get("ok"):
            error = str(reply.get("error"))
            raise (TimeoutError if error.startswith("TimeoutError") else ValueError)(error)
        return reply

    def _stderr(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace").strip()
        except OSError:
            return ""
        return f"; its stderr: {text[-2000:]}" if text else ""

    # The API.
    def set_faults(self, *faults: Fault) -> None:
        """Replace the fault plan with ``faults`` (none: clear it)."""
        self._call({"cmd": "faults", "faults": [fault.to_json() for fault in faults]})

    def release(self, path: str = "*") -> int:
        """Unblock the operations hung on paths matching ``path``; how many were hung."""
        return int(self._call({"cmd": "release", "path": path})["released"])

    def wait_for(
        self,
        op: str | None = None,
        action: str | None = None,
        path: str = "*",
        count: int = 1,
        timeout_s: float = 30.0,
    ) -> list[Injection]:
        """Block until ``count`` injections match (None matches any); all the matching ones."""
        query = {"op": op, "action": action, "path": path, "count": count, "timeout_s": timeout_s}
        reply = self._call({"cmd": "wait", **query}, timeout_s + STEP_TIMEOUT_S)
        return [Injection.from_json(entry) for entry in reply["entries"]]

    def freeze(self) -> None:
        """Stop the server process (a hung server) until :meth:`thaw` or :meth:`close`."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server run again."""
        os.kill(self.process.pid, signal.SIGCONT)

    def log(self) -> list[Injection]:
        """Every injection so far, in order (from the log file: works after close too)."""
        text = self.log_path.read_text(encoding="utf-8")
        return [Injection.from_json(json.loads(line)) for line in text.splitlines() if line]

    def close(self) -> None:
        """Unmount (lazily if busy), stop the server, check nothing is left mounted. Idempotent.

        Bounded: each step waits at most ``STEP_TIMEOUT_S``, whatever a client is stuck in.
        """
        if self._closed:
            return
        self._closed = True
        if is_mounted(self.mount) and not self._fusermount("-u"):
            self._fusermount("-uz")
        os.close(self._cmd_w)  # end of file: the server detaches its mount and exits
        try:
            self.process.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:  # hung or frozen: SIGKILL takes a stopped process too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(STEP_TIMEOUT_S)
        os.close(self._reply_r)
        if is_mounted(self.mount):  # the server could not detach it: force it from here
            subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, check=False)
        if is_mounted(self.mount):
            raise RuntimeError(f"faultfs left {self.mount} mounted{self._stderr()}")
        with contextlib.suppress(OSError):
            self.mount.rmdir()

    def _fusermount(self, flags: str) -> bool:
        """``fusermount3 FLAGS mount``, bounded; whether the mount is gone afterwards."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                ["fusermount3", flags, str(self.mount)],
                capture_output=True,
                timeout=STEP_TIMEOUT_S,
                check=False,
            )
        return not is_mounted(self.mount)


@contextlib.contextmanager
def faultfs(
    base: Path | str, direct_io: bool = False, start_timeout_s: float = 30.0
) -> Iterator[FaultFS]:
    """Mount a faultfs in a new directory under ``base``; tear it down on exit, bounded.

    Skips the calling test, saying why, where the bed cannot run (see :func:`unavailable`).
    """
    reason = unavailable()
    if reason is not None:
        bed_missing("fuse", reason)
    root = Path(tempfile.mkdtemp(prefix="faultfs-", dir=base))
    bed = FaultFS(root, direct_io, start_timeout_s)
    try:
        yield bed
    finally:
        bed.close()


@pytest.fixture
def faultfs_mount(tmp_path: Path) -> Iterator[FaultFS]:
    """A faultfs under ``tmp_path``, with the page cache (``direct_io=False``)."""
    with faultfs(tmp_path) as bed:
        yield bed
