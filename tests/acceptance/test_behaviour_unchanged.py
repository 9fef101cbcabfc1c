"""Behaviour unchanged (issue 56 part 4): the tmpfs checklist, run as ``ckptgate run`` runs it,
still has the items, requirements and verdict words stored beside this file in
``expected_tmpfs_checklist.json``, so that a refactor that moves the code cannot quietly change
what the suite asks or answers.

The expectation holds only what a run on any machine says the same: each item's id, title,
checklist number, unit, direction, scope words, whether it is gated, and what it requires (as
required and as the full cluster needs it); the gate report's rows in order with their verdict
words; the sizing's requirements (name, title, value, unit, formula, source); the JSON report's
sections; the verdict (its word, its line, what failed, is missing or was not run, the scale
played, the profile as run); and the exit status. Numbers are compared at 12 significant
digits, so that a reordered sum is not a change of behaviour.

It leaves out what a run measures or where it runs: measured values, margins, details and
messages (they carry timings), the load generator's requirement (twice the rate the target was
measured at), host, paths, run directory, start time, free bytes, the filesystem's type and
whether it is memory-backed (``tmp_path`` is on disk on one machine and on tmpfs on another:
the verdict line's memory-backed clause is taken off for the same reason), the storm loop
(native where the C loop was built), other runs on the machine, the sizing's ``measured_by``
(the acceptance modules' paths, which the refactor moves) and the profile's file path. Every
gated item passing is kept: the tmpfs profile's requirements are met with margins of 10x and
more on a busy 2-core machine, on disk as on /dev/shm (the profile's header), as the suite's
other tmpfs runs assume.

To change the expectation on purpose, rewrite it from a run and commit its diff with the change
that explains it::

    CKPTGATE_UPDATE_EXPECTED=1 pytest tests/acceptance/test_behaviour_unchanged.py

The test then skips, naming the file it wrote.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from ckptgate.cli import run_argv
from tests.fixtures.test_plugin import run_pytest

EXPECTED = Path(__file__).with_name("expected_tmpfs_checklist.json")
UPDATE_VARIABLE = "CKPTGATE_UPDATE_EXPECTED"

REQUIRED_FROM_THE_RUN = {"load-generator": "twice the target's measured write rate"}
"""Items whose requirement is itself measured: stored as these words, not as a number."""

MEMORY_BACKED_CLAUSE = "; memory-backed target: its page cache is the storage"
"""What the verdict line adds where the target is memory-backed, as tmp_path is on some
machines and not on others."""

SIGNIFICANT_DIGITS = 12

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the stored checklist has the DCP items, which need PyTorch: "
    "pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)


def _rounded(value: Any) -> Any:
    """``value`` with every float at ``SIGNIFICANT_DIGITS`` significant digits, throughout."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """One checklist item's question and requirement, without what the run measured."""
    required = REQUIRED_FROM_THE_RUN.get(item["id"], item["required"])
    return {
        "title": item["title"],
        "checklist": item["checklist"],
        "unit": item["unit"],
        "better": item["better"],
        "scope": item["scope"],
        "gated": item["passed"] is not None,
        "status": item["status"],
        "required": required,
        "cluster_required": item["cluster_required"],
    }


def _table_rows(stdout: str) -> list[str]:
    """The gate report's rows in the order printed, each as its checklist number, title and
    verdict word (the columns between are measured)."""
    lines = stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if re.match(r"#\s+item\s+required", line))
    rows = []
    for line in lines[start + 2 :]:  # past the header and its rule
        if not line.strip() or line.startswith("scope: "):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows.append(f"{cells[0]}  {cells[1]}  {cells[-1]}")
    return rows


def _verdict(verdict: dict[str, Any], memory_backed: bool) -> dict[str, Any]:
    """The verdict's words and lists, with the memory-backed clause taken off its line."""
    line = verdict["line"]
    if memory_backed:
        line = line.replace(MEMORY_BACKED_CLAUSE, "", 1)
    scale = {key: value for key, value in verdict["scale"].items() if key != "memory_backed"}
    profile = {key: value for key, value in verdict["profile"].items() if key != "source"}
    return {
        "status": verdict["status"],
        "line": line,
        "failed": verdict["failed"],
        "missing": verdict["missing"],
        "not_run": verdict["not_run"],
        "scale": scale,
        "profile": profile,
    }


def behaviour(returncode: int, stdout: str, report: dict[str, Any]) -> dict[str, Any]:
    """What a tmpfs run says that must not change, from its exit status, its terminal output
    and its JSON report (the module docstring says what is in it and what is left out)."""
    requirements = report["sizing"]["requirements"]
    return _rounded(
        {
            "exit_status": {"process": returncode, "report_json": report["exit_status"]},
            "sections": sorted(report),
            "verdict": _verdict(report["verdict"], bool(report["memory_backed"])),
            "gate_report_rows": _table_rows(stdout),
            "items": {item["id"]: _item(item) for item in report["items"]},
            "sizing_requirements": {
                name: {key: r[key] for key in ("title", "value", "unit", "formula", "source")}
                for name, r in requirements.items()
            },
        }
    )


def _as_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_tmpfs_checklist_asks_and_answers_as_it_did(tmp_path: Path) -> None:
    """The whole checklist on a directory of the test's own (under tmp_path: not under
    /dev/shm, where the fast tier's own checklist run is live and would refuse a nested one),
    compared with the stored expectation; a difference fails with a diff of the two."""
    target, report = tmp_path / "target", tmp_path / "report.json"
    target.mkdir()
    result = run_pytest(
        *run_argv([
            "--profile=tmpfs", f"--target={target}", f"--report-json={report}",
            "-p", "no:cacheprovider",
        ]),
        timeout_s=600,
    )  # fmt: skip
    output = result.stdout[-4000:] + result.stderr[-2000:]
    assert report.is_file(), f"the run wrote no JSON report (exit {result.returncode}):\n{output}"
    actual = behaviour(result.returncode, result.stdout, json.loads(report.read_text()))

    if os.environ.get(UPDATE_VARIABLE) == "1":
        EXPECTED.write_text(_as_text(actual), encoding="utf-8")
        pytest.skip(f"{UPDATE_VARIABLE}=1: rewrote {EXPECTED}; review its diff and commit it")

    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    if actual != expected:
        diff = difflib.unified_diff(
            _as_text(expected).splitlines(),
            _as_text(actual).splitlines(),
            fromfile=f"{EXPECTED.name} (stored)",
            tofile="this run",
            lineterm="",
        )
        pytest.fail(
            "the tmpfs checklist's items, requirements or verdict changed; if on purpose, "
            f"rewrite the expectation with {UPDATE_VARIABLE}=1 and commit its diff:\n"
            + "\n".join(diff)
            + f"\n\nthe run's output (tail):\n{output}",
            pytrace=False,
        )
