"""The file parts of a run's coordination at 256 and 1,024 simulated nodes, in operations
(never seconds): the manifest parts, ``ckptgate verify``, ``ckptgate clean`` and the report's
writers. A part whose work grows faster than the node count fails here.

An operation is a function call (Python's or a builtin's, as ``sys.setprofile`` reports them),
and a file-system call is one of the builtins that reach the kernel (open, stat, listdir ...),
counted apart. Both are deterministic for a given input, whatever the machine's load. A loop
inside one builtin (a list's ``in``) is one call here: the benchmark's fitted exponents of the
seconds (``ckptgate bench scale``) cover those."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ckptgate.benchmarks import scale
from ckptgate.report import figures
from ckptgate.report.compare import load_runs, render_text
from ckptgate.report.csvfiles import write_csv
from ckptgate.report.gate import write_report_json
from ckptgate.report.html import write_html
from ckptgate.report.schema import load_saved
from ckptgate.rundir.clean import clean_run
from ckptgate.rundir.runs import judge_run
from ckptgate.rundir.verify import VerifyReport, verify_run
from tests.report.saved_runs import RANKS_PER_NODE, saved_run_at

SMALL, LARGE = 256, 1024
RANKS = 2
"""Ranks per node for the file parts: the growth with the node count is the point."""
SYSTEM_CALLS = frozenset(
    {"open", "stat", "lstat", "fstat", "scandir", "listdir", "unlink", "remove", "rmdir",
     "rename", "replace", "mkdir", "fsync", "read", "write", "readinto", "close"}
)  # fmt: skip


@dataclass
class Operations:
    calls: int = 0
    system_calls: int = 0


def operations(step: Callable[[], object]) -> Operations:
    """The calls ``step`` makes (and, among them, the file-system calls)."""
    counted = Operations()

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "call":
            counted.calls += 1
        elif event == "c_call":
            counted.calls += 1
            if getattr(arg, "__name__", "") in SYSTEM_CALLS:
                counted.system_calls += 1

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return counted


def assert_linear(part: str, small: Operations, large: Operations, slack: int = 5_000) -> None:
    """Four times the nodes may cost at most four times the operations (and a fixed part)."""
    for name in ("calls", "system_calls"):
        before, after = getattr(small, name), getattr(large, name)
        assert after <= 4.1 * before + slack, (part, name, before, after)


def _run_dir(count: int, root: Path) -> str:
    run_dir = tempfile.mkdtemp(prefix="ckptgate-ops-", dir=root)
    for node in range(count):
        scale.write_manifest_part(run_dir, node, count, RANKS)
    return run_dir


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory of this test's own on tmpfs where there is one (a node's thousand manifest
    parts are fsynced: on a disk that is the test's whole time), removed after it."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    made = Path(tempfile.mkdtemp(prefix="ckptgate-test-ops-", dir="/dev/shm"))
    try:
        yield made
    finally:
        shutil.rmtree(made)


@pytest.fixture
def runs(memory_dir: Path) -> dict[int, str]:
    return {count: _run_dir(count, memory_dir) for count in (SMALL, LARGE)}


def test_writing_a_nodes_manifest_part_costs_the_same_at_any_node_count(memory_dir: Path):
    """Each node writes its own part: its cost may not grow with the node count at all."""

    def part(count: int) -> Callable[[], object]:
        run_dir = tempfile.mkdtemp(dir=memory_dir)
        return lambda: scale.write_manifest_part(run_dir, 0, count, RANKS)

    small, large = operations(part(SMALL)), operations(part(LARGE))
    assert large.calls <= small.calls + 50, (small, large)
    assert large.system_calls <= small.system_calls, (small, large)


def test_verify_of_a_run_grows_no_faster_than_its_nodes_parts(runs: dict[int, str]):
    reports: dict[int, VerifyReport] = {}

    def verify(count: int) -> Callable[[], object]:
        return lambda: reports.setdefault(count, verify_run(runs[count]))

    small, large = operations(verify(SMALL)), operations(verify(LARGE))
    assert reports[LARGE].ok and reports[LARGE].files == LARGE * RANKS
    assert_linear("verify", small, large)


def test_clean_of_a_run_grows_no_faster_than_its_nodes_parts(runs: dict[int, str]):
    def clean(count: int) -> Callable[[], object]:
        def step() -> None:
            state = judge_run(runs[count])
            assert state is not None
            cleaned = clean_run(state)
            assert not cleaned.refused and not cleaned.left
            assert cleaned.removed_files >= count * RANKS

        return step

    small, large = operations(clean(SMALL)), operations(clean(LARGE))
    assert not any(os.path.exists(path) for path in runs.values())
    assert_linear("clean", small, large)


def test_the_reports_writers_and_compare_grow_no_faster_than_the_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The JSON, the CSVs, the page (its figures aside: matplotlib's cost is the benchmark's)
    and ``compare`` of a run at 256 and 1,024 nodes."""
    monkeypatch.setattr(figures, "available", lambda: False)

    def write(count: int) -> Callable[[], object]:
        data = saved_run_at(count * RANKS_PER_NODE)
        out = tmp_path / str(count)
        out.mkdir()

        def step() -> None:
            path = str(out / "report.json")
            write_report_json(data, path)
            saved = load_saved(data, path)
            write_csv(saved, str(out / "report.csv"))
            write_html(saved, str(out / "report.html"), source=path)
            render_text(load_runs([path, path]))

        return step

    small, large = operations(write(SMALL)), operations(write(LARGE))
    assert_linear("report", small, large)
