"""The harness beside a real MPI run (benchmarks/prediction.py): the same code on the same
values, so node 0's messages and bytes are the same; seconds are compared in the benchmark."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from ckptgate.benchmarks import prediction


def _row(
    part: str, nodes: int, harness_s: list[float], real_s: list[float], messages: int, size: int
) -> prediction.Compared:
    row = prediction.Compared(part, nodes, harness_s=harness_s, real_cpu_s=real_s)
    row.real_wall_s = real_s
    counts = {"sent_bytes": 0, "received_bytes": size, "probes": messages}
    row.harness_counts = {"sent_messages": messages, "received_messages": 0, **counts}
    row.real_counts = dict(row.harness_counts)
    return row


def test_the_transport_is_measured_at_the_smallest_count_and_predicts_the_others() -> None:
    """The calibration parts at the smallest node count give the transport's cost: per
    message from the common start's real less harness seconds, per byte from the records
    gather's less its messages' share. Added to the harness at a larger count, a part the
    harness gets right but for its transport is predicted, and not before; the parts it was
    measured on are named as calibrating, not as predicted."""
    ms, moved = 0.001, prediction.BYTES_CALIBRATION
    rows = [  # 64 nodes: 10 us a message, 10 ns a byte; 128 nodes: twice the messages and bytes
        _row(prediction.CALIBRATION, 64, [ms, ms], [2 * ms, 2 * ms], 100, 0),
        _row(moved, 64, [10 * ms, 10 * ms], [13 * ms, 13 * ms], 100, 200_000),
        _row("start-up", 128, [ms, ms], [5 * ms, 5 * ms], 400, 0),
        _row(moved, 128, [20 * ms, 20 * ms], [26 * ms, 26 * ms], 200, 400_000),
    ]  # fmt: skip
    prediction._transport(rows)
    transport = prediction.calibrate(rows)
    assert transport.nodes == 64
    assert transport.per_message_s == pytest.approx(10e-6)
    assert transport.per_byte_s == pytest.approx(10e-9)
    startup, gather = rows[2], rows[3]
    assert startup.transport_s == pytest.approx([0.004, 0.004])
    assert gather.transport_s == pytest.approx([0.006, 0.006])
    assert startup.ratios() == pytest.approx([5.0, 5.0]) and not startup.predicted()
    assert gather.ratios() == pytest.approx([1.3, 1.3]) and not gather.predicted()
    assert startup.ratios(transport=True) == pytest.approx([1.0, 1.0])
    assert gather.predicted(transport=True) and startup.predicted(transport=True)
    text = prediction.render(rows)
    assert "10.00 us a message" in text and "10.00 ns a byte" in text
    lines = text.splitlines()
    assert sum(line.endswith("(calibrates)") for line in lines) == 2
    assert sum(line.endswith("1.00 [1.00, 1.00] within 25 %") for line in lines) == 2


@pytest.mark.skipif(
    shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpirun (openmpi-bin) and mpi4py",
)
def test_the_harness_and_a_real_mpi_run_move_the_same_messages_and_bytes_at_node_0():
    rows = prediction.compare([3], ranks=2, repeats=1, inner=1, timeout_s=300)
    assert [row.part for row in rows] == list(prediction.PARTS)
    for row in rows:
        h, r = row.harness_counts, row.real_counts
        for key in ("sent_messages", "received_messages", "sent_bytes", "received_bytes"):
            assert h[key] == r[key], (row.part, key, h[key], r[key])
        assert r["probes"] >= h["probes"]  # the real run's late peers cost empty polls
        assert row.real_cpu_s[0] > 0 and row.harness_s[0] > 0
