"""The storm's own floor: the rate below which a rank process's per-file loop, not the storage,
would bind a metadata measurement, and what a profile asks of one process.

A storm rate is a floor of the storage's rate (the loop adds its own time to every file): a
slow loop can make a run red, never green. It could make a run red wrongly only where a
requirement came near the loop's own rate; ``tests/workloads/test_storm_floor.py`` holds every
shipped profile's requirement ten times under ``LOOP_FLOOR_FILES_PER_S``, and the loops
benchmark (``python -m ckptgate.benchmarks.loops``) fails when a loop measures below it.
"""

from __future__ import annotations

from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile
from ckptgate.sizing.requirements import Sizing

LOOP_FLOOR_FILES_PER_S = 5_000
"""Files per second one rank process's slowest per-file loop (create, a 4 KiB write, fsync,
close: the checklist's storm) reaches at the least, on a memory-backed target where the
storage's own time is least: 200 us a file. Measured by the loops benchmark: see
benchmarks/README.md, "The loops against bare Python", for the figures it is set under."""

FLOOR_MARGIN = 10
"""How far under the floor every shipped profile's per-process requirement must stay."""


def per_process_rate_per_s(sizing: Sizing) -> float:
    """The most files per second a profile asks of one rank process: the checkpoint's create
    rate (``create_rate_per_s`` = files per checkpoint / create window, SPEC.md) or its
    delete rate (files per checkpoint / interval: the delete storm must finish within the
    interval), whichever is more, as if one process made every file. A run spreads the files
    over every node's rank processes, so each process needs this or less."""
    return max(sizing.create_rate_per_s, sizing.files_per_checkpoint / sizing.interval_s)


def shipped_per_process_rates() -> dict[str, float]:
    """``per_process_rate_per_s`` of every shipped profile (ckptgate/sizing/profiles), by name."""
    return {name: per_process_rate_per_s(derive(load_profile(name))) for name in SHIPPED_PROFILES}
