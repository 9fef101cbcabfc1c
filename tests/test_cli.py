"""The ``ckptgate`` command's own manners: its usage text, a closed pipe, a clean working
directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ckptgate.cli import run_argv
from ckptgate.pipes import CLOSED_PIPE_EXIT


def _ckptgate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ckptgate", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_run_help_names_ckptgate_run_not_pytest(tmp_path: Path) -> None:
    process = _ckptgate("run", "--help", cwd=tmp_path)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert out.splitlines()[0].startswith("usage: ckptgate run [options]")
    assert "python -m pytest" not in out
    assert "--profile" in out and "--target" in out


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """As ``ckptgate sizing 405b | head`` once the reader is gone: the read end is closed before
    the command starts, so its first write meets EPIPE, whatever the timing."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ckptgate", "sizing", "405b", "--sweep"],
            cwd=tmp_path,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == CLOSED_PIPE_EXIT


def test_an_installed_run_leaves_nothing_in_its_working_directory(tmp_path: Path) -> None:
    cwd, target, cache = tmp_path / "cwd", tmp_path / "target", tmp_path / "cache"
    for folder in (cwd, target):
        folder.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    process = _ckptgate(
        "run", "--profile=tmpfs", f"--target={target}", "-m", "decisions", "-q", cwd=cwd, env=env
    )
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0 or "VERDICT" in out, out[-3000:] + err[-3000:]
    assert sorted(os.listdir(cwd)) == []
    assert (cache / "ckptgate" / "pytest").is_dir()  # the documented place


def test_a_run_s_own_cache_choice_is_kept() -> None:
    argv = run_argv(["-o", "cache_dir=/elsewhere", "--benchmark-storage=file:///b"])
    assert argv.count("-o") == 1 and sum("benchmark-storage" in a for a in argv) == 1


def test_a_run_without_pytest_s_cache_is_not_given_a_cache_dir() -> None:
    """``-p no:cacheprovider`` removes the ``cache_dir`` option: setting it then is an error."""
    argv = run_argv(["-p", "no:cacheprovider"])
    assert not any("cache_dir" in a for a in argv)


def test_the_main_job_runs_in_a_checkout_without_the_test_extra(tmp_path: Path) -> None:
    """The README's set-up is `pip install -e .` then `ckptgate run ...` in the checkout: pytest
    loads tests/conftest.py there too (the invocation directory's test* folders), which
    imported hypothesis, a test dependency: the main job died on a ModuleNotFoundError."""
    root = Path(__file__).resolve().parents[1]
    shadow = tmp_path / "hypothesis"  # first on the path: as if hypothesis were not installed
    shadow.mkdir()
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'hypothesis'\")\n"
    )
    argv = run_argv(  # what `ckptgate run` execs; hypothesis's own plugin is not loaded
        ["--profile=tmpfs", "--target=/dev/shm", "--co", "-p", "no:hypothesispytest"]
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *argv],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    assert "ModuleNotFoundError" not in text
    assert "collected" in done.stdout, done.stdout[-2000:]
