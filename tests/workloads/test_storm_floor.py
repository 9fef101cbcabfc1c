"""No shipped profile asks a rank process for a metadata rate within ten times of the storm
loop's own floor (``ckptgate.workloads.storm.floor``; the floor is measured by
``python -m ckptgate.benchmarks.loops``, benchmarks/README.md). Not timed: arithmetic on the
profiles against the documented constant."""

from __future__ import annotations

import pytest

from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile
from ckptgate.workloads.storm import floor


@pytest.mark.parametrize("name", SHIPPED_PROFILES, ids=lambda name: f"profile={name}")
def test_no_shipped_profile_comes_within_ten_times_of_the_loop_floor(name: str) -> None:
    asked = floor.shipped_per_process_rates()[name]
    assert asked * floor.FLOOR_MARGIN <= floor.LOOP_FLOOR_FILES_PER_S, (
        f"profile {name}: {asked:.3g} files/s per process is within {floor.FLOOR_MARGIN}x of "
        f"the storm loop's floor {floor.LOOP_FLOOR_FILES_PER_S} files/s"
    )


@pytest.mark.parametrize("name", SHIPPED_PROFILES, ids=lambda name: f"profile={name}")
def test_the_per_process_rate_covers_the_checklist_s_create_and_delete(name: str) -> None:
    """At least the create requirement and a checkpoint's files over the interval (the delete
    storm's deadline), as one process would need them making every file."""
    profile = load_profile(name)
    sizing = derive(profile)
    asked = floor.per_process_rate_per_s(sizing)
    assert asked >= sizing.requirements["create_rate_per_s"].value
    assert asked >= sizing.files_per_checkpoint / profile.checkpoint.interval_s
