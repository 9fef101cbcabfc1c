"""What Slurm's environment says about a launch, read before MPI starts.

The suite runs one process per node, each with the node's rank processes under it; the
verdict counts those processes as nodes. Slurm states in its task environment (``srun(1)``,
``sbatch(1)`` "OUTPUT ENVIRONMENT VARIABLES") how many tasks it started on how many nodes, and
whether this process is a job step's task (``SLURM_STEP_ID``) or the job's batch script or
``salloc`` shell (``SLURM_JOB_ID`` without ``SLURM_STEP_ID``). Two launches would mislead:

- several tasks per node (``srun --ntasks-per-node=8``, as for a training job): every task is
  counted as a node, so 3 hosts could be reported as 24 nodes and a profile of 24 nodes as
  qualified at full scale, with each host running 8 times its rank processes and reading back
  files its own page cache holds;
- ``ckptgate run`` in a batch script without srun: one process on the first node of a job
  that asked for more nodes or tasks; nothing started the others, and the run came out
  ``partial`` at one node's share.

:func:`slurm_refusal` names either, with the fix, so that ``detect_nodes`` refuses the run.
"""

from __future__ import annotations

import re

_COUNT = re.compile(r"(\d+)(?:\(x(\d+)\))?$")


def tasks_per_node(value: str) -> list[int]:
    """Slurm's compressed per-node task counts (``SLURM_STEP_TASKS_PER_NODE``, ``2(x3),1``)
    expanded: ``[2, 2, 2, 1]``; ``[]`` where the value is not in that form."""
    counts: list[int] = []
    for part in value.split(","):
        match = _COUNT.match(part.strip())
        if match is None:
            return []
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def _number(env: dict[str, str], key: str) -> int | None:
    value = env.get(key, "").strip()
    return int(value) if value.isdigit() else None


def slurm_refusal(env: dict[str, str]) -> str | None:
    """Why this Slurm launch cannot make one run of one process per node, or None (also
    where Slurm did not start this process)."""
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job:
        return None
    if "SLURM_STEP_ID" not in env and "SLURM_STEPID" not in env:
        tasks = _number(env, "SLURM_NTASKS") or _number(env, "SLURM_NPROCS")
        nodes = _number(env, "SLURM_JOB_NUM_NODES") or _number(env, "SLURM_NNODES")
        if max(tasks or 1, nodes or 1) <= 1:
            return None
        has = " and ".join(
            f"{count} {word}" for count, word in ((tasks, "tasks"), (nodes, "nodes")) if count
        )
        return (
            f"ckptgate runs as the batch script (or salloc shell) of Slurm job {job}, one "
            f"process on one node, but the job has {has}: no launcher started the others; "
            "launch it with: srun --ntasks-per-node=1 --mpi=pmix ckptgate run ..."
        )
    per_node = tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE", ""))
    tasks = sum(per_node) or _number(env, "SLURM_STEP_NUM_TASKS")
    nodes = len(per_node) or _number(env, "SLURM_STEP_NUM_NODES")
    if tasks is not None and nodes is not None and tasks > nodes:
        step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "?"))
        layout = env.get("SLURM_STEP_TASKS_PER_NODE", "")
        return (
            f"Slurm job {job} step {step} started {tasks} tasks on {nodes} nodes"
            + (f" (SLURM_STEP_TASKS_PER_NODE={layout})" if layout else "")
            + ", but "
            "ckptgate runs one task per node and starts that node's rank processes itself "
            "(--ranks, default cluster.gpus_per_node): each extra task would count as a node; "
            "launch with srun --ntasks-per-node=1"
        )
    return None
