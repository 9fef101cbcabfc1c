"""The README's headline launch on the storage its users buy: srun over three client hosts,
each with CephFS mounted through ceph-fuse, one qualified report with every host.

The Ceph bed (``tests.beds.ceph``, three clients) with the Slurm bed (``tests.beds.slurm``)
laid over the same host bed: slurmctld in head, a slurmd in each client's namespaces, the
target the CephFS mount every client sees at the same path. Skips, saying why, where either
bed cannot be built or mpi4py is missing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds.ceph import CephBed, ceph_bed
from tests.beds.slurm import SlurmBed, slurm_bed
from tests.beds.test_slurm import srun_qualified

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py: pip install 'ckptgate[mpi]'"
)


@pytest.fixture(scope="module")
def beds() -> Iterator[tuple[CephBed, SlurmBed]]:
    with ceph_bed(clients=3, osds=2, rgw=False) as ceph:
        view = ceph.client_path("node0")
        with slurm_bed(ceph.hosts, target=ceph.mount_point, target_view=view) as slurm:
            yield ceph, slurm


def test_srun_on_three_cephfs_clients_gives_one_qualified_report(
    beds: tuple[CephBed, SlurmBed], tmp_path: Path
) -> None:
    ceph, slurm = beds
    data = srun_qualified(slurm, tmp_path / "report.json", timeout_s=900)
    assert (slurm.target, data["fs_type"]) == (ceph.mount_point, "fuse.ceph-fuse")
