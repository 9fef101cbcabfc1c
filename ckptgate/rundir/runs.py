"""Other runs on a target: which are live, which are provably dead, which cannot be told.

A run directory ``<target>/ckptgate-*`` holding a manifest part is a run's. Each part names
the process that wrote it (host, boot id, pid namespace, pid, the pid's start time) and has a
lease beside it. A part's process is judged:

- ``ended``: the manifest's end line or the last lease says the run ended (``--keep``);
- on this machine (same host name, boot id and pid namespace, where pids mean the same):
  ``live`` while that pid runs with the recorded start time, else ``dead`` (no such pid, or
  the pid is another process now): provably dead;
- elsewhere (another host, another boot, another container): ``live`` while its lease is
  younger than ``LEASE_FRESH_S``, else ``stale``: not provably dead.

A run is live if any part is, dead only if every part is dead or ended, else stale.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ckptgate.rundir.lease import LEASE_FRESH_S, lease_path, read_lease
from ckptgate.rundir.manifest import (
    MANIFEST_PREFIX,
    Manifest,
    ManifestError,
    ProcessId,
    process_start_ticks,
    read_manifest,
)

RUN_DIR_PREFIX = "ckptgate-"


@dataclass(frozen=True)
class PartState:
    """The judgement of one node's part of a run."""

    node: int
    process: ProcessId
    started_at: str
    state: str
    """``live``, ``dead``, ``stale`` or ``ended``."""
    reason: str
    lease_age_s: float | None


@dataclass
class RunState:
    """Another run found on the target, and what can be proved about it."""

    run_dir: str
    parts: list[PartState] = field(default_factory=list)
    manifests: list[Manifest] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Manifest parts that could not be read."""
    relation: str = "same target"
    """How its target lies to this run's (``rundir.overlap``): ``same target``,
    ``contains``, ``inside`` or ``same filesystem``."""

    @property
    def state(self) -> str:
        states = {p.state for p in self.parts}
        if "live" in states:
            return "live"
        if "stale" in states or not states:
            return "stale"
        return "ended" if states == {"ended"} else "dead"

    @property
    def provably_dead(self) -> bool:
        return self.state in ("dead", "ended")

    @property
    def lease_age_s(self) -> float | None:
        """The youngest lease of its parts (None where none had one)."""
        ages = [p.lease_age_s for p in self.parts if p.lease_age_s is not None]
        return min(ages) if ages else None

    @property
    def started_unix(self) -> float:
        return min((m.started_unix for m in self.manifests), default=0.0)

    def describe(self) -> str:
        """One line: the directory, each part's host, pid, start and what is proved."""
        first = self.parts[0] if self.parts else None
        if first is None:
            return f"{self.run_dir}: {'; '.join(self.problems) or 'no readable manifest'}"
        parts = "; ".join(
            f"node {p.node} host {p.process.host} pid {p.process.pid} started {p.started_at}: "
            f"{p.reason}"
            for p in self.parts
        )
        return f"{self.run_dir} ({parts})"

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": self.run_dir,
            "state": self.state,
            "relation": self.relation,
            "provably_dead": self.provably_dead,
            "parts": [
                {
                    "node": p.node,
                    "host": p.process.host,
                    "pid": p.process.pid,
                    "started_at": p.started_at,
                    "state": p.state,
                    "reason": p.reason,
                    "lease_age_s": p.lease_age_s,
                }
                for p in self.parts
            ],
            "problems": self.problems,
        }


def same_machine(theirs: ProcessId, here: ProcessId) -> bool:
    """Whether a pid of ``theirs`` names a process ``here`` can look up."""
    return (
        theirs.host == here.host
        and theirs.boot_id is not None
        and theirs.boot_id == here.boot_id
        and theirs.pid_namespace == here.pid_namespace
    )


def judge_part(
    manifest: Manifest,
    lease: dict[str, Any] | None,
    *,
    now: float,
    here: ProcessId,
    fresh_s: float = LEASE_FRESH_S,
) -> PartState:
    """Judge one manifest part's process (see the module docstring)."""
    process = manifest.process
    started = str(manifest.header.get("started_at", "?"))
    lease_time = float(lease["time"]) if lease and "time" in lease else manifest.started_unix
    age = max(0.0, now - lease_time)

    def part(state: str, reason: str) -> PartState:
        return PartState(manifest.node, process, started, state, reason, age)

    if manifest.end is not None or (lease and lease.get("ended")):
        kept = manifest.end.get("kept") if manifest.end else None
        return part("ended", "ended normally" + (" (kept)" if kept else ""))
    if same_machine(process, here):
        ticks = process_start_ticks(process.pid)
        if ticks is None:
            return part("dead", f"provably dead: no process {process.pid} on this host")
        if process.start_ticks is not None and ticks != process.start_ticks:
            return part(
                "dead", f"provably dead: pid {process.pid} is another process now (start differs)"
            )
        return part("live", f"running (pid {process.pid} on this host)")
    if age <= fresh_s:
        return part("live", f"lease {age:.0f} s old (fresh)")
    where = "another host" if process.host != here.host else "another boot or pid namespace"
    return part("stale", f"not provably dead ({where}); lease stale for {age:.0f} s")


def manifest_parts_in(run_dir: str) -> list[str]:
    """The manifest parts a run directory holds, by name (node order)."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    found = [n for n in names if n.startswith(MANIFEST_PREFIX) and n.endswith(".jsonl")]

    def node(name: str) -> int:
        digits = name[len(MANIFEST_PREFIX) : -len(".jsonl")]
        return int(digits) if digits.isdigit() else 1 << 30

    return [f"{run_dir}/{n}" for n in sorted(found, key=node)]


def judge_run(
    run_dir: str,
    *,
    now: float | None = None,
    here: ProcessId | None = None,
    fresh_s: float = LEASE_FRESH_S,
) -> RunState | None:
    """Read and judge a run directory's manifest parts; None where it holds none."""
    paths = manifest_parts_in(run_dir)
    if not paths:
        return None
    now = time.time() if now is None else now
    here = here or ProcessId.current()
    state = RunState(run_dir)
    for path in paths:
        try:
            manifest = read_manifest(path)
        except ManifestError as error:
            state.problems.append(str(error))
            continue
        lease = read_lease(lease_path(run_dir, manifest.node))
        state.manifests.append(manifest)
        state.parts.append(judge_part(manifest, lease, now=now, here=here, fresh_s=fresh_s))
    return state


def find_runs(
    root: str,
    *,
    exclude: str | None = None,
    now: float | None = None,
    here: ProcessId | None = None,
    fresh_s: float = LEASE_FRESH_S,
) -> list[RunState]:
    """Every run directory under the target ``root`` that holds a manifest, judged.

    Looks only at entries named ``ckptgate-*``: lists them, reads their manifest parts and
    leases, and touches nothing else.
    """
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    runs = []
    for name in names:
        path = f"{root.rstrip('/')}/{name}"
        if not name.startswith(RUN_DIR_PREFIX) or path == exclude or not os.path.isdir(path):
            continue
        judged = judge_run(path, now=now, here=here, fresh_s=fresh_s)
        if judged is not None:
            runs.append(judged)
    return runs
