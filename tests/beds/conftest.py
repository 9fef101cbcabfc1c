"""The beds' fixtures, for the tests in this folder (elsewhere, import them from the bed), and
their markers: every test here is marked ``beds``, and with each bed its module builds."""

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds import BED_MARKERS, BEDS_MARKER
from tests.beds.faultfs import faultfs_mount

__all__ = ["faultfs_mount", "own_host_registry", "pytest_collection_modifyitems"]

HERE = Path(__file__).resolve().parent


def beds_used(module: object) -> list[str]:
    """The bed markers of a test module: one for each bed module it imports from (its names'
    ``__module__``, or the module itself), in BED_MARKERS' order."""
    sources = {getattr(value, "__module__", None) for value in vars(module).values()}
    sources |= {value.__name__ for value in vars(module).values() if inspect.ismodule(value)}
    return [marker for bed, (marker, _) in BED_MARKERS.items() if f"tests.beds.{bed}" in sources]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``beds`` on every test of this folder, and a marker per bed it builds (pytest calls
    this hook with the whole session's items: the others are left as they are)."""
    for item in items:
        if not item.path.resolve().is_relative_to(HERE):
            continue
        item.add_marker(BEDS_MARKER)
        module = item.getparent(pytest.Module)
        for marker in beds_used(module.obj) if module is not None else []:
            item.add_marker(marker)


@pytest.fixture(autouse=True)
def own_host_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The runs a bed test starts keep their host registry entries (``rundir.overlap``) in
    the test's own directory: a bed's hosts are namespaces with host names of their own, whose
    entries no later run on this machine could judge, and a lost or stopped node leaves its
    entry behind. Removed with the test's directory."""
    monkeypatch.setenv("CKPTGATE_REGISTRY", str(tmp_path / "registry"))
    yield
