"""Every I/O backend keeps the same promises: one suite, written once, run for each backend.

fsspec's ``tests/abstract`` is the model: the tests below are written only against the
``backend`` and ``root`` fixtures of ``BackendContract``; a backend joins with a short
subclass that supplies them and says what it can promise (durable fsync, a page cache).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest

from ckptgate.storage import registry
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.fsfacts import local_fs_facts
from ckptgate.storage.fsspec_backend import FsspecBackend
from ckptgate.storage.operations import Backend
from ckptgate.storage.pagecache import DIRECT_ALIGN_BYTES, aligned_buffer
from ckptgate.storage.posix import PosixBackend
from tests.s3server import S3Server
from tests.storage import registered_backend

# not a whole number of pages or O_DIRECT blocks: the tail is a short read
DATA = bytes(range(256)) * 1000 + b"tail"


def write_file(backend: Backend[Any], path: str, data: bytes = DATA) -> None:
    handle = backend.create(path)
    try:
        backend.write_all(handle, data)
    finally:
        backend.close(handle)


def read_file(backend: Backend[Any], path: str, direct: bool = False) -> bytes:
    """The whole file through ``open_read``/``read_into``, in aligned 64 KiB reads."""
    opened = backend.open_read(path, direct=direct)
    buffer = aligned_buffer(64 * 1024)
    chunks, offset = [], 0
    try:
        while count := backend.read_into(opened, memoryview(buffer), offset):
            chunks.append(buffer[:count])
            offset += count
            if count < len(buffer):
                break
    finally:
        backend.close(opened.handle)
    return b"".join(chunks)


class BackendContract:
    """The contract; a subclass provides ``spec`` and ``root`` and the two promises below."""

    durable: bool
    """Whether fsync makes a file durable on this backend (an object store's does not)."""
    dir_durable: bool
    """Whether a directory can be synced (so a rename made durable)."""
    batch_delete_keys: int = 0
    """Keys per bulk delete request (an object store's DeleteObjects); 0: none."""
    expired_read: tuple[type[BaseException], ...] = ()
    """What a read raises when the object it opened is replaced under it (s3fs reads with
    If-Match on the ETag it opened: a refused read, never a mix of two versions)."""
    unlink_missing_raises: bool = True
    """False on S3: DeleteObject of a missing key succeeds (204)."""

    @pytest.fixture
    def spec(self) -> BackendSpec:
        raise NotImplementedError

    @pytest.fixture
    def root(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    def backend(self, spec: BackendSpec) -> Backend[Any]:
        return spec.open()

    @pytest.fixture
    def shard(self, backend: Backend[Any], root: str) -> str:
        """``DATA`` written to a file in ``root`` (which goes with ``root``)."""
        path = f"{root}/shard"
        write_file(backend, path)
        return path

    def test_the_spec_survives_pickling_and_opens_the_same_backend(
        self, spec: BackendSpec, backend: Backend[Any]
    ) -> None:
        again = pickle.loads(pickle.dumps(spec))
        assert again == spec
        assert again.open().name == backend.name
        if isinstance(backend, FsspecBackend):  # fsspec's own instance cache, not ours
            assert again.open().fs is backend.fs

    def test_exclusive_create_refuses_an_existing_file(
        self, backend: Backend[Any], root: str
    ) -> None:
        path = f"{root}/precious"
        write_file(backend, path, b"precious")
        with pytest.raises(FileExistsError):
            # An object store checks at the commit (S3's conditional write, If-None-Match: *,
            # sent by s3fs's close for mode "xb"): the refusal comes from close, not create.
            handle = backend.create(path)
            backend.write_all(handle, b"overwritten")
            backend.close(handle)
        assert read_file(backend, path) == b"precious"

    def test_a_non_exclusive_create_truncates(self, backend: Backend[Any], root: str) -> None:
        path = f"{root}/again"
        write_file(backend, path)
        handle = backend.create(path, exclusive=False)
        backend.write_all(handle, b"short")
        backend.close(handle)
        assert read_file(backend, path) == b"short"

    def test_write_then_read_round_trips_every_byte(
        self, backend: Backend[Any], shard: str
    ) -> None:
        assert backend.size(shard) == len(DATA)
        assert read_file(backend, shard) == DATA

    def test_read_into_reads_at_an_offset_and_short_at_the_end(
        self, backend: Backend[Any], shard: str
    ) -> None:
        opened = backend.open_read(shard)
        buffer = bytearray(10_000)
        try:
            assert backend.read_into(opened, memoryview(buffer), 12_345) == 10_000
            assert bytes(buffer) == DATA[12_345:22_345]
            tail = len(DATA) - 100
            assert backend.read_into(opened, memoryview(buffer), tail) == 100
            assert bytes(buffer[:100]) == DATA[tail:]
            assert backend.read_into(opened, memoryview(buffer), len(DATA)) == 0
        finally:
            backend.close(opened.handle)

    def test_fsync_says_whether_it_made_the_file_durable(
        self, backend: Backend[Any], root: str
    ) -> None:
        path = f"{root}/synced"
        handle = backend.create(path)
        try:
            backend.write_all(handle, DATA)
            assert backend.fsync(handle) is self.durable
        finally:
            backend.close(handle)
        assert backend.fsync_dir(root) is self.dir_durable
        assert read_file(backend, path) == DATA

    def test_rename_replaces_the_destination(self, backend: Backend[Any], root: str) -> None:
        source, destination = f"{root}/.metadata.tmp", f"{root}/.metadata"
        write_file(backend, destination, b"old")
        write_file(backend, source, b"new")
        backend.rename(source, destination)
        assert read_file(backend, destination) == b"new"
        assert backend.listdir(root) == [".metadata"]

    def test_a_reader_sees_the_old_or_the_new_file_never_a_part(
        self, backend: Backend[Any], root: str
    ) -> None:
        """The commit's promise: a restore polling the destination sees a whole file."""
        destination = f"{root}/.metadata"
        old, new = b"o" * 300_000, b"n" * 200_000
        write_file(backend, destination, old)
        seen: set[bytes] = set()
        stop = threading.Event()

        def poller() -> None:
            while not stop.is_set():
                try:
                    seen.add(read_file(backend, destination))
                except self.expired_read:
                    seen.add(b"refused: replaced while read")

        thread = threading.Thread(target=poller)
        thread.start()
        try:
            for n in range(20):
                source = f"{root}/.metadata.tmp"
                write_file(backend, source, new if n % 2 == 0 else old)
                backend.rename(source, destination)
        finally:
            stop.set()
            thread.join()
        assert seen <= {old, new, b"refused: replaced while read"}

    def test_listing_names_every_entry_and_nothing_else(
        self, backend: Backend[Any], root: str
    ) -> None:
        names = [f"__{rank}_0.distcp" for rank in range(5)] + [".metadata"]
        for name in names:
            write_file(backend, f"{root}/{name}", b"x")
        assert sorted(backend.listdir(root)) == sorted(names)

    def test_unlink_removes_the_file_and_only_that_file(
        self, backend: Backend[Any], root: str
    ) -> None:
        write_file(backend, f"{root}/old")
        write_file(backend, f"{root}/kept")
        backend.unlink(f"{root}/old")
        assert backend.listdir(root) == ["kept"]
        if self.unlink_missing_raises:
            with pytest.raises(FileNotFoundError):
                backend.unlink(f"{root}/old")

    def test_a_batch_unlink_removes_those_files_and_no_other(
        self, backend: Backend[Any], root: str
    ) -> None:
        names = [f"__{rank}_0.distcp" for rank in range(7)]
        for name in [*names, "kept"]:
            write_file(backend, f"{root}/{name}", b"x")
        assert backend.batch_delete_keys == self.batch_delete_keys
        backend.unlink_batch([f"{root}/{name}" for name in names])
        assert backend.listdir(root) == ["kept"]

    @pytest.mark.parametrize("operation", ["open_read", "size", "unlink", "rename"])
    def test_a_missing_file_is_file_not_found(
        self, backend: Backend[Any], root: str, operation: str
    ) -> None:
        missing = f"{root}/missing"
        calls = {
            "open_read": lambda: backend.open_read(missing),
            "size": lambda: backend.size(missing),
            "unlink": lambda: (
                backend.unlink(missing)
                if self.unlink_missing_raises
                else backend.open_read(missing)
            ),
            "rename": lambda: backend.rename(missing, f"{root}/elsewhere"),
        }
        with pytest.raises(FileNotFoundError):
            calls[operation]()

    def test_o_direct_is_used_or_the_refusal_is_named(
        self, backend: Backend[Any], shard: str
    ) -> None:
        opened = backend.open_read(shard, direct=True)
        backend.close(opened.handle)
        assert opened.direct != bool(opened.refused)  # one or the other, never both
        assert read_file(backend, shard, direct=True) == DATA
        plain = backend.open_read(shard)
        backend.close(plain.handle)
        assert (plain.direct, plain.refused) == (False, None)

    def test_an_aligned_direct_read_at_an_offset_fills_the_buffer(
        self, backend: Backend[Any], shard: str
    ) -> None:
        """Alignment is the caller's duty under O_DIRECT (the readback aligns); given it, a
        direct read, or its buffered fallback, fills the whole buffer."""
        opened = backend.open_read(shard, direct=True)
        buffer = aligned_buffer(2 * DIRECT_ALIGN_BYTES)
        try:
            count = backend.read_into(opened, memoryview(buffer), DIRECT_ALIGN_BYTES)
        finally:
            backend.close(opened.handle)
        assert buffer[:count] == DATA[DIRECT_ALIGN_BYTES : DIRECT_ALIGN_BYTES + count]
        assert count == 2 * DIRECT_ALIGN_BYTES

    def test_the_page_cache_is_dropped_and_measured_where_there_is_one(
        self, backend: Backend[Any], shard: str
    ) -> None:
        before = backend.resident_fraction(shard)
        backend.drop_pages(shard)
        after = backend.resident_fraction(shard)
        if not backend.has_page_cache:
            assert (before, after) == (None, None)
        elif backend.memory_backed(shard):
            assert after == 1.0  # tmpfs: the cache is the storage and cannot be dropped
        else:
            assert before is not None and before > 0.99
            assert after is not None and after < 0.01
        assert read_file(backend, shard) == DATA  # dropping never loses data


class LocalDirectory(BackendContract):
    """A backend on a local directory (pytest's temporary directory)."""

    durable = True

    @pytest.fixture
    def root(self, tmp_path: Any) -> str:
        return str(tmp_path)

    def test_memory_backed_is_the_kernels_answer(self, backend: Backend[Any], root: str) -> None:
        assert backend.memory_backed(f"{root}/file") == local_fs_facts(root).memory_backed


class TestPosix(LocalDirectory):
    dir_durable = True

    @pytest.fixture
    def spec(self) -> BackendSpec:
        return BackendSpec("file")

    def test_auto_chooses_posix_for_a_local_target(self, backend: Backend[Any]) -> None:
        assert isinstance(backend, PosixBackend) and backend.has_page_cache


class TestFsspecLocal(LocalDirectory):
    dir_durable = False

    @pytest.fixture
    def spec(self) -> BackendSpec:
        return BackendSpec("file", backend="fsspec")


class TestRegisteredBackend(LocalDirectory):
    """A backend the code has never heard of, added by its file and one registry entry."""

    dir_durable = True

    @pytest.fixture
    def spec(self, monkeypatch: pytest.MonkeyPatch) -> BackendSpec:
        monkeypatch.setitem(registry.BACKENDS, "counting", registered_backend.ENTRY)
        return BackendSpec("file", backend="counting")

    def test_the_registered_class_serves_the_spec(self, backend: Backend[Any], root: str) -> None:
        assert isinstance(backend, registered_backend.CountingBackend)
        write_file(backend, f"{root}/one")
        assert backend.created == 1


class TestFsspecMemory(BackendContract):
    """fsspec's in-memory filesystem: what an object store promises, in one process."""

    durable = False
    dir_durable = False

    @pytest.fixture
    def spec(self) -> BackendSpec:
        return BackendSpec("memory")

    @pytest.fixture
    def root(self, spec: BackendSpec) -> Iterator[str]:
        """A new directory in the process's memory filesystem; removed with all in it."""
        fs = fsspec.filesystem("memory")
        path = f"/ckptgate-contract-{uuid.uuid4().hex}"
        fs.mkdir(path)
        yield path
        fs.rm(path, recursive=True)

    def test_memory_is_memory_backed_without_a_page_cache(
        self, backend: Backend[Any], root: str
    ) -> None:
        assert backend.memory_backed(f"{root}/file")
        assert not backend.has_page_cache


class TestFsspecS3(BackendContract):
    """s3fs on moto's S3 server on loopback (``tests/s3server.py``): an object store."""

    durable = False
    dir_durable = False
    batch_delete_keys = 1000
    unlink_missing_raises = False

    @property
    def expired_read(self) -> tuple[type[BaseException], ...]:  # type: ignore[override]
        from s3fs.utils import FileExpired

        return (FileExpired,)

    @pytest.fixture
    def spec(self, s3: S3Server) -> BackendSpec:
        return BackendSpec("s3", s3.storage_options)

    @pytest.fixture
    def root(self, s3: S3Server) -> Iterator[str]:
        """A new prefix in the test bucket; every key under it removed after the test."""
        path = f"{s3.bucket}/contract-{uuid.uuid4().hex}"
        yield path
        fs = s3.filesystem()
        if fs.exists(path):
            fs.rm(path, recursive=True)

    def test_a_batch_delete_is_one_request_per_batch(
        self, backend: Backend[Any], root: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The delete storm's requests are DeleteObjects of many keys, not one call a key."""
        fs: Any = backend.fs  # type: ignore[attr-defined]
        calls: list[int] = []
        bulk = fs._bulk_delete

        async def counted(pathlist: list[str], **kwargs: Any) -> Any:
            calls.append(len(pathlist))
            return await bulk(pathlist, **kwargs)

        monkeypatch.setattr(fs, "_bulk_delete", counted)
        paths = [f"{root}/f{n}" for n in range(5)]
        for path in paths:
            write_file(backend, path, b"x")
        backend.unlink_batch(paths)
        assert calls == [5]
        with pytest.raises(ValueError, match="one request takes 1000"):
            backend.unlink_batch([f"{root}/f{n}" for n in range(1001)])


def test_a_spec_refuses_an_unknown_or_impossible_backend() -> None:
    with pytest.raises(ValueError, match="expected auto, posix or fsspec"):
        BackendSpec("file", backend="nfs")
    with pytest.raises(ValueError, match="needs a local target"):
        BackendSpec("memory", backend="posix")


def test_posix_descriptors_are_closed(tmp_path: Any) -> None:
    """Open handles would pile up over a storm of thousands of files."""
    backend = BackendSpec("file").open()
    for n in range(50):
        write_file(backend, str(tmp_path / f"f{n}"), b"x")
        backend.close(backend.open_read(str(tmp_path / f"f{n}")).handle)
    # The descriptors on the test's files, not the count of all: another test's server
    # thread (moto's, on loopback) may close a socket meanwhile.
    open_here = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
                open_here.append(fd)
    assert open_here == []
