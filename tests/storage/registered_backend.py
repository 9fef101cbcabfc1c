"""A backend that exists only for the registry's tests: one file, as a new backend would be.

POSIX's operations with every file it creates counted (what a tracing backend might keep);
``connect`` comes from ``PosixBackend``. ``tests/storage/test_backend_contract.py`` registers
it with one ``BackendEntry`` and runs the whole contract on it.
"""

from __future__ import annotations

from ckptgate.storage.fsfacts import LOCAL_PROTOCOLS
from ckptgate.storage.posix import PosixBackend
from ckptgate.storage.registry import BackendEntry

ENTRY = BackendEntry(
    class_path="tests.storage.registered_backend.CountingBackend",
    protocols=LOCAL_PROTOCOLS,
    scope="a local target",
    install_hint="it is part of the suite's own tests",
)
"""The one registry line the backend needs (``BACKENDS["counting"] = ENTRY``)."""


class CountingBackend(PosixBackend):
    """POSIX calls, and how many files were created through this instance."""

    name = "counting"

    def __init__(self) -> None:
        self.created = 0

    def create(self, path: str, *, exclusive: bool = True) -> int:
        handle = super().create(path, exclusive=exclusive)
        self.created += 1
        return handle
