"""The faultfs server: a fault-injecting passthrough FUSE filesystem, run as its own process.

Started by :func:`tests.beds.faultfs.faultfs` (not meant to be run by hand, though it can be)::

    python faultfs_server.py BACKING MOUNT --log LOG --cmd-fd R --reply-fd W [--direct-io]

It mirrors ``BACKING`` at ``MOUNT`` with mfusepy over libfuse 3, multithreaded, in the
foreground. Because it is a separate process, a fault that blocks it (a hung fsync) blocks the
client inside the kernel, as hung storage does, and killing it aborts the connection (the
blocked client gets ``ECONNABORTED``, later calls ``ENOTCONN``).

Control channel: one JSON object per line on ``--cmd-fd``, one JSON reply per line on
``--reply-fd`` (``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``); the first line
the server writes is ``{"ready": true, "pid": ...}``, once the kernel has sent FUSE_INIT (the
mount is live). Commands:

- ``{"cmd": "faults", "faults": [RULE, ...]}`` replaces the fault plan (see :func:`parse_rule`);
- ``{"cmd": "release", "path": GLOB}`` unblocks the hung operations on matching paths now;
- ``{"cmd": "wait", "op": ..., "action": ..., "path": GLOB, "count": N, "timeout_s": T}``
  returns once N matching injections are logged (or fails after T seconds);
- ``{"cmd": "log"}`` returns every injection so far.

Every injection is also appended, one JSON object a line, to ``--log`` before the faulty result
is returned, so the log outlives the server. End of file on ``--cmd-fd`` (the test ended, or
died) makes the server detach its mount (``fusermount3 -uz``) and exit at once.
"""

from __future__ import annotations

import argparse
import errno as errno_module
import fnmatch
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

#: Operations a rule may name; ``error`` and ``hang`` apply to all of them.
OPS = (
    "getattr",
    "readdir",
    "open",
    "create",
    "read",
    "write",
    "truncate",
    "flush",
    "release",
    "fsync",
    "unlink",
    "mkdir",
    "rmdir",
    "rename",
    "statfs",
    "chmod",
    "utimens",
)
#: Which operations each action applies to.
ACTIONS: dict[str, tuple[str, ...]] = {
    "error": OPS,
    "hang": OPS,
    "corrupt": ("read", "write"),
    "noop": ("fsync",),
}
#: No hang lasts longer than this, whatever a rule asks: nothing may hang forever.
HANG_CAP_S = 3600.0


