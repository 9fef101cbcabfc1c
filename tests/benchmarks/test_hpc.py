"""IOR and mdtest as peers (benchmarks/hpc.py): their command lines, their figures, and the
comparisons end to end where the tools are installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ckptgate.benchmarks import compare, fio, hpc, storms
from ckptgate.benchmarks.pairs import PeerError
from ckptgate.engine.pool import RankPool
from ckptgate.rundir.target import Target
from ckptgate.sizing.units import MiB
from ckptgate.workloads.fileplan import shard_file_name
from ckptgate.workloads.storm import WRITE_BYTES

HERE = Path(__file__).parent

IOR_JSON = {
    # the shape of IOR 4.1's summaryFormat=JSON, cut to what parse_ior reads
    "tests": [
        {
            "Results": [
                {"access": "write", "bwMiB": 3781.3935, "totalTime": 0.0338},
                {"access": "read", "bwMiB": 9000.0, "totalTime": 0.0142},
            ]
        }
    ],
    "summary": [
        {"operation": "write", "xsizeMiB": 128.0},
        {"operation": "read", "xsizeMiB": 128.0},
    ],
}


def test_ior_s_bandwidth_and_bytes_are_read_in_bytes() -> None:
    write = hpc.parse_ior(IOR_JSON, "write")
    assert write.bytes == 128 * MiB
    assert write.bytes_per_s == pytest.approx(3781.3935 * MiB)
    assert write.total_s == 0.0338
    assert hpc.parse_ior(IOR_JSON, "read").bytes_per_s == pytest.approx(9000.0 * MiB)


def test_ior_s_results_as_a_list_per_iteration_are_read_too() -> None:
    nested = json.loads(json.dumps(IOR_JSON))
    nested["tests"][0]["Results"] = [nested["tests"][0]["Results"]]
    assert hpc.parse_ior(nested, "read").total_s == 0.0142


def test_an_ior_document_without_the_operation_is_a_peer_error() -> None:
    with pytest.raises(PeerError, match="no single read result"):
        hpc.parse_ior({"tests": [{"Results": []}], "summary": []}, "read")


def test_ior_s_command_matches_the_suite_s_burst_and_readback() -> None:
    write = hpc.ior_command("write", "/d/ior", 64 * MiB, 16 * MiB)
    assert {"-F", "-w", "-e", "-k"} <= set(write) and "-r" not in write
    assert write[write.index("-t") + 1] == str(16 * MiB)
    assert write[write.index("-b") + 1] == str(64 * MiB)
    read = hpc.ior_command("read", "/d/ior", 64 * MiB, 16 * MiB, shift=3, direct=True)
    assert {"-r", "-E", "-C", "--posix.odirect"} <= set(read) and "-w" not in read
    assert read[read.index("-Q") + 1] == "3"
    assert "numTasksOnNode0=1" in read  # else -C -Q shift by nodes: by 0 on one node
    assert hpc.ior_paths("/d/ior", 2) == ["/d/ior.00000000", "/d/ior.00000001"]
    with pytest.raises(ValueError, match="write or read"):
        hpc.ior_command("append", "/d/ior", MiB, MiB)


def test_mdtest_s_summary_gives_create_stat_and_unlink_rates() -> None:
    result = hpc.parse_mdtest((HERE / "mdtest_output.txt").read_text(), files=16)
    assert result.rates_per_s == {"create": 240.085, "stat": 497102.696, "unlink": 133417.225}


def test_mdtest_output_without_a_summary_is_a_peer_error() -> None:
    with pytest.raises(PeerError, match="no SUMMARY rate"):
        hpc.parse_mdtest("mdtest: cannot create directory", files=1)


def test_mdtest_s_checklist_command_writes_and_fsyncs_each_file() -> None:
    """As checks/metadata.py runs the storm: a 4 KiB write and an fsync per create (-w -y)."""
    pure = hpc.mdtest_command("/d", 8)
    assert "-w" not in pure and "-y" not in pure
    checklist = hpc.mdtest_command("/d", 8, write_bytes=WRITE_BYTES, sync=True)
    assert checklist == [*pure, "-w", "4096", "-y"]


def test_the_checklist_variant_sets_the_storm_s_write_and_fsync() -> None:
    assert compare.BenchSettings(variant="checklist").storm_write_bytes == WRITE_BYTES == 4096
    assert compare.BenchSettings(variant="checklist").storm_fsync
    assert (
        compare.BenchSettings().storm_write_bytes == 0 and not compare.BenchSettings().storm_fsync
    )
    with pytest.raises(ValueError, match="--variant checklist: only metadata has variants"):
        compare.BenchSettings(variant="checklist").peer_for("create")
    with pytest.raises(ValueError, match="--variant full: use pure or checklist"):
        compare.BenchSettings(variant="full")


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
@pytest.mark.parametrize(
    ("variant", "ops"),
    [("pure", ["create", "close"]), ("checklist", ["create", "write", "fsync", "close"])],
)
def test_the_suite_s_storm_runs_each_variant_s_operations(variant: str, ops: list[str]) -> None:
    """The suite's side of ``metadata`` (no mdtest needed): the checklist variant writes and
    fsyncs every file, the pure one neither."""
    settings = compare.BenchSettings(ranks=2, files=8, variant=variant)
    target = Target("/dev/shm")
    target.create_run_dir()
    try:
        with RankPool(2) as pool:
            suite = compare._suite_storm(target, settings, pool, 1, ("create",), "mdtest")
            figures = suite("t0")
            # each repeat removes its emptied directory, as mdtest's -r removes its tree: a
            # repeat must not run beside the last one's emptied 65,536-entry directory
            assert os.listdir(str(target.run_dir)) == [
                name for name in os.listdir(str(target.run_dir)) if name.startswith(".ckptgate")
            ]
    finally:
        target.cleanup()
    assert figures["create"][1]["ops"] == ops
    assert not os.path.exists(str(target.run_dir))


def test_mdtest_s_and_fio_s_names_for_a_rank_s_files_are_their_own() -> None:
    assert hpc.mdtest_file_names(1, 3) == ["file.mdtest.1.0", "file.mdtest.1.1", "file.mdtest.1.2"]
    assert fio.create_job_names(0, 2) == ["create.0.0", "create.0.1"]
    with pytest.raises(ValueError, match="--file-names mdtest: use dcp or peer"):
        compare.BenchSettings(file_names="mdtest")


def _dcp_names(rank: int, files_per_rank: int) -> list[str]:
    return [shard_file_name(rank, index) for index in range(files_per_rank)]


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
@pytest.mark.parametrize(
    ("file_names", "peer", "names"),
    [
        ("dcp", "mdtest", _dcp_names),
        ("peer", "mdtest", hpc.mdtest_file_names),
        ("peer", "fio", fio.create_job_names),
    ],
)
def test_the_suite_s_storm_creates_dcp_s_names_or_with_file_names_peer_the_peer_s(
    file_names: str,
    peer: str,
    names: Callable[[int, int], list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--file-names peer``: the suite's storm creates the peer's names in its directory,
    rank r the peer's rank r's, so both sides of the comparison create the same names; by
    default DCP's, as the checklist's storm. 5 files on 2 ranks: 3 each, as both sides round
    up. What is on disk is listed before the storm's files are removed."""
    settings = compare.BenchSettings(ranks=2, files=5, file_names=file_names)
    target = Target("/dev/shm")
    target.create_run_dir()
    on_disk: list[str] = []
    remove_files = target.remove_files

    def listing(paths: list[str]) -> None:
        on_disk.extend(sorted(os.listdir(os.path.dirname(paths[0]))))
        remove_files(paths)

    monkeypatch.setattr(target, "remove_files", listing)
    try:
        with RankPool(2) as pool:
            compare._suite_storm(target, settings, pool, 1, ("create",), peer)("t0")
    finally:
        target.cleanup()
    assert on_disk == sorted(names(0, 3) + names(1, 3))
    rank_names = storms.storm_names(settings, peer)
    assert rank_names == (None if file_names == "dcp" else [names(0, 3), names(1, 3)])


