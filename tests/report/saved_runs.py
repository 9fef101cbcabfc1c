"""Hand-made saved JSON reports for the report tests: small, with every section the outputs
read (items, a write and a read burst on two nodes, metadata, contention, sweep)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from ckptgate.checks.table import checklist
from ckptgate.report.gate import GateReport
from ckptgate.report.items import Item, judge
from ckptgate.report.saved import sweep_section
from ckptgate.report.schema import SavedReport, load_saved
from ckptgate.report.verdict import RunScale
from ckptgate.sizing import derive, load_profile


def _rank(rank: int, node: int, start_s: float, write_s: float) -> dict[str, Any]:
    return {"rank": rank, "global_rank": node * 2 + rank, "node": node, "host": f"h{node}",
            "bytes": 1_000_000, "start_s": start_s, "open_s": 0.001, "write_s": write_s,
            "fsync_s": 0.002, "close_s": 0.0005, "total_s": 0.0035 + write_s,
            "end_s": start_s + 0.0035 + write_s}  # fmt: skip


def _burst(write_s: float) -> dict[str, Any]:
    ranks = [_rank(r, n, 0.001 * r, write_s * (1 + r + n)) for n in (0, 1) for r in (0, 1)]
    slowest = max(ranks, key=lambda r: r["end_s"])
    return {
        "total_bytes": 4_000_000,
        "span_s": slowest["end_s"],
        "aggregate_bytes_per_s": 4_000_000 / slowest["end_s"],
        "slowest_rank": {k: slowest[k] for k in ("rank", "global_rank", "node", "host", "total_s")},
        "node_bytes_per_s": {"0": 2.0e8, "1": 1.5e8},
        "ranks": ranks,
        "capped": False,
    }


def saved_run(*, write_s: float = 0.01, profile_overrides: tuple[str, ...] = (),
              memory_backed: bool = True, version: str = "0.1.0") -> dict[str, Any]:  # fmt: skip
    """A saved report as ``GateReport.json_data()`` gives it, for the tmpfs profile."""
    profile = load_profile("tmpfs", profile_overrides)
    sizing = derive(profile)
    report = GateReport(
        checklist=checklist(),
        meta={
            "ckptgate_version": version,
            "profile": profile.name,
            "target": "/dev/shm",
            "fs_type": "tmpfs" if memory_backed else "xfs",
            "memory_backed": memory_backed,
            "nodes": 2,
            "ranks": 4,
            "sizing": sizing.to_json(),
        },
        scale=RunScale(2, 2, 4, 4, True, memory_backed=memory_backed),
    )
    report.record(judge(id="async-persist", measured=4e6 / (write_s * 6), required=9.33e6,
                        unit="B/s", detail="224 MB / 60 s x 2.5 headroom",
                        cluster_required=9.33e6, scope="full cluster"))  # fmt: skip
    report.record(judge(id="sync-stall", measured=write_s * 6, required=3.0, unit="s",
                        detail="5 % x 60 s", better="lower"))  # fmt: skip
    report.record(Item(id="reader-slowdown", required=None, measured=0.4, unit="fraction",
                       passed=None, detail="not gated"))  # fmt: skip
    write = _burst(write_s)
    write["transfer_latency_s"] = {
        "write": {"count": 40, "p50_s": 0.012, "p99_s": 0.0301, "max_s": 0.041, "mean_s": 0.013}
    }
    read = copy.deepcopy(_burst(write_s / 2))
    for record in read["ranks"]:
        record["read_s"] = record.pop("write_s")
        del record["fsync_s"]
    report.section("write", write)
    report.section("read", read)
    latency = {"count": 10, "p50_s": 1e-5, "p99_s": 1e-4, "max_s": 1e-3, "mean_s": 2e-5}
    report.section("metadata", {"files": 10, "create_rate_per_s": 1e5,
                                "latency_s": {"create": latency, "unlink": latency}})  # fmt: skip
    report.section("contention", {"readers": 2, "writers_alone_bytes_per_s": 4e9,
                                  "writers_contended_bytes_per_s": 3e9, "writer_slowdown": 0.25,
                                  "readers_alone_bytes_per_s": 8e9,
                                  "readers_contended_bytes_per_s": 2e9, "reader_slowdown": 0.75,
                                  "writers": _burst(write_s * 1.5)})  # fmt: skip
    report.section("sweep", sweep_section(profile))
    report.section("bandwidth_series", {"runs": [
        {"phase": "write burst", "nth": 1, "node": 0, "interval_s": 0.5,
         "t_s": [0.0, 0.5, 1.0, 1.4], "done_bytes": [0, 2e9, 4e9, 5e9],
         "done_files": [0, 0, 0, 4], "bytes_per_s": [4e9, 4e9, 2.5e9]},
        {"phase": "readback", "nth": 1, "node": 0, "interval_s": 0.5,
         "t_s": [0.0, 0.5, 0.9], "done_bytes": [0, 3e9, 5e9], "done_files": [0, 1, 4],
         "bytes_per_s": [6e9, 5e9]},
    ]})  # fmt: skip
    return report.json_data()


def saved_report(**options: Any) -> SavedReport:
    """``saved_run(**options)`` read back through the schema, as ``ckptgate report`` reads it."""
    return load_saved(saved_run(**options), "run.json")


RANKS_PER_NODE = 8
"""Ranks per node in ``saved_run_at`` (one node below it)."""


def _scaled_burst(ranks: int, write_s: float, *, read: bool = False) -> dict[str, Any]:
    """A burst over ``ranks`` ranks, ``RANKS_PER_NODE`` a node, each rank a little slower than
    the one before (the slowest last), with each node's bandwidth."""
    per_node = min(ranks, RANKS_PER_NODE)
    records = []
    for index in range(ranks):
        node, rank = divmod(index, per_node)
        record = _rank(rank, node, 0.0001 * rank, write_s * (1 + index / ranks))
        record["global_rank"] = index
        if read:
            record["read_s"] = record.pop("write_s")
            del record["fsync_s"]
        records.append(record)
    slowest = max(records, key=lambda r: r["end_s"])
    nodes = ranks // per_node
    return {
        "total_bytes": 1_000_000 * ranks,
        "span_s": slowest["end_s"],
        "aggregate_bytes_per_s": 1_000_000 * ranks / slowest["end_s"],
        "slowest_rank": {k: slowest[k] for k in ("rank", "global_rank", "node", "host", "total_s")},
        "node_bytes_per_s": {str(n): 1.0e8 * (1 + n / nodes) for n in range(nodes)},
        "ranks": records,
        "capped": False,
    }


