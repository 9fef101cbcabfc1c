"""The suite on the storage its users buy: CephFS through ceph-fuse and S3 from RADOS Gateway.

Runs on the Ceph bed (``tests.beds.ceph``: a mon, a mgr, an MDS, two memstore OSDs and
radosgw, each in its own network namespace, CephFS mounted on a client); skips, saying why,
where the bed cannot be built. One cluster serves the whole module (starting one takes about
half a minute); the tests that kill a daemon bring the cluster back to health before they end,
and the one that loses data does it on a pool of its own (``single``, size 1) that no other
test writes to.

The cluster has three clients: the checklist and the faults run on the first, and the README's
headline launch, srun over all three (the Slurm bed, ``tests.beds.slurm``, laid over the same
host bed: slurmctld in head, a slurmd in each client's namespaces), gives one qualified report
from CephFS and one from RGW. That is one cluster where a module of its own for the srun tests
started a second; the Slurm bed lives only while its tests run, so that no slurmd is among the
client's processes when a fault test counts them.

The checklist runs as a user runs it, inside the client's namespaces; faults are waited for
through the run directory and the daemons' state, never through a wall-clock race: each
real timeout here is a generous safety net.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptgate.rundir.manifest import manifest_name
from tests.beds.ceph import CephBed, ceph_bed, wait_for
from tests.beds.runs import (
    FAULT_RUN,
    SAFETY_S,
    WRITE_BURST,
    ends,
    named_stall,
    reached,
    run_in,
    start_in,
    suite,
    verdict_line,
    wait_for_step,
)
from tests.beds.slurm import SlurmBed, slurm_bed
from tests.beds.test_slurm import srun_qualified

CLIENT = "node0"
S3_ENV = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
"""botocore asks no credential provider and reads no config: the keys are storage options."""


@pytest.fixture(scope="module")
def ceph() -> Iterator[CephBed]:
    """One cluster for the module (started once, torn down after the last test), with three
    clients: ``node0`` (``CLIENT``) runs the checklist and the faults, all three the srun
    tests."""
    with ceph_bed(clients=3, osds=2, rgw=True) as bed:
        yield bed


def run_on(bed: CephBed, argv: list[str], timeout_s: float = SAFETY_S) -> tuple[int, str]:
    """Run ``argv`` on the client, bounded; its exit status and its output (both streams)."""
    return run_in(bed.hosts, CLIENT, argv, timeout_s, S3_ENV)


def test_the_checklist_is_green_on_cephfs(ceph: CephBed, tmp_path: Path) -> None:
    report = tmp_path / "cephfs.json"
    code, out = run_on(ceph, suite(ceph.mount_point, "-m", "not dcp", f"--report-json={report}"))
    assert code == 0, out[-5000:]
    assert "Traceback" not in out
    assert verdict_line(out).startswith("VERDICT qualified for tmpfs: "), out[-5000:]
    assert "every item passed" in verdict_line(out)
    data = json.loads(report.read_text())
    assert data["fs_type"] == "fuse.ceph-fuse"
    assert data["fs_placement"] == {"ceph.dir.layout.pool": "replicated"}  # size 2
    assert ceph.ceph("osd", "ls").split() == ["0", "1"]  # the servers behind that pool


def test_the_checklist_is_green_on_rgw(ceph: CephBed, tmp_path: Path) -> None:
    bucket = "ckpt"
    make = (
        "import json, sys, s3fs\ns3fs.S3FileSystem(**json.loads(sys.argv[1])).mkdir(sys.argv[2])\n"
    )
    code, out = run_on(
        ceph, [sys.executable, "-c", make, json.dumps(ceph.s3_options()), bucket], 120
    )
    assert code == 0, out
    report = tmp_path / "rgw.json"
    argv = suite(f"s3://{bucket}/qualify", *ceph.s3_option_args(), f"--report-json={report}")
    # The storm at 256 files (a checkpoint here has 5): RGW creates about 35 objects/s on
    # this bed, and 2,048 creates, their verify and delete take minutes.
    code, out = run_on(ceph, [*argv, "-m", "not dcp", "--set", "run.metadata_files=256"])
    assert code == 0, out[-5000:]
    assert verdict_line(out).startswith("VERDICT qualified for tmpfs: "), out[-5000:]
    assert "every item passed" in verdict_line(out)
    data = json.loads(report.read_text())
    assert (data["object_store"], data["fs_type"]) == ("S3", "s3")
    assert json.loads(s3_call(ceph, "print(json.dumps(fs.find(sys.argv[2])))", bucket)) == []
    ceph.rgw_collect_garbage()  # the room the deleted objects held, for the next test


@pytest.fixture(scope="class")
def slurm(ceph: CephBed) -> Iterator[SlurmBed]:
    """The Slurm bed on the cluster's hosts, the target the CephFS mount every client sees at
    the same path; torn down after the srun class's tests."""
    view = ceph.client_path(CLIENT)
    with slurm_bed(ceph.hosts, target=ceph.mount_point, target_view=view) as bed:
        yield bed


@pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py: pip install 'ckptgate[mpi]'"
)
class TestSrunOnThreeClients:
    """The README's headline launch on the storage its users buy: srun over the three client
    hosts, each with CephFS mounted through ceph-fuse (and each reaching RGW), one qualified
    report with every host."""

    def test_srun_on_three_cephfs_clients_gives_one_qualified_report(
        self, ceph: CephBed, slurm: SlurmBed, tmp_path: Path
    ) -> None:
        data = srun_qualified(slurm, tmp_path / "report.json", timeout_s=900)
        assert (slurm.target, data["fs_type"]) == (ceph.mount_point, "fuse.ceph-fuse")

    def test_srun_on_three_clients_gives_one_qualified_report_on_rgw(
        self, ceph: CephBed, slurm: SlurmBed, tmp_path: Path
    ) -> None:
        """The same launch against RADOS Gateway's S3 from all three clients (s3fs, the keys
        as storage options); the bucket is empty afterwards."""
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
        ceph.rgw_collect_garbage()  # the room the deleted objects held, for the next test


def start_on(bed: CephBed, argv: list[str], log: Path) -> subprocess.Popen[str]:
    """Start ``argv`` on the client, its output to ``log`` (``runs.start_in``)."""
    return start_in(bed.hosts, CLIENT, argv, log, S3_ENV)


def abandoned_ranks_gone(bed: CephBed) -> None:
    """Wait (bounded) until only ceph-fuse runs on the client: rank processes the suite
    abandoned in the kernel end once their call returns (their parent is gone)."""
    fuse = bed.daemons[f"fuse.{CLIENT}"].pid
    wait_for(lambda: set(bed.hosts.pids(CLIENT)) <= {fuse}, SAFETY_S, "abandoned ranks exited")


def run_dirs(bed: CephBed, under: str = "") -> list[Path]:
    return sorted(bed.client_path(CLIENT, under).glob("ckptgate-*"))


def on_client(bed: CephBed, path: Path) -> str:
    """``path`` (under :meth:`CephBed.client_path`) as the client names it."""
    return str(Path(bed.mount_point) / path.relative_to(bed.client_path(CLIENT)))


def test_an_osd_killed_mid_burst_on_replicated_storage_keeps_every_fsynced_byte(
    ceph: CephBed,
    tmp_path: Path,
) -> None:
    argv = suite(ceph.mount_point, "--keep", *FAULT_RUN, "--set", "run.rounds=6", WRITE_BURST)
    log = tmp_path / "run.log"
    job = start_on(ceph, argv, log)
    wait_for_step(job, reached(ceph.client_path(CLIENT), "step-2"), "write/step-2")
    ceph.kill_osd(1)
    ceph.start_osd(1)
    code, out = ends(job, log)
    print(out[-3000:])
    assert "Traceback" not in out
    if code != 0:  # the storage stalled past the stall timeout: named, with the phase
        named_stall(out)
    # osd.1 came back empty (memstore): the replicated pools refill it from osd.0; the
    # unreplicated pool's PGs there are gone (it held nothing yet) and are recreated empty.
    ceph.recreate_lost_pgs("single")
    ceph.wait_healthy()
    (kept,) = run_dirs(ceph)
    code, out = run_on(
        ceph, [sys.executable, "-m", "ckptgate", "verify", on_client(ceph, kept)], timeout_s=600
    )
    assert code == 0, out[-4000:]
    assert "Traceback" not in out
    code, out = run_on(
        ceph, [sys.executable, "-m", "ckptgate", "clean", "--include-kept", ceph.mount_point]
    )
    assert code == 0, out
    assert run_dirs(ceph) == []


