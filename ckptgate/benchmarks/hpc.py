"""IOR and mdtest (hpc/ior) as peers of the suite's drivers: their command lines and figures.

Neither ships with the suite: build them from https://github.com/hpc/ior outside the checkout
(``./bootstrap && ./configure --prefix=DIR && make install``, with Open MPI's ``mpicc``) and
put ``DIR/bin`` on PATH, or name them with ``--ior`` and ``--mdtest``. A missing binary is one
clear error (``PeerError``), never a skipped comparison that looks like a result.

Both run under ``mpirun`` with one MPI process per suite rank, ``--bind-to none`` (the suite's
ranks are not pinned; Open MPI pins to cores by default at 2 processes or fewer), and
``--oversubscribe``. Their own timers measure between their own barriers, so ``mpirun``'s
start-up is outside both figures, as the suite's process start-up is outside its own.

IOR (``-a POSIX -F``: a file per process, as the suite's burst):
- write: ``-w -e -k``: write ``-b`` bytes in ``-t`` transfers, fsync at close (``-e``), keep
  the files. IOR's bandwidth is the aggregate bytes over the slowest process's open-to-close
  time between barriers, what the suite's span measures.
- read: ``-r -E -k -C -Q shift -O numTasksOnNode0=1``: read the files an earlier write left
  (``-E``), process i the file of process i + shift (``-C -Q``, the suite's ``shift``). IOR
  does not verify (no ``-R``) and does not drop pages: the caller drops them as it does for
  the suite. ``-C -Q`` shifts by nodes: with every process on one node IOR offsets by
  ``Q x tasks on node 0`` modulo the tasks, which is 0, and each process read its own file
  (IOR's ``-vvv`` says "task 0 reading ior.00000000"); telling IOR one task per node makes
  the shift one process, as the suite's is.

mdtest (``-F``, one shared directory: no ``-u``): ``-C -T -r -n N``: every process creates N
empty files, stats them and removes them, each phase between barriers; its rates are the
files of all processes over the phase's time, what the storm's phases measure. As the
checklist runs the storm, ``-w 4096 -y`` adds a 4 KiB write and an fsync to every create.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from ckptgate.benchmarks.pairs import PeerError

MDTEST_PHASES = {"create": "File creation", "stat": "File stat", "unlink": "File removal"}
"""The storm's phase names and mdtest's rows for them."""


def find_tool(name: str, given: str | None = None) -> str:
    """``given`` (a path), or ``name`` on PATH; ``PeerError`` saying how to get it otherwise."""
    path = given or shutil.which(name)
    if not path or not os.access(path, os.X_OK):
        where = f"--{name} {given}" if given else f"{name} on PATH"
        raise PeerError(
            f"{where}: not found or not executable; build IOR and mdtest from "
            "https://github.com/hpc/ior outside this checkout (benchmarks/README.md)"
        )
    return path


def mpirun(ranks: int, launcher: str | None = None) -> list[str]:
    """``mpirun -np RANKS`` with unpinned, oversubscribable processes (and root allowed)."""
    command = [find_tool("mpirun", launcher), "-np", str(ranks), "--bind-to", "none"]
    command.append("--oversubscribe")
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def _run(command: list[str], timeout_s: float) -> str:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise PeerError(f"{command[0]}: no answer within {timeout_s:.0f} s") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise PeerError(f"{' '.join(command)} exited {done.returncode}: {' / '.join(tail)}")
    return done.stdout


def ior_paths(prefix: str, ranks: int) -> list[str]:
    """IOR's file-per-process names: ``{prefix}.%08d`` per process (aiori-POSIX)."""
    return [f"{prefix}.{rank:08d}" for rank in range(ranks)]


def ior_command(
    direction: str,
    prefix: str,
    bytes_per_rank: int,
    transfer_bytes: int,
    *,
    shift: int = 1,
    direct: bool = False,
) -> list[str]:
    """IOR's arguments for one ``write`` or ``read`` of every process's file."""
    if direction not in ("write", "read"):
        raise ValueError(f"direction must be write or read, got {direction!r}")
    args = ["-a", "POSIX", "-F", "-k", "-s", "1", "-i", "1", "-t", str(transfer_bytes)]
    args += ["-b", str(bytes_per_rank), "-o", prefix, "-O", "summaryFormat=JSON"]
    if direction == "write":
        args += ["-w", "-e"]
    else:  # one task per node: -C -Q then shifts by processes (see the module docstring)
        args += ["-r", "-E", "-C", "-Q", str(shift), "-O", "numTasksOnNode0=1"]
    if direct:
        args.append("--posix.odirect")
    return args


@dataclass(frozen=True)
class IorResult:
    """One IOR operation: its aggregate bandwidth and the time it reports."""

    direction: str
    bytes: int
    bytes_per_s: float
    total_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "bytes": self.bytes,
            "bytes_per_s": self.bytes_per_s,
            "total_s": self.total_s,
        }


