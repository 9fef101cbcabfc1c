"""The page-cache tools: dropping pages, measuring residency, O_DIRECT and its fallback."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

from ckptgate.storage import pagecache
from ckptgate.storage.fsfacts import local_fs_facts

SIZE_BYTES = 3 * 1024 * 1024 + 123  # not a whole number of pages: the tail page counts too


def write_file(path: Path, size: int = SIZE_BYTES) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def _resident(path: Path) -> float:
    fraction = pagecache.resident_fraction(str(path))
    assert fraction is not None, f"{path}: mincore measured nothing"
    return fraction


def test_a_file_just_written_is_resident(directory: Path) -> None:
    path = directory / "shard"
    write_file(path)
    assert _resident(path) > 0.99


def test_dropping_leaves_nothing_resident_unless_memory_backed(directory: Path) -> None:
    path = directory / "shard"
    write_file(path)
    pagecache.drop_pages(str(path))
    fraction = _resident(path)
    if local_fs_facts(str(directory)).memory_backed:
        assert fraction == 1.0  # tmpfs: the cache is the storage, nothing can drop
    else:
        assert fraction < 0.01


def test_a_buffered_read_brings_the_pages_back(directory: Path) -> None:
    path = directory / "shard"
    write_file(path)
    pagecache.drop_pages(str(path))
    path.read_bytes()
    assert _resident(path) > 0.99


def test_dropping_and_measuring_change_nothing_in_the_file(directory: Path) -> None:
    path = directory / "shard"
    data = write_file(path)
    before = path.stat()
    pagecache.drop_pages(str(path))
    pagecache.resident_fraction(str(path))
    after = path.stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert path.read_bytes() == data


def test_an_empty_file_has_nothing_resident(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert pagecache.resident_pages(str(path)) == (0, 0)
    assert pagecache.resident_fraction(str(path)) == 0.0


def test_aligned_buffers_start_on_a_page_and_round_up() -> None:
    buffer = pagecache.aligned_buffer(10_000)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    assert address % pagecache.DIRECT_ALIGN_BYTES == 0
    assert len(buffer) == 12_288


def test_direct_reads_return_the_file_including_an_unaligned_tail(directory: Path) -> None:
    path = directory / "shard"
    data = write_file(path)
    opened = pagecache.open_read(str(path), direct=True)
    buffer = pagecache.aligned_buffer(1024 * 1024)
    view = memoryview(buffer)
    parts, offset = [], 0
    try:
        while True:
            count = pagecache.read_into(opened.fd, view, offset, direct=opened.direct)
            if count == 0:
                break
            parts.append(bytes(view[:count]))
            offset += count
    finally:
        os.close(opened.fd)
    assert b"".join(parts) == data
    assert opened.direct or opened.refused


def test_a_filesystem_that_refuses_o_direct_gets_a_plain_read_and_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "shard"
    write_file(path, 8192)
    real_open = os.open

    def refuse_direct(name: str, flags: int, *args: int) -> int:
        if flags & os.O_DIRECT:  # as tmpfs did before Linux 6.6
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(name, flags, *args)

    monkeypatch.setattr(pagecache.os, "open", refuse_direct)
    opened = pagecache.open_read(str(path), direct=True)
    os.close(opened.fd)
    assert not opened.direct
    assert opened.refused is not None and "EINVAL" in opened.refused


def test_other_open_errors_are_not_hidden_by_the_fallback(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        pagecache.open_read(str(tmp_path / "missing"), direct=True)


@pytest.mark.parametrize("refuse", [False, True], ids=["buffered", "o-direct-refused"])
def test_a_buffered_read_advises_sequential_access_and_a_direct_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse: bool
) -> None:
    """fio advises sequential access on a sequential read (``fadvise_hint=1``), which doubles
    the kernel's read-ahead; the readback must drive the target as hard, so it does too."""
    path = tmp_path / "shard"
    write_file(path, 8192)
    advised: list[int] = []
    real_fadvise, real_open = os.posix_fadvise, os.open

    def record(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append(advice)
        real_fadvise(fd, offset, length, advice)

    def refuse_direct(name: str, flags: int, *args: int) -> int:
        if refuse and flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(name, flags, *args)

    monkeypatch.setattr(pagecache.os, "posix_fadvise", record)
    monkeypatch.setattr(pagecache.os, "open", refuse_direct)
    for direct in (False, True):
        advised.clear()
        opened = pagecache.open_read(str(path), direct=direct)
        os.close(opened.fd)
        assert advised == ([] if opened.direct else [os.POSIX_FADV_SEQUENTIAL])


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_read_buffer_is_populated_before_the_timed_read() -> None:
    # the timed read's first transfer must not fault in and zero its own buffer
    before = _rss_bytes()
    buffer = pagecache.aligned_buffer(64 * 2**20)
    assert _rss_bytes() - before >= 60 * 2**20
    assert len(buffer) == 64 * 2**20
