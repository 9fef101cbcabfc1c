"""A run's coordination steps as node 0 and every other node take them, with what each sends.

One definition for the two benchmarks that measure them: the scale harness
(``benchmarks.scale``: node 0 of N simulated nodes in one process) and the MPI benchmark
(``benchmarks.collectives``: N real processes under ``mpirun``), so the harness's prediction
and the real run's figure are of the same code on the same values.

- ``start_up``: ``MpiNodes.learn_hosts``, ``check_same_everywhere`` on the shipped 405b
  profile's facts, and the run id's and run directory's broadcasts;
- ``common_start``: the rank pool's gate (``pool_gate``), once;
- ``records_gather``: one write burst's records from every node (``run_everywhere``, then
  ``merge_nodes`` and the burst's JSON), each rank's record with its transfer histogram.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ckptgate.cluster.nodes import MpiNodes, Nodes, pool_gate, run_everywhere
from ckptgate.engine.latency import LatencyHistogram
from ckptgate.engine.records import BurstResult, RankRecord, merge_nodes
from ckptgate.workloads.write_burst import FileWritten, WriteDetail

TIMEOUT_S = 600.0
"""Every step's deadline: far above any step's time, so only a hung node would reach it."""
RUN_ID = 12345678901234
RUN_DIR = "/lustre/ckpt/ckptgate-20261203T120000Z-node00000-abcdef"
"""The run directory node 0 broadcasts (a 405b run's, on Lustre)."""
FILE_BYTES = 3_430_000_000
"""One rank's file of a 405b checkpoint at 14 bytes a parameter on 16,384 ranks (rounded)."""


def host_name(node: int) -> str:
    """Node ``node``'s host name, as long as a cluster's fully qualified names are."""
    return f"node{node:05d}.cluster.example"


def named(nodes: MpiNodes) -> MpiNodes:
    """``nodes`` with its host name a cluster's (``host_name``), as every node sends it."""
    nodes.host = host_name(nodes.index)
    nodes.hosts = {nodes.index: nodes.host}
    return nodes


def facts_405b() -> dict[str, Any]:
    """What the nodes compare at start-up, for the shipped 405b profile."""
    from ckptgate.fixtures.run.options import Options
    from ckptgate.fixtures.run.startup import run_facts
    from ckptgate.sizing import load_profile

    options = Options(profile="405b", profile_named=True, target="/lustre/ckpt")
    return run_facts(options, load_profile("405b"))


def _write_detail(global_rank: int) -> WriteDetail:
    """A write rank's detail as a 405b burst on Lustre reports it (one file per rank)."""
    path = f"/lustre/ckpt/ckptgate-run/round-1/__{global_rank}_0.distcp"
    return WriteDetail(
        generate_s=0.8,
        fsynced=True,
        peak_rss_bytes=180_000_000,
        path=path,
        global_ranks=(global_rank,),
        files=(FileWritten(path, FILE_BYTES, 0, 41.2),),
    )


WRITE_TRANSFERS_NS = 2_000_000 + 37_000 * (np.arange(420, dtype=np.int64) % 97)
"""A rank's write-transfer latencies as a 405b burst times them (a few hundred transfers):
made once, since every simulated rank of every node fills its histogram from them."""


def write_histogram() -> LatencyHistogram:
    """A rank's write-transfer histogram as a 405b burst fills it (``WRITE_TRANSFERS_NS``)."""
    histogram = LatencyHistogram()
    histogram.add_ns(WRITE_TRANSFERS_NS)
    return histogram


def node_burst(node: int, ranks: int) -> BurstResult:
    """One node's write-burst records as the write campaign gathers them, each rank's with its
    transfer histogram."""
    records = tuple(
        RankRecord(
            rank=rank,
            global_rank=node * ranks + rank,
            host=host_name(node),
            bytes=FILE_BYTES,
            start_s=0.0001 * rank,
            end_s=41.2 + 0.01 * rank,
            phases_s={"open": 0.002, "write": 38.9, "fsync": 2.2, "close": 0.001},
            detail=_write_detail(node * ranks + rank),
            node=node,
            latency={"write": write_histogram()},
        )
        for rank in range(ranks)
    )
    return BurstResult("write", records)


def start_up(nodes: MpiNodes, facts: dict[str, Any]) -> object:
    """What every node does before any test: the host names, the settings' digest, the run id
    and the run directory."""
    from ckptgate.fixtures.run.startup import check_same_everywhere

    nodes.learn_hosts(TIMEOUT_S)
    check_same_everywhere(nodes, facts)
    nodes.bcast(RUN_ID, TIMEOUT_S, "the run id")
    return nodes.bcast((RUN_DIR, None), TIMEOUT_S, "the run directory")


def common_start(nodes: Nodes) -> object:
    """The rank pool's gate, as every node passes it before a burst."""
    gate = pool_gate(nodes)
    assert gate is not None, "the common start is a gate of two nodes or more"
    return gate(True, TIMEOUT_S)


def records_gather(nodes: Nodes, own: BurstResult) -> object:
    """The end of a write burst: every node's records to node 0, merged, written as JSON."""
    bursts = run_everywhere(nodes, TIMEOUT_S, "the end of the write burst", lambda: own)
    if nodes.index != 0:
        return bursts  # node 0 alone merges and writes the run's records
    merged = merge_nodes("write", bursts)
    return merged, merged.to_json()
