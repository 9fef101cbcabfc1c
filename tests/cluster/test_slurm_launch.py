"""Slurm launches that would not be one run of one process per node are refused, named.

The environments are what Slurm 22.05 set on the Slurm bed (tests/beds/slurm.py) for a task
of ``srun -N 3 --ntasks-per-node=1 --mpi=pmix`` and for a batch script of ``sbatch -N 3``
(trimmed to the keys that matter).
"""

from __future__ import annotations

import pytest

from ckptgate.cluster.launch import detect_nodes
from ckptgate.cluster.nodes import NodesUnavailable
from ckptgate.cluster.slurm import slurm_refusal, tasks_per_node

STEP = {
    "SLURM_JOB_ID": "7",
    "SLURM_JOB_NUM_NODES": "3",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NUM_NODES": "3",
    "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
    "SLURM_NTASKS": "3",
    "SLURM_NPROCS": "3",
    "SLURM_MPI_TYPE": "pmix",
}
BATCH = {
    "SLURM_JOB_ID": "8",
    "SLURM_JOB_NUM_NODES": "3",
    "SLURM_NNODES": "3",
    "SLURM_NTASKS": "3",
    "SLURM_NPROCS": "3",
    "SLURM_TASKS_PER_NODE": "1(x3)",
}


@pytest.mark.parametrize(
    ("value", "expanded"),
    [("1(x3)", [1, 1, 1]), ("2(x3),1", [2, 2, 2, 1]), ("8", [8]), ("", []), ("2(x", [])],
    ids=["uniform", "mixed", "one-node", "absent", "malformed"],
)
def test_tasks_per_node_expands_slurms_compressed_counts(value: str, expanded: list[int]) -> None:
    assert tasks_per_node(value) == expanded


def test_one_task_per_node_is_accepted() -> None:
    assert slurm_refusal(STEP) is None
    assert slurm_refusal({}) is None  # not under Slurm
    one = {
        "SLURM_NTASKS": "1",
        "SLURM_NPROCS": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NNODES": "1",
    }
    assert slurm_refusal({**BATCH, **one}) is None  # sbatch -N 1 -n 1: ckptgate in the script


def test_several_tasks_per_node_are_refused_naming_the_layout() -> None:
    """srun -N 3 --ntasks-per-node=2 ran 6 suite processes on 3 hosts, each counted as a node:
    a profile of 6 nodes was reported qualified at full scale."""
    env = {
        **STEP,
        "SLURM_STEP_NUM_TASKS": "6",
        "SLURM_STEP_TASKS_PER_NODE": "2(x3)",
        "SLURM_NTASKS": "6",
    }
    refusal = slurm_refusal(env)
    assert refusal is not None
    assert "Slurm job 7 step 0 started 6 tasks on 3 nodes (SLURM_STEP_TASKS_PER_NODE=2(x3))" in (
        refusal
    )
    assert "launch with srun --ntasks-per-node=1" in refusal
    with pytest.raises(NodesUnavailable, match=r"6 tasks on 3 nodes"):
        detect_nodes("auto", environ={**env, "PMIX_RANK": "0"})


def test_the_counts_alone_refuse_where_the_layout_is_absent() -> None:
    env = {**STEP, "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "2"}
    del env["SLURM_STEP_TASKS_PER_NODE"]
    assert "started 4 tasks on 2 nodes, but" in (slurm_refusal(env) or "")


def test_a_batch_script_without_srun_is_refused_naming_the_job() -> None:
    """ckptgate run in an sbatch -N 3 script, without srun, was refused as if a launcher had
    started 3 tasks that MPI did not see; none had."""
    refusal = slurm_refusal(BATCH)
    assert refusal is not None
    assert "batch script (or salloc shell) of Slurm job 8" in refusal
    assert "one process on one node, but the job has 3 tasks and 3 nodes" in refusal
    assert "srun --ntasks-per-node=1 --mpi=pmix ckptgate run" in refusal
    with pytest.raises(NodesUnavailable, match=r"batch script"):
        detect_nodes("auto", environ=BATCH)
    with pytest.raises(NodesUnavailable, match=r"batch script"):
        detect_nodes("none", environ=BATCH)


def test_a_batch_script_of_several_nodes_without_a_task_count_is_refused() -> None:
    """sbatch -N 3 (no --ntasks) sets no SLURM_NTASKS: ckptgate in its script ran on the first
    node alone and came out partial at a third of the cluster."""
    env = {k: v for k, v in BATCH.items() if k not in ("SLURM_NTASKS", "SLURM_NPROCS")}
    assert "the job has 3 nodes: no launcher" in (slurm_refusal(env) or "")
    one_node = {**env, "SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "1"}
    assert slurm_refusal(one_node) is None
