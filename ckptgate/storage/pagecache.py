"""The client page cache: drop a file's pages, measure what is resident, read around it.

SPEC.md, "How to measure honestly": readback must not come from the client's page cache. A
rank that reads back what this node just wrote would otherwise be timing memory, not the
target. This module gives the readback three tools, each on a plain POSIX path:

- ``drop_pages``: fsync, then ``posix_fadvise(POSIX_FADV_DONTNEED)``. The fsync comes first
  because the kernel drops only clean pages: dirty ones stay until written back.
- ``resident_fraction``: ``mincore(2)`` over a read-only shared mapping of the file, called
  through ctypes (Python's ``mmap`` exposes no address, and ``ctypes.from_buffer`` refuses a
  read-only mapping). Mapping faults nothing in, so measuring does not change the answer.
- ``open_read``: ``O_DIRECT`` where asked for and the filesystem takes it, with page-aligned
  buffers (anonymous ``mmap``) as it requires; where it refuses (``EINVAL``: tmpfs before
  Linux 6.6, some FUSE and network mounts), a plain descriptor and the reason, so the report
  can say so. A plain descriptor is advised sequential access, as fio's reads are.

A memory-backed target (tmpfs) cannot drop anything: its page cache is the storage. Whether a
target is memory-backed comes from ``ckptgate.storage.fsfacts.FsFacts.memory_backed``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
from dataclasses import dataclass

PAGE_BYTES = mmap.PAGESIZE
DIRECT_ALIGN_BYTES = 4096
"""O_DIRECT alignment for buffers, offsets and lengths: the largest logical block in common use
(512 B and 4 KiB sector devices both accept it)."""

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.restype = ctypes.c_int
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value


def drop_pages(path: str) -> None:
    """Make ``path`` durable, then ask the kernel to drop its cached pages.

    Opens read-only (readback never modifies a checkpoint); Linux allows fsync on a read-only
    descriptor, and it writes back any page a writer left dirty so that DONTNEED can drop it.
    """
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def resident_pages(path: str) -> tuple[int, int]:
    """(resident pages, total pages) of ``path`` in this node's page cache, by mincore(2)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(descriptor).st_size
        if size == 0:
            return 0, 0
        pages = -(-size // PAGE_BYTES)
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
        if address in (None, _MAP_FAILED):
            code = ctypes.get_errno()
            raise OSError(code, f"mmap for mincore: {os.strerror(code)}", path)
        try:
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(address, size, vector) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"mincore: {os.strerror(code)}", path)
            # only the low bit means resident; the others are reserved by the kernel
            resident = sum(1 for flag in bytes(vector) if flag & 1)
        finally:
            _libc.munmap(address, size)
        return resident, pages
    finally:
        os.close(descriptor)


def resident_fraction(path: str) -> float | None:
    """Fraction 0..1 of ``path``'s pages resident in the page cache (0 for an empty file).

    None where the file has no page cache to measure: a FUSE mount with ``direct_io`` (and
    other filesystems that serve every read themselves) cannot be mapped, and ``mmap`` fails
    with ENODEV; no read there can come from a cache, so residency does not apply. A reported
    readback crashed on it (``mmap for mincore: No such device``) until it said so.
    """
    try:
        resident, pages = resident_pages(path)
    except OSError as error:
        if error.errno == errno.ENODEV:
            return None
        raise
    return resident / pages if pages else 0.0


@dataclass(frozen=True)
class OpenedFile:
    """A read-only descriptor, and whether it bypasses the page cache."""

    fd: int
    direct: bool
    refused: str | None = None
    """Why O_DIRECT was asked for and not used (None when it was used or not asked for)."""


def open_read(path: str, direct: bool = False) -> OpenedFile:
    """Open ``path`` read-only; with ``direct``, O_DIRECT where the filesystem allows it.

    A buffered descriptor is advised ``POSIX_FADV_SEQUENTIAL``: a restart reads each file (or
    each range of a resharded slice) front to back, and saying so lets the kernel double its
    read-ahead window, as fio does by default (``fadvise_hint=1``), so the suite drives the
    target with the read-ahead fio gets. On this project's virtio disk it doubled the I/O in
    flight and moved 4 ranks from 2.37 to 2.45 GB/s (median of 8 runs each,
    ``benchmarks/README.md``). O_DIRECT has no read-ahead to advise.
    """
    if direct:
        if not hasattr(os, "O_DIRECT"):
            return _sequential(path, "no O_DIRECT on this platform")
        try:
            return OpenedFile(os.open(path, os.O_RDONLY | os.O_DIRECT), True)
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            return _sequential(
                path, f"the filesystem refuses O_DIRECT ({errno.errorcode[error.errno]})"
            )
    return _sequential(path, None)


def _sequential(path: str, refused: str | None) -> OpenedFile:
    """A buffered read-only descriptor with sequential access advised."""
    descriptor = os.open(path, os.O_RDONLY)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    return OpenedFile(descriptor, False, refused)


def aligned_buffer(size_bytes: int) -> mmap.mmap:
    """A writable buffer of ``size_bytes`` rounded up to 4 KiB, page-aligned (O_DIRECT needs it)
    and populated: private anonymous memory with every page faulted in now (``MAP_POPULATE``,
    else a write to each page), so the timed read's first transfer does not pay for faulting
    and zeroing its buffer (IOR's buffer is touched before its timer starts too). Measured
    here, one process reading 512 MiB of tmpfs in 16 MiB transfers into a fresh buffer: 108.6
    ms unpopulated, 95.9 ms populated, 91 ms into a buffer used before.

    Anonymous mappings start on a page boundary, which no bytearray promises.
    """
    rounded = max(DIRECT_ALIGN_BYTES, -(-size_bytes // DIRECT_ALIGN_BYTES) * DIRECT_ALIGN_BYTES)
    populate = getattr(mmap, "MAP_POPULATE", 0)
    buffer = mmap.mmap(-1, rounded, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    if not populate:  # no MAP_POPULATE on this platform: fault each page in now
        for page in range(0, rounded, mmap.PAGESIZE):
            buffer[page] = 0
    return buffer


def read_into(fd: int, buffer: memoryview, offset: int, direct: bool = False) -> int:
    """Fill ``buffer`` from file ``offset``; returns the bytes read (fewer only at end of file).

    A plain read may come back short without reaching the end (a signal), so it retries; an
    O_DIRECT read may not retry an unaligned remainder, and local filesystems return a short
    direct read only at end of file, so a short direct read ends the loop.
    """
    done = 0
    while done < len(buffer):
        count = os.preadv(fd, [buffer[done:]], offset + done)
        if count == 0:
            break
        done += count
        if direct and done % DIRECT_ALIGN_BYTES:
            break
    return done
