"""The target: one URL opened once, and the parts of the run on it, composed.

``Target`` reaches the target (fsspec's filesystem for the URL, the ``BackendSpec`` rank
processes open, the object store and its upload part size) and holds the run's parts, each in
its own module:

- facts about the filesystem and whether it can take the run: ``ckptgate.storage.fsfacts``;
- the run directory and the registry of every path the run makes (with the manifest):
  ``ckptgate.rundir.directory``;
- the lease that tells other runs this one is live: ``ckptgate.rundir.run_lease``;
- removal of exactly what the run made, bounded: ``ckptgate.rundir.removal``.

Callers use the target's methods, which are those parts' own (bound here, not wrapped).
"""

from __future__ import annotations

from typing import Any

import fsspec
from fsspec import AbstractFileSystem

from ckptgate.rundir.appender import suppress_hung
from ckptgate.rundir.directory import MANIFEST_STALL_S, RunDirectory
from ckptgate.rundir.janitor import Janitor, TargetHung
from ckptgate.rundir.manifest import ManifestWriter
from ckptgate.rundir.overlap import FsIdentity, HostRegistry
from ckptgate.rundir.removal import CleanupReport, Removal
from ckptgate.rundir.run_lease import RunLease
from ckptgate.storage import fsfacts
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.errors import TargetError
from ckptgate.storage.fsfacts import FsFacts
from ckptgate.storage.object_store import ObjectStore, PartSize, object_store, part_size

FLUSH_BOUND_S = 300.0
"""How long writing back the target's dirty data may take (``Target.flush``): gigabytes at a
slow disk's speed, far longer than one unlink's bound."""

__all__ = ["CleanupReport", "FsFacts", "Target", "TargetError", "TargetHung"]


