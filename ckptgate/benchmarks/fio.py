"""fio, the reference the suite's drivers are compared with: job text, running, parsing.

Every job is passed to fio on standard input (``fio -``), so the benchmark writes no job file:
the only files that appear on the target are the ones fio writes or creates for the workload,
inside a directory the benchmark made and registered, under names we know in advance
(``filename_format`` or a per-job ``filename``). fio never unlinks (``unlink=0``); the
benchmark removes what it registered, untimed, between repeats.

Bandwidth is computed the way fio's ``group_reporting`` does: total bytes of all jobs over the
longest job's runtime (fio's ``runtime`` runs from a job's start to the end of its I/O,
including ``end_fsync``; milliseconds). That is the closest fio has to the suite's span (common
start to the last rank's end); fio's jobs start nearly together but not from one barrier.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.benchmarks.pairs import PeerError
from ckptgate.engine.records import per_second

MIN_VERSION = (3, 1)
"""filecreate and create_on_open need fio 3.1 or later; Debian bookworm ships 3.33."""

JOB_FILENAME_FORMAT = "$jobname.$jobnum.$filenum"

SCHEDULING = """fio jobs run as threads of one fio process (``thread=1``), never as processes.

A fio job process calls setsid(), so with the kernel's autogroup scheduling
(/proc/sys/kernel/sched_autogroup_enabled = 1, the default on desktop and many server
kernels) every job becomes its own scheduling group and gets a whole fair share of the CPU
against every other group on the machine, while the suite's N ranks share the one group of the
session that started them. On a busy machine that alone gave fio up to twice the suite's
bandwidth on tmpfs. As threads, fio's jobs share its session's group, as the ranks do.
``thread=False`` (``--fio-processes``) restores fio's default for machines without autogroup.
"""


class FioError(PeerError):
    """fio is missing, too old, or a job failed; the message is one line for the user."""


def fio_binary(name: str = "fio") -> str:
    """The path of fio, or a ``FioError`` that says how to get it."""
    path = shutil.which(name)
    if path is None:
        raise FioError(f"{name} not found on PATH; install it (Debian/Ubuntu: apt-get install fio)")
    return path


def parse_version(text: str) -> tuple[int, int]:
    """``fio-3.33`` (as ``fio --version`` prints it) -> (3, 33)."""
    found = re.search(r"fio-(\d+)\.(\d+)", text)
    if not found:
        raise FioError(f"cannot read a fio version from {text.strip()!r}")
    return int(found.group(1)), int(found.group(2))


def fio_version(binary: str | None = None) -> tuple[int, int]:
    """The installed fio's version; ``FioError`` when older than ``MIN_VERSION``."""
    binary = binary or fio_binary()
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    version = parse_version(out.stdout + out.stderr)
    if version < MIN_VERSION:
        wanted = ".".join(map(str, MIN_VERSION))
        raise FioError(f"fio {version[0]}.{version[1]} is too old; the benchmark needs {wanted}+")
    return version


def _section(name: str, options: dict[str, Any]) -> str:
    lines = [f"[{name}]"]
    for key, value in options.items():
        if isinstance(value, bool):
            value = int(value)
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def _common(transfer_bytes: int, direct: bool, thread: bool) -> dict[str, Any]:
    return {
        "thread": thread,  # see SCHEDULING
        "ioengine": "psync",  # one blocking pwrite/pread per transfer, as the suite's ranks do
        "bs": transfer_bytes,
        "iodepth": 1,
        "direct": direct,
        "unlink": False,  # the benchmark removes exactly what it registered
        "fallocate": "none",
    }


def write_job(
    directory: str,
    ranks: int,
    bytes_per_rank: int,
    transfer_bytes: int,
    *,
    direct: bool = False,
    thread: bool = True,
    name: str = "write",
) -> str:
    """fio's twin of the write burst: ``ranks`` jobs, one new file each, fsync before close.

    ``create_on_open`` makes each job create its file when it opens it, inside the timed run;
    by default fio lays the file out (creates and sizes it) before the clock starts, which the
    suite cannot do. Buffers are fio's default: random once, ``scramble_buffers`` per write.
    """
    options = {
        **_common(transfer_bytes, direct, thread),
        "rw": "write",
        "size": bytes_per_rank,
        "nrfiles": 1,
        "numjobs": ranks,
        "directory": directory,
        "filename_format": JOB_FILENAME_FORMAT,
        "create_on_open": True,
        "end_fsync": True,
        "fsync_on_close": True,
    }
    return _section(name, options)


def write_job_paths(directory: str, ranks: int, name: str = "write") -> list[str]:
    """The files ``write_job`` makes, so that they can be registered before fio runs."""
    return [f"{directory}/{name}.{job}.0" for job in range(ranks)]


def read_job(
    paths: Sequence[str],
    bytes_per_file: int,
    transfer_bytes: int,
    *,
    direct: bool = False,
    invalidate: bool = True,
    thread: bool = True,
    name: str = "read",
) -> str:
    """fio's twin of the readback: one job per file, reading the whole file sequentially.

    One section per job names its file (the suite's rank i reads the file rank i+shift wrote,
    so the benchmark passes the paths in that order). ``invalidate=1`` drops each file's
    cached pages (posix_fadvise DONTNEED) before the job reads it, like the suite's readback;
    ``direct=1`` reads with O_DIRECT. fio must not create or extend anything here.
    """
    text = _section(
        "global",
        {
            **_common(transfer_bytes, direct, thread),
            "rw": "read",
            "size": bytes_per_file,
            "invalidate": invalidate,
            "allow_file_create": False,
            "create_on_open": False,
        },
    )
    for job, path in enumerate(paths):
        text += _section(f"{name}{job}", {"filename": path.replace(":", r"\:")})
    return text


