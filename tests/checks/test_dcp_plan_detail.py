"""The dcp-bytes item says how the real save's files compare with DCP's planner replayed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from ckptgate.checks.dcp import DcpRun, planned_files_text
from ckptgate.dcp.driver import FileInfo
from ckptgate.sizing import load_profile
from ckptgate.sizing.dcp_plan import dcp_save_layout


def _run(files: dict[str, int]) -> DcpRun:
    profile = load_profile("tmpfs")
    result = SimpleNamespace(file_list=[FileInfo(n, s, s) for n, s in files.items()])
    return DcpRun(ctx=cast(Any, SimpleNamespace(profile=profile)), result=cast(Any, result),
                  suite_write=None)  # fmt: skip


def _planned() -> dict[str, int]:
    spec = load_profile("tmpfs").dcp
    plan = dcp_save_layout(spec.architecture, 14, spec.world_size, spec.thread_count, "fsdp")
    return dict(plan.files)


def test_a_save_as_planned_reads_every_file_within_two_percent() -> None:
    files = _planned()
    text = planned_files_text(_run({**files, ".metadata": 1000}))
    assert f"names {len(files)} data files" in text and "every file within 2 %" in text


def test_a_file_off_the_plan_is_named() -> None:
    files = _planned()
    name = sorted(files)[-1]
    text = planned_files_text(_run({**files, name: files[name] * 2}))
    assert f"1 off by > 2 % ({name}, ...)" in text
    missing = dict(files)
    del missing[name]
    assert "1 off by > 2 %" in planned_files_text(_run(missing))
