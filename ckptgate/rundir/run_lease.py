"""The session's side of the lease: start it in the run directory, stop it, say when none is.

``ckptgate.rundir.lease`` writes and reads one lease file; this module decides when the
session keeps one (a local target with a run directory and a manifest part) and registers the
lease's two files in the manifest, so ``ckptgate clean`` removes them with the run. While the
lease runs, this node's entry in the host registry of live runs (``rundir.overlap``) says the
same to runs on this host whatever their target.
"""

from __future__ import annotations

from typing import Any

from ckptgate.rundir.directory import RunDirectory
from ckptgate.rundir.lease import LEASE_PERIOD_S, LeaseKeeper, lease_path
from ckptgate.rundir.overlap import FsIdentity, HostRegistry, fs_identity
from ckptgate.storage.fsfacts import FsFacts

__all__ = ["RunLease"]


class RunLease:
    """This node's lease on its run directory (none on a target that is not POSIX)."""

    def __init__(self, run: RunDirectory, facts: FsFacts) -> None:
        self.run = run
        self.facts = facts
        self.keeper: LeaseKeeper | None = None
        """The thread that keeps the lease fresh (None before ``start`` and after ``stop``)."""
        self.registry = HostRegistry()
        """This host's live runs: this node's entry while the lease runs."""

    def __getstate__(self) -> dict[str, Any]:
        """A rank process gets a copy without the lease's thread or the registry entry."""
        state = dict(self.__dict__)
        state["keeper"] = None
        state["registry"] = HostRegistry(self.registry.directory)
        return state

    def identity(self) -> FsIdentity:
        """The filesystem under the target: device, id and type (``rundir.overlap``)."""
        return fs_identity(self.run.root, self.facts.fs_type)

    @property
    def words(self) -> str | None:
        """What the header says when no lease protects the target (None when one does)."""
        if self.run.local:
            return None
        return (
            f"no lease protects the target: {self.run.protocol} is not a POSIX target, so "
            "this run keeps no lease and does not look for other live runs on it; run one "
            "ckptgate at a time on this prefix"
        )

    def start(self, *, period_s: float = LEASE_PERIOD_S) -> None:
        """Keep this node's lease fresh in the run directory (local targets) until ``stop``:
        other runs on the target see this one is live."""
        run, manifest = self.run, self.run.manifest
        if run.run_dir is None or manifest is None or not run.local:
            return
        keeper = LeaseKeeper(
            run.run_dir, manifest.node, run_id=manifest.header["run_id"], period_s=period_s
        )
        path = lease_path(run.run_dir, manifest.node)
        manifest.add_files([path, f"{path}.tmp"], kind="meta")
        run.meta_files.extend([keeper.tmp_path, path])
        keeper.start()
        self.keeper = keeper
        self.registry.enter(run.run_dir, manifest.node, run.root, self.identity(), manifest.header)

    def stop(self, *, ended: bool = False) -> None:
        """Stop the lease's thread; ``ended``: its last write says the run ended normally."""
        if self.keeper is not None:
            self.keeper.stop(ended=ended)
            self.keeper = None
        self.registry.leave()
