"""The plugin as a user meets it: options, refusals, the report, and cleanup on any exit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "run.shard_bytes_cap=2 MB", "--set", "run.rounds=1", "-p", "no:cacheprovider"]


def run_pytest(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the suite in a fresh process, as a user would, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_without_target_the_acceptance_tests_skip_and_say_why() -> None:
    result = run_pytest("acceptance/test_write_burst.py", "-rs", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stdout
    assert "no --target given: acceptance tests measure a storage target" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--profile=nosuch"], "nosuch"),
        (["--profile=tmpfs", "--set", "checkpoint.mode=sometimes"], "checkpoint.mode"),
        (["--profile=tmpfs", "--set", "checkpoint.intervall_s=60"], "interval_s"),
        (["--profile=tmpfs", "--target=/nonexistent/ckpt"], "no such directory"),
        (["--profile=tmpfs", "--target=/dev/shm", "--ranks=0"], "--ranks 0"),
        (["--profile=tmpfs", "--target=/dev/shm", "--storage-option=oops"], "KEY=VALUE"),
        (["--profile=tmpfs", "--report-json=/nonexistent/r.json"], "no such directory"),
    ],
    ids=[
        "unknown-profile",
        "bad-mode",
        "misspelt-key",
        "missing-target",
        "zero-ranks",
        "bad-storage-option",
        "report-in-missing-dir",
    ],
)
def test_a_user_mistake_is_one_line_not_a_traceback(args: list[str], expected: str) -> None:
    result = run_pytest(*args, "acceptance", "-p", "no:cacheprovider")
    assert result.returncode == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and expected in errors[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_run_leaves_the_target_as_it_found_it_and_writes_its_report(tmp_path: Path) -> None:
    neighbour = tmp_path / "other-team-checkpoint" / "__0_0.distcp"
    neighbour.parent.mkdir()
    neighbour.write_bytes(b"precious")
    report = tmp_path.parent / f"{tmp_path.name}-report.json"
    result = run_pytest(
        "--profile=tmpfs",
        f"--target={tmp_path}",
        f"--report-json={report}",
        *SMALL,
        "acceptance/test_write_burst.py",
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-team-checkpoint"]
    assert neighbour.read_bytes() == b"precious"
    data = json.loads(report.read_text())
    for key in ("profile", "target", "fs_type", "hostname", "nodes", "ranks", "started_at"):
        assert key in data
    assert {"id", "title", "required", "measured", "unit", "passed", "detail"} <= set(
        data["items"][0]
    )
    write = data["write"]
    assert write["total_bytes"] == sum(r["bytes"] for r in write["ranks"])
    rank = write["ranks"][0]
    for key in (
        "rank",
        "global_rank",
        "bytes",
        "open_s",
        "write_s",
        "fsync_s",
        "close_s",
        "total_s",
    ):
        assert key in rank
    assert write["generator_bytes_per_s"] > 0


def test_keep_leaves_the_run_directory(tmp_path: Path) -> None:
    result = run_pytest(
        "--profile=tmpfs",
        f"--target={tmp_path}",
        "--keep",
        *SMALL,
        "acceptance/test_write_burst.py",
    )
    assert result.returncode == 0, result.stdout[-3000:]
    (run_dir,) = tmp_path.iterdir()
    assert run_dir.name.startswith("ckptgate-")
    assert list(run_dir.rglob("*.distcp"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_removes_what_it_created(tmp_path: Path, signum: int) -> None:
    """Interrupt mid-burst (rounds without end), then find only the neighbour left."""
    neighbour = tmp_path / "keep.me"
    neighbour.write_text("x")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--profile=tmpfs",
            f"--target={tmp_path}",
            "--set",
            "run.rounds=100000",
            "--set",
            "run.shard_bytes_cap=4 MB",
            "-p",
            "no:cacheprovider",
            "acceptance/test_write_burst.py::test_write_burst_rounds",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("ckptgate-*/write/step-3")):
        assert process.poll() is None and time.monotonic() < deadline, "no rounds started"
        time.sleep(0.1)
    process.send_signal(signum)
    output, _ = process.communicate(timeout=120)
    assert process.returncode != 0
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ["keep.me"], f"{left}\n{output[-3000:]}"