def create_job(
    directory: str,
    ranks: int,
    files_per_rank: int,
    *,
    file_bytes: int = 0,
    thread: bool = True,
    name: str = "create",
) -> str:
    """fio's file creation storm: ``ranks`` jobs each create and close ``files_per_rank`` files.

    ``ioengine=filecreate`` opens each file with O_CREAT and closes it (``openfiles=1``); fio
    counts one I/O per file when ``filesize`` equals ``bs``, so its IOPS is the create rate.
    """
    size = max(file_bytes, 1)
    options = {
        "thread": thread,  # see SCHEDULING
        "ioengine": "filecreate",
        "rw": "read",  # filecreate accounts its creates as reads; nothing is read
        "fallocate": "none",
        "filesize": size,
        "bs": size,
        "nrfiles": files_per_rank,
        "openfiles": 1,
        "create_on_open": True,
        "unlink": False,
        "numjobs": ranks,
        "directory": directory,
        "filename_format": JOB_FILENAME_FORMAT,
    }
    return _section(name, options)


def create_job_names(job: int, files_per_rank: int, name: str = "create") -> list[str]:
    """The names ``create_job``'s job ``job`` gives its files: ``NAME.JOB.INDEX``."""
    return [f"{name}.{job}.{index}" for index in range(files_per_rank)]


def create_job_paths(
    directory: str, ranks: int, files_per_rank: int, name: str = "create"
) -> list[str]:
    """The files ``create_job`` makes."""
    return [
        f"{directory}/{file_name}"
        for job in range(ranks)
        for file_name in create_job_names(job, files_per_rank, name)
    ]


@dataclass(frozen=True)
class FioJobResult:
    """One fio job's figures in its main direction (write, or read for reads and creates)."""

    name: str
    direction: str
    io_bytes: int
    total_ios: int
    runtime_s: float
    """fio's ``runtime``: the job's start to the end of its I/O, end_fsync included."""
    job_runtime_s: float
    bw_bytes_per_s: float
    iops: float
    error: int


@dataclass(frozen=True)
class FioResult:
    """A whole fio run: its jobs, and aggregates defined as fio's group_reporting does."""

    version: str
    jobs: tuple[FioJobResult, ...]

    @property
    def total_bytes(self) -> int:
        return sum(job.io_bytes for job in self.jobs)

    @property
    def total_ios(self) -> int:
        return sum(job.total_ios for job in self.jobs)

    @property
    def span_s(self) -> float:
        """The longest job's runtime (fio's group runtime)."""
        return max((job.runtime_s for job in self.jobs), default=0.0)

    @property
    def aggregate_bytes_per_s(self) -> float:
        return per_second(self.total_bytes, self.span_s)

    @property
    def aggregate_iops(self) -> float:
        return per_second(self.total_ios, self.span_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "total_bytes": self.total_bytes,
            "total_ios": self.total_ios,
            "span_s": self.span_s,
            "aggregate_bytes_per_s": self.aggregate_bytes_per_s,
            "aggregate_iops": self.aggregate_iops,
            "jobs": [vars(job) for job in self.jobs],
        }


def parse_output(document: dict[str, Any]) -> FioResult:
    """Parse ``fio --output-format=json`` (jobs reported separately, no group_reporting)."""
    jobs = []
    for job in document.get("jobs", []):
        direction = max(("read", "write"), key=lambda d: job.get(d, {}).get("total_ios", 0))
        figures = job[direction]
        jobs.append(
            FioJobResult(
                name=job["jobname"],
                direction=direction,
                io_bytes=int(figures["io_bytes"]),
                total_ios=int(figures["total_ios"]),
                runtime_s=figures["runtime"] / 1e3,
                job_runtime_s=job.get("job_runtime", figures["runtime"]) / 1e3,
                bw_bytes_per_s=float(figures["bw_bytes"]),
                iops=float(figures["iops"]),
                error=int(job.get("error", 0)),
            )
        )
    failed = [job for job in jobs if job.error]
    if failed:
        raise FioError(f"fio job {failed[0].name} failed with error {failed[0].error}")
    return FioResult(document.get("fio version", "fio"), tuple(jobs))


def run_fio(job_text: str, binary: str | None = None, timeout_s: float = 600.0) -> FioResult:
    """Run a job given as text (on stdin, no job file) and parse its JSON output."""
    binary = binary or fio_binary()
    command = [binary, "--output-format=json", "-"]
    try:
        done = subprocess.run(
            command, input=job_text, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise FioError(f"fio did not finish within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise FioError(f"fio exited with status {done.returncode}: {last[0]}")
    text = done.stdout
    # fio prints notes ("fio: ...") before the JSON document on some versions.
    start = text.find("{")
    if start < 0:
        raise FioError("fio printed no JSON output")
    return parse_output(json.loads(text[start:]))
