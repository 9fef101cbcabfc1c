"""``ckptgate compare``: what makes two runs unfair to compare comes first, then the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptgate.cli import main
from ckptgate.report.compare import load_runs, render_html, render_text, unfairness
from tests.report.saved_runs import saved_run


def _save(tmp_path: Path, name: str, data: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_alike_runs_compare_without_warnings(tmp_path: Path) -> None:
    runs = load_runs([_save(tmp_path, "a.json", saved_run(write_s=0.01)),
                      _save(tmp_path, "b.json", saved_run(write_s=0.02))])  # fmt: skip
    assert unfairness(runs) == []


def test_every_unfair_difference_is_named_with_each_runs_value(tmp_path: Path) -> None:
    a = saved_run()
    b = saved_run(profile_overrides=("checkpoint.interval_s=120",), memory_backed=False,
                  version="0.2.0")  # fmt: skip
    b["profile"] = "other"
    b["verdict"]["scale"].update(nodes=1, ranks=2)
    b["write"]["capped"] = True
    runs = load_runs([_save(tmp_path, "a.json", a), _save(tmp_path, "b.json", b)])
    warnings = "\n".join(unfairness(runs))
    assert "cluster profile differs: A tmpfs, B other" in warnings
    assert "sizing interval_s differs: A 60.0 s, B 120 s" in warnings
    assert "sizing stall_budget_s differs" in warnings
    assert "nodes differs: A 2, B 1" in warnings and "ranks differs: A 4, B 2" in warnings
    assert "capped shards differs: A False, B True" in warnings
    assert "suite version (ckptgate_version) differs: A 0.1.0, B 0.2.0" in warnings
    assert "memory-backed target differs: A True, B False" in warnings


def test_the_table_shows_each_item_per_run_and_warnings_come_first(tmp_path: Path) -> None:
    b = saved_run(write_s=0.02, version="0.2.0")
    b["items"] = [i for i in b["items"] if i["id"] != "reader-slowdown"]
    runs = load_runs([_save(tmp_path, "a.json", saved_run(write_s=0.01)),
                      _save(tmp_path, "b.json", b)])  # fmt: skip
    lines = render_text(runs)
    assert lines[0].startswith("WARNING: unfair comparison: suite version")
    assert any(line.startswith("A: ") and "trial, tightest margin x" in line for line in lines)
    header = next(line for line in lines if line.startswith("#  item"))
    assert "A required" in header and "B margin" in header
    persist = next(line for line in lines if line.startswith("5  async persist bandwidth"))
    assert persist.count("9.33 MB/s") == 2 and "66.7 MB/s" in persist and "33.3 MB/s" in persist
    assert "x7.15" in persist and "x3.57" in persist
    slowdown = next(line for line in lines if "dataloader slowdown" in line)
    assert "not run" in slowdown
    page = render_html(runs)
    assert 'class="warning"' in page and "<script" not in page and "B margin" in page


def test_the_commands_take_saved_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _save(tmp_path, "a.json", saved_run())
    b = _save(tmp_path, "b.json", saved_run(write_s=0.5))
    html = tmp_path / "cmp.html"
    assert main(["compare", a, b, "--html", str(html)]) == 0
    assert "async persist bandwidth" in capsys.readouterr().out and html.exists()
    assert main(["report", a, "--html", str(tmp_path / "r.html"),
                 "--csv", str(tmp_path / "r.csv")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("VERDICT ") and (tmp_path / "r-ranks.csv").exists()
    assert main(["report", str(tmp_path / "r.csv")]) == 2


def test_values_that_print_alike_but_differ_show_every_digit_and_the_change(
    tmp_path: Path,
) -> None:
    a, b = saved_run(), saved_run()
    a["sizing"]["largest_shard_bytes"] = 56_012_345
    b["sizing"]["largest_shard_bytes"] = 56_001_000
    runs = load_runs([_save(tmp_path, "a.json", a), _save(tmp_path, "b.json", b)])
    (warning,) = [w for w in unfairness(runs) if "largest_shard_bytes" in w]
    assert warning == (
        "sizing largest_shard_bytes differs: A 56.0 MB (56,012,345 B), "
        "B 56.0 MB (56,001,000 B) (relative to A: B -0.0203 %)"
    )


def test_equal_values_are_no_difference_however_they_were_saved(tmp_path: Path) -> None:
    a, b = saved_run(), saved_run()
    a["sizing"]["largest_shard_bytes"] = 56_000_000
    b["sizing"]["largest_shard_bytes"] = 56_000_000.0  # a float in one file, an int in the other
    runs = load_runs([_save(tmp_path, "a.json", a), _save(tmp_path, "b.json", b)])
    assert [w for w in unfairness(runs) if "largest_shard_bytes" in w] == []
