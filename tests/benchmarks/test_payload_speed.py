"""``ckptgate bench payload``: the keystream against a memory copy, as interleaved pairs with
a ratio; no timing is asserted (the figures are the benchmark's, not the test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptgate.benchmarks.payload_speed import main
from ckptgate.engine import keystream


@pytest.mark.parametrize("use", ["c", "numpy"])
def test_the_command_writes_pairs_and_a_ratio_for_either_keystream(
    tmp_path: Path, use: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if use == "c" and keystream.native() is None:
        pytest.skip("the C keystream is not built in this install (no C compiler at install)")
    out = tmp_path / "payload.json"
    argv = ["--transfer-mib", "1", "--transfers", "2", "--repeats", "2", "--warmup", "0"]
    assert main([*argv, "--keystream", use, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["kind"], data["peer"], data["settings"]["keystream"]) == (
        "generate",
        "memcpy",
        use,
    )
    assert [r["first"] for r in data["repeats"]] == ["suite", "peer"]
    assert all(r["ratio"] > 0 for r in data["repeats"])
    assert "median ratio suite/memcpy" in capsys.readouterr().out


def test_a_bad_count_is_one_line() -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--transfers", "0"])
    assert stopped.value.code == 2