def test_a_missing_tool_says_where_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(PeerError, match=r"--ior .*not found.*github.com/hpc/ior"):
        hpc.find_tool("ior", str(tmp_path / "ior"))


def test_a_missing_peer_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["write", "--target", "/dev/shm", "--peer", "ior", "--ior", "/nonexistent/ior"]
    assert compare.main(argv) == 2
    assert "not found or not executable" in capsys.readouterr().err


def test_a_peer_the_kind_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="--peer mdtest: write compares with fio or ior"):
        compare.BenchSettings(peer="mdtest").peer_for("write")


needs_hpc = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("ior", "mdtest", "mpirun"))
    or not os.path.isdir("/dev/shm"),
    reason="needs ior and mdtest (built from github.com/hpc/ior, see benchmarks/README.md) "
    "and mpirun on PATH, and /dev/shm",
)


@needs_hpc
@pytest.mark.parametrize("kind", ["write", "read"])
def test_compare_with_ior_end_to_end_leaves_nothing_behind(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "figures.json"
    argv = [kind, "--target", "/dev/shm", "--peer", "ior", "--ranks", "2"]
    argv += ["--bytes-per-rank", "2MiB", "--transfer", "1MiB", "--repeats", "2", "--warmup", "0"]
    assert compare.main([*argv, "--json", str(report)]) == 0
    assert "median ratio suite/ior" in capsys.readouterr().out
    figures = json.loads(report.read_text())
    assert figures["peer"] == "ior" and len(figures["repeats"]) == 2
    assert all(r["peer"] > 0 and r["suite"] > 0 for r in figures["repeats"])
    assert all(r["suite_detail"]["start_skew_s"] >= 0 for r in figures["repeats"])
    if kind == "read":  # the same files, so the same pages: not files written at other times
        assert "IOR read the suite's own files (hard links under IOR's names)" in figures["notes"]
    assert not os.path.exists(figures["run_dir"])


@needs_hpc
def test_ior_s_read_takes_the_next_process_s_file_on_one_node(tmp_path: Path) -> None:
    """IOR's -C -Q shift by nodes; on one node every process read its own file until IOR
    was told one task per node. Its -vvv names the file each task reads."""
    prefix = f"{tmp_path}/ior"
    hpc.run_ior("write", prefix, 2, MiB, MiB, timeout_s=120)
    command = [*hpc.mpirun(2, None), hpc.find_tool("ior", None)]
    command += [*hpc.ior_command("read", prefix, MiB, MiB, shift=1), "-vvv"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    assert f"task 0 reading {prefix}.00000001" in out.stdout
    assert f"task 1 reading {prefix}.00000000" in out.stdout


@needs_hpc
def test_compare_metadata_with_mdtest_gives_three_comparisons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "figures.json"
    argv = ["metadata", "--target", "/dev/shm", "--ranks", "2", "--files", "64"]
    assert compare.main([*argv, "--repeats", "1", "--warmup", "0", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    for kind in ("create", "stat", "unlink"):
        assert f"{kind}: target=/dev/shm" in out
    figures = json.loads(report.read_text())["comparisons"]
    assert [c["kind"] for c in figures] == ["create", "stat", "unlink"]
    assert all(c["peer"] == "mdtest" and c["repeats"][0]["peer"] > 0 for c in figures)
    assert not os.path.exists(figures[0]["run_dir"])


@needs_hpc
def test_compare_metadata_as_the_checklist_runs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--variant checklist``: both sides write 4 KiB and fsync each file (mdtest -w -y)."""
    report = tmp_path / "figures.json"
    argv = ["metadata", "--target", "/dev/shm", "--ranks", "2", "--files", "64"]
    argv += ["--variant", "checklist", "--repeats", "1", "--warmup", "0"]
    assert compare.main([*argv, "--json", str(report)]) == 0
    assert "variant=checklist" in capsys.readouterr().out
    figures = json.loads(report.read_text())["comparisons"]
    assert all(c["settings"]["variant"] == "checklist" for c in figures)
    create = figures[0]["repeats"][0]
    assert create["suite_detail"]["ops"] == ["create", "write", "fsync", "close"]
    assert create["peer"] > 0 and not os.path.exists(figures[0]["run_dir"])
