"""The backend registry: each backend's name, where its class lives, and the protocols it serves.

fsspec's ``registry.py`` is the model: one table from a name to a class's dotted path and an
install hint, imported on first use (``importlib``), so this module imports no backend and no
backend imports it; adding a backend is its module, one ``BackendEntry`` line in ``BACKENDS``,
and its subclass of the contract suite (``tests/storage/test_backend_contract.py``).

``backend="auto"`` (``ckptgate.storage.backend.BackendSpec``) takes the first entry that
claims the target's fsspec protocol, else the catch-all entry (``protocols=None``): POSIX for
a local filesystem, fsspec for anything else.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ckptgate.storage.fsfacts import LOCAL_PROTOCOLS
from ckptgate.storage.operations import Backend, Connect

__all__ = ["AUTO", "BACKENDS", "BackendEntry", "BackendUnavailable", "connect", "resolve"]

AUTO = "auto"
"""The backend choice that lets the protocol decide."""


class BackendUnavailable(ImportError):
    """A registered backend whose module cannot be imported here; the message is the hint."""


@dataclass(frozen=True)
class BackendEntry:
    """One backend: where its class is, which protocols it serves, what to install for it."""

    class_path: str
    """``package.module.Class``; the class has ``connect(protocol, storage_options)``."""
    protocols: frozenset[str] | None
    """The fsspec protocols it can serve (None: every protocol) and claims under ``auto``."""
    scope: str
    """The protocols it serves, in words (``a local target``)."""
    install_hint: str
    """What to install when its module does not import."""


BACKENDS: dict[str, BackendEntry] = {
    "posix": BackendEntry(
        class_path="ckptgate.storage.posix.PosixBackend",
        protocols=LOCAL_PROTOCOLS,
        scope="a local target",
        install_hint="reinstall ckptgate",
    ),
    "fsspec": BackendEntry(
        class_path="ckptgate.storage.fsspec_backend.FsspecBackend",
        protocols=None,
        scope="any fsspec protocol",
        install_hint="pip install fsspec",
    ),
}
"""Backend name to entry, in the order ``auto`` tries them (the catch-all last)."""


def _auto(protocol: str) -> str:
    """The first entry that claims ``protocol``, else the first catch-all."""
    claims = [n for n, e in BACKENDS.items() if e.protocols is not None and protocol in e.protocols]
    catch_all = [n for n, e in BACKENDS.items() if e.protocols is None]
    if not claims and not catch_all:
        raise ValueError(f"no registered backend serves {protocol}")
    return [*claims, *catch_all][0]


def resolve(backend: str, protocol: str) -> str:
    """The registered backend that serves ``protocol`` for the choice ``backend`` (``auto``
    or a name in ``BACKENDS``); ValueError in one line when none does."""
    if backend == AUTO:
        return _auto(protocol)
    entry = BACKENDS.get(backend)
    if entry is None:
        *first, last = [AUTO, *BACKENDS]
        raise ValueError(f"backend {backend!r}: expected {', '.join(first)} or {last}")
    if entry.protocols is not None and protocol not in entry.protocols:
        raise ValueError(f"backend {backend!r} needs {entry.scope}, not {protocol}")
    return backend


def connect(name: str, protocol: str, storage_options: Mapping[str, Any]) -> Backend[Any]:
    """A new backend of the registered ``name`` on ``protocol``: its class imported on first
    use (fsspec's ``get_filesystem_class``), then ``connect``ed."""
    entry = BACKENDS[name]
    module_name, _, class_name = entry.class_path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise BackendUnavailable(
            f"backend {name!r} ({entry.class_path}) does not import: {error}; {entry.install_hint}"
        ) from error
    opener: Connect = getattr(module, class_name).connect
    return opener(protocol, storage_options)
