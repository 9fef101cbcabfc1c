"""The coordination path's growth at 1,024 simulated nodes, in messages, bytes and probes
(never seconds): a part that grows faster than the node count fails here."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import tracemalloc

import pytest

from ckptgate.benchmarks import coordination, scale
from ckptgate.benchmarks.simnodes import ANY_SOURCE, SimComm, SimStatus
from ckptgate.cluster.nodes import MpiNodes, run_everywhere
from ckptgate.engine.latency import LatencyHistogram
from ckptgate.engine.records import BurstResult, merge_nodes

NODES = 1024
RANKS = 8


def test_a_gather_whose_nodes_arrive_one_by_one_costs_node_0_a_probe_per_poll():
    """Nodes that reach the gather 1 ms apart (event time): one wildcard probe per poll and
    one per message, O(N); one probe per waited-for node per poll was O(N^2) (about 2.6
    million probes here)."""
    comm = SimComm(NODES, peer_value=lambda peer, tag: peer, arrival=lambda peer, tag: peer * 1e-3)
    nodes = MpiNodes(
        comm, clock=comm.clock, sleep=comm.clock.sleep, any_source=ANY_SOURCE, status=SimStatus
    )
    gathered, decision = nodes.gather_decide(0, sum, 600.0, "the test's gather")
    assert gathered == list(range(NODES))
    assert decision == sum(range(NODES))
    polls = comm.clock() / 0.0002
    assert comm.counts.received_messages == NODES - 1
    assert comm.counts.probes <= polls + 2 * NODES, (comm.counts.probes, polls)


def test_without_a_wildcard_the_same_gather_probes_every_waited_for_node():
    """The same gather with one probe per pending node: the count the wildcard removes."""
    count = 128
    comm = SimComm(count, peer_value=lambda peer, tag: peer, arrival=lambda peer, tag: peer * 1e-3)
    nodes = MpiNodes(comm, clock=comm.clock, sleep=comm.clock.sleep)
    nodes.gather_decide(0, sum, 600.0, "the test's gather")
    assert comm.counts.probes > count * count  # quadratic: each poll probes every pending node


@pytest.mark.parametrize("part", sorted(scale.PARTS))
def test_each_coordination_part_grows_no_faster_than_the_node_count(part):
    """Node 0's messages, bytes and probes for each part at 256 and 1,024 nodes: four times
    the nodes may cost at most four times (and a little for the fixed part's rounding)."""
    make = scale.PARTS[part]
    small, large = (scale.measure(make, n, RANKS).counts for n in (NODES // 4, NODES))
    for field in ("sent_messages", "received_messages", "probes", "sent_bytes", "received_bytes"):
        before, after = getattr(small, field), getattr(large, field)
        assert after <= 4.1 * before + 64, (part, field, before, after)


def _gather_peak_bytes(transfers: int) -> int:
    made = LatencyHistogram()
    made.add_ns([1_000_000 + 1_000 * (i % 4000) for i in range(transfers)])

    def histogram() -> LatencyHistogram:  # each rank its own object, as each rank sends it
        return copy.deepcopy(made)  # (its samples counted once: 8,192 ranks' would take a minute)

    def burst(node: int) -> BurstResult:
        records = coordination.node_burst(node, RANKS).ranks
        return BurstResult(
            "write", tuple(dataclasses.replace(r, latency={"write": histogram()}) for r in records)
        )

    comm = SimComm(
        NODES, peer_value=lambda peer, tag: (coordination.host_name(peer), burst(peer), None)
    )
    nodes = scale._nodes(comm)
    tracemalloc.start()
    bursts = run_everywhere(nodes, 600.0, "the burst", lambda: burst(0))
    merged = merge_nodes("write", bursts)
    merged.to_json()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def test_node_0s_memory_for_the_records_is_bounded_by_the_summaries_not_the_samples():
    """A hundred times the transfers per rank leaves node 0's memory for 8,192 ranks' records
    where it was: each rank sends a histogram of occupied buckets, not its samples; and the
    records (the burst's JSON included) cost node 0 under 6 kB a rank."""
    few, many = _gather_peak_bytes(400), _gather_peak_bytes(40_000)
    assert many <= 1.25 * few, (few, many)
    assert few / (NODES * RANKS) < 6_000, few / (NODES * RANKS)  # dense counters: 9,250


def test_a_histogram_travels_as_its_occupied_buckets_and_merges_the_same():
    histogram = LatencyHistogram()
    histogram.add_ns([2_000_000 + 37_000 * (i % 97) for i in range(420)])
    data = pickle.dumps(histogram)
    assert len(data) < 1_000  # the dense counters alone are 5,376 bytes
    back = pickle.loads(data)
    assert (back.counts == histogram.counts).all()
    assert back.summary() == histogram.summary()
    merged = LatencyHistogram().merge(back).merge(pickle.loads(data))
    twice = LatencyHistogram().merge(histogram).merge(histogram)
    assert (merged.counts == twice.counts).all()
    back.add_ns([5])  # a received histogram takes more samples
    assert back.count == histogram.count + 1


def test_node_0_unpickles_a_gather_with_the_cyclic_collector_paused_and_restores_it():
    """Each collection scans every live object: on during a gather of 16,384 ranks' records,
    node 0's time grew as N^1.2. Paused while the values arrive, on again after."""
    import gc

    seen: list[bool] = []

    def value(peer: int, tag: int) -> int:
        seen.append(gc.isenabled())
        return peer

    comm = SimComm(64, peer_value=value)
    nodes = scale._nodes(comm)
    assert gc.isenabled()
    nodes.gather_decide(0, sum, 600.0, "the test's gather")
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_template_run_that_writes_no_report_leaves_nothing_in_the_target(tmp_path, monkeypatch):
    """The template run failed (no report written): the error says so with what the run said
    (its ERROR line is on stderr), and the folder the harness made for the report is gone, so
    the target holds only what was there before."""
    (tmp_path / "theirs").write_text("kept")

    def no_report(command, **_):
        return subprocess.CompletedProcess(command, 1, stdout="", stderr="ERROR: another run\n")

    monkeypatch.setattr(scale.subprocess, "run", no_report)
    told = r"the template run wrote no report: ERROR: another run$"
    with pytest.raises(RuntimeError, match=told):
        scale.template_report(str(tmp_path))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["theirs"]
