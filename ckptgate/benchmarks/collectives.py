"""What the node layer's collectives cost against the node count: bytes and seconds per node.

    python -m ckptgate.benchmarks.collectives --nodes 16,32,64,128,256 [--json PATH]

For each N, ``mpirun -np N`` (oversubscribed, unpinned, on this machine) starts N workers of
this module; each builds the suite's ``MpiNodes`` on a communicator that counts the bytes of
every message it sends and receives, and runs, ``--repeats`` times each:

- start-up: what ``detect_nodes`` and ``start_session`` exchange before any test: the host
  names (``learn_hosts``), the settings' digest (``check_same_everywhere``, with a real
  profile's facts), the run id and the run directory (``bcast``);
- a gathered step: ``run_everywhere`` with one node's write-burst records (``--ranks`` ranks,
  each a ``RankRecord`` with the fields a burst carries) to node 0, a decision back.

Each worker reports its bytes and its median seconds per step; node 0 gathers them (outside
the measurement) and the driver prints one row per N: node 0's bytes and seconds, and the
largest of any other node's. Node 0's bytes grow with N (it receives every node's value) and
every other node's stay flat (one value sent, one decision received). Times are of N Python
processes sharing this machine's cores, so they show the growth, not a cluster's latency.
The heartbeat is off (no liveness thread): the figures are the collectives' own.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ckptgate.benchmarks.hpc import mpirun
from ckptgate.engine.records import BurstResult, RankRecord
from ckptgate.workloads.write_burst import FileWritten, WriteDetail

STEPS = ("start-up", "gathered step")
MODULE = "ckptgate.benchmarks.collectives"


class CountingComm:
    """An mpi4py communicator that counts the pickled bytes of what it sends and receives."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self.sent_bytes = 0
        self.received_bytes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)

    def isend(self, value: Any, dest: int, tag: int) -> Any:
        self.sent_bytes += len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        return self._comm.isend(value, dest=dest, tag=tag)

    def improbe(self, source: int, tag: int) -> Any:
        from mpi4py import MPI

        status = MPI.Status()
        message = self._comm.improbe(source=source, tag=tag, status=status)
        if message is not None:
            self.received_bytes += status.Get_count(MPI.BYTE)
        return message


def _write_detail(global_rank: int) -> WriteDetail:
    """A write rank's detail as a 405b burst on Lustre reports it (one file per rank)."""
    path = f"/lustre/ckpt/ckptgate-run/round-1/__{global_rank}_0.distcp"
    return WriteDetail(
        generate_s=0.8,
        fsynced=True,
        peak_rss_bytes=180_000_000,
        path=path,
        global_ranks=(global_rank,),
        files=(FileWritten(path, 3_430_000_000, 0, 41.2),),
    )


def burst_records(node: int, ranks: int) -> BurstResult:
    """One node's write-burst records, shaped as the write campaign gathers them."""
    records = tuple(
        RankRecord(
            rank=rank,
            global_rank=node * ranks + rank,
            host=f"node{node:05d}.cluster.example",
            bytes=3_430_000_000,
            start_s=0.0001 * rank,
            end_s=41.2 + 0.01 * rank,
            phases_s={"open": 0.002, "write": 38.9, "fsync": 2.2, "close": 0.001},
            detail=_write_detail(node * ranks + rank),
            node=node,
        )
        for rank in range(ranks)
    )
    return BurstResult("write", records)


def _facts() -> dict[str, Any]:
    """What the nodes compare at start-up, for the shipped 405b profile."""
    from ckptgate.fixtures.options import Options
    from ckptgate.fixtures.startup import run_facts
    from ckptgate.sizing import load_profile

    options = Options(profile="405b", profile_named=True, target="/lustre/ckpt")
    return run_facts(options, load_profile("405b"))


def _timed(comm: CountingComm, step: Callable[[], Any], repeats: int) -> dict[str, float]:
    seconds: list[float] = []
    sent, received = comm.sent_bytes, comm.received_bytes
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return {
        "seconds": statistics.median(seconds),
        "bytes": ((comm.sent_bytes - sent) + (comm.received_bytes - received)) / repeats,
    }


def worker(repeats: int, ranks: int) -> dict[str, Any] | None:
    """One MPI process's figures; node 0 returns every node's, the others None."""
    from mpi4py import MPI

    from ckptgate.cluster.nodes import MpiNodes, run_everywhere
    from ckptgate.fixtures.startup import check_same_everywhere

    counting = CountingComm(MPI.COMM_WORLD)
    nodes = MpiNodes(counting)
    facts = _facts()
    records = burst_records(nodes.index, ranks)

    def start_up() -> None:
        nodes.learn_hosts(600.0)
        check_same_everywhere(nodes, facts)
        nodes.bcast(12345678901234, 600.0, "the run id")
        nodes.bcast(("/lustre/ckpt/ckptgate-20261201T120000Z-node00000-abcdef", None), 600.0, "")

    def gathered() -> None:
        run_everywhere(nodes, 600.0, "the write burst", lambda: records)

    mine = {
        "start-up": _timed(counting, start_up, repeats),
        "gathered step": _timed(counting, gathered, repeats),
    }
    every = MPI.COMM_WORLD.gather(mine, root=0)
    if nodes.index != 0 or every is None:  # gather returns the list on the root alone
        return None
    return {
        "nodes": nodes.count,
        "ranks_per_node": ranks,
        "value_bytes": len(pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)),
        "steps": {
            step: {
                "node0_bytes": every[0][step]["bytes"],
                "node0_s": every[0][step]["seconds"],
                "others_max_bytes": max(f[step]["bytes"] for f in every[1:]),
                "others_max_s": max(f[step]["seconds"] for f in every[1:]),
            }
            for step in STEPS
        },
    }


def run_size(nodes: int, repeats: int, ranks: int, timeout_s: float) -> dict[str, Any]:
    """Start ``nodes`` workers under mpirun and return node 0's figures."""
    command = [*mpirun(nodes), "--mca", "btl", "self,vader", sys.executable, "-m", MODULE]
    command += ["--worker", "--repeats", str(repeats), "--ranks", str(ranks)]
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
            f"{'others max s':>12}"
        )
        for row in rows:
            figures = row["steps"][step]
            lines.append(
                f"{row['nodes']:>6}  {figures['node0_bytes']:>13,.0f}  "
                f"{figures['others_max_bytes']:>11,.0f}  {figures['node0_s']:>9.4f}  "
                f"{figures['others_max_s']:>12.4f}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckptgate.benchmarks.collectives")
    parser.add_argument("--nodes", default="16,32,64,128,256", help="node counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, metavar="K", help="default: 5")
    parser.add_argument("--ranks", type=int, default=8, help="ranks per node (default: 8)")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per node count")
    parser.add_argument("--json", default=None, metavar="PATH")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        figures = worker(args.repeats, args.ranks)
        if figures is not None:
            print(json.dumps(figures), flush=True)
        return 0
    try:
        counts = [int(n) for n in args.nodes.split(",")]
    except ValueError:
        parser.error(f"--nodes {args.nodes!r}: allowed: node counts >= 2, comma-separated")
    if any(n < 2 for n in counts) or args.repeats < 1:
        parser.error(f"--nodes {args.nodes!r}: allowed: node counts >= 2; --repeats >= 1")
    rows = [run_size(n, args.repeats, args.ranks, args.timeout_s) for n in counts]
    print(render(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
