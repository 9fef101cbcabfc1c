"""The checklist run on a bed's client host as a user runs it, and the bounded waits on it.

Shared by the tests of every bed built on the host bed (Ceph, GlusterFS, MooseFS): the suite's
command line (``suite``), a run to its end on one client (``run_in``, ``ckptgate`` for its
verify and clean) or started in the background with its output in a file (``start_in``), a
wait for a step of the run that fails if the run ends first (``wait_for_step``, on
``reached``), the run's own end within ``SAFETY_S`` (``ends``) and its one verdict line
(``verdict_line``); the kept runs a test inspects (``kept_runs``, ``kept_burst``) and a server
fault in the middle of a kept burst (``burst_with_a_fault``); and the client-cache probes every
filesystem's tests make: a client's own timed read of one file (``READS``, ``read_step``), a
kept shard cut while another client looks (``cut_while``) and the verify line that must name it
(``named_at``).

A *root* here is a target directory as this process reaches it (a bed's ``client_path``, through
the client's FUSE process), a *target* the same directory as the client names it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.beds.hosts import HostBed

ROOT = Path(__file__).resolve().parents[2]
SAFETY_S = 900.0
"""A run of the checklist on a bed takes about two minutes on a busy 2-core machine."""
CALL_S = 600.0
"""A bounded call on a client that is not a fault run (a verify, a clean, a kept burst, a
reader's look): ten minutes."""
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
# Faults on a real system. A stall is named at 30 s: well past what rank processes take to
# start on a machine loaded ten times over its cores (10 s was not), well within SAFETY_S.
FAULT_RUN = ["--set", "run.rounds=50", "--set", "run.stall_timeout_s=30", "--accept=trial"]
"""The write burst alone is a trial (items not run): ``--accept=trial`` lets one that passed
exit 0."""
WRITE_BURST = "-mwrite"
"""The write check alone (its rounds and its rows), as ``pytest -m write`` selects it."""
STALLED = r"no progress for 30 s in |the target is hung: \S+ \S+ did not return within 30 s"
"""How a run names a stall at ``FAULT_RUN``'s timeout: a rank's stall watch, in a measured
phase, or node 0's own bounded call on the target between phases (a manifest append, a
removal; seen in CI when an MDS stopped as round 2 was being prepared)."""


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


def ckptgate(hosts: HostBed, client: str, *args: str) -> tuple[int, str]:
    """``ckptgate ARGS`` on ``client`` (verify, clean): its status and output."""
    return run_in(hosts, client, [sys.executable, "-m", "ckptgate", *args], CALL_S)


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


def kept_runs(root: Path) -> list[Path]:
    """The run directories under ``root``."""
    return sorted(root.glob("ckptgate-*"))


def reached(root: Path, step: str, min_bytes: int = 0) -> Callable[[], bool]:
    """Whether a run under ``root`` has a ``write/<step>`` (``step`` a glob) whose files hold
    ``min_bytes`` at least (with 0: whether it exists)."""

    def found() -> bool:
        for directory in root.glob(f"ckptgate-*/write/{step}"):
            held = 0
            with contextlib.suppress(OSError):  # a round is retired as we look
                held = sum(path.stat().st_size for path in directory.iterdir())
            if held >= min_bytes:
                return True
        return False

    return found


def kept_burst(hosts: HostBed, client: str, target: str, root: Path) -> Path:
    """A write burst of one round on ``target``, run by ``client`` and kept (``--keep``); its
    run directory under ``root`` (the same target)."""
    argv = suite(target, "--keep", "--accept=trial", "--set", "run.rounds=1", WRITE_BURST)
    code, out = run_in(hosts, client, argv, CALL_S)
    assert code == 0, out[-4000:]
    (kept,) = kept_runs(root)
    return kept


FAULT_AFTER_BYTES = 16 << 20
"""A fault in a kept burst strikes once a round after the first holds this much: mid-burst,
with fsynced rounds behind it for verify to prove."""


def burst_with_a_fault(
    hosts: HostBed, client: str, target: str, root: Path, fault: Callable[[], object], log: Path
) -> tuple[int, str, Path]:
    """A kept write burst of up to six rounds on ``target`` (``FAULT_RUN``), run by ``client``,
    with ``fault()`` once a later round holds ``FAULT_AFTER_BYTES``; the run's status and
    output, and its run directory under ``root``. No traceback, whatever the fault."""
    argv = suite(target, "--keep", *FAULT_RUN, "--set", "run.rounds=6", WRITE_BURST)
    job = start_in(hosts, client, argv, log)
    step = reached(root, "step-[2-9]*", FAULT_AFTER_BYTES)
    wait_for_step(job, step, f"{FAULT_AFTER_BYTES >> 20} MiB in a round after the first")
    fault()
    code, out = ends(job, log)
    print(out[-3000:])
    assert "Traceback" not in out, out[-4000:]
    (kept,) = kept_runs(root)
    return code, out, kept


def named_stall(out: str) -> None:
    """The run's output names a stall at the stall timeout (``STALLED``)."""
    assert re.search(STALLED, out), out[-4000:]


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


READS = """
import json, os, sys, time
from ckptgate.storage import pagecache as pc
path, step = sys.argv[1], sys.argv[2]
if step == "write":
    with open(path, "wb") as out:
        out.write(os.urandom(int(sys.argv[3])))
        out.flush()
        os.fsync(out.fileno())
    sys.exit(0)
if step != "cached":
    pc.drop_pages(path)
resident = pc.resident_fraction(path)
opened = pc.open_read(path, direct=step == "direct")
buffer = pc.aligned_buffer(4 << 20)
start, done = time.perf_counter(), 0
try:
    while count := pc.read_into(opened.fd, memoryview(buffer), done, opened.direct):
        done += count
finally:
    os.close(opened.fd)
seconds = time.perf_counter() - start
print(json.dumps({"resident": resident, "bytes": done, "seconds": seconds,
                  "direct": opened.direct, "refused": opened.refused}))
"""
"""A client's reads with the suite's own page-cache tools (``ckptgate.storage.pagecache``):
write a file; or drop its pages (not for ``cached``), measure its residency, read it whole
(``direct``: O_DIRECT)."""


def read_step(
    hosts: HostBed,
    client: str,
    path: str,
    step: str,
    file_bytes: int,
    served: Callable[[], int],
) -> dict[str, Any]:
    """One step of ``READS`` on ``client``, with what ``served()`` (the servers' bytes read)
    grew by meanwhile (``served``)."""
    before = served()
    code, out = run_in(hosts, client, [sys.executable, "-c", READS, path, step, str(file_bytes)])
    assert code == 0, out
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1]) if step != "write" else {}
    result["served"] = served() - before
    return result


