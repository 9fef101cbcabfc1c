"""The I/O backend protocol: one table of operations every workload driver is written against.

IOR's ``aiori.h`` declares one operations table (create, open, xfer, fsync, close, stat,
delete) that each backend file fills in, so its drivers never branch on the backend; fsspec's
``AbstractFileSystem`` is the same idea for Python. Here ``Backend`` is that table, with what
the checkpoint drivers need: exclusive create, full writes, fsync that says whether it made
anything durable, reads into a caller's buffer at an offset (O_DIRECT where asked and allowed,
with the refusal reason), stat, list, unlink (one, or a batch where the store has a bulk
delete), rename, directory fsync, and the page-cache operations a backend with a node-local
page cache offers (``has_page_cache``).

An implementation is a class with these operations and a ``connect(protocol,
storage_options)`` class method (``Connect``); ``ckptgate.storage.registry`` names each one by
dotted path, and ``ckptgate.storage.backend.BackendSpec.open`` connects one per process. This
module imports nothing of ``ckptgate``: every other storage module may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Backend", "Bytes", "Connect", "ReadFile", "Writer"]

H = TypeVar("H")
"""A backend's open-file handle: a descriptor for POSIX, a file object for fsspec."""

Bytes = bytes | bytearray | memoryview
"""What a write takes (``collections.abc.Buffer`` needs Python 3.12)."""


@dataclass(frozen=True)
class ReadFile(Generic[H]):
    """A file opened for reading: the backend's handle, and whether it bypasses the cache."""

    handle: H
    direct: bool
    refused: str | None = None
    """Why O_DIRECT was asked for and not used (None when it was used or not asked for)."""


class Writer(Protocol[H]):
    """The write half of the table: what a write burst needs of a sink."""

    def create(self, path: str, *, exclusive: bool = True) -> H:
        """Open ``path`` for writing; ``exclusive`` refuses an existing file (FileExistsError)."""
        ...

    def write_all(self, handle: H, data: Bytes) -> None:
        """Write every byte of ``data`` at the handle's position (retrying short writes)."""
        ...

    def fsync(self, handle: H) -> bool:
        """Make the file durable; False where this backend cannot (an object store commits on
        close), so the report never claims an fsync that did not happen."""
        ...

    def close(self, handle: H) -> None:
        """Close a handle from ``create`` or ``open_read`` (an object store commits here)."""
        ...

    def discard(self, handle: H) -> None:
        """Close a handle from ``create`` after a failed write, committing nothing: an object
        store aborts the upload, so no partial object appears (an abort the store refuses
        leaves the upload to ``ckptgate clean``); a file keeps what reached it, which cleanup
        removes as it removes every registered file."""
        ...


class Backend(Writer[H], Protocol[H]):
    """The whole operations table (IOR's aiori struct)."""

    @property
    def name(self) -> str:
        """The registry's name for this implementation (``posix``, ``fsspec``), as the report
        names it."""
        ...

    @property
    def has_page_cache(self) -> bool:
        """True when reads may come from this node's page cache, so ``drop_pages`` and
        ``resident_fraction`` mean something; False for an object store."""
        ...

    def open_read(self, path: str, *, direct: bool = False) -> ReadFile[H]:
        """Open read-only with sequential access advised; O_DIRECT where asked and allowed,
        else a buffered handle and the reason in ``refused``."""
        ...

    def read_into(self, file: ReadFile[H], buffer: memoryview, offset: int) -> int:
        """Fill ``buffer`` from ``offset``; the bytes read (fewer only at end of file)."""
        ...

    def size(self, path: str) -> int:
        """The file's size in bytes (stat)."""
        ...

    def listdir(self, path: str) -> list[str]:
        """The names (not paths) in directory ``path``."""
        ...

    def unlink(self, path: str) -> None:
        """Remove the file ``path`` (FileNotFoundError when it is not there)."""
        ...

    @property
    def batch_delete_keys(self) -> int:
        """Keys one bulk delete request removes (S3 DeleteObjects: 1000); 0 where the backend
        has no bulk delete and ``unlink_batch`` is one unlink per file."""
        ...

    def unlink_batch(self, paths: list[str]) -> None:
        """Remove every file of ``paths``: one request of a bulk delete where the backend has
        one (at most ``batch_delete_keys`` paths), else one unlink each."""
        ...

    def rename(self, source: str, destination: str) -> None:
        """Move ``source`` to ``destination``, replacing it (atomically where the backend can)."""
        ...

    def fsync_dir(self, path: str) -> bool:
        """Make directory entries (a rename) durable; False where the backend has none."""
        ...

    def drop_pages(self, path: str) -> None:
        """Write back and drop the file's cached pages (a no-op without a page cache)."""
        ...

    def resident_fraction(self, path: str) -> float | None:
        """Fraction 0..1 of the file's pages in this node's cache; None without a cache."""
        ...

    def memory_backed(self, path: str) -> bool:
        """Whether the storage under ``path`` is memory (tmpfs, ramfs, fsspec's memory fs)."""
        ...


class Connect(Protocol):
    """What the registry calls to make a backend: ``Class.connect(protocol, storage_options)``
    (the target's fsspec protocol and the ``--storage-option`` values)."""

    def __call__(self, protocol: str, storage_options: Mapping[str, Any]) -> Backend[Any]: ...
