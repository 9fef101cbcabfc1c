"""The sizing table names the acceptance module that measures each requirement: it must exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", SHIPPED_PROFILES, ids=lambda n: f"profile={n}")
def test_every_measured_by_names_an_acceptance_module_that_exists(name: str) -> None:
    sizing = derive(load_profile(name))
    named = {
        module.strip()
        for requirement in sizing.requirements.values()
        if requirement.measured_by
        for module in requirement.measured_by.split(",")
    }
    assert named, "no requirement says which test measures it"
    assert all((ROOT / module).is_file() for module in named), sorted(named)
