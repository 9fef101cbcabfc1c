"""Run only under mpirun by tests/test_many_nodes.py: verdicts across nodes (not collected)."""

from __future__ import annotations

import os
import time


def _node() -> int:
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))


def test_passes_everywhere() -> None:
    assert True


def test_fails_on_node_one_only() -> None:
    assert _node() != 1, "node 1 found its storage wanting"


def test_hangs_on_node_one() -> None:
    if _node() == 1 and os.environ.get("CKPTGATE_CASE_HANG"):
        time.sleep(3600)
