"""Many nodes on MPI: two MPI processes on this machine stand in for two nodes.

OpenMPI from Debian (``openmpi-bin``) with mpi4py; root needs ``--allow-run-as-root`` and two
processes on two cores need ``--oversubscribe``. Skips, saying why, where either is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "mpi_cases" / "verdicts_case.py"
TWO_NODES = ["--set", "cluster.gpus=8", "--set", "cluster.parallelism.dp=4"]

pytestmark = [
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun (openmpi-bin)"),
    pytest.mark.skipif(
        __import__("importlib").util.find_spec("mpi4py") is None,
        reason="needs mpi4py: pip install 'ckptgate[mpi]'",
    ),
]


def mpirun(*pytest_args: str, env: dict[str, str] | None = None, timeout_s: float = 300):
    """``mpirun -np 2 python -m pytest ...`` from the repository root."""
    command = ["mpirun", "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    command += [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--color=no",
        *pytest_args,
    ]
    # OpenMPI's shared-memory segments go in a private folder, not /dev/shm, so that an
    # aborted job (the hung-node test) leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="ckptgate-ompi-") as segments:
        return subprocess.run(
            command,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "OMPI_MCA_btl_vader_backing_directory": segments, **(env or {})},
        )


def test_two_nodes_report_every_rank_and_read_each_others_files(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    target = tmp_path / "target"
    target.mkdir()
    result = mpirun(
        "--profile=tmpfs",
        f"--target={target}",
        f"--report-json={report}",
        *TWO_NODES,
        "--set",
        "run.shard_bytes_cap=4 MB",
        "--set",
        "run.rounds=2",
        "--accept=trial",  # capped shards, and two items of the checklist
        # what the assertions read: the write and the restart read (the whole checklist on
        # many nodes is the bed tier's, over the host bed and Slurm)
        "ckptgate/acceptance",
        "-m",
        "write or restart",
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
    assert os.listdir(target) == []


def test_a_test_that_fails_on_one_node_fails_on_all_naming_it(tmp_path: Path) -> None:
    result = mpirun(str(CASES), "-rA", "--profile=tmpfs", f"--target={tmp_path}", *TWO_NODES)
    assert result.returncode != 0
    assert "failed on node 1: AssertionError: node 1 found its storage wanting" in (
        result.stdout
    ), result.stdout[-4000:]
    assert result.stdout.count("2 failed") == 0  # one failure per node, not two
    assert result.stdout.count("1 failed, 2 passed") == 2
    assert os.listdir(tmp_path) == []


def test_a_hung_node_turns_into_a_named_failure_within_bounded_time(tmp_path: Path) -> None:
    started = time.monotonic()
    result = mpirun(
        str(CASES),
        "--profile=tmpfs",
        f"--target={tmp_path}",
        *TWO_NODES,
        "--set",
        "run.timeout_floor_s=3",
        "--set",
        "checkpoint.interval_s=1",
        "--set",
        "restart.read_s=0.3",
        "-k",
        "hangs",
        env={"CKPTGATE_CASE_HANG": "1"},
        timeout_s=240,
    )
    elapsed_s = time.monotonic() - started
    assert result.returncode != 0
    assert "node 1 (" in result.stdout and "did not reach the end of test_hangs_on_node_one" in (
        result.stdout
    ), result.stdout[-4000:]
    assert elapsed_s < 120


def test_more_nodes_than_the_cluster_has_is_one_line_on_every_node(tmp_path: Path) -> None:
    result = mpirun("--profile=tmpfs", f"--target={tmp_path}", "ckptgate/acceptance")
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2 and all("node 1 would play no rank" in e for e in errors), (
        result.stderr[-3000:]
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert os.listdir(tmp_path) == []
