"""The collectives' cost benchmark (benchmarks/collectives.py) on a few MPI processes."""

from __future__ import annotations

import importlib.util
import pickle
import shutil

import pytest

from ckptgate.benchmarks import collectives, coordination


def test_every_node_s_records_are_the_same_size_whatever_its_index() -> None:
    sizes = [len(pickle.dumps(coordination.node_burst(n, 8))) for n in (1, 99, 2047)]
    # the others' bytes can stay flat only if their values do (a few digits more at most)
    assert max(sizes) < 1.05 * min(sizes)


@pytest.mark.skipif(
    shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpirun (openmpi-bin) and mpi4py",
)
def test_node_0_receives_every_node_s_value_and_the_others_send_one() -> None:
    row = collectives.run_size(4, repeats=1, ranks=2, timeout_s=300)
    assert row["nodes"] == 4
    step = row["steps"]["records gather"]
    # node 0: three values in, three small decisions out; any other node: one value out, one in
    assert step["node0_bytes"] >= 3 * row["value_bytes"]
    assert row["value_bytes"] <= step["others_max_bytes"] < 2 * row["value_bytes"]
    assert row["steps"]["start-up"]["node0_bytes"] > row["steps"]["start-up"]["others_max_bytes"]
    # node 0's counts are the harness's for the same step and N: the same code on the same values
    counts = step["node0_counts"]
    assert counts["received_messages"] == 3 and counts["sent_messages"] == 3
    assert "records gather" in collectives.render([row])
