"""The POSIX backend's ``write_all``: one ``os.write`` in the usual case, the rest written
after a short write (a signal, a full pipe)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from ckptgate.storage import posix


def test_a_short_write_is_followed_by_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def short_write(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return os.write(fd, bytes(data[:3]))  # at most 3 bytes a call

    monkeypatch.setattr(posix, "os", SimpleNamespace(write=short_write))
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        posix.PosixBackend().write_all(fd, b"0123456789")
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"0123456789"
    assert calls == [10, 7, 4, 1]


def test_a_whole_write_is_one_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def whole_write(fd: int, data: bytes | memoryview) -> int:
        calls.append(data)
        return os.write(fd, data)

    monkeypatch.setattr(posix, "os", SimpleNamespace(write=whole_write))
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        posix.PosixBackend().write_all(fd, b"x" * 4096)
    finally:
        os.close(fd)
    assert len(calls) == 1 and isinstance(calls[0], bytes)  # the caller's bytes: no view made
