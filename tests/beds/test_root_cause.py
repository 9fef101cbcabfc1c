"""One root cause, one failure (issue 22, item 5): an fsync or a write that fails with ENOSPC
on the FUSE bed is one failure, named with rank, file and phase; the tests that needed what it
made are "not measured", naming it, not failed or errored beside it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.beds.faultfs import Fault, faultfs

ROOT = Path(__file__).resolve().parents[2]
SAFETY_S = 300.0
"""A safety net for a busy host, not a deadline under test."""


def test_each_root_cause_is_one_failure_and_what_it_stopped_is_not_measured(
    tmp_path: Path,
) -> None:
    """Before: one ENOSPC gave 9 failed and 2 errored tests. Here two root causes: ENOSPC on
    the first round's fsync (the later tests that need the rounds) and on a write of the
    metadata storm (its module fixture, which every storm test uses)."""
    with faultfs(tmp_path) as bed:
        bed.set_faults(
            Fault("fsync", "error", path="*/write/step-1/__1_0.distcp", errno="ENOSPC", times=1),
            Fault("write", "error", path="*/metadata/step-1/__0_0.distcp", errno="ENOSPC",
                  times=1),
        )  # fmt: skip
        report = tmp_path / "report.json"
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--profile=tmpfs"]
        argv += [f"--target={bed.mount}", "--ranks=2", "--set", "run.shard_bytes_cap=4 MB"]
        argv += [f"--report-json={report}", "-m", "not dcp", "-rs", "ckptgate/acceptance"]
        result = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_S, check=False
        )
        left = list(bed.mount.iterdir())
    text = result.stdout + result.stderr
    assert result.returncode == 1, text[-4000:]
    summary = result.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (failed|errors?|skipped)", summary)}
    assert counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0) == 2, summary
    data = json.loads(report.read_text())
    bad = {i["id"]: i["error"] for i in data["items"] if i["passed"] is False}
    assert set(bad) == {"test:test_write_rounds", "test:test_checklist[metadata-create-rate]"}, bad
    rounds = bad["test:test_write_rounds"]
    assert "global rank 1" in rounds and "No space left" in rounds and "in fsync of" in rounds
    assert "No space left" in bad["test:test_checklist[metadata-create-rate]"]
    stopped = data["not_measured"]
    assert counts["skipped"] >= len(stopped), summary  # each one a skip, "not measured: ..."
    assert {"test_checklist[metadata-restore-stat]", "test_checklist[metadata-delete]"} <= set(
        stopped
    )
    assert stopped["test_checklist[metadata-delete]"] == (
        "not measured: what it needs failed in test_checklist[metadata-create-rate] "
        "(the root cause)"
    )
    assert stopped["test_checklist[restart-read]"] == (
        "not measured: what it needs failed in test_write_rounds (the root cause)"
    )
    assert data["verdict"]["status"] == "failed"
    assert sorted(data["verdict"]["failed"]) == [
        "test_checklist[metadata-create-rate]",
        "test_write_rounds",
    ]
    assert left == [], left


def test_sigterm_during_a_hung_fsync_ends_interrupted_and_lists_what_it_could_not_remove(
    tmp_path: Path,
) -> None:
    """A batch scheduler cancels a run whose fsync hangs: the run says it was interrupted
    (before: ``trial`` from the items it had not reached), exits 12, and leaves nothing on the
    target but what the hung mount kept, each named. The hang is waited for through the bed's
    log, not a sleep."""
    with faultfs(tmp_path) as bed:
        bed.set_faults(Fault("fsync", "hang", path="*/write/step-1/__1_0.distcp", max_s=300))
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--profile=tmpfs"]
        argv += [f"--target={bed.mount}", "--ranks=2", "--set", "run.shard_bytes_cap=4 MB"]
        argv += ["ckptgate/acceptance", "-m", "write"]
        output = tmp_path / "pytest.out"
        with open(output, "w") as out:  # a file: an abandoned rank may hold a pipe open
            session = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            try:
                bed.wait_for(op="fsync", action="hang", timeout_s=SAFETY_S)
                session.send_signal(signal.SIGTERM)
                status = session.wait(timeout=SAFETY_S)
            finally:
                if session.poll() is None:
                    session.kill()
                    session.wait()
        bed.release()
        left = [str(p.relative_to(bed.mount)) for p in bed.mount.rglob("*") if p.is_file()]
    text = output.read_text()
    assert status == 12, text[-4000:]
    assert "VERDICT interrupted for tmpfs: " in text, text[-4000:]
    assert (
        ": SIGTERM during ckptgate/acceptance/test_checklist.py::test_write_rounds "
        "stopped the run after 0 checklist item(s)"
    ) in text, text[-4000:]
    assert "could not remove (the target hung" in text, text[-3000:]
    for name in left:  # only what the hung mount kept, and the run says which; beside it the
        # run's manifest and lease, which stay while a file they list stays (ckptgate clean)
        kept_meta = name.rsplit("/", 1)[-1].startswith(".ckptgate-")
        assert (kept_meta and name.split("/")[0] in text) or name in text, (name, text[-3000:])
