"""python -m ckptgate.sizing: the table, --json, --sweep, one-line usage errors (exit status 2)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ckptgate.sizing", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_json_parses_with_the_issue_keys():
    result = run_cli("405b", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["profile"] == "405b"
    assert data["checkpoint_bytes"] == 5_670_000_000_000
    assert data["files_per_checkpoint"] == 16385
    assert data["requirements"]["async_persist_planned_bytes_per_s"]["formula"] == (
        "5.67 TB per save / 600 s x 2.5 headroom"
    )


def test_table_reads_like_a_procurement_sheet():
    result = run_cli("405b")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("Cluster profile 405b: ")
    assert "| requirement" in out and "| derived / measured" in out
    for text in (
        "5.67 TB",
        "945 GB/s",
        "23.6 GB/s",
        "9.45 GB/s",
        "68.3 /s",
        "56.7 TB",
        "16,385 files",
        "measured by -m write",
        "largest",
    ):
        assert text in out, text


def test_set_overrides_change_the_numbers():
    result = run_cli("405b", "--set", "checkpoint.interval_s=20 min", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stall_budget_s"] == 12.0


def test_sweep_lists_intervals():
    result = run_cli("405b", "--sweep")
    assert result.returncode == 0, result.stderr
    assert "Young" in result.stdout and "chosen" in result.stdout
    assert "lost work" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(("406b",), "405b", id="unknown-profile"),
        pytest.param(("405b", "--set", "cluster.gpus=0"), "cluster.gpus", id="zero"),
        pytest.param(("405b", "--set", "nonsense"), "key.path=value", id="set-without-equals"),
        pytest.param(("405b", "--set", "checkpoint.mode=fast"), "sync, async", id="bad-enum"),
        pytest.param(("405b", "--set", "cluster.parallelism.dp=3"), "tp*pp*dp", id="tp-pp-dp"),
        pytest.param(("405b", "--bogus"), "unrecognized arguments", id="bad-option"),
        pytest.param((), "PROFILE", id="no-profile"),
        pytest.param(("405b", "--json", "--sweep"), "not allowed", id="json-and-sweep"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args, expected):
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sizing: error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_malformed_yaml_file_is_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: {parameters: 7e9\n")
    result = run_cli(str(path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"{path}:" in result.stderr


def test_a_replay_says_which_requirements_it_is_judged_by(tmp_path):
    """Under checkpoint.replay the async persist is the replayed bytes', the rest the
    profile's: the sizing output says so (it said nothing, and the verdict said 'the
    requirements the profile's')."""
    result = run_cli("tmpfs", "--set", f"checkpoint.replay={tmp_path}")
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("checkpoint.replay"))
    assert "replayed bytes / interval x headroom" in line and "is the profile's" in line
    assert "checkpoint.replay" not in run_cli("tmpfs").stdout


def test_the_writer_a_dcp_profile_gets_is_said_in_the_table_and_the_json():
    """Issue 35 item 3 in the sizing's own output: tmpfs saves with DCP (its dcp: section) and
    gives no cluster.layout.writer, so the table's header and --json say which layout it gets;
    405b (no dcp: section) says nothing of it."""
    table = run_cli("tmpfs")
    assert table.returncode == 0, table.stderr
    header = table.stdout.split("\n\n")[0].splitlines()
    told = [line for line in header if "cluster.layout.writer" in line]
    assert len(told) == 1 and told[0].startswith("writer: megatron (the default): "), header
    data = json.loads(run_cli("tmpfs", "--json").stdout)
    assert data["profile_notes"] == told
    plain = run_cli("405b", "--json")
    assert json.loads(plain.stdout)["profile_notes"] == []
    assert "cluster.layout.writer" not in run_cli("405b").stdout
