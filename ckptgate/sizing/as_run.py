"""The cluster profile as run: its name, what ``--set`` changed, and the size it implies.

A verdict names what it proved (SPEC.md, "What a verdict means": "the verdict names the
profile as run (overrides that change its size or requirements included)"). A shipped profile
is named by its name; any other file by its path and the first 12 hex digits of the SHA-256 of
its bytes, since a path alone does not say which profile it held. A ``--set`` that changes a
field outside ``run`` and ``dcp`` (the suite's own I/O settings and the small DCP model) changes
the job's size or its requirements: the profile is then "modified", and every changed key is
named with the profile's value and the value run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ckptgate.sizing.profile import Profile, profile_to_dict
from ckptgate.sizing.requirements import Sizing
from ckptgate.sizing.units import format_bytes, format_count

SHORT_DIGEST_CHARS = 12
"""Hex digits of the profile file's SHA-256 shown (48 bits: no accidental collision)."""

SHIPPED_SOURCE = "sizing/profiles/"
"""How a shipped profile's ``source`` begins (``ckptgate.sizing.profile._locate``)."""

SUITE_SETTINGS = ("run.", "dcp.", "name", "description")
"""Keys that do not size the job or its requirements: the suite's own I/O settings (a trial
setting among them makes the verdict ``trial`` by itself), the DCP test model, the labels."""


@dataclass(frozen=True)
class Change:
    """One field a ``--set`` changed: its key, the profile's value, the value run."""

    key: str
    profile_value: Any
    run_value: Any

    def words(self) -> str:
        return f"{self.key} {self.profile_value} -> {self.run_value}"


@dataclass(frozen=True)
class ProfileAsRun:
    """What the verdict, the header and every report file call the profile."""

    name: str
    source: str
    shipped: bool
    sha256: str | None
    """Short SHA-256 of the profile file (None for a shipped profile)."""
    changes: tuple[Change, ...]
    """Fields that size the job or its requirements, changed by ``--set``."""
    settings: tuple[Change, ...]
    """The suite's own settings changed by ``--set`` (``run.*``, ``dcp.*``)."""
    parameters: int
    checkpoint_bytes: int
    gpus: int
    nodes: int

    @property
    def modified(self) -> bool:
        return bool(self.changes)

    def label(self) -> str:
        """``7b``, ``7b modified (cluster.gpus 64 -> 4)``, ``file x.yaml (sha256 1a2b...)``."""
        base = self.name if self.shipped else f"{self.source} (sha256 {self.sha256})"
        if not self.changes:
            return base
        return f"{base} modified ({'; '.join(c.words() for c in self.changes)})"

    def size_words(self) -> str:
        """Ψ, the checkpoint's bytes, GPUs and nodes (decimal units, SPEC.md "Units")."""
        return (
            f"Ψ {format_count(self.parameters)} parameters, checkpoint "
            f"{format_bytes(self.checkpoint_bytes)}, {format_count(self.gpus)} GPUs on "
            f"{format_count(self.nodes)} node{'s' if self.nodes != 1 else ''}"
        )

    def words(self) -> str:
        return f"{self.label()}: {self.size_words()}"

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "modified": self.modified,
            "label": self.label(),
            "size_words": self.size_words(),
        }


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"a.b.c": value}``."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def profile_as_run(
    profile: Profile, run: Profile, sizing: Sizing, sha256: str | None = None
) -> ProfileAsRun:
    """Compare the profile as loaded (``profile``) with the one run (``run``, after ``--set``).

    ``sha256`` is the hex digest of a non-shipped profile file's bytes (shortened here)."""
    before, after = flatten(profile_to_dict(profile)), flatten(profile_to_dict(run))
    changed = [
        Change(key, before.get(key), after.get(key))
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    ]
    suite = tuple(c for c in changed if c.key.startswith(SUITE_SETTINGS))
    shipped = run.source == f"{SHIPPED_SOURCE}{profile.name}.yaml"
    return ProfileAsRun(
        name=profile.name,
        source=run.source,
        shipped=shipped,
        sha256=None if shipped or sha256 is None else sha256[:SHORT_DIGEST_CHARS],
        changes=tuple(c for c in changed if c not in suite),
        settings=suite,
        parameters=sizing.parameters,
        checkpoint_bytes=sizing.checkpoint_bytes,
        gpus=sizing.gpus,
        nodes=sizing.nodes,
    )