def parse_rule(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate one fault rule and fill in its defaults; raise ``ValueError`` naming the fault.

    A rule is ``{"op", "action", "path"="*", "errno", "offset", "times", "max_s"=60}``:
    ``error`` fails ``op`` with ``errno`` (a name such as ``"EIO"``); ``hang`` blocks ``op``
    until released or ``max_s`` seconds, then runs it (or fails it with ``errno`` if given);
    ``corrupt`` flips (XOR 0xFF) the byte at file offset ``offset`` in the data a read returns
    or a write stores (``None``: the operation's first byte), only in operations covering it;
    ``noop`` makes fsync report success without syncing. ``times`` bounds how often the rule
    fires (``None``: every time). ``path`` is a glob (``fnmatch``, ``*`` crosses ``/``) against
    the path inside the mount, which starts with ``/``.
    """
    known = {"op", "action", "path", "errno", "offset", "times", "max_s"}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"unknown fault fields {sorted(unknown)} in {raw}")
    op, action = raw.get("op"), raw.get("action")
    if action not in ACTIONS:
        raise ValueError(f"fault action {action!r} is not one of {sorted(ACTIONS)}")
    if op not in ACTIONS[action]:
        raise ValueError(f"fault action {action!r} applies to {ACTIONS[action]}, not {op!r}")
    name = raw.get("errno")
    code = None
    if name is not None:
        code = getattr(errno_module, str(name), None)
        if not isinstance(code, int):
            raise ValueError(f"unknown errno name {name!r}")
    if action == "error" and code is None:
        raise ValueError(f"an error fault needs an errno name: {raw}")
    if action in ("corrupt", "noop") and code is not None:
        raise ValueError(f"a {action} fault takes no errno: {raw}")
    offset, times = raw.get("offset"), raw.get("times")
    if offset is not None and (not isinstance(offset, int) or offset < 0):
        raise ValueError(f"offset must be a whole number of bytes: {raw}")
    if times is not None and (not isinstance(times, int) or times < 1):
        raise ValueError(f"times must be at least 1 (or null for always): {raw}")
    max_s = float(raw.get("max_s", 60.0))
    if not 0 < max_s <= HANG_CAP_S:
        raise ValueError(f"max_s must lie in (0, {HANG_CAP_S:.0f}] seconds: {raw}")
    return {
        "op": op,
        "action": action,
        "path": str(raw.get("path", "*")),
        "errno": name,
        "code": code,
        "offset": offset,
        "times": times,
        "max_s": max_s,
    }


class Bed:
    """The fault plan, the hung operations and the injection log, shared by every thread."""

    def __init__(self, log_path: str) -> None:
        self._lock = threading.Condition()
        self._rules: list[dict[str, Any]] = []
        self._hangs: list[tuple[str, threading.Event]] = []
        self._log: list[dict[str, Any]] = []
        self._log_file = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 (process-long)

    def set_rules(self, raws: list[dict[str, Any]]) -> None:
        """Replace the plan (all rules valid, or nothing changes)."""
        rules = [parse_rule(raw) for raw in raws]
        with self._lock:
            self._rules = rules

    def take(self, op: str, path: str, offset: int = 0, size: int = 0) -> dict[str, Any] | None:
        """The first rule that fires for ``op`` on ``path`` (its count spent), or None.

        A corrupt rule fires only for an operation whose byte range ``[offset, offset+size)``
        covers its offset.
        """
        with self._lock:
            for rule in self._rules:
                if rule["op"] != op or rule["times"] == 0:
                    continue
                if not fnmatch.fnmatchcase(path, rule["path"]):
                    continue
                aimed = rule["action"] == "corrupt" and rule["offset"] is not None
                if aimed and not offset <= rule["offset"] < offset + size:
                    continue
                if rule["times"] is not None:
                    rule["times"] -= 1
                return dict(rule)
        return None

    def record(self, op: str, action: str, path: str, **detail: Any) -> None:
        """Log one injection, on disk first (flushed), then in memory; wake the waiters."""
        with self._lock:
            entry = {"seq": len(self._log), "time": time.time(), "op": op, "action": action}
            entry.update(path=path, **detail)
            self._log_file.write(json.dumps(entry) + "\n")
            self._log_file.flush()
            self._log.append(entry)
            self._lock.notify_all()

    def hang(self, rule: dict[str, Any], op: str, path: str) -> None:
        """Block the calling FUSE thread until released or ``max_s``; log both ends."""
        event = threading.Event()
        with self._lock:
            self._hangs.append((path, event))
        self.record(op, "hang", path, max_s=rule["max_s"])
        released = event.wait(rule["max_s"])
        with self._lock:
            self._hangs.remove((path, event))
        self.record(op, "hang-end", path, detail="released" if released else "expired")

    def release(self, pattern: str) -> int:
        """Unblock the hung operations on paths matching ``pattern``; how many there were."""
        with self._lock:
            hung = [event for path, event in self._hangs if fnmatch.fnmatchcase(path, pattern)]
        for event in hung:
            event.set()
        return len(hung)

    def entries(self) -> list[dict[str, Any]]:
        """A copy of the log."""
        with self._lock:
            return list(self._log)

    def wait(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        """Matching log entries once ``count`` of them exist; ``TimeoutError`` after timeout_s."""
        count = int(query.get("count", 1))
        timeout_s = min(float(query.get("timeout_s", 30.0)), HANG_CAP_S)
        deadline = time.monotonic() + timeout_s

        def matching() -> list[dict[str, Any]]:
            return [
                entry
                for entry in self._log
                if all(
                    query.get(key) is None or entry[key] == query[key] for key in ("op", "action")
                )
                and fnmatch.fnmatchcase(entry["path"], query.get("path") or "*")
            ]

        with self._lock:
            while len(found := matching()) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{len(found)} of {count} injections matching {query} within {timeout_s} s"
                    )
                self._lock.wait(left)
            return found


def _flip(data: bytes, index: int) -> bytes:
    """``data`` with the byte at ``index`` inverted (XOR 0xFF)."""
    return data[:index] + bytes([data[index] ^ 0xFF]) + data[index + 1 :]


class FaultFS:
    """Passthrough of a backing directory, consulting the bed before each operation.

    mfusepy registers exactly the methods defined here (no ``Operations`` base class, so the
    module imports without mfusepy, and the client side can validate rules with it); an
    ``OSError`` raised by a method becomes that errno for the client.
    """

    use_ns = True

    def __init__(self, backing: str, bed: Bed, on_ready: Any) -> None:
        self.backing = os.path.realpath(backing)
        self.bed = bed
        self.on_ready = on_ready

    def _real(self, path: str) -> str:
        return self.backing + path

    def _enter(self, op: str, path: str, **detail: Any) -> dict[str, Any] | None:
        """Apply an error or hang rule for ``op``; return a corrupt or noop rule to the caller."""
        rule = self.bed.take(op, path, detail.get("offset", 0), detail.get("size", 0))
        if rule is None:
            return None
        if rule["action"] == "hang":
            self.bed.hang(rule, op, path)
            if rule["code"] is None:
                return None
        if rule["action"] in ("error", "hang"):
            self.bed.record(op, "error", path, errno=rule["errno"], **detail)
            raise OSError(rule["code"], os.strerror(rule["code"]))
        return rule

    # Lifecycle.
    def init(self, path: str) -> None:
        self.on_ready()

    # Metadata.
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        self._enter("getattr", path)
        st = os.lstat(self._real(path))
        attrs = {
            key: getattr(st, key)
            for key in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino")
        }
        attrs.update(
            st_atime=st.st_atime_ns,
            st_mtime=st.st_mtime_ns,
            st_ctime=st.st_ctime_ns,
            st_blocks=st.st_blocks,
            st_blksize=st.st_blksize,
        )
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        self._enter("readdir", path)
        return [".", "..", *os.listdir(self._real(path))]

    def statfs(self, path: str) -> dict[str, int]:
        self._enter("statfs", path)
        sv = os.statvfs(self._real(path))
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree")
        return {key: getattr(sv, key) for key in (*keys, "f_favail", "f_flag", "f_namemax")}

    def chmod(self, path: str, mode: int) -> int:
        self._enter("chmod", path)
        os.chmod(self._real(path), mode)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        self._enter("utimens", path)
        if times is None:
            os.utime(self._real(path))  # now, as utimensat(2) with a NULL times does
        else:
            os.utime(self._real(path), ns=times)
        return 0

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        self._enter("truncate", path, size=length)
        if fh is None:
            os.truncate(self._real(path), length)
        else:
            os.ftruncate(fh, length)
        return 0

    def unlink(self, path: str) -> int:
        self._enter("unlink", path)
        os.unlink(self._real(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self._enter("mkdir", path)
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._enter("rmdir", path)
        os.rmdir(self._real(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._enter("rename", old)
        os.rename(self._real(old), self._real(new))
        return 0

    # Files. O_DIRECT and O_APPEND are the client's business: the kernel sends aligned-or-not
    # buffers and the final offsets, so the backing file is opened without them.
    _STRIP = os.O_DIRECT | os.O_APPEND

    def open(self, path: str, flags: int) -> int:
        self._enter("open", path)
        return os.open(self._real(path), flags & ~self._STRIP)

    def create(self, path: str, mode: int, flags: int) -> int:
        self._enter("create", path)
        return os.open(self._real(path), (flags & ~self._STRIP) | os.O_CREAT, mode)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        rule = self._enter("read", path, offset=offset, size=size)
        data = os.pread(fh, size, offset)
        if rule is not None and data:
            at = offset if rule["offset"] is None else rule["offset"]
            if at - offset < len(data):
                data = _flip(data, at - offset)
                self.bed.record("read", "corrupt", path, offset=at, size=len(data))
        return data

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        rule = self._enter("write", path, offset=offset, size=len(data))
        if rule is not None and data:
            at = offset if rule["offset"] is None else rule["offset"]
            data = _flip(data, at - offset)
            self.bed.record("write", "corrupt", path, offset=at, size=len(data))
        return os.pwrite(fh, data, offset)

    def flush(self, path: str, fh: int) -> int:
        self._enter("flush", path)
        return 0

    def release(self, path: str, fh: int) -> int:
        self._enter("release", path)
        os.close(fh)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        rule = self._enter("fsync", path)
        if rule is not None:  # noop: report success, sync nothing
            self.bed.record("fsync", "noop", path)
            return 0
        (os.fdatasync if datasync else os.fsync)(fh)
        return 0


class Channel:
    """The JSON-lines control channel: commands in, replies out, one writer at a time."""

    def __init__(self, cmd_fd: int, reply_fd: int, bed: Bed, mount: str) -> None:
        self.commands = os.fdopen(cmd_fd, "r", encoding="utf-8")
        self.replies = os.fdopen(reply_fd, "w", encoding="utf-8")
        self.bed = bed
        self.mount = mount
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        """Write one reply line."""
        with self._lock:
            self.replies.write(json.dumps(message) + "\n")
            self.replies.flush()

    def answer(self, command: dict[str, Any]) -> dict[str, Any]:
        """Run one command; its reply."""
        name = command.get("cmd")
        if name == "faults":
            self.bed.set_rules(list(command.get("faults", [])))
            return {"ok": True}
        if name == "release":
            return {"ok": True, "released": self.bed.release(command.get("path") or "*")}
        if name == "wait":
            return {"ok": True, "entries": self.bed.wait(command)}
        if name == "log":
            return {"ok": True, "entries": self.bed.entries()}
        raise ValueError(f"unknown command {name!r}")

    def serve(self) -> None:
        """Answer commands until end of file; then detach the mount and exit the process."""
        for line in self.commands:
            try:
                reply = self.answer(json.loads(line))
            except (ValueError, TypeError, TimeoutError) as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            self.send(reply)
        # The test is gone: leave nothing mounted. os._exit closes /dev/fuse, which aborts the
        # connection and fails any operation still blocked in the kernel (ECONNABORTED).
        subprocess.run(
            ["fusermount3", "-uz", self.mount], capture_output=True, timeout=10, check=False
        )
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """Mount, serve the control channel on a thread, run FUSE in the foreground."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backing")
    parser.add_argument("mount")
    parser.add_argument("--log", required=True, help="injection log, JSON lines (appended)")
    parser.add_argument("--cmd-fd", type=int, required=True)
    parser.add_argument("--reply-fd", type=int, required=True)
    parser.add_argument("--direct-io", action="store_true", help="no page cache")
    args = parser.parse_args(argv)
    import mfusepy  # here, not at the top: the client imports this module for parse_rule

    bed = Bed(args.log)
    channel = Channel(args.cmd_fd, args.reply_fd, bed, args.mount)
    operations = FaultFS(
        args.backing, bed, lambda: channel.send({"ready": True, "pid": os.getpid()})
    )
    threading.Thread(target=channel.serve, name="faultfs-control", daemon=True).start()
    options: dict[str, Any] = {"foreground": True, "fsname": "faultfs", "subtype": "faultfs"}
    if args.direct_io:
        options["direct_io"] = True
    mfusepy.FUSE(operations, args.mount, **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
