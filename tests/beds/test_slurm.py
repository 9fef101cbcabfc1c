"""The suite launched by Slurm, as docs/clusters.md says: ``srun -N 3 --ntasks-per-node=1 --mpi=pmix
ckptgate run`` gives one qualified report naming every node; the shipped sbatch script does
the same from a batch job; ``scancel`` mid-burst and a node whose slurmd dies each stop every
rank, and what the run left is named by the next command on the target.

Runs on the Slurm bed (tests/beds/slurm.py over the host bed's sshfs export); skips, saying why,
where Slurm, munge or the host bed's packages are missing or the user is not root.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.beds.hosts import HEAD, HostBed, host_bed
from tests.beds.slurm import SlurmBed, slurm_bed

ROOT = Path(__file__).resolve().parents[2]
SBATCH_SCRIPT = ROOT / "examples" / "slurm" / "ckptgate.sbatch"
needs_mpi4py = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs mpi4py: pip install 'ckptgate[mpi]'"
)
pytestmark = needs_mpi4py

CKPTGATE = str(Path(sys.executable).with_name("ckptgate"))
"""The console script of this interpreter's environment (srun passes the environment on)."""

QUALIFYING = [
    "--set", "model.parameters=2e6", "--set", "cluster.gpus=6", "--set", "cluster.gpus_per_node=2",
    "--set", "cluster.parallelism.pp=1", "--set", "cluster.parallelism.dp=6",
    "--set", "run.rounds=1", "--set", "run.metadata_files=96", "--set", "run.reader_bytes=8 MB",
    "-m", "not dcp", "--color=no",
]  # fmt: skip
"""The tmpfs profile shrunk to three nodes of two ranks, 28 MB a checkpoint, uncapped shards:
a run on all three nodes is the whole cluster, so its verdict can be ``qualified``."""

LONG_BURST = [
    *QUALIFYING, "--set", "run.rounds=200", "--set", "run.stall_timeout_s=15",
    "-k", "test_write_rounds",
]  # fmt: skip
"""A write burst of 200 rounds (minutes) that a fault interrupts; a node left alone names its
silent peers after 15 s (the heartbeat), long before the windows' deadline. (Windows of 1 s
made a burst's deadline 10 s, which the ranks' start missed on a busy machine.)"""

DAEMONS = {"slurmd", "slurmstepd", "slurmctld", "slurmscriptd", "munged", "sshfs", "ssh", "sshd"}
ENDS_WITHIN_S = 150.0
"""Every suite process must be gone within this after the fault (KillWait is 5 s; a node left
alone by its peers ends itself at the collectives' deadline, about 30 s here)."""


def suite_processes(hosts: HostBed) -> dict[int, str]:
    """Every process in the bed's client and head namespaces that is not a daemon of Slurm,
    munge or sshfs: the suite's pytest processes, its rank processes and srun."""
    found = {}
    for host in [HEAD, *hosts.clients]:
        for pid in hosts.pids(host, "tasks"):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if comm not in DAEMONS:
                found[pid] = f"{host}: {cmdline.decode(errors='replace')[:120]}"
    return found


def wait_no_suite_processes(hosts: HostBed, since: float, timeout_s: float = ENDS_WITHIN_S) -> None:
    """Wait, bounded, until no suite process is left; print how long that took after
    ``since`` (a ``time.monotonic()``, the fault)."""
    deadline = since + timeout_s
    while left := suite_processes(hosts):
        if time.monotonic() > deadline:
            pytest.fail(f"suite processes still running {timeout_s:.0f} s after the fault: {left}")
        time.sleep(0.5)
    print(f"no suite process left {time.monotonic() - since:.1f} s after the fault")


def run_dirs(slurm: SlurmBed) -> list[Path]:
    return sorted(slurm.target_view.glob("ckptgate-*"))


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmBed]:
    """Three nodes sharing the export, with Slurm, made once for the module."""
    with host_bed(clients=3) as hosts, slurm_bed(hosts) as made:
        yield made


