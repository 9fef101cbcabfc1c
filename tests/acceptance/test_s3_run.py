"""The acceptance suite against an S3 bucket prefix (moto's server on loopback), as a user
runs it: it passes, and the report says what each POSIX-only phase is on an object store.

A green run on an object store means the storage qualified at the scale the verdict states for
what the store can do: the verdict line says no fsync and no atomic commit were qualified, the
header says the upload part size and that no lease protects the target, the create storm's row
says its commit is copy and delete, and the delete storm's row names the batch delete.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.s3server import S3Server

pytestmark = pytest.mark.slow  # the whole checklist on moto: about 4 minutes on 2 cores

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "ckpt"


def test_the_suite_passes_on_s3_with_every_object_store_label(s3: S3Server, tmp_path: Path) -> None:
    report = tmp_path / "s3.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "ckptgate.acceptance",
         "--profile=tmpfs", f"--target=s3://{s3.bucket}/{PREFIX}", *s3.option_args(),
         f"--report-json={report}", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, env=s3.env(),
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-2000:]
    assert "Traceback" not in out

    header = [line for line in out.splitlines() if line.startswith("ckptgate: ")]
    assert any("object store S3 through s3fs: fsync not applicable on object store / no fsync"
               in line for line in header), header  # fmt: skip
    assert any("upload part size 5.24 MB (s3fs default_block_size), tied to the transfer size"
               in line for line in header), header  # fmt: skip
    assert any(line.startswith("ckptgate: no lease protects the target") for line in header)

    (verdict,) = [line for line in out.splitlines() if line.startswith("VERDICT")]
    assert verdict.startswith("VERDICT qualified for tmpfs: Ψ 16.0 M parameters"), verdict
    assert ": every item passed" in verdict, verdict
    assert verdict.endswith(
        "object store (S3 through s3fs): no fsync (objects commit on close), commit by copy "
        "and delete: atomic commit not qualified"
    ), verdict
    rows = out.splitlines()
    assert any("metadata storm create rate [no fsync, commit copy+delete]" in r and "PASS" in r
               for r in rows), out[-4000:]  # fmt: skip
    assert any("retention delete storm [batch delete, " in r and "keys per request]" in r
               and "PASS" in r for r in rows), out[-4000:]  # fmt: skip

    data = json.loads(report.read_text())
    assert (data["object_store"], data["lease"], data["fs_type"]) == ("S3", False, "s3")
    assert data["upload_part_bytes"] == 5 * 2**20
    items = {item["id"]: item for item in data["items"]}
    assert "fsync not applicable on object store" in items["sync-stall"]["detail"]
    assert "fsync 0" not in items["sync-stall"]["detail"]  # no fake zero-time fsync
    assert "commit is copy and delete" in items["metadata-create-rate"]["detail"]
    assert "S3 DeleteObjects through s3fs rm" in items["metadata-delete"]["detail"]
    assert set(data["metadata"]["delete"]["latency_s"]) == {"delete_batch"}
    assert data["write"]["fsync"].startswith("fsync not applicable on object store")
    for read in ("restart-read", "resharded-restore"):
        assert "every read goes to the store: residency not applicable" in items[read]["detail"]

    # The run removed exactly what it made: nothing is left under the prefix.
    fs = s3.filesystem()
    assert not fs.exists(f"{s3.bucket}/{PREFIX}") or fs.find(f"{s3.bucket}/{PREFIX}") == []
