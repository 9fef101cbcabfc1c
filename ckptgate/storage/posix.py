"""The POSIX backend: the operations table as thin ``os`` calls on this node's kernel.

Each operation is one or two system calls, so a driver's hot loop (the metadata storm creates
thousands of files per rank) runs at the speed of the ``os`` calls themselves; where an
operation is exactly an ``os`` function it is that function (a ``staticmethod``), with no
Python frame of its own. The page cache is this node's, so the backend drops pages and
measures residency (``ckptgate.storage.pagecache`` does the low-level work).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ckptgate.storage import pagecache
from ckptgate.storage.fsfacts import local_fs_facts
from ckptgate.storage.operations import Bytes, ReadFile

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CREATE_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC
_CREATE_TRUNCATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _CLOEXEC
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
FILE_MODE = 0o644


class PosixBackend:
    """Operations on a local filesystem, by descriptor (handles are ``int`` descriptors)."""

    name = "posix"
    has_page_cache = True
    batch_delete_keys = 0
    """No bulk delete: one unlink per file."""

    @classmethod
    def connect(cls, protocol: str, storage_options: Mapping[str, Any]) -> PosixBackend:
        """The registry's constructor: a local filesystem needs no options (the kernel's)."""
        return cls()

    def create(self, path: str, *, exclusive: bool = True) -> int:
        return os.open(path, _CREATE_EXCLUSIVE if exclusive else _CREATE_TRUNCATE, FILE_MODE)

    def write_all(self, handle: int, data: Bytes) -> None:
        written = os.write(handle, data)
        if written == len(data):  # the usual case: no view made (a storm's 4 KiB per file)
            return
        view = memoryview(data)[written:]
        while view:  # a write may be short (a signal, a full pipe): write the rest
            view = view[os.write(handle, view) :]

    def fsync(self, handle: int) -> bool:
        os.fsync(handle)
        return True

    close = staticmethod(os.close)
    discard = staticmethod(os.close)  # what reached the file stays; cleanup removes it

    def open_read(self, path: str, *, direct: bool = False) -> ReadFile[int]:
        opened = pagecache.open_read(path, direct)
        return ReadFile(opened.fd, opened.direct, opened.refused)

    def read_into(self, file: ReadFile[int], buffer: memoryview, offset: int) -> int:
        return pagecache.read_into(file.handle, buffer, offset, direct=file.direct)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    listdir = staticmethod(os.listdir)
    unlink = staticmethod(os.unlink)
    # os.replace is rename(2): atomic, and it replaces an existing destination
    rename = staticmethod(os.replace)

    def unlink_batch(self, paths: list[str]) -> None:
        for path in paths:
            os.unlink(path)

    def fsync_dir(self, path: str) -> bool:
        # A rename is durable only once its directory entry is: fsync the directory.
        descriptor = os.open(path, _DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        return True

    drop_pages = staticmethod(pagecache.drop_pages)
    resident_fraction = staticmethod(pagecache.resident_fraction)

    def memory_backed(self, path: str) -> bool:
        # the file itself may not exist yet; its directory does
        return local_fs_facts(os.path.dirname(path) or ".").memory_backed
