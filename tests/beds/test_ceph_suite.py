"""The suite on the storage its users buy: CephFS through ceph-fuse and S3 from RADOS Gateway.

Runs on the Ceph bed (``tests.beds.ceph``: a mon, a mgr, an MDS, two memstore OSDs and
radosgw, each in its own network namespace, CephFS mounted on a client); skips, saying why,
where the bed cannot be built. One cluster serves the whole module (starting one takes about
half a minute); the tests that kill a daemon bring the cluster back to health before they end,
and the one that loses data does it on a pool of its own (``single``, size 1) that no other
test writes to.

The checklist runs as a user runs it, inside the client's namespaces; faults are waited for
through the run directory and the daemons' state, never through a wall-clock race: each
real timeout here is a generous safety net.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds.ceph import CephBed, ceph_bed

ROOT = Path(__file__).resolve().parents[2]
CLIENT = "node0"
SAFETY_S = 900.0
"""A run of the checklist on the bed takes about two minutes on a busy 2-core machine."""
S3_ENV = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
"""botocore asks no credential provider and reads no config: the keys are storage options."""


@pytest.fixture(scope="module")
def ceph() -> Iterator[CephBed]:
    """One cluster for the module (started once, torn down after the last test)."""
    with ceph_bed(clients=1, osds=2, rgw=True) as bed:
        yield bed


def suite(target: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "--pyargs", "ckptgate.acceptance",
        "-p", "no:cacheprovider", "-p", "no:randomly", "--color=no",
        "--profile=tmpfs", f"--target={target}", *args,
    ]  # fmt: skip


def run_on(bed: CephBed, argv: list[str], timeout_s: float = SAFETY_S) -> tuple[int, str]:
    """Run ``argv`` on the client, bounded; its exit status and its output (both streams)."""
    env = {**os.environ, **S3_ENV}
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(proxy, None)
    done = bed.hosts.run(CLIENT, argv, timeout_s=timeout_s, cwd=ROOT, env=env)
    return done.returncode, done.stdout + done.stderr


def verdict_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("VERDICT")]
    assert len(lines) == 1, output[-4000:]
    return lines[0]


def test_the_checklist_is_green_on_cephfs(ceph: CephBed, tmp_path: Path) -> None:
    report = tmp_path / "cephfs.json"
    code, out = run_on(ceph, suite(ceph.mount_point, "-m", "not dcp", f"--report-json={report}"))
    assert code == 0, out[-5000:]
    assert "Traceback" not in out
    assert verdict_line(out).startswith("VERDICT qualified: every item passed"), out[-5000:]
    data = json.loads(report.read_text())
    assert data["fs_type"] == "fuse.ceph-fuse"
    assert ceph.ceph("osd", "ls").split() == ["0", "1"]


def test_the_checklist_is_green_on_rgw(ceph: CephBed, tmp_path: Path) -> None:
    bucket = "ckpt"
    make = (
        "import json, sys, s3fs\n"
        "s3fs.S3FileSystem(**json.loads(sys.argv[1])).mkdir(sys.argv[2])\n"
    )
    code, out = run_on(ceph, [sys.executable, "-c", make, json.dumps(ceph.s3_options()), bucket], 120)
    assert code == 0, out
    report = tmp_path / "rgw.json"
    argv = suite(f"s3://{bucket}/qualify", *ceph.s3_option_args(), f"--report-json={report}")
    code, out = run_on(ceph, [*argv, "-m", "not dcp"])
    assert code == 0, out[-5000:]
    assert verdict_line(out).startswith("VERDICT qualified: every item passed"), out[-5000:]
    data = json.loads(report.read_text())
    assert (data["object_store"], data["fs_type"]) == ("S3", "s3")
