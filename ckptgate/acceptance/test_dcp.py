"""Checklist item 1 with the real framework, plus async save and item 7's resharded restore.

A real PyTorch Distributed Checkpoint (DCP) save of the cluster profile's small model (its
``dcp`` section) on the target: bytes on disk against 12/14/16 Ψ, async save's blocking part
and completion, and a load onto fewer ranks with another sharding, every tensor verified.
"""

from __future__ import annotations

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

from ckptgate.checks import dcp
from ckptgate.checks.dcp import DcpRun
from ckptgate.fixtures.provided import Gate

pytestmark = pytest.mark.dcp


def test_dcp_bytes_on_disk_match_k(dcp_run: DcpRun, gate: Gate) -> None:
    """Checklist 1: what DCP puts on disk per parameter is the profile's K."""
    gate.check(dcp.bytes_on_disk(dcp_run))


def test_dcp_async_blocking_within_stall_budget(dcp_run: DcpRun, gate: Gate) -> None:
    """Checklist 3 and 4: async save's blocking part (staging to CPU) fits the stall budget."""
    gate.check(dcp.async_blocking(dcp_run))


def test_dcp_async_completes_within_interval_over_headroom(dcp_run: DcpRun, gate: Gate) -> None:
    """Checklist 5 with DCP: the async save completes within interval / headroom."""
    gate.check(dcp.async_completion(dcp_run))


def test_dcp_resharded_load_verified_exactly(dcp_run: DcpRun, gate: Gate) -> None:
    """Checklist 7 with DCP: a load onto fewer ranks is bit-exact; a flipped byte is caught."""
    gate.check(dcp.resharded_load(dcp_run))
