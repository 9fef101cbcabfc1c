"""Where the manifest's lines go: appended on a local target through a bounded helper, or the
whole part rewritten on an object store.

The manifest is written by the session's own process, between the phases and at the end
(``--keep``'s end line, the removals a cleanup records). On a local path a plain ``write`` and
``fsync`` there can sleep in the kernel for as long as the storage does not answer, and once a
FUSE request has reached a server that never replies not even SIGKILL frees the caller: a
CephFS run whose OSD died left the session in ``request_wait_answer`` for good, its verdict
printed and its process never ending. So on a local target the manifest's file descriptor
lives in a helper process (``ckptgate.rundir.janitor``, with :class:`LocalAppender` as its
filesystem), each append is one bounded call, and an append that does not return within the
run's stall timeout makes the target hung (``TargetHung``): named, the helper abandoned,
nothing more tried on the manifest.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from typing import Any, Protocol

from ckptgate.rundir.janitor import Janitor, TargetHung

__all__ = ["BoundedAppend", "LocalAppender", "ManifestSink", "StoreRewrite"]

_TAIL_BYTES = 1 << 20
"""How far back a reopened part is searched for its last whole line (a line is one record,
far below this)."""


class ManifestSink(Protocol):
    """Where a manifest part's bytes go: ``create`` its first line(s), then ``append``s."""

    def create(self, path: str, data: bytes) -> None: ...
    def append(self, path: str, data: bytes) -> None: ...
    def close(self, path: str) -> None: ...
    @property
    def hung(self) -> str | None: ...


class LocalAppender:
    """The helper process's side: files it created exclusively, each append written whole and
    fsynced before the call returns; the directory fsynced once the file exists."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_fds": {}}  # descriptors are the helper's own

    def create(self, path: str, data: bytes) -> None:
        # exclusive: a part that exists belongs to another writer
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._fds[path] = fd
        self._write(fd, data)
        _fsync_dir(os.path.dirname(path))  # the part's directory entry is durable too

    def append(self, path: str, data: bytes) -> None:
        fd = self._fds.get(path)
        if fd is None:  # a new helper: the one that created the part died (SIGKILL, OOM)
            fd = self._reopen(path)
        self._write(fd, data)

    def _reopen(self, path: str) -> int:
        """Open a part an earlier helper created, to append; never creates one. A line the dead
        helper left half written was never acknowledged (its call did not return): it is cut
        back to the last whole line, so that the next line does not follow a torn one."""
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            tail = os.pread(fd, min(size, _TAIL_BYTES), max(size - _TAIL_BYTES, 0))
            if tail and not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n")
                if cut < 0:
                    raise OSError(errno.EIO, f"no whole line in the last {len(tail)} bytes", path)
                os.ftruncate(fd, size - len(tail) + cut + 1)
        except OSError:
            os.close(fd)
            raise
        self._fds[path] = fd
        return fd

    def close(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    @staticmethod
    def _write(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse a directory fsync; the file's own fsync still stands
    finally:
        os.close(fd)


class BoundedAppend:
    """A local manifest part written by a helper process, each call bounded by ``stall_s``."""

    def __init__(self, stall_s: float) -> None:
        self.janitor = Janitor(LocalAppender(), stall_s=stall_s)

    @property
    def hung(self) -> str | None:
        return self.janitor.hung

    def create(self, path: str, data: bytes) -> None:
        self.janitor.one("create", path, data=data)

    def append(self, path: str, data: bytes) -> None:
        self.janitor.one("append", path, data=data)

    def close(self, path: str) -> None:
        """Close the part and stop the helper; never raises, never waits past the bound (on a
        hung target the descriptor goes with the abandoned helper)."""
        if self.janitor.hung is None:
            with contextlib.suppress(OSError):
                self.janitor.one("close", path)
        self.janitor.close()


class StoreRewrite:
    """An object store has no append: the whole part is rewritten with each batch (correct,
    at the cost of one write of the manifest per registration point)."""

    hung: str | None = None

    def __init__(self, store: Callable[[str, bytes], None]) -> None:
        self._store = store
        self._lines: list[bytes] = []

    def create(self, path: str, data: bytes) -> None:
        self.append(path, data)

    def append(self, path: str, data: bytes) -> None:
        self._lines.append(data)
        self._store(path, b"".join(self._lines))

    def close(self, path: str) -> None:
        pass


def suppress_hung() -> contextlib.AbstractContextManager[None]:
    """For the records a run writes on its way out (its end line, its removals): on a hung
    target they are skipped, and the target's hung state says why."""
    return contextlib.suppress(TargetHung)
