"""Checklist 2's message: the parts it names add up to the goodput loss it is judged on."""

from __future__ import annotations

import re

from ckptgate.checks.decisions import interval_from_failure_rate
from ckptgate.sizing import derive, load_profile


def test_the_goodput_message_names_every_part_of_the_loss_it_fails_on() -> None:
    # A long restart read: the restart is most of the loss, and the message must show it.
    profile = load_profile("405b", ["checkpoint.goodput_budget=0.05", "restart.read_s=1200"])
    sizing = derive(profile)
    item = interval_from_failure_rate(profile, sizing)
    assert item.passed is False
    parts = re.findall(r"([\d.]+) % to (failures|restarts|stalls)", item.detail)
    assert [name for _, name in parts] == ["failures", "restarts", "stalls"]
    total = sum(float(value) for value, _ in parts) / 100
    assert abs(total - sizing.goodput_loss_fraction) <= 0.002, (item.detail, total)
    assert f"{sizing.goodput_loss_fraction * 100:.3g} % in all" in item.detail
