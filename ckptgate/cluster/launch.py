"""How this process was launched, and so which nodes take part: ``detect_nodes`` returns a
``SingleNode``, or ``MpiNodes`` over MPI's world (with a heartbeat where MPI gives
``MPI_THREAD_MULTIPLE``), and refuses a launch that would make N separate one-node runs, each
green on its own (``NodesUnavailable``, with the fix).
"""

from __future__ import annotations

import os

from ckptgate.cluster.heartbeat import Heartbeat
from ckptgate.cluster.nodes import MpiNodes, Nodes, NodesUnavailable, SingleNode
from ckptgate.cluster.slurm import slurm_refusal

MPI_ENV_KEYS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
"""Variables that OpenMPI, MPICH/Hydra, PMIx (srun --mpi=pmix) and Intel MPI set."""


def launched_under_mpi(environ: dict[str, str] | None = None) -> bool:
    """Whether a launcher (mpirun, mpiexec, srun with PMI/PMIx) started this process."""
    env = os.environ if environ is None else environ
    return any(key in env for key in MPI_ENV_KEYS)


LAUNCHER_SIZE_KEYS = ("SLURM_NTASKS", "SLURM_NPROCS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
"""Variables in which a launcher states how many tasks it started (Slurm sets the first two
whether or not it gives the tasks PMI)."""


def launcher_tasks(environ: dict[str, str] | None = None) -> int:
    """How many tasks the launcher says it started (1 where none says)."""
    env = os.environ if environ is None else environ
    counts = [int(env[k]) for k in LAUNCHER_SIZE_KEYS if env.get(k, "").strip().isdigit()]
    return max(counts, default=1)


def _launch_mismatch(tasks: int, seen: int, mode: str) -> NodesUnavailable:
    how = "--nodes one makes each task" if mode == "none" else f"MPI sees {seen}, so each is"
    return NodesUnavailable(
        f"the launcher started {tasks} tasks, but {how} a separate one-node run: every node "
        "must take part in one run; with srun add --mpi=pmix (or --mpi=pmi2), with mpirun use "
        "the MPI library that mpi4py was built against, or start a single task"
    )


def detect_nodes(mode: str = "auto", environ: dict[str, str] | None = None) -> Nodes:
    """``SingleNode`` unless launched under MPI (auto) or asked for (mpi).

    Refuses (``NodesUnavailable``) a launch that would make N separate one-node runs, each
    green on its own: ``--nodes mpi`` outside an MPI launch, and a launcher that started N
    tasks where MPI (or ``--nodes one``) sees one; and a Slurm launch whose tasks are not one
    per node (``ckptgate.cluster.slurm``).
    """
    refusal = slurm_refusal(dict(os.environ) if environ is None else environ)
    if refusal is not None:
        raise NodesUnavailable(refusal)
    tasks = launcher_tasks(environ)
    under_mpi = launched_under_mpi(environ)
    if mode == "mpi" and not under_mpi:
        raise NodesUnavailable(
            "--nodes mpi, but no MPI launcher started this process (none of "
            f"{', '.join(MPI_ENV_KEYS)} is set); launch with srun --mpi=pmix or mpirun, "
            "or use --nodes auto"
        )
    if mode == "none" or (mode == "auto" and not under_mpi):
        if tasks > 1:
            raise _launch_mismatch(tasks, 1, mode)
        return SingleNode()
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise NodesUnavailable(
            "launched under MPI but mpi4py is not importable "
            f"({error}); install it with: pip install 'ckptgate[mpi]'"
        ) from None
    comm = MPI.COMM_WORLD
    if comm.Get_size() == 1:
        if tasks > 1:
            raise _launch_mismatch(tasks, 1, mode)
        return SingleNode()
    nodes = MpiNodes(comm, any_source=MPI.ANY_SOURCE, status=MPI.Status)
    level = MPI.Query_thread()
    if level >= MPI.THREAD_MULTIPLE:
        nodes.heartbeat = Heartbeat(comm, MPI.ANY_SOURCE)
        nodes.liveness = nodes.heartbeat.liveness
        nodes.heartbeat.start()
    else:
        names = {getattr(MPI, n, None): n for n in THREAD_LEVELS}
        nodes.thread_level_note = (
            f"MPI gives thread level {names.get(level, level)}, the heartbeat needs "
            "MPI_THREAD_MULTIPLE"
        )
    nodes.learn_hosts(120.0)
    return nodes


THREAD_LEVELS = ("THREAD_SINGLE", "THREAD_FUNNELED", "THREAD_SERIALIZED", "THREAD_MULTIPLE")
