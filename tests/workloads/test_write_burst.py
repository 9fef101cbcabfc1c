"""The write burst: one file per rank, every byte written; the load generator's burst goes
through the same write calls into a sink that discards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankPool
from ckptgate.storage.backend import BackendSpec
from ckptgate.workloads.write_burst import ShardFile, run_write_burst

MiB = 2**20
LOCAL = BackendSpec("file")


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Two rank processes for this module; stopped at its end."""
    with RankPool(2) as ranks:
        yield ranks


def _written_bytes(pids: list[int]) -> int:
    """Bytes the processes passed to write calls so far (/proc/PID/io ``wchar``)."""
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                total += int(line.split()[1])
    return total


def test_the_load_generator_writes_through_the_client_path_into_a_discarding_sink(
    pool: RankPool, tmp_path: Path
) -> None:
    """Its null sink never called write, so a slow client write path went unseen."""
    shards = [ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), 8 * MiB, 7, MiB) for g in (0, 1)]
    before = _written_bytes(pool.pids())
    burst = run_write_burst(pool, LOCAL, shards, 60, sink="null")
    after = _written_bytes(pool.pids())
    assert burst.total_bytes == 16 * MiB
    assert after - before >= 16 * MiB  # every byte went through write(2)
    assert list(tmp_path.iterdir()) == []  # and nowhere on the target
    assert not any(r.extra["fsynced"] for r in burst.ranks)


def test_the_target_burst_writes_every_byte_and_fsyncs(pool: RankPool, tmp_path: Path) -> None:
    shards = [ShardFile(g, str(tmp_path / f"__{g}_0.distcp"), 3 * MiB + 5, 7, MiB) for g in (0, 1)]
    burst = run_write_burst(pool, LOCAL, shards, 60)
    assert [Path(s.path).stat().st_size for s in shards] == [3 * MiB + 5] * 2
    assert all(r.extra["fsynced"] for r in burst.ranks)
    assert [list(r.phases_s) for r in burst.ranks] == [["open", "write", "fsync", "close"]] * 2