def parse_ior(document: dict[str, Any], direction: str) -> IorResult:
    """IOR's ``summaryFormat=JSON``: the ``tests[0].Results`` row (one iteration, as a row or
    a list of rows) for ``direction``.

    ``bwMiB`` is MiB/s of the aggregate; ``xsizeMiB`` in ``summary`` the bytes moved.
    """
    try:
        results = document["tests"][0]["Results"]
        rows = [r for item in results for r in (item if isinstance(item, list) else [item])]
        (result,) = [r for r in rows if r["access"] == direction]
        (summary,) = [s for s in document["summary"] if s["operation"] == direction]
        return IorResult(
            direction,
            round(float(summary["xsizeMiB"]) * 2**20),
            float(result["bwMiB"]) * 2**20,
            float(result["totalTime"]),
        )
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise PeerError(f"IOR's JSON has no single {direction} result: {error!r}") from error


def run_ior(
    direction: str,
    prefix: str,
    ranks: int,
    bytes_per_rank: int,
    transfer_bytes: int,
    *,
    shift: int = 1,
    direct: bool = False,
    ior: str | None = None,
    launcher: str | None = None,
    timeout_s: float = 600.0,
) -> IorResult:
    """Run IOR once under mpirun and check it moved every byte."""
    command = [*mpirun(ranks, launcher), find_tool("ior", ior)]
    command += ior_command(
        direction, prefix, bytes_per_rank, transfer_bytes, shift=shift, direct=direct
    )
    output = _run(command, timeout_s)
    start = output.find("{")
    try:
        document = json.loads(output[start:]) if start >= 0 else {}
    except json.JSONDecodeError as error:
        raise PeerError(f"IOR printed no JSON summary: {error}") from error
    result = parse_ior(document, direction)
    if result.bytes != ranks * bytes_per_rank:
        raise PeerError(f"IOR moved {result.bytes} B, expected {ranks * bytes_per_rank}")
    return result


@dataclass(frozen=True)
class MdtestResult:
    """mdtest's rates (files per second over all processes) for create, stat and unlink."""

    files: int
    rates_per_s: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "rates_per_s": self.rates_per_s}


def mdtest_command(
    directory: str, files_per_rank: int, *, write_bytes: int = 0, sync: bool = False
) -> list[str]:
    """mdtest's arguments: files only, one shared directory, create, stat, remove; with
    ``write_bytes`` each create also writes that many bytes (``-w``), and with ``sync`` fsyncs
    the file after its write (``-y``: mdtest's ``sync_file`` sets IOR's ``fsyncPerWrite``),
    all inside the create phase: the checklist's storm (create, 4 KiB write, fsync, close)."""
    command = ["-F", "-C", "-T", "-r", "-n", str(files_per_rank), "-d", directory]
    if write_bytes:
        command += ["-w", str(write_bytes)]
    if sync:
        command.append("-y")
    return command


def mdtest_file_names(rank: int, files_per_rank: int) -> list[str]:
    """The names mdtest's ``-F -C`` gives rank ``rank``'s files in its shared directory:
    ``file.mdtest.RANK.ITEM`` (mdtest.c: ``mk_name`` is ``mdtest.RANK.``, each file
    ``file.`` + ``mk_name`` + its item number)."""
    return [f"file.mdtest.{rank}.{item}" for item in range(files_per_rank)]


def parse_mdtest(output: str, files: int) -> MdtestResult:
    """The ``SUMMARY rate`` table's Max column for each phase (one iteration: Max = Mean)."""
    table = output.split("SUMMARY rate", 1)
    if len(table) < 2:
        raise PeerError("mdtest printed no SUMMARY rate table")
    section = table[1].split("SUMMARY time", 1)[0]
    rates: dict[str, float] = {}
    for phase, row in MDTEST_PHASES.items():
        found = re.search(rf"^\s*{row}\s+([0-9.]+)", section, re.MULTILINE)
        if found is None:
            raise PeerError(f"mdtest's summary has no {row!r} row")
        rates[phase] = float(found.group(1))
    return MdtestResult(files, rates)


def run_mdtest(
    directory: str,
    ranks: int,
    files_per_rank: int,
    *,
    write_bytes: int = 0,
    sync: bool = False,
    mdtest: str | None = None,
    launcher: str | None = None,
    timeout_s: float = 600.0,
) -> MdtestResult:
    """Run mdtest once under mpirun; every file it makes it also removes (``-r``)."""
    command = [*mpirun(ranks, launcher), find_tool("mdtest", mdtest)]
    command += mdtest_command(directory, files_per_rank, write_bytes=write_bytes, sync=sync)
    output = _run(command, timeout_s)
    return parse_mdtest(output, ranks * files_per_rank)
