"""A real kept run re-verified: every file the suite wrote is checked and labelled by what
wrote it (the storm's ``.metadata`` included, which was size-checked as "PyTorch DCP's"), and
the JSON records how the readback and the resharded restore verified what they read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptgate.cli import main
from tests.fixtures.test_plugin import run_pytest


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One small kept run of the write, restart and metadata items (removed with pytest's
    temporary directory)."""
    root = tmp_path_factory.mktemp("kept")
    target, report = root / "target", root / "report.json"
    target.mkdir()
    result = run_pytest(
        "--profile=tmpfs", f"--target={target}", "--keep", f"--report-json={report}",
        "--accept=trial",  # shards capped: a rehearsal, which is all this test needs
        "--set", "run.rounds=1", "--set", "run.shard_bytes_cap=4 MB",
        "--set", "run.metadata_files=64", "-p", "no:cacheprovider",
        "ckptgate/acceptance", "-m", "write or restart or metadata",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    (run_dir,) = target.glob("ckptgate-*")
    return run_dir, json.loads(report.read_text())


@pytest.mark.parametrize("section", ["read", "reshard"])
def test_the_json_records_each_reads_verification(
    kept_run: tuple[Path, dict], section: str
) -> None:
    verification = kept_run[1][section]["verification"]
    assert verification is not None
    assert verification["when"] in ("after the read", "in the read")
    assert verification["bytes"] == kept_run[1][section]["total_bytes"] > 0
    assert verification["seconds"] > 0
    assert "resident_fraction" in verification


def test_a_flipped_byte_in_the_storms_metadata_is_named_with_file_and_offset(
    kept_run: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = kept_run[0]
    assert main(["verify", str(run_dir)]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert "PyTorch DCP" not in summary and "size checked only" not in summary  # no DCP ran
    assert "metadata storm's commit (.metadata): 1" in summary and "metadata storm: 64" in summary
    (commit,) = run_dir.glob("metadata/step-*/.metadata")
    data = bytearray(commit.read_bytes())
    for offset in (100, len(data) - 7):  # in the listing, in the padding
        data[offset] ^= 0x01
        commit.write_bytes(data)
        assert main(["verify", str(run_dir)]) == 1
        first = capsys.readouterr().out.splitlines()[0]
        relative = commit.relative_to(run_dir)
        writer = "metadata storm's commit (.metadata)"
        assert first.startswith(f"ckptgate verify: {relative} ({writer}) at offset {offset}: ")
        data[offset] ^= 0x01
    commit.write_bytes(data)
    assert main(["verify", str(run_dir)]) == 0
