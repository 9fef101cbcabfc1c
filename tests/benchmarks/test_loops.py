"""The per-file loops against bare os loops (benchmarks/loops.py): every loop compared, the
run directory removed, and the floor's verdict (a loop under the documented floor fails)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptgate.benchmarks import loops
from ckptgate.benchmarks.pairs import Comparison, Pair
from ckptgate.workloads.storm import floor

needs_shm = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")


@needs_shm
@pytest.mark.parametrize("peer", [loops.PEER, loops.RECORDED])
def test_every_loop_is_compared_with_a_bare_loop_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, peer: str
) -> None:
    """Against the bare system calls, and against them with the report's recording (the
    clock read after each call, the files-done store): what bounds the suite's loops."""
    # the floor's verdict is tested below on set figures: a busy machine must not fail this
    monkeypatch.setattr(floor, "LOOP_FLOOR_FILES_PER_S", 1)
    report = tmp_path / "loops.json"
    argv = ["--target", "/dev/shm", "--files", "64", "--repeats", "2", "--warmup", "0"]
    argv += ["--peer", peer]
    assert loops.main([*argv, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    figures = json.loads(report.read_text())
    comparisons = figures["comparisons"]
    assert [c["kind"] for c in comparisons] == list(loops.LOOPS)
    for comparison in comparisons:
        assert comparison["peer"] == peer and comparison["settings"]["files"] == 64
        assert [r["first"] for r in comparison["repeats"]] == ["suite", "peer"]  # alternated
        assert all(r["suite"] > 0 and r["peer"] > 0 for r in comparison["repeats"])
        assert f"floor: {comparison['kind']} loop" in out
    assert f"median ratio suite/{peer}" in out and "405b" in out
    assert not os.path.exists(comparisons[0]["run_dir"])


def _loop(kind: str, suite_rate_per_s: float) -> Comparison:
    pairs = [Pair(suite_rate_per_s, 2 * suite_rate_per_s) for _ in range(3)]
    return Comparison(kind, "files/s", {}, True, "bare", pairs)


def test_a_loop_under_the_floor_on_a_memory_backed_target_fails_the_benchmark() -> None:
    slow = floor.LOOP_FLOOR_FILES_PER_S / 2
    lines, held = loops.floor_lines([_loop("stat", 10 * slow), _loop("create", slow)], True)
    assert not held
    assert "holds the documented floor" in lines[0]
    assert "create loop" in lines[1] and "BELOW the documented floor" in lines[1]


def test_off_a_memory_backed_target_the_floor_line_carries_no_verdict() -> None:
    slow = floor.LOOP_FLOOR_FILES_PER_S / 2
    lines, held = loops.floor_lines([_loop("create-write-fsync", slow)], False)
    assert held
    assert "no verdict" in lines[0] and "BELOW" not in lines[0]


def test_bad_loop_settings_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        loops.main(["--target", "/dev/shm", "--files", "0"])
    assert "--files and --repeats must be positive" in capsys.readouterr().err
