"""The exit status of a run: it follows the verdict, so a script that gates on it gates right.

SPEC.md, "What a verdict means": only ``qualified`` exits 0 unless the user asked to accept
less. pytest's own codes are 0 to 5 (``pytest.ExitCode``); the verdicts that are not a
qualification take codes of their own above them, so a pipeline can tell them apart:

====  =============================================================
code  meaning
====  =============================================================
0     qualified (or a narrower verdict the user accepted, ``--accept``)
1     failed: an item failed or a test errored (pytest's TESTS_FAILED)
10    partial: every item passed, on fewer nodes than the profile's
11    trial: a rehearsal (capped shards, items not run, trial settings)
12    interrupted: Ctrl-C or SIGTERM stopped the run
13    no verdict: the run measured nothing
====  =============================================================
"""

from __future__ import annotations

from enum import IntEnum

from ckptgate.report.verdict import Status


class RunExit(IntEnum):
    """The run's exit status by verdict (see the module docstring)."""

    QUALIFIED = 0
    FAILED = 1
    PARTIAL = 10
    TRIAL = 11
    INTERRUPTED = 12
    NO_VERDICT = 13


ACCEPT_CHOICES: tuple[str, ...] = ("qualified", "partial", "trial")
"""What ``--accept`` may name, widest claim first: each accepts itself and every verdict before
it (``--accept=trial`` also accepts ``partial``: a rehearsal on fewer nodes is a trial)."""

BY_STATUS: dict[Status, RunExit] = {
    "qualified": RunExit.QUALIFIED,
    "failed": RunExit.FAILED,
    "partial": RunExit.PARTIAL,
    "trial": RunExit.TRIAL,
    "interrupted": RunExit.INTERRUPTED,
    "error": RunExit.NO_VERDICT,
}


def exit_status(status: Status, accept: str = "qualified") -> RunExit:
    """The exit status of a verdict, given the narrowest verdict the user accepts."""
    if status in ACCEPT_CHOICES and ACCEPT_CHOICES.index(status) <= ACCEPT_CHOICES.index(accept):
        return RunExit.QUALIFIED
    return BY_STATUS[status]


def run_exit_status(status: Status, pytest_status: int, accept: str = "qualified") -> int:
    """The exit status of a run that gave a verdict, from pytest's own: an interrupt is
    ``INTERRUPTED`` whatever pytest says; where pytest found nothing wrong (0) the verdict
    decides; any other pytest status (a test of the suite itself failed, a collection error,
    a usage error) stands, since it already says the run is not green."""
    if status == "interrupted":
        return RunExit.INTERRUPTED
    if pytest_status == 0:
        return exit_status(status, accept)
    return pytest_status
