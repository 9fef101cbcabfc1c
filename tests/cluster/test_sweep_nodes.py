"""A node sweep on MPI: two MPI processes on this machine stand in for two nodes of a four-node
cluster; the point at one node runs on node 0 alone while node 1 waits at the barrier."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cluster.test_many_nodes import mpirun, pytestmark  # noqa: F401  (skips without MPI)

FOUR_NODE_CLUSTER = ["--set", "cluster.gpus=16", "--set", "cluster.parallelism.dp=8"]


def test_a_node_sweep_runs_each_count_on_the_first_nodes(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    target = tmp_path / "target"
    target.mkdir()
    result = mpirun(
        "--profile=tmpfs", f"--target={target}", f"--report-json={report}",
        *FOUR_NODE_CLUSTER, "--ranks=2",
        "--set", "run.shard_bytes_cap=2 MB", "--set", "run.rounds=1",
        "--sweep=nodes", "--sweep-repeats=1",  # the points' order and bytes need no repeat
        "ckptgate/acceptance", "-m", "write or sweep",
    )  # fmt: skip
    assert report.is_file(), result.stdout[-4000:] + result.stderr[-2000:]
    data = json.loads(report.read_text())
    points = data["scaling"]["points"]
    assert [(p["nodes"], p["ranks_per_node"]) for p in points] == [(1, 2), (2, 2)]
    one, two = points
    assert two["write_bytes"] == 2 * one["write_bytes"] > 0  # both nodes' ranks wrote
    assert all(p["read_bytes"] == p["write_bytes"] for p in points)  # and read it all back
    assert two["created_files"] == 2 * one["created_files"]
    write = next(i for i in data["scaling"]["projection"]["items"] if i["metric"] == "write")
    assert write["measured_nodes"] == 2 and write["cluster_nodes"] == 4
    assert data["verdict"]["status"] in ("trial", "partial")
    assert not list(target.iterdir()), "the sweep left files behind"
