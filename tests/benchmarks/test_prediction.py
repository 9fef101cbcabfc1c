"""The harness beside a real MPI run (benchmarks/prediction.py): the same code on the same
values, so node 0's messages and bytes are the same; seconds are compared in the benchmark."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from ckptgate.benchmarks import prediction


def _row(part: str, harness_s: list[float], real_s: list[float], messages: int):
    row = prediction.Compared(part, 64, harness_s=harness_s, real_cpu_s=real_s)
    row.real_wall_s = real_s
    counts = {"sent_bytes": 0, "received_bytes": 0, "probes": messages}
    row.harness_counts = {"sent_messages": messages, "received_messages": 0, **counts}
    row.real_counts = dict(row.harness_counts)
    return row


def test_the_transport_cost_of_a_message_is_the_calibration_part_s_own_measured():
    """The calibration part's real less harness seconds per message, per repeat, times each
    other part's messages: a part the harness gets right but for its messages' transport is
    predicted once that cost is added, and not before."""
    calibration = _row(prediction.CALIBRATION, [0.001, 0.001], [0.003, 0.005], 100)
    other = _row("records gather", [0.010, 0.010], [0.014, 0.018], 200)
    prediction._transport({calibration.part: calibration, other.part: other})
    assert calibration.transport_s == [0.0, 0.0]
    assert other.transport_s == pytest.approx([0.004, 0.008])
    assert other.ratios() == pytest.approx([1.4, 1.8])
    assert not other.predicted()
    assert other.ratios(transport=True) == pytest.approx([1.0, 1.0])
    assert other.predicted(transport=True)
    text = prediction.render([calibration, other])
    assert "NOT within 25 %; 1.00 [1.00, 1.00] within 25 %" in text


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
