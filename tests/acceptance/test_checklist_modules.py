"""The sizing table names the acceptance module that measures each requirement: it must exist."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from ckptgate.sizing import SHIPPED_PROFILES, derive, load_profile
from ckptgate.sizing.checklist import CHECKLIST, ChecklistItem

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
    assert all((ROOT / "ckptgate" / module).is_file() for module in named), sorted(named)


@pytest.mark.parametrize("entry", CHECKLIST, ids=lambda e: e.id)
def test_every_checklist_item_names_a_check_that_exists_and_its_module_calls_it(
    entry: ChecklistItem,
) -> None:
    module_name, function = entry.check.split(":")
    check = getattr(importlib.import_module(f"ckptgate.checks.{module_name}"), function)
    assert callable(check)
    acceptance = (ROOT / "ckptgate" / "acceptance" / entry.module).read_text()
    assert f"{function}(" in acceptance, f"{entry.module} never asks {entry.check}"
