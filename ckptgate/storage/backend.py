"""How any process reaches the target: the picklable ``BackendSpec``, opened once per process.

Rank processes receive a ``BackendSpec`` (fsspec protocol, storage options, backend choice)
and turn it into a backend (``ckptgate.storage.operations.Backend``) once per task through the
registry (``ckptgate.storage.registry``); fsspec's own instance cache (``fsspec.filesystem``)
makes that cheap. The spec names its backend by the registry's name, so no module here knows
the set of backends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptgate.storage import registry
from ckptgate.storage.fsfacts import is_local
from ckptgate.storage.operations import Backend

__all__ = ["BackendName", "BackendSpec"]

BackendName = str
"""``auto`` or a name in ``ckptgate.storage.registry.BACKENDS`` (``posix``, ``fsspec``)."""


@dataclass(frozen=True)
class BackendSpec:
    """How to reach the target from any process: picklable, turned into a backend per process.

    ``backend="auto"`` uses POSIX for a local filesystem and fsspec for anything else;
    ``"fsspec"`` forces fsspec on a local one too (to compare the two paths). ``loop``: the
    metadata storm's per-file loop as chosen, ``auto``, ``native`` or ``python``
    (``--storm-loop``), carried to the rank processes; the storm resolves it, and checks it
    against this spec's backend (``ckptgate.workloads.storm.loops.spec_loop``).
    """

    protocol: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    backend: BackendName = registry.AUTO
    loop: str = "auto"

    def __post_init__(self) -> None:
        # one line (ValueError) for an unknown backend, or one that cannot serve the protocol
        registry.resolve(self.backend, self.protocol)

    @property
    def is_local(self) -> bool:
        """A filesystem of this node's kernel (what the target checks before any I/O)."""
        return is_local(self.protocol)

    @property
    def resolved(self) -> str:
        """The registered backend this spec opens (``auto`` decided by the protocol)."""
        return registry.resolve(self.backend, self.protocol)

    def stand_in(self) -> BackendSpec:
        """The same kind of backend on this node's own files, for a burst with no storage
        behind it (the generator's null sink, the null-source read): this spec where the
        target is local (its POSIX calls), fsspec's local files for any other."""
        return self if self.is_local else BackendSpec("file", backend="fsspec")

    def open(self) -> Backend[Any]:
        """This process's backend for the spec (fsspec caches the filesystem instance)."""
        return registry.connect(self.resolved, self.protocol, self.storage_options)
