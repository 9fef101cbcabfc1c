"""The suite on GlusterFS: the client's caches that make a restart read lie, and the servers'
faults, each ended named and bounded.

Runs on the GlusterFS bed (``tests.beds.gluster``: glusterd and four memory-backed bricks in a
namespace of their own; volume ``dist`` over two bricks, ``replica`` on two); skips, saying
why, where the bed cannot be built. One cluster serves the module. Volume ``replica`` has the
client's io-cache on, with a cache large enough for a file of the test's and revalidated once
a minute (``CACHED``); client ``node1`` caches attributes and names for ten minutes
(``--attribute-timeout=600 --entry-timeout=600``), as a site tuning for metadata would. A test
that kills a brick starts every brick of its volume again (``volume start force``) before it
ends.

The checklist runs as a user runs it, inside a client's namespaces (``tests.beds.runs``);
faults are waited for through the run directory, never a wall-clock race.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.beds.gluster import GlusterBed, gluster_bed
from tests.beds.runs import (
    CALL_S,
    burst_with_a_fault,
    ckptgate,
    cut_while,
    items,
    kept_burst,
    largest_shard,
    named_at,
    named_stall,
    read_step,
    run_in,
    suite,
    verdict_line,
)

WRITER, READER = "node0", "node1"
CACHED = {
    "performance.io-cache": "on",
    "performance.cache-size": "256MB",
    "performance.cache-refresh-timeout": "60",
}
"""io-cache on ``replica``, holding a 64 MiB file, trusting what it holds for a minute."""
LONG_CACHE = ["--attribute-timeout=600", "--entry-timeout=600"]
RESTART_READ = "-mrestart"
"""The restart check alone (the write rounds it reads are made as its rows need them)."""
FILE_BYTES = 64 << 20


@pytest.fixture(scope="module")
def gluster() -> Iterator[GlusterBed]:
    """One cluster for the module: two clients (``node1`` with long attribute and entry
    timeouts), io-cache on volume ``replica``."""
    with gluster_bed(
        clients=2, client_options={READER: LONG_CACHE}, volume_options={"replica": CACHED}
    ) as bed:
        yield bed


def client_read(bed: GlusterBed, client: str, path: str, step: str) -> dict[str, Any]:
    """One step of ``READS`` on ``client``, with the bytes the volume's bricks read meanwhile
    (``served``)."""
    volume = Path(path).relative_to("/ckpt").parts[0]
    return read_step(
        bed.hosts, client, path, step, FILE_BYTES, lambda: bed.brick_read_bytes(volume)
    )


def test_io_cache_serves_a_read_the_page_cache_calls_uncached_and_o_direct_goes_to_the_bricks(
    gluster: GlusterBed,
) -> None:
    """The finding the suite's refusal rests on: after the pages were dropped, mincore says 0 %
    resident, and yet the bricks serve none of a second read: the glusterfs process's io-cache
    did. An O_DIRECT read of the same file is the bricks' again."""
    path = f"{gluster.mount_point('replica')}/io-cache-probe"
    assert "performance/io-cache" in gluster.graph(READER, "replica")
    client_read(gluster, WRITER, path, "write")
    first = client_read(gluster, READER, path, "buffered")
    cached = client_read(gluster, READER, path, "buffered")
    direct = client_read(gluster, READER, path, "direct")
    for name, read in (("first", first), ("again", cached), ("O_DIRECT", direct)):
        print(
            f"{name}: resident {read['resident']}, {read['bytes'] / read['seconds'] / 1e6:.0f}"
            f" MB/s, bricks read {read['served'] / 1e6:.1f} MB, direct {read['direct']}"
        )
    assert first["bytes"] == cached["bytes"] == direct["bytes"] == FILE_BYTES
    assert first["served"] >= FILE_BYTES  # the bricks'
    assert cached["resident"] == 0.0  # mincore: nothing in the page cache ...
    assert cached["served"] < FILE_BYTES // 10  # ... and the bricks did not serve it
    assert direct["direct"], direct["refused"]
    assert direct["served"] >= FILE_BYTES  # O_DIRECT: the bricks' again
    run_in(gluster.hosts, WRITER, ["rm", "-f", path], CALL_S)


