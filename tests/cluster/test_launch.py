"""Launch mistakes are refused: N tasks that would each run alone, or MPI asked for and absent."""

from __future__ import annotations

import pytest

from ckptgate.cluster.launch import detect_nodes, launcher_tasks
from ckptgate.cluster.nodes import NodesUnavailable, SingleNode


def test_no_launcher_is_one_node() -> None:
    assert isinstance(detect_nodes("auto", environ={}), SingleNode)


def test_srun_without_pmi_is_refused_naming_the_fix() -> None:
    """srun -n 4 without --mpi=pmix gave 4 separate one-node runs, all green."""
    with pytest.raises(NodesUnavailable, match=r"started 4 tasks.*--mpi=pmix"):
        detect_nodes("auto", environ={"SLURM_NTASKS": "4", "SLURM_PROCID": "2"})


def test_nodes_one_under_a_launcher_of_several_tasks_is_refused() -> None:
    with pytest.raises(NodesUnavailable, match=r"--nodes one makes each task"):
        detect_nodes("none", environ={"SLURM_NTASKS": "8"})


def test_nodes_mpi_outside_an_mpi_launch_is_refused() -> None:
    """--nodes mpi outside MPI ran as one node, exit 0."""
    with pytest.raises(NodesUnavailable, match=r"--nodes mpi, but no MPI launcher"):
        detect_nodes("mpi", environ={})


def test_a_single_task_launch_is_one_node() -> None:
    assert launcher_tasks({"SLURM_NTASKS": "1"}) == 1
    assert isinstance(detect_nodes("auto", environ={"SLURM_NTASKS": "1"}), SingleNode)
