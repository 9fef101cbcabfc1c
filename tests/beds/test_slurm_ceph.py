"""The README's headline launch on the storage its users buy: srun over three client hosts,
each with CephFS mounted through ceph-fuse, one qualified report with every host.

The Ceph bed (``tests.beds.ceph``, three clients) with the Slurm bed (``tests.beds.slurm``)
laid over the same host bed: slurmctld in head, a slurmd in each client's namespaces, the
target the CephFS mount every client sees at the same path. Skips, saying why, where either
bed cannot be built or mpi4py is missing.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds.ceph import CephBed, ceph_bed
from tests.beds.slurm import SlurmBed, slurm_bed
from tests.beds.test_ceph_suite import S3_ENV, s3_call
from tests.beds.test_slurm import srun_qualified

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py: pip install 'ckptgate[mpi]'"
)


@pytest.fixture(scope="module")
def beds() -> Iterator[tuple[CephBed, SlurmBed]]:
    with ceph_bed(clients=3, osds=2, rgw=True) as ceph:
        view = ceph.client_path("node0")
        with slurm_bed(ceph.hosts, target=ceph.mount_point, target_view=view) as slurm:
            yield ceph, slurm


def test_srun_on_three_cephfs_clients_gives_one_qualified_report(
    beds: tuple[CephBed, SlurmBed], tmp_path: Path
) -> None:
    ceph, slurm = beds
    data = srun_qualified(slurm, tmp_path / "report.json", timeout_s=900)
    assert (slurm.target, data["fs_type"]) == (ceph.mount_point, "fuse.ceph-fuse")


def test_srun_on_three_clients_gives_one_qualified_report_on_rgw(
    beds: tuple[CephBed, SlurmBed], tmp_path: Path
) -> None:
    """The same launch against RADOS Gateway's S3 from all three clients (s3fs, the keys as
    storage options); the bucket is empty afterwards."""
    ceph, slurm = beds
    bucket = "srun"
    s3_call(ceph, "fs.mkdir(sys.argv[2])", bucket)
    data = srun_qualified(
        slurm,
        tmp_path / "report.json",
        timeout_s=900,
        target=f"s3://{bucket}/qualify",
        options=ceph.s3_option_args(),
        env=S3_ENV,
    )
    assert (data["object_store"], data["fs_type"]) == ("S3", "s3")
    assert json.loads(s3_call(ceph, "print(json.dumps(fs.find(sys.argv[2])))", bucket)) == []