def test_a_restart_read_through_io_cache_is_refused_unless_read_with_o_direct(
    gluster: GlusterBed, tmp_path: Path
) -> None:
    """A buffered restart read on a client with io-cache may be the cache's (the resharded
    restore reads what the readback just read): both items fail, naming the cache; with
    ``--direct`` they pass, every file read with O_DIRECT."""
    target = gluster.mount_point("replica")
    speeds: dict[bool, dict[str, float]] = {}
    for direct in (False, True):
        report = tmp_path / f"direct-{direct}.json"
        args = ["--accept=trial", f"--report-json={report}", RESTART_READ]
        code, out = run_in(
            gluster.hosts, READER, suite(target, *(["--direct"] if direct else []), *args), CALL_S
        )
        assert "Traceback" not in out, out[-4000:]
        # the header: the volume as the client's graph has it, and its data cache
        assert "glusterfs.volume replica, glusterfs.type Replicate (replica 2)" in out, out[:4000]
        assert "performance/io-cache" in out
        assert "ckptgate: client cache: GlusterFS io-cache" in out, out[:4000]
        found = items(report)
        reads = [found["restart-read"], found["resharded-restore"]]
        data = json.loads(report.read_text())
        assert data["read"]["client_cache"] is not None
        assert data["read"]["direct"] is direct
        if direct:
            assert code == 0, out[-4000:]
            assert all(item["passed"] for item in reads), [i["detail"] for i in reads]
        else:
            assert code != 0
            for item in reads:
                assert not item["passed"]
                assert "client cache: read without O_DIRECT" in item["detail"], item["detail"]
                assert "io-cache" in item["detail"]
        speeds[direct] = {item["id"]: item["measured"] / 1e6 for item in reads}
    print(f"restart read MB/s buffered (io-cache): {speeds[False]}, O_DIRECT: {speeds[True]}")


def writer_view(bed: GlusterBed, volume: str) -> Path:
    """``volume``'s mount as the writer sees it, from this namespace."""
    return bed.client_path(WRITER, volume)


def burst_with_a_brick_killed(bed: GlusterBed, volume: str, tmp_path: Path) -> tuple[int, str, str]:
    """The kept write burst on ``volume`` with brick 1 killed mid-burst
    (``runs.burst_with_a_fault``); the run's status and output, and its run directory as the
    writer names it."""
    code, out, kept = burst_with_a_fault(
        bed.hosts, WRITER, bed.mount_point(volume), writer_view(bed, volume),
        lambda: bed.kill_brick(volume, 1), tmp_path / "run.log",
    )  # fmt: skip
    return code, out, on_client(bed, WRITER, volume, kept)


def on_client(bed: GlusterBed, client: str, volume: str, path: Path) -> str:
    """``path`` (under :meth:`GlusterBed.client_path`) as the client names it."""
    return str(Path(bed.mount_point(volume)) / path.relative_to(bed.client_path(client, volume)))


