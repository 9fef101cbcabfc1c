"""Removing what a dead run left: exactly the files its manifest lists, never recursively.

``ckptgate clean TARGET`` finds the run directories under a target (``ckptgate.rundir.runs``)
and, for each run that is provably dead (or ended), unlinks each file its manifest parts list,
one call per file, then its leases and manifest parts, then removes the directories the parts
list, deepest first, each with ``rmdir``: a directory that still holds anything (a file
someone else put there) stays, and what it holds is reported, never removed. A run that is
live is refused; one on another host whose lease is stale only with ``force_stale`` and a lease
older than ``FORCE_STALE_AFTER_S``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ckptgate.rundir.lease import FORCE_STALE_AFTER_S, lease_path
from ckptgate.rundir.runs import RunState


@dataclass
class CleanResult:
    """What ``clean_run`` did to one run directory."""

    run_dir: str
    removed_files: int = 0
    removed_dirs: int = 0
    refused: str | None = None
    """Why nothing was removed (a live run, one not provably dead)."""
    left: list[str] = field(default_factory=list)
    """Directories that stayed, each with what it still holds."""
    errors: list[str] = field(default_factory=list)


def may_clean(
    run: RunState, *, force_stale: bool = False, stale_after_s: float = FORCE_STALE_AFTER_S
) -> str | None:
    """None where ``run`` may be removed, else the one-line reason it may not."""
    state = run.state
    if run.provably_dead:
        return None
    if state == "live":
        return f"refusing {run.describe()}: the run is live"
    age = run.lease_age_s
    if not force_stale:
        return (
            f"refusing {run.describe()}: not provably dead; after its lease is "
            f"{stale_after_s:.0f} s old, --force-stale removes it"
        )
    if age is None or age < stale_after_s:
        shown = "no lease" if age is None else f"lease {age:.0f} s old"
        return (
            f"refusing {run.describe()}: --force-stale needs a lease older than "
            f"{stale_after_s:.0f} s ({shown})"
        )
    return None


def clean_run(
    run: RunState, *, force_stale: bool = False, stale_after_s: float = FORCE_STALE_AFTER_S
) -> CleanResult:
    """Remove what ``run``'s manifest parts list, if ``may_clean`` allows (see the module)."""
    result = CleanResult(run.run_dir)
    result.refused = may_clean(run, force_stale=force_stale, stale_after_s=stale_after_s)
    if result.refused is not None:
        return result
    root = run.run_dir
    dirs: set[str] = set()
    for manifest in run.manifests:
        for listed in manifest.files.values():
            _unlink(f"{root}/{listed.path}", result)
        # what the run itself removed may be back if it died between remove and record
        for gone in manifest.removed:
            _unlink(f"{root}/{gone}", result)
        dirs.update(manifest.dirs)
    for manifest in run.manifests:
        for own in (lease_path(root, manifest.node), f"{lease_path(root, manifest.node)}.tmp"):
            _unlink(own, result)
        _unlink(manifest.path, result)
    paths = {root if d == "." else f"{root}/{d}" for d in dirs}
    for directory in sorted(paths, key=lambda d: d.count("/"), reverse=True):
        try:
            os.rmdir(directory)
            result.removed_dirs += 1
        except FileNotFoundError:
            pass
        except OSError as error:
            try:
                held = sorted(os.listdir(directory))
            except OSError:
                held = []
            shown = ", ".join(held[:5]) + (f" (+{len(held) - 5} more)" if len(held) > 5 else "")
            result.left.append(
                f"{directory} ({error.strerror}; holds {shown})" if held else directory
            )
    return result


def _unlink(path: str, result: CleanResult) -> None:
    try:
        os.unlink(path)
        result.removed_files += 1
    except FileNotFoundError:
        pass
    except OSError as error:
        result.errors.append(f"{path}: {error.strerror}")
