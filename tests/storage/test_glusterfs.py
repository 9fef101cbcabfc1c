"""A GlusterFS client's graph as the suite reads it from the mount (``.meta``): the volume's
type, bricks and translators for the report, and io-cache named as a cache the page cache does
not show, which makes a buffered restart read the cache's until read with O_DIRECT."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptgate.checks.restart import client_cache_refusal
from ckptgate.engine.records import BurstResult
from ckptgate.storage.fsfacts import local_fs_facts
from ckptgate.storage.glusterfs import FS_TYPE, VOLFILE, GlusterGraph, parse_volfile
from ckptgate.storage.placement import client_placement
from ckptgate.workloads.readback import ReadResult

HERE = Path(__file__).resolve().parent
REPLICA = (HERE / "gluster-replica.vol").read_text()
"""The active graph of a replica-2 volume with io-cache on, as a GlusterFS 10.3 client's
``.meta/graphs/active/volfile`` gave it on the bed (tests/beds/gluster.py)."""
DIST = (HERE / "gluster-dist.vol").read_text()
"""The same of a volume distributed over two bricks, with the default translators."""


def graph(text: str) -> GlusterGraph:
    return GlusterGraph(tuple(parse_volfile(text)))


def test_a_replica_volumes_graph_names_its_type_bricks_and_translators() -> None:
    placement = graph(REPLICA).placement()
    assert placement["glusterfs.volume"] == "replica"
    assert placement["glusterfs.type"] == "Replicate (replica 2)"
    assert placement["glusterfs.bricks"] == (
        "198.18.0.40:/run/bricks/replica0, 198.18.0.40:/run/bricks/replica1"
    )
    translators = placement["glusterfs.translators"].split(", ")
    assert translators[0] == "debug/io-stats"  # the top, as a call passes them
    assert translators.index("performance/io-cache") < translators.index("cluster/replicate")
    assert "protocol/client" not in translators and "meta" not in translators


def test_a_distributed_volume_is_distribute_over_its_bricks() -> None:
    dist = graph(DIST)
    assert (dist.volume, dist.volume_type) == ("dist", "Distribute")
    assert dist.bricks == ["198.18.0.40:/run/bricks/dist0", "198.18.0.40:/run/bricks/dist1"]


def test_io_cache_in_the_graph_is_the_clients_own_data_cache() -> None:
    words = graph(REPLICA).data_cache()
    assert words is not None and "io-cache" in words and "mincore" in words
    without = [t for t in parse_volfile(REPLICA) if t.type != "performance/io-cache"]
    assert GlusterGraph(tuple(without)).data_cache() is None


def test_more_replica_sets_are_distributed_replicate() -> None:
    twice = REPLICA.replace("replica-replicate-0", "replica-replicate-1")
    text = REPLICA + twice
    assert graph(text).volume_type == "Distributed-Replicate (2 x 2)"


def test_the_placement_is_read_from_the_mounts_meta_volfile(tmp_path: Path) -> None:
    (tmp_path / VOLFILE).parent.mkdir(parents=True)
    (tmp_path / VOLFILE).write_text(REPLICA)
    placement, cache = client_placement(str(tmp_path / "ckpt"), str(tmp_path), FS_TYPE)
    assert placement["glusterfs.type"] == "Replicate (replica 2)"
    assert cache is not None
    # another filesystem type with the same file: not read (no GlusterFS client there)
    assert client_placement(str(tmp_path), str(tmp_path), "tmpfs") == ({}, None)
    assert local_fs_facts(str(tmp_path)).client_cache is None


def test_an_unreadable_graph_gives_no_placement_and_no_cache(tmp_path: Path) -> None:
    assert client_placement(str(tmp_path), str(tmp_path), FS_TYPE) == ({}, None)


def read_result(direct: bool, refused: str | None = None) -> ReadResult:
    return ReadResult(
        burst=BurstResult("read", ()),
        resident_fraction=0.0,
        resident_before_drop=1.0,
        memory_backed=False,
        direct=direct,
        direct_refused=refused,
        cache_served=(),
    )


@pytest.mark.parametrize("refused", [None, "the filesystem refuses O_DIRECT (EINVAL)"])
def test_a_buffered_read_through_a_client_cache_is_refused_as_the_caches(
    refused: str | None,
) -> None:
    words = graph(REPLICA).data_cache()
    refusal = client_cache_refusal(words, read_result(direct=False, refused=refused))
    assert refusal is not None and "io-cache" in refusal and "not counted" in refusal
    if refused:
        assert refused in refusal


def test_an_o_direct_read_or_a_client_without_cache_is_not_refused() -> None:
    words = graph(REPLICA).data_cache()
    assert client_cache_refusal(words, read_result(direct=True)) is None
    assert client_cache_refusal(None, read_result(direct=False)) is None