@pytest.mark.parametrize("volume", ["dist", "replica"], ids=lambda v: f"volume={v}")
def test_another_clients_rewrite_read_back_short_or_stale_is_named_with_file_and_offset(
    gluster: GlusterBed, volume: str
) -> None:
    """The writer rewrites part of a kept shard while the reader caches what it saw in
    between: on ``dist`` the reader caches the shard's size while it is cut short (its
    attributes kept ten minutes), on ``replica`` the bytes while a block is zeroed (io-cache
    trusts them a minute). The storage ends whole (the writer's verify passes); the reader's
    ``ckptgate verify`` reads it short or stale and names the file and the offset."""
    kept = kept_burst(
        gluster.hosts, WRITER, gluster.mount_point(volume), writer_view(gluster, volume)
    )
    shard = largest_shard(kept)
    as_named = on_client(gluster, WRITER, volume, shard)
    # The reader looks while the shard is cut, and caches what it saw: on dist the size (a
    # stat, as a restore's listing makes: a read would mark its atime stale and the next stat
    # would ask again), on replica the bytes (a read, which io-cache keeps).
    look = "os.stat(sys.argv[1])" if volume == "dist" else "open(sys.argv[1], 'rb').read()"
    reader = [sys.executable, "-c", f"import os, sys; {look}", as_named]
    cut = cut_while(
        shard, volume == "dist", lambda: run_in(gluster.hosts, READER, reader, CALL_S)[0] == 0
    )
    run_dir = on_client(gluster, WRITER, volume, kept)
    code, out = ckptgate(gluster.hosts, WRITER, "verify", run_dir)
    assert code == 0, out  # the storage holds what the run wrote
    code, out = ckptgate(gluster.hosts, READER, "verify", run_dir)
    print(out[-2000:])
    assert code == 1, out
    what = "truncated" if volume == "dist" else "byte differs"
    named_at(out, str(shard.relative_to(kept)), cut, what)
    assert (
        ckptgate(gluster.hosts, WRITER, "clean", "--include-kept", gluster.mount_point(volume))[0]
        == 0
    )


def test_a_brick_killed_mid_burst_on_replica_2_keeps_every_fsynced_byte(
    gluster: GlusterBed, tmp_path: Path
) -> None:
    try:
        code, out, kept = burst_with_a_brick_killed(gluster, "replica", tmp_path)
        if code != 0:  # the storage stalled past the stall timeout: named, with the phase
            named_stall(out)
        code, out = ckptgate(gluster.hosts, WRITER, "verify", kept)  # from the surviving brick
        assert code == 0, out[-4000:]
    finally:
        gluster.start_force("replica")
    assert ckptgate(gluster.hosts, WRITER, "clean", "--include-kept", "/ckpt/replica")[0] == 0


def test_a_brick_killed_on_the_distributed_volume_is_named_and_restarted_verify_says_what_survived(
    gluster: GlusterBed, tmp_path: Path
) -> None:
    """Brick 1 of ``dist`` dies mid-burst: a file on it fails with ENOTCONN, named with its
    path (a rank's file, or the run's manifest where the brick held that: the run still ends,
    saying its end line is missing); ``volume start force`` brings the brick back with what
    it held (its tmpfs stays), and ``ckptgate verify`` of the kept run names each file that
    is not whole."""
    try:
        code, out, kept = burst_with_a_brick_killed(gluster, "dist", tmp_path)
        assert code != 0
        failure = [
            line for line in out.splitlines() if "Transport endpoint is not connected" in line
        ]
        assert failure, out[-4000:]
        # named with its file: a shard, a round's .metadata (a rank's RankFailure, with its
        # round, phase and offset) or the run's own manifest, wherever the dead brick held it
        assert any(re.search(r"/ckpt/dist/ckptgate-[^ ]*/[^ ]+", line) for line in failure)
        assert verdict_line(out).startswith("VERDICT failed for tmpfs: ")
    finally:
        gluster.start_force("dist")
    code, out = ckptgate(gluster.hosts, WRITER, "verify", kept)
    print(out[-3000:])
    assert code in (0, 1), out[-4000:]
    assert "Traceback" not in out
    problems = [
        line
        for line in out.splitlines()
        if line.startswith("ckptgate verify: ") and not line.startswith("ckptgate verify: note:")
    ]
    assert all(" at offset " in line or "missing" in line or "size" in line for line in problems)
    assert ckptgate(gluster.hosts, WRITER, "clean", "--include-kept", "/ckpt/dist")[0] == 0