class Target:
    """The target URL, its fsspec filesystem, and the run directory this session owns."""

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        transfer_bytes: int | None = None,
        stall_s: float = MANIFEST_STALL_S,
        storm_loop: str = "auto",
    ) -> None:
        """``transfer_bytes``: on an object store, the upload part size is tied to it unless
        ``storage_options`` set it (``ckptgate.storage.object_store.part_size``). ``stall_s``:
        how long one call of the session's on the target (an append to the run's manifest, a
        removal, a directory made) may take before the target counts as hung (the session
        gives the profile's ``run.stall_timeout_s``, the bound a rank's I/O has too)."""
        self.url = url
        options = dict(storage_options or {})
        self.part: PartSize | None = None
        """The upload part size on an object store (None elsewhere, or not asked)."""
        try:
            fs, root = fsspec.core.url_to_fs(url, **options)
            protocol = fs.protocol
            name = protocol if isinstance(protocol, str) else protocol[0]
            if transfer_bytes is not None:
                tied, self.part = part_size(name, options, transfer_bytes)
                if tied != options:  # the filesystem again, with the part size it will use
                    options = tied
                    fs, root = fsspec.core.url_to_fs(url, **options)
        except (ValueError, ImportError, TypeError) as error:
            raise TargetError(f"--target {url!r}: {error}") from None
        self.store: ObjectStore | None = object_store(name)
        """The object store under the target (None for a filesystem): what the report labels."""
        # What rank processes get to reach the target: the backend is chosen from the
        # protocol, and storm_loop is the metadata storm's loop as chosen: the session checks
        # it against the backend (ckptgate.workloads.storm.loops.spec_loop) before any I/O.
        self.spec = BackendSpec(name, options, loop=storm_loop)
        self.fs: AbstractFileSystem = fs
        self.root = root.rstrip("/") or "/"
        self.janitor = Janitor(fs, stall_s=stall_s)
        """Bounded calls on the target (``ckptgate.rundir.janitor``)."""
        self.facts = fsfacts.target_facts(url, name, self.root)
        self.run = RunDirectory(url, name, fs, self.root, self.janitor, manifest_stall_s=stall_s)
        self.lease = RunLease(self.run, self.facts)
        self.removal = Removal(self.run, self.lease, self.janitor)
        # the parts' own methods, as the target's
        self.create_run_dir = self.run.create
        self.adopt_run_dir = self.run.adopt
        self.share = self.run.share
        self.path = self.run.path
        self.new_dir = self.run.new_dir
        self.new_local_dir = self.run.new_local_dir
        self.register = self.run.register
        self.register_shards = self.run.register_shards
        self.record_content = self.run.record_content
        self.claim_tree = self.run.claim_tree
        self.start_lease = self.lease.start
        self.remove_files = self.removal.remove_files
        self.forget_removed = self.removal.forget_removed
        self.remove_dirs = self.removal.remove_dirs
        self.cleanup = self.removal.cleanup

    @property
    def is_local(self) -> bool:
        return self.spec.is_local

    @property
    def run_dir(self) -> str | None:
        """The run directory (None before it is made or joined)."""
        return self.run.run_dir

    @property
    def shared(self) -> bool:
        """True when several nodes write into one run directory (MPI); node 0 owns it."""
        return self.run.shared

    @property
    def owns_dirs(self) -> bool:
        """False on a node that joined node 0's run directory: node 0 removes it last."""
        return self.run.owns_dirs

    @property
    def manifest(self) -> ManifestWriter | None:
        """This node's manifest part (None before the run directory exists)."""
        return self.run.manifest

    @property
    def left_behind(self) -> list[str]:
        """What the run created and a hung target made impossible to remove."""
        return self.removal.left_behind

    @property
    def hung(self) -> str | None:
        """Why the target counts as hung (a call on it did not return), or None."""
        return self.run.hung

    @property
    def lease_words(self) -> str | None:
        """What the header says when no lease protects the target (None when one does)."""
        return self.lease.words

    def check_writable(self) -> None:
        """Refuse a read-only or unwritable target (``fsfacts.check_writable``)."""
        fsfacts.check_writable(self.url, self.spec.protocol, self.root, self.facts)

    def flush(self) -> None:
        """Write back what the target's filesystem holds dirty (syncfs(2), of it alone),
        bounded by ``FLUSH_BOUND_S``: a target that does not finish counts as hung
        (``TargetHung``). An object store holds nothing dirty on this host: nothing to do."""
        if self.is_local:  # the run directory is ours to open, where the root may not be
            self.janitor.one("syncfs", self.run_dir or self.root, bound_s=FLUSH_BOUND_S)

    def check_room(self, needed_bytes: int, what: str) -> None:
        """Refuse the run before it starts when the target lacks the room it needs."""
        fsfacts.check_room(self.url, self.facts, needed_bytes, what)

    def identity(self) -> FsIdentity:
        """The filesystem under the target (``rundir.overlap``): device, id and type."""
        return self.lease.identity()

    @property
    def registry(self) -> HostRegistry:
        """This host's live runs (``rundir.overlap``), this run's entry among them while its
        lease runs."""
        return self.lease.registry

    def keep(self) -> str | None:
        """``--keep``: stop the lease and end the manifest saying the files stay for
        ``ckptgate verify``; why the end line could not be written, or None.

        A target that refuses the append (a GlusterFS brick holding the manifest died:
        ENOTCONN) keeps a manifest without its end line, as a hung one does; the run says so
        rather than ending in a traceback."""
        self.lease.stop(ended=True)
        problem = None
        if self.manifest is not None:
            try:
                with suppress_hung():  # a hung target keeps a manifest without its end line
                    self.manifest.ended(kept=True)
            except OSError as error:
                problem = (
                    f"the manifest's end line was not written ({error.strerror or error}: "
                    f"{error.filename or self.manifest.path})"
                )
            self.manifest.close()
        return problem

    def close(self) -> None:
        """Stop the helper process of the bounded calls (bounded)."""
        self.janitor.close()
