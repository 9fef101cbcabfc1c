"""The checklist run on a bed's client host as a user runs it, and the bounded waits on it.

Shared by the tests of every bed built on the host bed (Ceph, GlusterFS): the suite's command
line (``suite``), a run to its end on one client (``run_in``) or started in the background
with its output in a file (``start_in``), a wait for a step of the run that fails if the run
ends first (``wait_for_step``), the run's own end within ``SAFETY_S`` (``ends``) and its one
verdict line (``verdict_line``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from tests.beds.hosts import HostBed

ROOT = Path(__file__).resolve().parents[2]
SAFETY_S = 900.0
"""A run of the checklist on a bed takes about two minutes on a busy 2-core machine."""
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
# Faults on a real system. A stall is named at 30 s: well past what rank processes take to
# start on a machine loaded ten times over its cores (10 s was not), well within SAFETY_S.
FAULT_RUN = ["--set", "run.rounds=50", "--set", "run.stall_timeout_s=30", "--accept=trial"]
"""The write burst alone is a trial (items not run): ``--accept=trial`` lets one that passed
exit 0."""
WRITE_BURST = "ckptgate.acceptance.test_write_burst"


def suite(target: str, *args: str) -> list[str]:
    """The checklist as a user runs it; ``args`` may end with the modules to run."""
    modules = [a for a in args if a.startswith("ckptgate.acceptance")] or ["ckptgate.acceptance"]
    options = [a for a in args if not a.startswith("ckptgate.acceptance")]
    return [
        sys.executable, "-m", "pytest", "--pyargs", *modules,
        "-p", "no:cacheprovider", "-p", "no:randomly", "--color=no",
        "--profile=tmpfs", f"--target={target}", *options,
    ]  # fmt: skip


def _env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {**os.environ, **extra}
    for proxy in PROXIES:
        env.pop(proxy, None)
    return env


def run_in(
    hosts: HostBed,
    client: str,
    argv: Sequence[str],
    timeout_s: float = SAFETY_S,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """Run ``argv`` on ``client``, bounded; its exit status and its output (both streams)."""
    done = hosts.run(client, argv, timeout_s=timeout_s, cwd=ROOT, env=_env(env or {}))
    return done.returncode, done.stdout + done.stderr


def start_in(
    hosts: HostBed,
    client: str,
    argv: Sequence[str],
    log: Path,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start ``argv`` on ``client``, its output to ``log``: a file, not a pipe, because rank
    processes hung in the kernel keep a pipe open after the suite's own process has ended."""
    with log.open("w") as out:
        return hosts.popen(
            client, argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=_env(env or {})
        )


def verdict_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("VERDICT")]
    assert len(lines) == 1, output[-4000:]
    return lines[0]


def wait_for_step(job: subprocess.Popen[str], found: Callable[[], bool], what: str) -> None:
    """Return once ``found()``; fail if the job ends first (bounded)."""
    deadline = time.monotonic() + SAFETY_S
    while not found():
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            pytest.fail(f"the run never reached {what} (exit status {job.wait(30)})")
        time.sleep(0.2)


def ends(job: subprocess.Popen[str], log: Path) -> tuple[int, str]:
    """The suite's exit status and output: its own process must end by itself within
    ``SAFETY_S`` (rank processes it abandoned in the kernel may outlive it)."""
    try:
        code = job.wait(timeout=SAFETY_S)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait(timeout=30)
        pytest.fail(f"the run did not end within {SAFETY_S:.0f} s:\n{log.read_text()[-4000:]}")
    return code, log.read_text()
