"""The nodes taking part: one node by default, many under MPI (mpi4py, srun or mpirun).

Under MPI each node's pytest process is one MPI process and keeps its own local rank
processes. Every collective here has a deadline: it is built from non-blocking MPI calls
polled against the clock, so a node that dies or hangs turns into a ``NodeTimeout`` naming it,
never a hung job. After a timeout the layer is broken: later collectives fail at once, and
the session ends with ``MPI_Abort`` so that the launcher reaps every process.

Node 0 makes the run directory and the run id and broadcasts them; it gathers every rank's
records and writes the report; pass and fail are exchanged after every test.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ckptgate.engine.pool import RankFailure, StartGate

T = TypeVar("T")

MPI_ENV_KEYS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
"""Variables that OpenMPI, MPICH/Hydra, PMIx (srun --mpi=pmix) and Intel MPI set."""

_POLL_S = 0.0002


class NodeTimeout(RuntimeError):
    """A node did not reach a collective in time."""


class NodesUnavailable(RuntimeError):
    """Launched under MPI but mpi4py cannot be used; the message says how to fix it."""


class Nodes(Protocol):
    """What the suite needs from the nodes: an index, a count, and bounded collectives."""

    index: int
    count: int
    host: str

    def barrier(self, timeout_s: float, what: str) -> None: ...

    def bcast(self, value: Any, timeout_s: float, what: str) -> Any: ...

    def allgather(self, value: Any, timeout_s: float, what: str) -> list[Any]: ...

    def abort(self, code: int) -> None: ...


class SingleNode:
    """The embedded default: this node is the whole run."""

    index = 0
    count = 1

    def __init__(self) -> None:
        self.host = socket.gethostname()

    def barrier(self, timeout_s: float, what: str) -> None:
        return None

    def bcast(self, value: Any, timeout_s: float, what: str) -> Any:
        return value

    def allgather(self, value: Any, timeout_s: float, what: str) -> list[Any]:
        return [value]

    def abort(self, code: int) -> None:
        return None


class MpiNodes:
    """Nodes on an MPI communicator, with deadlines on every collective."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.index = comm.Get_rank()
        self.count = comm.Get_size()
        self.host = socket.gethostname()
        self.hosts: list[str] = [self.host]
        self.broken: str | None = None
        self._sequence = 0

    def _tag(self) -> int:
        self._sequence += 1
        return 100 + self._sequence % 30000

    def _check(self) -> None:
        if self.broken:
            raise NodeTimeout(f"the nodes fell out of step earlier: {self.broken}")

    def _wait(
        self, sends: dict[int, Any], receives: list[int], tag: int, timeout_s: float, what: str
    ) -> dict[int, Any]:
        """Poll sends (by peer) and receives from peers until all complete or time runs out.

        Receives use matched probes, so a value of any size arrives whole.
        """
        deadline = time.monotonic() + timeout_s
        pending_sends = dict(sends)
        pending = list(receives)
        values: dict[int, Any] = {}
        while pending_sends or pending:
            for peer, request in list(pending_sends.items()):
                if request.test()[0]:
                    del pending_sends[peer]
            for peer in list(pending):
                message = self.comm.improbe(source=peer, tag=tag)
                if message is not None:
                    values[peer] = message.recv()
                    pending.remove(peer)
            if not (pending_sends or pending):
                break
            if time.monotonic() > deadline:
                missing = sorted(set(pending_sends) | set(pending))
                names = ", ".join(self._name(p) for p in missing)
                self.broken = f"{names} did not reach {what} within {timeout_s:.0f} s"
                raise NodeTimeout(self.broken)
            time.sleep(_POLL_S)
        return values

    def _name(self, node: int) -> str:
        host = self.hosts[node] if node < len(self.hosts) else "?"
        return f"node {node} ({host})"

    def barrier(self, timeout_s: float, what: str) -> None:
        self._check()
        request = self.comm.Ibarrier()
        deadline = time.monotonic() + timeout_s
        while not request.Test():
            if time.monotonic() > deadline:
                self.broken = f"not every node reached {what} within {timeout_s:.0f} s"
                raise NodeTimeout(self.broken)
            time.sleep(_POLL_S)

    def bcast(self, value: Any, timeout_s: float, what: str) -> Any:
        self._check()
        tag = self._tag()
        if self.index == 0:
            sends = {p: self.comm.isend(value, dest=p, tag=tag) for p in range(1, self.count)}
            self._wait(sends, [], tag, timeout_s, what)
            return value
        return self._wait({}, [0], tag, timeout_s, what)[0]

    def allgather(self, value: Any, timeout_s: float, what: str) -> list[Any]:
        """Every node's ``value``, in node order, on every node (gathered through node 0)."""
        self._check()
        tag = self._tag()
        if self.index == 0:
            values = self._wait({}, list(range(1, self.count)), tag, timeout_s, what)
            gathered = [value] + [values[p] for p in range(1, self.count)]
        else:
            self._wait({0: self.comm.isend(value, dest=0, tag=tag)}, [], tag, timeout_s, what)
            gathered = None
        return self.bcast(gathered, timeout_s, what)

    def abort(self, code: int) -> None:
        self.comm.Abort(code)


def pool_gate(nodes: Nodes) -> StartGate | None:
    """The rank pool's gate: every node's ranks start together, or none do (None: one node)."""
    if nodes.count == 1:
        return None
    return lambda ready, timeout_s: all(nodes.allgather(ready, timeout_s, "the common start"))


def run_everywhere(nodes: Nodes, timeout_s: float, what: str, step: Callable[[], T]) -> list[T]:
    """Run ``step`` on this node and gather every node's result, in node order.

    A ``RankFailure`` on any node fails the step on every node, naming the nodes that failed;
    ``timeout_s`` is the step's own deadline, so a node waits that long for the slowest.
    """
    result, error = None, None
    try:
        result = step()
    except RankFailure as failure:
        error = str(failure)
    except Exception as failure:  # exchanged too: a node that skips the gather hangs the rest
        if nodes.count == 1:
            raise
        error = f"{type(failure).__name__}: {failure}"
    outcomes = nodes.allgather((nodes.host, result, error), timeout_s, what)
    failures = [f"node {i} ({host}): {why}" for i, (host, _, why) in enumerate(outcomes) if why]
    if failures:
        raise RankFailure("; ".join(failures), [])
    return [r for _, r, _ in outcomes]


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
    tasks where MPI (or ``--nodes one``) sees one.
    """
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
    nodes = MpiNodes(comm)
    nodes.hosts = nodes.allgather(nodes.host, 120.0, "start-up")
    return nodes
