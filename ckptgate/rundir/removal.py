"""Removal of exactly what the run made: registered files, then its directories, bounded.

Cleanup removes registered files and then the directories the run made, each with a
non-recursive call: a file that someone else put in the run directory survives, and the
directory stays with a warning. Every call goes through ``ckptgate.rundir.janitor``: bounded,
so a hung target fails the run instead of holding it. What a hung target made impossible to
remove is listed in ``left_behind`` (the report's notes), never retried. The manifest part and
the lease go last, once every registered file and directory (but the run directory) is gone,
so ``ckptgate clean`` can still remove what a failed removal or a killed node left.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptgate.rundir.appender import suppress_hung
from ckptgate.rundir.directory import RunDirectory
from ckptgate.rundir.janitor import Janitor
from ckptgate.rundir.run_lease import RunLease

__all__ = ["CleanupReport", "Removal"]


@dataclass
class CleanupReport:
    removed_files: int = 0
    removed_dirs: int = 0
    left: list[str] = field(default_factory=list)
    """Directories left because they hold what the run did not create."""
    unremovable: list[str] = field(default_factory=list)
    """Files and directories a hung target made impossible to remove (never retried)."""
    failed: list[str] = field(default_factory=list)
    """Files whose removal the target refused, each with its error (``path: error``)."""
    hung: str | None = None


class Removal:
    """Removes what ``run`` registered, through ``janitor``; stops ``lease`` first."""

    def __init__(self, run: RunDirectory, lease: RunLease, janitor: Janitor) -> None:
        self.run = run
        self.lease = lease
        self.janitor = janitor
        self.left_behind: list[str] = []
        """What the run created and a hung target made impossible to remove."""
        self._failed: dict[str, str] = {}
        """Files the final cleanup could not remove, with the target's error (an object store
        that stopped answering refuses at once rather than hangs): they stay registered, and
        the manifest that names them stays, for ``ckptgate clean``."""
        self._files_removed = False

    def _leave(self, paths: list[str]) -> None:
        self.left_behind.extend(p for p in paths if p not in self.left_behind)

    def remove_files(self, paths: list[str] | tuple[str, ...], *, failing: bool = False) -> int:
        """Remove registered files that exist; returns how many were removed.

        A path that does not exist stays registered: a rank still running may yet create it,
        and the final cleanup, after the ranks have stopped, tries again. Each removal is
        bounded (``ckptgate.rundir.janitor``); when one hangs, it and the rest are moved to
        ``left_behind`` and not tried again. ``failing``: the caller is already failing (a
        round's files removed after its ranks failed): a refused removal is kept in ``failed``
        instead of raised, so the failure told stays the first one.
        """
        removed = self._remove(paths, end=failing)
        if self.run.manifest is not None:
            with suppress_hung():  # the removal stands; the target's hung state says why
                self.run.manifest.removed(sorted(removed))
        return len(removed)

    def _remove(self, paths: list[str] | tuple[str, ...], *, end: bool = False) -> set[str]:
        """Remove registered ``paths``; an error raises, or at the run's ``end`` is kept in
        ``failed`` (cleanup must finish and say what stayed, not stop at the first refusal)."""
        registered = set(self.run.files)
        for path in paths:
            if path not in registered:
                raise ValueError(f"refusing to remove {path}: this run did not register it")
        outcome = self.janitor.call("rm_file", list(paths))
        removed = set(outcome.done)
        abandoned = set(outcome.left)
        self._leave(outcome.left)
        self.run.files = [p for p in self.run.files if p not in removed and p not in abandoned]
        if outcome.errors and not end:
            raise next(iter(outcome.errors.values()))
        for path in removed:
            self._failed.pop(path, None)
        for path, error in outcome.errors.items():
            self._failed[path] = str(error.strerror or error)
        return removed

    @property
    def failed(self) -> list[str]:
        """``path: error`` for each file the final cleanup could not remove (still there)."""
        return [f"{path}: {error}" for path, error in self._failed.items()]

    def forget_removed(self, paths: list[str] | tuple[str, ...]) -> list[str]:
        """Drop from the registry files the run's own workload deleted (a delete storm);
        returns those of ``paths`` still there (they stay registered)."""
        fs = self.run.fs
        if hasattr(fs, "invalidate_cache"):
            fs.invalidate_cache()  # s3fs lists from a cache: ask the store itself
        outcome = self.janitor.call("exists", list(paths))  # bounded: the left stay registered
        gone = {p for p, there in outcome.done.items() if not there}
        if self.run.manifest is not None:
            with suppress_hung():
                self.run.manifest.removed(sorted(gone & set(self.run.files)))
        self.run.files = [p for p in self.run.files if p not in gone]
        return [p for p in paths if p not in gone]

    def remove_dirs(self, paths: list[str]) -> list[str]:
        """Remove emptied directories this run made, before its end (non-recursive, bounded),
        as a benchmark's repeat removes its own directory once its files are gone, the way
        mdtest's ``-r`` removes its tree; returns those that stay (not empty, refused, or on a
        hung target), still registered for the final cleanup. The run directory is the
        cleanup's alone, and so is every directory of a run shared by many nodes."""
        if self.run.shared:
            raise ValueError(
                "refusing to remove directories before the run's end on a shared target: "
                "another node may still be filling them, and node 0 removes them last"
            )
        made = set(self.run.dirs)
        for path in paths:
            if path not in made or path == self.run.run_dir:
                raise ValueError(
                    f"refusing to remove {path}: not a directory this run made inside its "
                    "run directory"
                )
        report = CleanupReport()
        self._rmdir(list(paths), report)
        return [p for p in paths if p in self.run.dirs]

    def cleanup(self, files: bool = True, directories: bool = True) -> CleanupReport:
        """Remove exactly what the run created: registered files, then its own directories.

        Many nodes remove their own files first and node 0 the directories after a barrier.
        The lease stops; the manifest part and the lease go once every registered file and
        every directory but the run directory is gone, and the run directory after them. What
        could not be removed (a file, or a directory still holding another node's files when
        that node was killed) keeps the manifest that names it, for ``ckptgate clean``.
        """
        report = CleanupReport()
        run = self.run
        if files:
            self.lease.stop()
            report.removed_files = len(self._remove(list(dict.fromkeys(run.files)), end=True))
            self._files_removed = True
        if directories:
            inner = [d for d in run.dirs if d != run.run_dir]
            self._rmdir(sorted(set(inner), key=lambda d: d.count("/"), reverse=True), report)
        # Another node's directories that still hold what node 0 made are node 0's to remove
        # (it registered them too, and goes last): that node's manifest goes after its try.
        others = [d for d in run.dirs if d != run.run_dir]
        settled = not others or (directories and not run.owns_dirs)
        if self._files_removed and not self.left_behind and not self.failed and settled:
            last = run.run_dir if directories and run.run_dir in run.dirs else None
            if last is not None and self._held_by_others():
                report.left.append(last)  # a killed node's part, or a stranger's file: all stay
            else:
                self._remove_meta()  # the manifest stays while anything it lists stays
                if last is not None:
                    self._rmdir([last], report)
        report.unremovable = list(self.left_behind)
        report.failed = list(self.failed)
        report.hung = self.run.hung
        return report

    def _rmdir(self, ordered: list[str], report: CleanupReport) -> None:
        """Remove ``ordered`` directories (non-recursive, bounded), counting into ``report``."""
        if not ordered:
            return
        outcome = self.janitor.call("rmdir", ordered)
        report.removed_dirs += len(outcome.done)
        report.left += [d for d in ordered if d in outcome.errors]
        self._leave(outcome.left)
        gone = set(outcome.done) | set(outcome.missing)  # missing: another node removed it
        self.run.dirs = [d for d in self.run.dirs if d not in gone]

    def _held_by_others(self) -> list[str]:
        """What the run directory holds besides this node's manifest part and lease (bounded;
        on a hung target, or where it cannot be listed, nothing is assumed and the rmdir
        after the manifest's removal tells). Node 0's part names the node count that
        ``ckptgate clean`` reads the others by: it goes only with the directory."""
        run_dir = self.run.run_dir
        if run_dir is None:
            return []
        outcome = self.janitor.call("ls", [run_dir], detail=False)
        listed = outcome.done.get(run_dir) or []
        own = {_bare(p) for p in self.run.meta_files}  # the part, the lease and its .tmp
        return [p for p in map(_bare, listed) if p not in own]

    def _remove_meta(self) -> None:
        """The manifest part and the lease, last of this node's files (bounded calls)."""
        run = self.run
        if run.manifest is not None:
            run.manifest.close()
            run.manifest = None
        if run.meta_files:
            outcome = self.janitor.call("rm_file", list(run.meta_files))
            self._leave(outcome.left)
        run.meta_files = []


def _bare(path: str) -> str:
    """A listed path as the run registers it (fsspec may add or drop a protocol or a slash)."""
    return "/" + path.split("://", 1)[-1].strip("/")
