"""What the node layer's collectives cost against the node count, on N real MPI processes.

    python -m ckptgate.benchmarks.collectives --nodes 16,32,64,128 [--repeats K] [--json PATH]

For each N, ``mpirun -np N`` (oversubscribed, unpinned, on this machine) starts N workers of
this module; each builds the suite's ``MpiNodes`` as ``detect_nodes`` does (wildcard probes),
with its host name set to a cluster's (``coordination.host_name``), on a communicator that
counts the messages, the pickled bytes and the probes of every call, and runs each of
``coordination``'s steps ``--repeats`` times: the start-up, the common start and a write
burst's records gather, with the same values the scale harness's simulated nodes send.

Before each repeat the nodes meet at a barrier; the other nodes then take the step at once and
node 0 only after ``--settle-s`` (0.01 s a node by default), so that what node 0's clock sees
is its own work on values that are there, as in the harness (its probes say how many polls
found nothing). Node 0 reports its wall seconds and its main thread's CPU seconds
(``time.thread_time``) per repeat, and every node its counts; the driver prints one row per N:
node 0's bytes and seconds, and the largest of any other node's. Times are of N Python
processes sharing this machine's cores: node 0's CPU seconds are its work, its wall seconds
include the waits for N processes that share two cores. The heartbeat is off (no liveness
thread): the figures are the collectives' own. ``ckptgate bench scale --mpi N,N`` sets these
figures beside the harness's for the same N.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptgate.benchmarks import coordination
from ckptgate.benchmarks.command import node_counts
from ckptgate.benchmarks.coordination import facts_405b, named, node_burst
from ckptgate.benchmarks.hpc import mpirun
from ckptgate.benchmarks.simnodes import Counts
from ckptgate.cluster.nodes import MpiNodes

STEPS = ("start-up", "common start", "records gather")
MODULE = "ckptgate.benchmarks.collectives"
SETTLE_S_PER_NODE = 0.01
"""Node 0's default wait before it takes a step, per node: the others' values are there."""


@dataclass
class CountingComm:
    """An mpi4py communicator that counts what goes through it: messages and pickled bytes each
    way, and probes (as ``simnodes.Counts`` for the harness's communicator)."""

    comm: Any
    counts: Counts = field(default_factory=Counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.comm, name)

    def isend(self, value: Any, dest: int, tag: int) -> Any:
        self.counts.sent_messages += 1
        self.counts.sent_bytes += len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        return self.comm.isend(value, dest=dest, tag=tag)

    def improbe(self, source: int, tag: int, status: Any = None) -> Any:
        from mpi4py import MPI

        self.counts.probes += 1
        status = MPI.Status() if status is None else status
        message = self.comm.improbe(source=source, tag=tag, status=status)
        if message is not None:
            self.counts.received_messages += 1
            self.counts.received_bytes += status.Get_count(MPI.BYTE)
        return message


def _steps(nodes: MpiNodes, ranks: int) -> dict[str, Callable[[], object]]:
    facts = facts_405b()
    own = node_burst(nodes.index, ranks)
    return {
        "start-up": lambda: coordination.start_up(nodes, facts),
        "common start": lambda: coordination.common_start(nodes),
        "records gather": lambda: coordination.records_gather(nodes, own),
    }


def _timed(
    comm: CountingComm, step: Callable[[], object], repeats: int, settle_s: float
) -> dict[str, Any]:
    """``step`` ``repeats`` times, each after a barrier (node 0 after ``settle_s`` more)."""
    wall_s: list[float] = []
    cpu_s: list[float] = []
    before = dataclasses.replace(comm.counts)
    for _ in range(repeats):
        comm.Barrier()
        if comm.Get_rank() == 0:
            time.sleep(settle_s)
        started, started_cpu = time.perf_counter(), time.thread_time()
        kept = step()
        cpu_s.append(time.thread_time() - started_cpu)
        wall_s.append(time.perf_counter() - started)
        del kept
    moved = comm.counts.since(before)
    return {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "counts": {k: v / repeats for k, v in dataclasses.asdict(moved).items()},
    }


def _bytes(figures: dict[str, Any]) -> float:
    counts = figures["counts"]
    return float(counts["sent_bytes"] + counts["received_bytes"])


def worker(repeats: int, ranks: int, settle_s: float) -> dict[str, Any] | None:
    """One MPI process's figures; node 0 returns every node's, the others None."""
    from mpi4py import MPI

    counting = CountingComm(MPI.COMM_WORLD)
    nodes = named(MpiNodes(counting, any_source=MPI.ANY_SOURCE, status=MPI.Status))
    mine = {
        name: _timed(counting, step, repeats, settle_s)
        for name, step in _steps(nodes, ranks).items()
    }
    every = MPI.COMM_WORLD.gather(mine, root=0)
    if nodes.index != 0 or every is None:  # gather returns the list on the root alone
        return None
    return {
        "nodes": nodes.count,
        "ranks_per_node": ranks,
        "settle_s": settle_s,
        "value_bytes": len(pickle.dumps(node_burst(1, ranks), protocol=pickle.HIGHEST_PROTOCOL)),
        "steps": {
            step: {
                "node0_bytes": _bytes(every[0][step]),
                "node0_s": statistics.median(every[0][step]["wall_s"]),
                "node0_cpu_s": every[0][step]["cpu_s"],
                "node0_wall_s": every[0][step]["wall_s"],
                "node0_counts": every[0][step]["counts"],
                "others_max_bytes": max(_bytes(f[step]) for f in every[1:]),
                "others_max_s": max(statistics.median(f[step]["wall_s"]) for f in every[1:]),
            }
            for step in STEPS
        },
    }


def run_size(
    nodes: int, repeats: int, ranks: int, timeout_s: float, settle_s: float | None = None
) -> dict[str, Any]:
    """Start ``nodes`` workers under mpirun and return node 0's figures (``settle_s``: node
    0's wait before each step; default ``SETTLE_S_PER_NODE`` a node)."""
    settle_s = SETTLE_S_PER_NODE * nodes if settle_s is None else settle_s
    command = [*mpirun(nodes), "--mca", "btl", "self,vader", sys.executable, "-m", MODULE]
    command += ["--worker", "--repeats", str(repeats), "--ranks", str(ranks)]
    command += ["--settle-s", str(settle_s)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"mpirun -np {nodes} exited {done.returncode}: {' / '.join(tail)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def render(rows: Sequence[dict[str, Any]]) -> str:
    lines = []
    for step in STEPS:
        lines.append(f"{step}: bytes sent + received per node, median seconds")
        lines.append(
            f"{'nodes':>6}  {'node 0 bytes':>13}  {'others max':>11}  {'node 0 s':>9}  "
            f"{'node 0 CPU s':>12}  {'others max s':>12}"
        )
        for row in rows:
            figures = row["steps"][step]
            lines.append(
                f"{row['nodes']:>6}  {figures['node0_bytes']:>13,.0f}  "
                f"{figures['others_max_bytes']:>11,.0f}  {figures['node0_s']:>9.4f}  "
                f"{statistics.median(figures['node0_cpu_s']):>12.4f}  "
                f"{figures['others_max_s']:>12.4f}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckptgate.benchmarks.collectives")
    parser.add_argument("--nodes", default="16,32,64,128", help="node counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, metavar="K", help="default: 5")
    parser.add_argument("--ranks", type=int, default=8, help="ranks per node (default: 8)")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per node count")
    parser.add_argument(
        "--settle-s", type=float, default=None, metavar="S",
        help=f"node 0's wait before each step (default: {SETTLE_S_PER_NODE} s a node)",
    )  # fmt: skip
    parser.add_argument("--json", default=None, metavar="PATH")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        figures = worker(args.repeats, args.ranks, args.settle_s or 0.0)
        if figures is not None:
            print(json.dumps(figures), flush=True)
        return 0
    counts = node_counts(parser, args.nodes)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: allowed: 1 or more")
    if args.settle_s is not None and args.settle_s < 0:
        parser.error(f"--settle-s {args.settle_s}: allowed: 0 or more seconds")
    rows = [run_size(n, args.repeats, args.ranks, args.timeout_s, args.settle_s) for n in counts]
    print(render(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