def srun_qualified(
    slurm: SlurmBed,
    report: Path,
    timeout_s: float = 400,
    target: str | None = None,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """docs/clusters.md's launch line over the bed's three nodes, on ``target`` (default the bed's
    shared mount, then checked empty afterwards) with ``options`` and ``env`` added; asserts
    one qualified report over every node; the report."""
    argv = [CKPTGATE, "run", "--profile=tmpfs", f"--target={target or slurm.target}", *options]
    result = subprocess.run(
        slurm.srun_command([*argv, f"--report-json={report}", *QUALIFYING], nodes=3),
        env={**slurm.env, **(env or {})},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    data: dict[str, Any] = json.loads(report.read_text())
    assert data["verdict"]["status"] == "qualified", data["verdict"]["line"]
    assert "3 of 3 nodes (100 % of the cluster), 6 of 6 ranks" in data["verdict"]["line"]
    assert (data["nodes"], data["ranks"]) == (3, 6)
    writers = {r["host"] for r in data["write"]["ranks"]}
    readers = {r["host"] for r in data["read"]["ranks"]}
    assert writers == readers == {"node0", "node1", "node2"}
    assert result.stdout.count("VERDICT qualified") == 1  # one report, from node 0
    if target is None:
        dirs = run_dirs(slurm)
        left = {str(d): sorted(str(f.relative_to(d)) for f in d.rglob("*")) for d in dirs}
        notes = [line for line in result.stdout.splitlines() if line.startswith("ckptgate: ")]
        assert left == {}, f"run directory left: {left}; the run said: {notes[-8:]}"
    return data


def test_srun_launches_one_qualified_run_over_every_node(slurm: SlurmBed, tmp_path: Path) -> None:
    srun_qualified(slurm, tmp_path / "report.json")


def test_the_shipped_sbatch_script_runs_the_checklist(slurm: SlurmBed, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    job = slurm.sbatch(
        SBATCH_SCRIPT,
        nodes=3,
        output=tmp_path / "job.out",
        options=[f"--chdir={tmp_path}"],
        args=["tmpfs", slurm.target, *QUALIFYING],
    )
    state = slurm.wait_job(job, timeout_s=400)
    output = (tmp_path / "job.out").read_text()
    assert state == "COMPLETED", output[-4000:]
    data = json.loads((tmp_path / f"ckptgate-{job}.json").read_text())
    assert data["verdict"]["status"] == "qualified", data["verdict"]["line"]
    assert {r["host"] for r in data["write"]["ranks"]} == {"node0", "node1", "node2"}
    assert run_dirs(slurm) == []


def test_the_sbatch_script_refuses_missing_arguments(slurm: SlurmBed, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    job = slurm.sbatch(SBATCH_SCRIPT, nodes=1, output=tmp_path / "job.out", args=["tmpfs"])
    assert slurm.wait_job(job, timeout_s=60) == "FAILED"
    assert (
        "usage: sbatch [-N NODES] ckptgate.sbatch PROFILE TARGET"
        in (tmp_path / "job.out").read_text()
    )


def test_srun_with_two_tasks_per_node_is_refused_before_any_test(slurm: SlurmBed) -> None:
    """Six suite processes on three hosts were six nodes: a profile of six one-GPU nodes came
    out qualified at full scale."""
    one_gpu_nodes = [a.replace("gpus_per_node=2", "gpus_per_node=1") for a in QUALIFYING]
    argv = slurm.srun_command(
        [CKPTGATE, "run", "--profile=tmpfs", f"--target={slurm.target}", *one_gpu_nodes]
    )
    argv[argv.index("--ntasks-per-node=1")] = "--ntasks-per-node=2"
    result = subprocess.run(
        argv, env=slurm.env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "started 6 tasks on 3 nodes (SLURM_STEP_TASKS_PER_NODE=2(x3))" in result.stderr, (
        result.stdout[-2000:] + result.stderr[-2000:]
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert run_dirs(slurm) == []


def test_ckptgate_in_a_batch_script_without_srun_is_refused(
    slurm: SlurmBed, tmp_path: Path
) -> None:
    """sbatch -N 3 with ckptgate run in the script, no srun: it ran on node0 alone, exit 0
    with a partial verdict."""
    tmp_path.chmod(0o755)
    script = tmp_path / "alone.sbatch"
    script.write_text(
        f"#!/bin/sh\nexec {CKPTGATE} run --profile=tmpfs --target={slurm.target} "
        f"{shlex.join(QUALIFYING)}\n"
    )
    job = slurm.sbatch(script, nodes=3, output=tmp_path / "job.out", options=[f"--chdir={ROOT}"])
    assert slurm.wait_job(job, timeout_s=120) == "FAILED"
    output = (tmp_path / "job.out").read_text()
    assert f"batch script (or salloc shell) of Slurm job {job}" in output, output[-3000:]
    assert "the job has 3 nodes: no launcher started the others" in output
    assert run_dirs(slurm) == []


def _start_long_burst(slurm: SlurmBed) -> tuple[subprocess.Popen[str], str]:
    """srun the long write burst on every node; return it and its job id once the run
    directory holds the burst's second step (bounded)."""
    argv = [CKPTGATE, "run", "--profile=tmpfs", f"--target={slurm.target}", *LONG_BURST]
    job = slurm.hosts._spawn(
        slurm.srun_command(argv, nodes=3),
        env=slurm.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while not list(slurm.target_view.glob("ckptgate-*/write/step-2")):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            output = job.communicate(timeout=10)[0]
            pytest.fail(f"the burst never reached step 2:\n{output[-3000:]}")
        time.sleep(0.1)
    listed = slurm.run_in_head(["squeue", "-h", "-o", "%i"]).stdout.split()
    assert len(listed) == 1, listed
    return job, listed[0]


def _srun_ends(job: subprocess.Popen[str]) -> str:
    try:
        return job.communicate(timeout=ENDS_WITHIN_S)[0]
    except subprocess.TimeoutExpired:
        job.kill()
        output = job.communicate(timeout=10)[0]
        pytest.fail(f"srun did not end within {ENDS_WITHIN_S:.0f} s:\n{output[-3000:]}")


def _left_is_cleaned_or_named(slurm: SlurmBed) -> None:
    """The run directory is gone, or it holds its manifests and the next command on the
    target (``ckptgate clean`` on node 0's host) names it."""
    left = run_dirs(slurm)
    if not left:
        assert os.listdir(slurm.target_view) == []
        print("the run removed its directory")
        return
    (run_dir,) = left
    assert list(run_dir.glob(".ckptgate-manifest.node*.jsonl")), sorted(
        str(path.relative_to(run_dir)) for path in run_dir.rglob("*")
    )
    cleaned = slurm.hosts.run(
        "node0", [CKPTGATE, "clean", slurm.target], timeout_s=60, env=slurm.env, cwd=ROOT
    )
    assert run_dir.name in cleaned.stdout, cleaned.stdout + cleaned.stderr
    print(f"left {run_dir.name} with its manifests; ckptgate clean: {cleaned.stdout.strip()}")


def test_scancel_mid_burst_stops_every_rank(slurm: SlurmBed) -> None:
    job, job_id = _start_long_burst(slurm)
    slurm.scancel(job_id)
    cancelled = time.monotonic()
    output = _srun_ends(job)
    assert job.returncode != 0
    assert slurm.wait_job(job_id, timeout_s=60) == "CANCELLED", output[-3000:]
    wait_no_suite_processes(slurm.hosts, cancelled)
    print(output[-1500:])
    _left_is_cleaned_or_named(slurm)


def test_a_node_whose_slurmd_dies_ends_the_job_and_every_rank(tmp_path: Path) -> None:
    # A bed of its own: a node whose slurmd died stays DOWN.
    with host_bed(clients=3) as hosts, slurm_bed(hosts) as slurm:
        job, job_id = _start_long_burst(slurm)
        slurm.kill_slurmd("node1")
        killed = time.monotonic()
        output = _srun_ends(job)
        assert job.returncode != 0
        assert slurm.wait_job(job_id, timeout_s=60) == "NODE_FAIL", output[-3000:]
        assert "down" in slurm.node_state("node1")
        wait_no_suite_processes(hosts, killed)
        print(output[-1500:])
        _left_is_cleaned_or_named(slurm)