def test_a_stopped_mds_is_named_at_the_stall_timeout(ceph: CephBed, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    job = start_on(ceph, suite(ceph.mount_point, *FAULT_RUN, WRITE_BURST), log)
    wait_for_step(job, reached(ceph.client_path(CLIENT), "step-2"), "write/step-2")
    ceph.stop_mds()
    try:
        code, out = ends(job, log)  # the MDS is still stopped: the run ended by itself
    finally:
        ceph.cont_mds()
    assert code != 0
    named_stall(out)
    assert "Traceback" not in out
    abandoned_ranks_gone(ceph)  # they finish their calls now, see their parent gone, and exit
    code, out = run_on(ceph, [sys.executable, "-m", "ckptgate", "clean", ceph.mount_point])
    assert run_dirs(ceph) == [], out


def s3_call(bed: CephBed, script: str, *args: str) -> str:
    """Run ``script`` on the client with ``fs`` an s3fs filesystem of the bed's user."""
    prologue = "import json, sys, s3fs\nfs = s3fs.S3FileSystem(**json.loads(sys.argv[1]))\n"
    argv = [sys.executable, "-c", prologue + script, json.dumps(bed.s3_options()), *args]
    code, out = run_on(bed, argv, timeout_s=120)
    assert code == 0, out
    return out


def test_radosgw_stopped_mid_upload_is_named_and_leaves_no_partial_object(
    ceph: CephBed, tmp_path: Path
) -> None:
    """RGW killed while the ranks upload: the run fails naming the phase, and what stays on
    the store once RGW is back is whole: every object left has the size the manifest gave
    it (a rank whose upload failed aborts it, ``Writer.discard``; it never commits a part), and
    the run named each one it could not remove."""
    bucket = "faults"
    s3_call(ceph, "fs.mkdir(sys.argv[2])", bucket)
    argv = suite(f"s3://{bucket}/run", *ceph.s3_option_args(), *FAULT_RUN, WRITE_BURST)
    log = tmp_path / "run.log"
    job = start_on(ceph, argv, log)
    # Rounds replace each other: any round after the first has begun uploading.
    later = (
        "import re\n"
        "keys = fs.glob(sys.argv[2] + '/run/ckptgate-*/write/step-*/*')\n"
        "print(any(int(re.search(r'/step-(\\d+)/', k)[1]) >= 2 for k in keys))"
    )
    wait_for_step(job, lambda: s3_call(ceph, later, bucket).strip() == "True", "round 2")
    ceph.stop_rgw()
    try:
        code, out = ends(job, log)
    finally:
        ceph.start_rgw()
    print(out[-3000:])
    assert code != 0
    assert "Traceback" not in out
    # the round named (its preparation, write, verify or removal), not a bare OSError
    phase = r"RankFailure: (preparing |verifying |removing )?write round \d+"
    assert re.search(phase, out), out[-4000:]
    listing = "print(json.dumps(fs.find(sys.argv[2], detail=True), default=str))"
    left = json.loads(s3_call(ceph, listing, bucket))
    sizes = registered_sizes(ceph, bucket, left)
    for key, info in left.items():
        name = key.rsplit("/", 1)[-1]
        if name.startswith(".ckptgate"):
            continue  # the run's manifest and lease: they list what stayed
        assert info["size"] == sizes[key], (key, info["size"], sizes.get(key))  # whole
        assert key.split("/", 1)[1] in out, (key, out[-4000:])  # named as left behind
    # an upload's Initiated is a datetime: the listing prints as text what JSON cannot hold
    uploads = (
        "print(json.dumps(fs.call_s3('list_multipart_uploads', Bucket=sys.argv[2]), default=str))"
    )
    pending = json.loads(s3_call(ceph, uploads, bucket)).get("Uploads", [])
    print(f"objects left {len(left)}, uploads RGW's death kept open {len(pending)}")
    wipe = (
        "for u in fs.call_s3('list_multipart_uploads', Bucket=sys.argv[2]).get('Uploads', []):\n"
        "    fs.call_s3('abort_multipart_upload', Bucket=sys.argv[2], Key=u['Key'],"
        " UploadId=u['UploadId'])\n"
        "fs.rm(sys.argv[2], recursive=True)\n"
    )
    s3_call(ceph, wipe, bucket)  # the test's own bucket, for the next test's room
    ceph.rgw_collect_garbage()


def registered_sizes(bed: CephBed, bucket: str, left: dict[str, Any]) -> dict[str, int]:
    """Each registered file's size, from the run's manifest parts among ``left``."""
    sizes: dict[str, int] = {}
    for key in left:
        name = key.rsplit("/", 1)[-1]
        if not name.startswith(".ckptgate-manifest"):
            continue
        run_dir = key.rsplit("/", 1)[0]
        text = s3_call(bed, "print(fs.cat_file(sys.argv[3]).decode())", bucket, key)
        for line in text.splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("kind") == "file" and "bytes" in record:
                sizes[f"{run_dir}/{record['path']}"] = int(record["bytes"])
    return sizes


def test_an_osd_lost_on_unreplicated_storage_is_bounded_and_verify_names_every_lost_file(
    ceph: CephBed,
    tmp_path: Path,
) -> None:
    single = f"{ceph.mount_point}/single"
    ceph.layout_dir(CLIENT, single, "single")
    log = tmp_path / "run.log"
    job = start_on(ceph, suite(single, "--keep", *FAULT_RUN, WRITE_BURST), log)
    # 64 MiB of the round written first: 16 RADOS objects, so that some lie on osd.1 (each PG
    # of the size-1 pool is on one OSD) and its loss takes data, not just a round's start.
    later = "step-[2-9]*"  # any round after the first (rounds replace each other)
    wait_for_step(
        job,
        reached(ceph.client_path(CLIENT, "single"), later, 64 << 20),
        "64 MiB in a round after the first",
    )
    ceph.kill_osd(1)  # memstore: what osd.1 held is gone
    code, out = ends(job, log)  # writers hang in the kernel on osd.1's PGs: the run still ends
    print(out[-3000:])
    assert code != 0
    named_stall(out)
    (kept,) = run_dirs(ceph, "single")
    kept_path = on_client(ceph, kept)
    ceph.abort_mount(CLIENT)  # the writers' calls end with ENOTCONN
    abandoned_ranks_gone(ceph)
    ceph.start_osd(1)
    ceph.recreate_lost_pgs("single")
    ceph.wait_healthy()
    ceph.remount(CLIENT)
    surviving = ceph.objects("single")
    code, out = run_on(ceph, [sys.executable, "-m", "ckptgate", "verify", kept_path], timeout_s=600)
    print(out[-3000:])
    assert code == 1, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    (kept,) = run_dirs(ceph, "single")  # as the new mount shows it
    lost = lost_files(ceph, kept, surviving, own=True)
    assert lost, "osd.1 held none of the run's objects: the fault tested nothing"
    relative = {str(Path(path).relative_to(kept_path)) for path in lost}
    if "the run's own record of what it wrote did not survive" in out:
        # The manifest's own bytes were on osd.1: verify cannot name what it listed, and says
        # so; the part as the storage now returns it is indeed not what the run wrote.
        first_line = (kept / manifest_name(0)).read_bytes().split(b"\n", 1)[0]
        with pytest.raises(ValueError):
            json.loads(first_line)
    else:
        named = {  # each problem line names its file relative to the run directory
            line.split()[2] for line in out.splitlines() if line.startswith("ckptgate verify: ")
        }
        files = {name for name in relative if not Path(name).name.startswith(".ckptgate")}
        assert files <= named, (sorted(files), out[-4000:])
    run_on(ceph, [sys.executable, "-m", "ckptgate", "clean", "--include-kept", single])


def lost_files(bed: CephBed, run_dir: Path, surviving: set[str], own: bool = False) -> list[str]:
    """The files under ``run_dir`` some of whose data objects are gone (the run's own manifest
    and lease among them with ``own``): CephFS stores a file's bytes in objects
    ``<inode hex>.<index, 8 hex digits>`` of its pool's 4 MiB objects."""
    lost = []
    for path in run_dir.rglob("*"):
        if not path.is_file() or (path.name.startswith(".ckptgate") and not own):
            continue
        stat = path.stat()
        count = -(-stat.st_size // (4 << 20))
        names = {f"{stat.st_ino:x}.{index:08x}" for index in range(count)}
        if not names <= surviving:
            lost.append(on_client(bed, path))
    return lost


def persist_bytes_per_s(report: Path) -> float:
    items = {item["id"]: item for item in json.loads(report.read_text())["items"]}
    return float(items["async-persist"]["measured"])


def test_the_same_burst_on_one_osd_and_on_two_shows_the_second_servers_bandwidth(
    ceph: CephBed, tmp_path: Path
) -> None:
    """A scaling row: the write burst on pool ``first`` (osd.0 alone) and on ``single`` (both
    OSDs, the same replica count), compared by ``ckptgate compare``. Both OSDs share this
    machine's cores, so the ratio is reported, not gated: what is asserted is that each run
    says which pool it measured."""
    reports = []
    for pool in ("first", "single"):
        directory = f"{ceph.mount_point}/scaling-{pool}"
        ceph.layout_dir(CLIENT, directory, pool)
        report = tmp_path / f"{pool}.json"
        argv = suite(directory, f"--report-json={report}", "--set", "run.rounds=2", WRITE_BURST)
        argv.append("--accept=trial")
        code, out = run_on(ceph, argv)
        assert code == 0, out[-4000:]
        assert f"ceph.dir.layout.pool {pool}" in out  # the header names the pool
        assert json.loads(report.read_text())["fs_placement"] == {"ceph.dir.layout.pool": pool}
        reports.append(report)
    code, out = run_on(ceph, [sys.executable, "-m", "ckptgate", "compare", *map(str, reports)])
    assert code == 0, out
    one, two = (persist_bytes_per_s(report) for report in reports)
    print(out)
    print(
        f"async persist: 1 OSD {one / 1e6:.1f} MB/s, 2 OSDs {two / 1e6:.1f} MB/s: x{two / one:.2f}"
    )
    for directory in ("scaling-first", "scaling-single"):
        run_on(ceph, ["rmdir", f"{ceph.mount_point}/{directory}"])
