"""Checklist item 1 with the real framework, plus async save and item 7's resharded restore.

A real PyTorch Distributed Checkpoint (DCP) save of the cluster profile's small model (its
``dcp`` section) on the target: bytes on disk (``du``) against 12/14/16 Ψ, async save's
blocking part against the stall budget and its completion against interval / headroom, and a
load onto fewer ranks with another sharding, every tensor verified (DCP keeps no checksums).
All at this model's scale, on this node: the numbers show the framework on this storage, not
the full cluster's requirement.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

from ckptgate.dcp.driver import DcpConfig, DcpResult, run_dcp
from ckptgate.engine.records import BurstResult
from ckptgate.fixtures.plugin import RunState
from ckptgate.report.gate import GateReport, Item, judge
from ckptgate.sizing import Profile, Sizing, format_bytes, format_seconds
from ckptgate.storage.target import Target
from ckptgate.workloads.write_burst import ShardFile, run_write_burst, shard_file_name

pytestmark = pytest.mark.dcp

K_TOLERANCE = 0.1
"""Measured bytes per parameter must be within this of the profile's K (the Ks are 2 apart;
DCP's .metadata and per-tensor framing add a few hundredths at tens of millions of Ψ)."""

SCOPE = "DCP on this node at the dcp section's model size: the framework on this storage"


@dataclass(frozen=True)
class DcpRun:
    """DCP's measurements, and the same bytes per rank through the suite's own write burst."""

    result: DcpResult
    suite_write: BurstResult | None


@pytest.fixture(scope="module")
def dcp_run(
    cluster_profile: Profile, target: Target, run_state: RunState, gate: GateReport
) -> Iterator[DcpRun]:
    """One DCP run for the module in a new directory of the run directory; the files DCP
    names itself are claimed for the run's cleanup once written. Then the suite's write burst
    writes DCP's bytes per rank (one file per rank) on the same target, for comparison."""
    if not target.is_local:
        pytest.skip("DCP's FileSystemWriter needs a local (POSIX) target; this target is not")
    # One DCP job per node, each in its own directory (under MPI every node runs this module).
    node = run_state.cluster.index
    directory = target.new_local_dir(f"dcp-{node}")
    config = DcpConfig.from_spec(
        cluster_profile.dcp, cluster_profile.model.bytes_per_parameter, directory
    )
    try:
        result = run_dcp(config)
    finally:
        target.claim_tree(directory)
    suite_write = None
    if result.world_size <= run_state.ranks:
        suite_dir = target.new_dir(f"dcp-suite-write-{node}")
        shards = [
            ShardFile(
                rank,
                f"{suite_dir}/{shard_file_name(rank)}",
                size,
                run_state.run_id,
                cluster_profile.run.transfer_bytes,
            )
            for rank, size in enumerate(result.per_rank_bytes)
        ]
        target.register([s.path for s in shards])
        suite_write = run_write_burst(
            run_state.rank_pool(), target.fs_spec, shards, cluster_profile.run.timeout_floor_s
        )
    gate.section(
        "dcp",
        {
            **result.to_json(),
            "suite_write_s": suite_write.span_s if suite_write else None,
            "framework_overhead_s": result.save_s - suite_write.span_s if suite_write else None,
        },
    )
    yield DcpRun(result, suite_write)


@pytest.fixture(scope="module")
def dcp_result(dcp_run: DcpRun) -> DcpResult:
    return dcp_run.result


def test_dcp_bytes_on_disk_match_k(
    dcp_result: DcpResult, cluster_profile: Profile, gate: GateReport
) -> None:
    """Checklist 1: what DCP puts on disk per parameter is the profile's K."""
    result = dcp_result
    k = cluster_profile.model.bytes_per_parameter
    item = gate.record(
        Item(
            id="dcp-bytes",
            title="DCP bytes per parameter (du)",
            required=k,
            measured=result.bytes_per_parameter,
            unit="B/param",
            passed=result.matched_k == k and abs(result.bytes_per_parameter - k) <= K_TOLERANCE,
            detail=f"{format_bytes(result.bytes_on_disk)} on disk in {result.files} files for "
            f"Ψ = {result.parameters:,}: nearest K = {result.matched_k}, "
            f"{format_bytes(result.overhead_bytes)} beyond it "
            f"({format_bytes(result.metadata_bytes)} .metadata); tolerance ±{K_TOLERANCE}",
            scope=SCOPE,
        )
    )
    assert item.passed, item.message


def test_dcp_async_blocking_within_stall_budget(
    dcp_result: DcpResult, requirements: Sizing, gate: GateReport
) -> None:
    """Checklist 3 and 4: async save's blocking part (staging to CPU) fits the stall budget."""
    result = dcp_result
    budget = requirements.requirements["stall_budget_s"]
    item = gate.record(
        judge(
            id="dcp-async-block",
            title=f"DCP async save blocking ({result.checkpointer})",
            measured=result.async_block_s,
            required=requirements.stall_budget_s,
            unit="s",
            better="lower",
            detail=f"{budget.formula}; {result.parameters:,} parameters on {result.world_size} "
            f"ranks; sync save {format_seconds(result.save_s)} for comparison",
            scope=SCOPE,
        )
    )
    assert item.passed, item.message


def test_dcp_async_completes_within_interval_over_headroom(
    dcp_run: DcpRun, cluster_profile: Profile, gate: GateReport
) -> None:
    """Checklist 5 with DCP: the async save completes within interval / headroom."""
    result = dcp_run.result
    storage = (
        f"the same bytes through the suite's write burst: "
        f"{format_seconds(dcp_run.suite_write.span_s)} (storage); the rest is the framework"
        if dcp_run.suite_write
        else "no suite comparison: dcp.world_size exceeds --ranks"
    )
    checkpoint = cluster_profile.checkpoint
    item = gate.record(
        judge(
            id="dcp-async-complete",
            title=f"DCP async save completion ({result.checkpointer})",
            measured=result.async_complete_s,
            required=checkpoint.interval_s / checkpoint.async_headroom,
            unit="s",
            better="lower",
            detail=f"{checkpoint.interval_s:g} s / {checkpoint.async_headroom:g} headroom; "
            f"sync save {format_seconds(result.save_s)}; {storage}",
            scope=SCOPE,
        )
    )
    assert item.passed, item.message


def test_dcp_resharded_load_verified_exactly(dcp_result: DcpResult, gate: GateReport) -> None:
    """Checklist 7 with DCP: a load onto fewer ranks with another sharding is bit-exact, and
    a flipped byte in a .distcp file is caught (DCP itself would load it silently)."""
    result = dcp_result
    gate.record(
        Item(
            id="dcp-reshard-load",
            title="DCP resharded load verified",
            required=None,
            measured=result.reshard_load_s,
            unit="s",
            passed=result.verified and bool(result.corruption_detected),
            better="lower",
            detail=f"{result.world_size} ranks Shard(0) -> {result.reshard_ranks} rank(s) "
            f"Shard(1); same ranks {format_seconds(result.load_s)}, one process "
            f"{format_seconds(result.single_process_load_s)}; every tensor compared; flipped "
            f"byte caught: {result.corruption_detected}",
            scope=SCOPE,
        )
    )
    assert result.verified, f"loaded content differs: {list(result.mismatches)[:5]}"
    assert result.corruption_detected, f"a flipped byte went unnoticed: {result.corruption_detail}"
