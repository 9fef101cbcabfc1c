"""The test plan's concurrency item: the persist burst while dataloader readers keep the
target busy, as they do during an async save."""

from __future__ import annotations

from ckptgate.checks import contention as contention_check
from ckptgate.checks.contention import Contention
from ckptgate.fixtures.provided import Gate


def test_persist_under_contention(contention: Contention, gate: Gate) -> None:
    """The persist requirement still holds while the dataloader reads from the same target."""
    gate.check(contention_check.persist(contention))


def test_reader_slowdown(contention: Contention, gate: Gate) -> None:
    """The dataloader's loss of bandwidth during a save: gated where the profile sets a limit."""
    gate.check(contention_check.reader_slowdown(contention))