def _scaled_series(phase: str, nodes: int, samples: int, peak_bytes_per_s: float) -> list[Any]:
    """Each node's sampled progress in one run: a ramp up and a tail, node n a little slower."""
    runs = []
    for node in range(nodes):
        rate = peak_bytes_per_s * (1 - 0.3 * node / max(nodes, 1))
        t_s = [0.5 * i for i in range(samples)]
        done = [0]
        for i in range(1, samples):
            shape = min(1.0, i / 3, (samples - i) / 3)
            done.append(done[-1] + int(rate * 0.5 * shape))
        rates = [(b1 - b0) / 0.5 for b0, b1 in itertools.pairwise(done)]
        runs.append({"phase": phase, "nth": 0, "node": node, "interval_s": 0.5, "t_s": t_s,
                     "done_bytes": done, "done_files": [0] * (samples - 1) + [RANKS_PER_NODE],
                     "bytes_per_s": rates})  # fmt: skip
    return runs


def saved_run_at(ranks: int) -> dict[str, Any]:
    """``saved_run()`` at ``ranks`` ranks (``RANKS_PER_NODE`` a node): every burst, the node
    bandwidths and the bandwidth series (three write rounds and a readback per node) scaled up,
    so that each figure can be drawn at the rank counts a real cluster has."""
    data = saved_run()
    nodes = max(1, ranks // RANKS_PER_NODE)
    data["nodes"], data["ranks"] = nodes, ranks
    data["write"] = _scaled_burst(ranks, 0.01)
    data["read"] = _scaled_burst(ranks, 0.005, read=True)
    data["contention"]["writers"] = _scaled_burst(ranks, 0.015)
    runs = []
    for nth in range(3):  # the write rounds: each a little slower than the one before
        for run in _scaled_series("write burst", nodes, 30 + 2 * nth, 2e9 * (1 - 0.1 * nth)):
            runs.append({**run, "nth": nth})
    runs += _scaled_series("readback", nodes, 20, 4e9)
    data["bandwidth_series"]["runs"] = runs
    return data
