"""The beds' fixtures, for the tests in this folder (elsewhere, import them from the bed)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds.faultfs import faultfs_mount

__all__ = ["faultfs_mount", "own_host_registry"]


@pytest.fixture(autouse=True)
def own_host_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The runs a bed test starts keep their host registry entries (``storage.overlap``) in
    the test's own directory: a bed's hosts are namespaces with host names of their own, whose
    entries no later run on this machine could judge, and a lost or stopped node leaves its
    entry behind. Removed with the test's directory."""
    monkeypatch.setenv("CKPTGATE_REGISTRY", str(tmp_path / "registry"))
    yield
