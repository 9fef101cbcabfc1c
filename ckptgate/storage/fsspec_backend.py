"""The fsspec backend: the operations table on any fsspec filesystem (object stores included).

fsspec's file objects buffer writes and commit them on close (on an object store the object
appears whole then, and a rename is a copy and a delete: ``ckptgate.storage.object_store``);
where a file object exposes an OS descriptor (a local filesystem) ``fsync`` reaches it,
elsewhere it reports that nothing was made durable. Reads turn fsspec's own read-ahead cache
off (``cache_type="none"``), which would otherwise serve them from this process's memory.
fsspec gives no control of a page cache and no O_DIRECT, so this backend has neither; the POSIX
backend serves local targets by default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, Any

import fsspec
from fsspec import AbstractFileSystem

from ckptgate.storage.fsfacts import MEMORY_BACKED_FS_TYPES, is_local, local_fs_facts
from ckptgate.storage.object_store import object_store
from ckptgate.storage.operations import Bytes, ReadFile


def file_descriptor(handle: IO[bytes]) -> int | None:
    """The OS file descriptor behind an fsspec file, or None where there is none."""
    try:
        return handle.fileno()
    except (AttributeError, OSError, ValueError, NotImplementedError):
        return None


class FsspecBackend:
    """Operations through one fsspec filesystem instance (handles are its file objects)."""

    name = "fsspec"
    has_page_cache = False

    def __init__(self, fs: AbstractFileSystem) -> None:
        self.fs = fs
        protocol = fs.protocol
        self.protocol: str = protocol if isinstance(protocol, str) else protocol[0]
        store = object_store(self.protocol)
        self.batch_delete_keys: int = store.batch_delete_keys if store else 0
        """Keys per bulk delete request (s3fs's rm of a list sends DeleteObjects of at most
        1000 keys; ``ckptgate.storage.object_store``); 0: one ``rm_file`` per file."""

    @classmethod
    def connect(cls, protocol: str, storage_options: Mapping[str, Any]) -> FsspecBackend:
        """The registry's constructor: fsspec's filesystem for the protocol (fsspec caches the
        instance, so a task that connects again gets the same one)."""
        return cls(fsspec.filesystem(protocol, **storage_options))

    def create(self, path: str, *, exclusive: bool = True) -> IO[bytes]:
        return self.fs.open(path, "xb" if exclusive else "wb")

    def write_all(self, handle: IO[bytes], data: Bytes) -> None:
        handle.write(data)  # fsspec's files are buffered: a write takes every byte

    def fsync(self, handle: IO[bytes]) -> bool:
        handle.flush()
        descriptor = file_descriptor(handle)
        if descriptor is None:
            return False  # an object store: the object is committed on close, not before
        os.fsync(descriptor)
        return True

    def close(self, handle: IO[bytes]) -> None:
        handle.close()

    def discard(self, handle: IO[bytes]) -> None:
        """s3fs's ``discard`` aborts the multipart upload; fsspec's buffered files then count as
        closed, so nothing commits the partial object later (on garbage collection). Files of
        a filesystem (fsspec's ``file``) have no upload to abort: they are closed."""
        abort = getattr(handle, "discard", None)
        if abort is None or not hasattr(handle, "buffer"):
            handle.close()
            return
        try:
            abort()
        finally:
            handle.closed = True  # type: ignore[misc]  # AbstractBufferedFile's setter

    def open_read(self, path: str, *, direct: bool = False) -> ReadFile[IO[bytes]]:
        handle = self.fs.open(path, "rb", cache_type="none")
        refused = f"{self.protocol} through fsspec: no O_DIRECT" if direct else None
        return ReadFile(handle, False, refused)

    def read_into(self, file: ReadFile[IO[bytes]], buffer: memoryview, offset: int) -> int:
        handle: Any = file.handle  # fsspec's file objects all have readinto
        handle.seek(offset)
        done = 0
        while done < len(buffer):
            count = handle.readinto(buffer[done:])
            if not count:
                break
            done += count
        return done

    def size(self, path: str) -> int:
        return int(self.fs.info(path)["size"])

    def listdir(self, path: str) -> list[str]:
        return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False)]

    def unlink(self, path: str) -> None:
        self.fs.rm_file(path)

    def unlink_batch(self, paths: list[str]) -> None:
        if not self.batch_delete_keys:
            for path in paths:
                self.fs.rm_file(path)
            return
        if len(paths) > self.batch_delete_keys:
            raise ValueError(f"{len(paths)} keys: one request takes {self.batch_delete_keys}")
        self.fs.rm(list(paths))  # s3fs: one DeleteObjects request for up to 1000 keys

    def rename(self, source: str, destination: str) -> None:
        self.fs.mv(source, destination)

    def fsync_dir(self, path: str) -> bool:
        return False  # fsspec has no directory descriptor to sync

    def drop_pages(self, path: str) -> None:
        pass  # no page cache this backend controls

    def resident_fraction(self, path: str) -> float | None:
        return None

    def memory_backed(self, path: str) -> bool:
        if is_local(self.protocol):  # a local filesystem may be tmpfs: ask the kernel
            return local_fs_facts(os.path.dirname(path) or ".").memory_backed
        return self.protocol in MEMORY_BACKED_FS_TYPES
