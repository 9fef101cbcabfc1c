"""Checklist item 6: the metadata rate: a checkpoint's create storm and commit at full rank
count, a restore's listing and stat pass, and the retention delete storm."""

from __future__ import annotations

from ckptgate.checks import metadata
from ckptgate.checks.metadata import MetadataRun
from ckptgate.fixtures.provided import Gate


def test_metadata_create_rate(metadata_run: MetadataRun, gate: Gate) -> None:
    """Checklist 6: files per second from the common start to the commit, against the window;
    the listing after the commit shows exactly the storm's files and ``.metadata``."""
    gate.check(metadata.create_rate(metadata_run))


def test_restore_listing_and_stat(metadata_run: MetadataRun, gate: Gate) -> None:
    """Checklist 6: what a restore does first, listed and stat'ed; reported, not gated."""
    gate.check(metadata.restore_stat(metadata_run))


def test_retention_delete_storm(metadata_run: MetadataRun, gate: Gate) -> None:
    """Checklist 6: removing an older checkpoint's files finishes within the interval."""
    gate.check(metadata.delete_storm(metadata_run))