def items(report: Path) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in json.loads(report.read_text())["items"]}


def largest_shard(run_dir: Path) -> Path:
    return max(run_dir.glob("write/step-*/*"), key=lambda p: p.stat().st_size)


def cut_while(shard: Path, truncate: bool, look: Callable[[], bool]) -> int:
    """Cut ``shard`` from the middle (a page boundary) on: ``truncate`` it there, or zero its
    tail, fsynced; ``look()`` (another client looking now, which must succeed); then put the
    tail back, fsynced: the storage ends whole. Return the cut's offset."""
    cut = shard.stat().st_size // 2 // 4096 * 4096
    with shard.open("r+b") as handle:  # the writer's own view
        handle.seek(cut)
        tail = handle.read()
        if truncate:
            handle.truncate(cut)
        else:
            handle.seek(cut)
            handle.write(bytes(len(tail)))
        handle.flush()
        os.fsync(handle.fileno())
    assert look()
    with shard.open("r+b") as handle:  # the writer puts the bytes back
        handle.seek(cut)
        handle.write(tail)
        handle.flush()
        os.fsync(handle.fileno())
    return cut


def named_at(out: str, relative: str, cut: int, what: str) -> None:
    """``ckptgate verify``'s output names the file ``relative`` (to its run directory) with
    ``what`` (``truncated``, ``byte differs``) at an offset within a page past ``cut``: the
    first byte that differs is the cut, or a byte or so past it where the stamp's byte happens
    to be the zero written."""
    lines = [line for line in out.splitlines() if relative in line]
    assert lines, out
    offset = re.search(r" at offset (\d+): ", lines[0])
    assert offset, lines
    assert cut <= int(offset[1]) < cut + 4096, (cut, lines)
    assert what in lines[0], lines
