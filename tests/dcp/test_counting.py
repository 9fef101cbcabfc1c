"""DCP's bytes counted as they go (``ckptgate.dcp.counting``), without ranks: a data file
written through the counting filesystem reports each write as the OS takes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

from ckptgate.dcp.counting import CountingFileSystem, counting, rank_file_bytes


def test_a_data_file_reports_its_bytes_as_each_write_reaches_the_file(tmp_path: Path) -> None:
    reports: list[dict[str, Any]] = []
    fs = CountingFileSystem()
    with counting(lambda **kw: reports.append(kw)):
        with fs.create_stream(tmp_path / "__0_0.distcp", "wb") as stream:
            for _ in range(3):
                stream.write(b"x" * 100_000)  # past the buffer: it reaches the OS now
                stream.flush()
            assert [r["bytes"] for r in reports] == [100_000, 200_000, 300_000]
        with fs.create_stream(tmp_path / ".metadata", "wb") as stream:
            stream.write(b"m" * 10)  # in no rank's total
    assert reports[-1] == {"bytes": 300_000}
    assert (tmp_path / "__0_0.distcp").stat().st_size == 300_000
    assert rank_file_bytes(str(tmp_path), 0) == 300_000
    assert rank_file_bytes(str(tmp_path), 1) == 0


def test_outside_a_step_the_filesystem_is_torch_s_own(tmp_path: Path) -> None:
    """In torch's checkpoint process (a process-based async save) nothing counts."""
    with CountingFileSystem().create_stream(tmp_path / "__0_0.distcp", "wb") as stream:
        stream.write(b"x")
    assert (tmp_path / "__0_0.distcp").read_bytes() == b"x"
