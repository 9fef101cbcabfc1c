"""The exit status follows the verdict: only qualified exits 0 unless less is accepted."""

from __future__ import annotations

import pytest

from ckptgate.report.exitcodes import (
    ACCEPT_CHOICES,
    BY_STATUS,
    RunExit,
    exit_status,
    run_exit_status,
)


def test_only_qualified_exits_0_and_every_other_verdict_has_its_own_code() -> None:
    assert exit_status("qualified") == 0
    codes = [exit_status(status) for status in BY_STATUS if status != "qualified"]
    assert 0 not in codes and len(set(codes)) == len(codes)
    pytest_codes = {int(code) for code in pytest.ExitCode}
    assert {int(c) for c in codes} & pytest_codes == {1}  # failed is pytest's TESTS_FAILED


@pytest.mark.parametrize("accept", ACCEPT_CHOICES)
def test_accept_widens_0_to_the_named_verdict_and_no_further(accept: str) -> None:
    accepted = ACCEPT_CHOICES[: ACCEPT_CHOICES.index(accept) + 1]
    for status in BY_STATUS:
        code = exit_status(status, accept)
        assert (code == 0) == (status in accepted), (status, accept)
    assert exit_status("failed", "trial") == RunExit.FAILED
    assert exit_status("error", "trial") == RunExit.NO_VERDICT


def test_an_interrupt_is_interrupted_whatever_pytest_says_and_pytest_failures_stand() -> None:
    assert run_exit_status("interrupted", int(pytest.ExitCode.INTERRUPTED)) == 12
    assert run_exit_status("trial", 0) == RunExit.TRIAL
    assert run_exit_status("qualified", int(pytest.ExitCode.TESTS_FAILED)) == 1
    assert run_exit_status("trial", int(pytest.ExitCode.USAGE_ERROR), "trial") == 4
