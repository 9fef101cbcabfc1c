"""The host bed: clients share one sshfs export, mpirun starts one process per client inside
its namespaces, a link taken down cuts that client off, and the real suite runs across it.

Needs root, iproute2, util-linux, openssh-server, sshfs and openmpi-bin (``.ci/run`` installs
them); skips, saying why, elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.beds.hosts import HostBed, host_bed

ROOT = Path(__file__).resolve().parents[2]

# Each test of the bed has a few seconds' work; the suite's smoke run has a minute.
pytestmark: pytest.MarkDecorator | list[pytest.MarkDecorator] = (
    pytest.mark.timeout(60) if importlib.util.find_spec("pytest_timeout") else []
)
needs_mpi4py = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py: pip install 'ckptgate[mpi]'"
)


@pytest.fixture(scope="module")
def bed() -> Iterator[HostBed]:
    """Three clients sharing the export, made once for the module (under a second)."""
    with host_bed(clients=3) as made:
        yield made


def test_every_client_sees_the_same_export(bed: HostBed) -> None:
    writer, *readers = bed.clients
    written = bed.run(writer, ["sh", "-c", "hostname > /ckpt/from-writer && sync"])
    assert written.returncode == 0, written.stderr
    for reader in readers:
        read = bed.run(reader, ["cat", "/ckpt/from-writer"], timeout_s=10)
        assert (read.returncode, read.stdout) == (0, f"{writer}\n"), read.stderr
        mount = bed.run(reader, ["findmnt", "-n", "-o", "FSTYPE", "/ckpt"])
        assert mount.stdout.split()[-1] == "fuse.sshfs"  # on top of the bed's tmpfs underlay
    assert (bed.export / "from-writer").read_text() == f"{writer}\n"
    (bed.export / "from-writer").unlink()
    # Not on this machine's own /ckpt: the mounts live in the clients' namespaces only.
    assert not os.path.exists("/ckpt/from-writer")


@needs_mpi4py
def test_mpirun_starts_one_process_per_client_inside_its_namespaces(bed: HostBed) -> None:
    (bed.export / "seen-by-all").write_text("x")
    probe = (
        "import json, os, socket\n"
        "from mpi4py import MPI\n"
        "print(json.dumps({'rank': MPI.COMM_WORLD.rank, 'host': socket.gethostname(),\n"
        "  'net': os.stat('/proc/self/ns/net').st_ino, 'ckpt': os.listdir('/ckpt'),\n"
        "  'hosts': MPI.COMM_WORLD.allgather(socket.gethostname())}), flush=True)\n"
    )
    result = bed.mpirun([sys.executable, "-c", probe], timeout_s=45)
    (bed.export / "seen-by-all").unlink()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    reports = sorted(_json_objects(result.stdout), key=lambda r: r["rank"])
    assert [r["host"] for r in reports] == bed.clients
    for report in reports:
        netns = os.stat(f"/run/netns/{bed.hosts[report['host']].netns}").st_ino
        assert report["net"] == netns, report
        assert report["ckpt"] == ["seen-by-all"], report
        assert report["hosts"] == bed.clients  # they talk to each other over the bridge


def _json_objects(text: str) -> list[dict]:
    """Every JSON object in ``text``: mpirun forwards each rank's lines, and under load two
    ranks' lines can arrive joined on one."""
    decoder, found, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        value, end = decoder.raw_decode(text, at)
        found.append(value)
        at = text.find("{", end)
    return found


def test_a_link_taken_down_cuts_that_client_off_and_comes_back(bed: HostBed) -> None:
    cut, *others = bed.clients
    assert all(bed.reachable(other, cut) for other in others)
    bed.link_down(cut)
    try:
        assert not any(bed.reachable(other, cut, timeout_s=1) for other in others)
        assert not bed.reachable(cut, bed.server)
        assert bed.reachable(others[0], bed.server)
    finally:
        bed.link_up(cut)
    assert bed.reachable(others[0], cut)


def test_a_stopped_client_is_stopped_and_continues(bed: HostBed) -> None:
    sleeper = bed.popen(bed.clients[1], ["sleep", "30"])
    deadline = time.monotonic() + 5
    while sleeper.pid not in bed.pids(bed.clients[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped = bed.stop(bed.clients[1], "tasks")
    try:
        assert sleeper.pid in stopped
        assert _state_becomes(sleeper.pid, lambda s: s == "T")
        assert all(_state(pid) != "T" for pid in bed.pids(bed.clients[1], "storage"))
    finally:
        bed.cont(bed.clients[1])
    assert _state_becomes(sleeper.pid, lambda s: s != "T")
    sleeper.kill()
    sleeper.wait(timeout=5)


def test_an_unshared_client_sees_its_own_directory_and_teardown_leaves_nothing() -> None:
    with host_bed(clients=2, local=(1,)) as bed:
        assert bed.local == ["node1"]
        assert bed.run("node0", ["sh", "-c", "echo shared > /ckpt/f"]).returncode == 0
        alone = bed.run("node1", ["ls", "-A", "/ckpt"])
        assert (alone.returncode, alone.stdout) == (0, "")
        bed.stop("node0")  # teardown must cope with stopped processes
        state, names = bed.state, {h.netns for h in bed.hosts.values()} | {bed.bridge_ns}
        token = bed.bridge_ns.split("-")[1]  # every namespace of the bed is <prefix>-<token>-...
    assert all(name.split("-")[1] == token for name in names)
    assert not state.exists()
    # Nothing of this bed's is left; other beds' namespaces (a CI lane running beside this
    # one, .ci/run) are theirs to remove.
    assert [name for name in os.listdir("/run/netns") if f"-{token}-" in name] == []


@needs_mpi4py
def test_the_suite_across_two_clients_reads_back_the_other_clients_files(
    bed: HostBed, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    hosts = bed.clients[:2]
    result = bed.mpirun(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--color=no",
            "--profile=tmpfs",
            f"--target={bed.mount_point}",
            f"--report-json={report}",
            "--set",
            "cluster.gpus=8",
            "--set",
            "cluster.parallelism.dp=4",
            "--set",
            "run.shard_bytes_cap=4 MB",
            "--set",
            "run.rounds=1",
            "--set",
            "run.metadata_files=256",
            "--accept=trial",  # capped shards, a smaller storm
            "ckptgate/acceptance",
            "-m",
            "not dcp",
        ],
        hosts=hosts,
        timeout_s=55,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    data = json.loads(report.read_text())
    assert (data["nodes"], data["ranks"]) == (2, 8)
    ranks = [r for r in data["write"]["ranks"] if not r.get("coordinator")]
    written = {r["global_rank"]: r["node"] for r in ranks}
    assert written == {g: g // 4 for g in range(8)}
    # the save ends with node 0's coordinator writing .metadata
    assert [r["node"] for r in data["write"]["ranks"] if r.get("coordinator")] == [0]
    for record in data["read"]["ranks"]:
        assert written[record["global_rank"]] != record["node"], record
    assert sorted({r["host"] for r in data["write"]["ranks"]}) == hosts
    assert os.listdir(bed.export) == []


def _state_becomes(pid: int, wanted: Callable[[str], bool], timeout_s: float = 10.0) -> bool:
    """Whether the process reaches the wanted state: a signal is delivered asynchronously, so
    the state is polled until it changes (bounded), never read once right after sending."""
    deadline = time.monotonic() + timeout_s
    while not wanted(_state(pid)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _state(pid: int) -> str:
    """The process state letter from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
