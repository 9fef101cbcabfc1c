"""ckptgate bench verify: verify and fio on the same stamped files, and nothing left after."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptgate.benchmarks import verify_speed


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (Debian: apt-get install fio)")
def test_verify_and_fio_read_the_same_bytes_and_the_run_directory_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    target = tmp_path / "target"
    target.mkdir()
    argv = ["--target", str(target), "--files", "2", "--file-mib", "4", "--jobs", "2"]
    assert verify_speed.main([*argv, "--repeats", "2", "--warmup", "0", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "verify: files=2, file_bytes=4194304, jobs=2" in text
    assert "median ratio suite/fio:" in text
    data = json.loads(out.read_text())
    for repeat in data["repeats"]:
        assert repeat["peer_detail"]["total_bytes"] == 2 * 4 * 2**20  # fio read every byte
        assert repeat["suite"] > 0 and repeat["ratio"] > 0
    assert list(target.iterdir()) == []  # the run directory the benchmark made is gone


def test_verify_speed_refuses_a_count_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        verify_speed.main(["--target", "/nonexistent", "--jobs", "0"])
    assert stop.value.code == 2
    assert "--jobs 0: allowed: 1 or more" in capsys.readouterr().err
