"""The README's headline launch on GlusterFS: srun over three client hosts, each with both
volumes mounted through the glusterfs FUSE client, one qualified report per volume naming
every host, and the volume's type, bricks and translators as the client reads them.

The GlusterFS bed (``tests.beds.gluster``: glusterd and its bricks in a namespace of their
own, a distributed volume and a replica-2 volume, three clients) with the Slurm bed
(``tests.beds.slurm``) laid over the same host bed. One cluster serves the module. Skips,
saying why, where either bed cannot be built or mpi4py is missing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds.gluster import SERVER_ADDRESS, VOLUMES, GlusterBed, brick_path, gluster_bed
from tests.beds.slurm import SlurmBed, slurm_bed
from tests.beds.test_slurm import srun_qualified

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py: pip install 'ckptgate[mpi]'"
)

TYPES = {"dist": "Distribute", "replica": "Replicate (replica 2)"}
"""What the report must call each volume of the bed (``gluster volume info``'s words)."""


@pytest.fixture(scope="module")
def beds() -> Iterator[tuple[GlusterBed, SlurmBed]]:
    """Three clients of both volumes, with Slurm, made once for the module."""
    with gluster_bed(clients=3) as gluster:
        first = next(iter(VOLUMES))
        view = gluster.client_path("node0", first)
        with slurm_bed(gluster.hosts, target=gluster.mount_point(first), target_view=view) as slurm:
            yield gluster, slurm


@pytest.mark.parametrize("volume", list(VOLUMES), ids=lambda v: f"volume={v}")
def test_srun_on_three_glusterfs_clients_gives_one_qualified_report(
    beds: tuple[GlusterBed, SlurmBed], volume: str, tmp_path: Path
) -> None:
    gluster, slurm = beds
    target = gluster.mount_point(volume)
    data = srun_qualified(slurm, tmp_path / "report.json", timeout_s=600, target=target)
    assert data["fs_type"] == "fuse.glusterfs"
    placement = data["fs_placement"]
    assert placement["glusterfs.volume"] == volume
    assert placement["glusterfs.type"] == TYPES[volume]
    bricks = [f"{SERVER_ADDRESS}:{brick_path(volume, i)}" for i in range(2)]
    assert placement["glusterfs.bricks"] == ", ".join(bricks)
    assert "cluster/distribute" in placement["glusterfs.translators"]
    print(f"{volume}: {placement}")
    left = sorted(p.name for p in gluster.client_path("node0", volume).glob("ckptgate-*"))
    assert left == [], f"run directories left on {volume}: {left}"
