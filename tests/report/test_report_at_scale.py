"""The report at the users' scale (16,384 ranks): the page shows the slowest ranks' records,
not every one, and the JSON carries every record without indentation or float noise."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path

from ckptgate.checks.table import checklist
from ckptgate.engine.records import RankRecord
from ckptgate.report.gate import GateReport, write_report_json
from ckptgate.report.html import MAX_RANK_ROWS, _rank_table
from ckptgate.report.outputs import write_outputs
from ckptgate.report.saved import bursts, load_report
from ckptgate.report.schema import load_saved
from tests.report.saved_runs import saved_run_at

RANKS = 16384


def test_a_burst_of_16384_ranks_lists_its_slowest_ranks_in_the_page_and_says_where_the_rest_are():
    write = next(bursts(load_saved(saved_run_at(RANKS), "run.json")))
    assert len(write.ranks) == RANKS
    table = _rank_table(write)
    assert table.count("<tr>") - 1 == MAX_RANK_ROWS  # the header row aside
    assert f"the {MAX_RANK_ROWS} slowest ranks' records of {RANKS}" in table
    assert "(slowest)" in table  # the slowest rank of all is among them
    slowest = max(write.ranks, key=lambda r: r.end_s)
    assert f">{slowest.global_rank} (slowest)<" in table
    assert len(table) < 200_000


def test_a_small_burst_still_lists_every_rank():
    write = next(bursts(load_saved(saved_run_at(64), "run.json")))
    table = _rank_table(write)
    assert table.count("<tr>") - 1 == len(write.ranks) == 64
    assert "every rank's record (64 ranks)" in table


def test_the_json_report_is_compact_and_reads_back_the_same(tmp_path: Path):
    data = saved_run_at(2048)
    path = tmp_path / "run.json"
    write_report_json(data, str(path))
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == 1 and "  " not in text
    assert json.loads(text) == data


def test_a_gate_reports_json_goes_through_the_same_writer(tmp_path: Path):
    path = tmp_path / "gate.json"
    GateReport(checklist=checklist(), meta={"profile": "tmpfs"}).write_json(str(path))
    assert path.read_text(encoding="utf-8").count("\n") == 1


def test_a_records_times_are_kept_to_the_nanosecond():
    record = RankRecord(0, 0, "h", 1, 0.1 + 0.2, 0.7 + 1e-12, {"write": 0.4 + 1e-13})
    data = record.to_json()
    assert data["start_s"] == 0.3 and data["write_s"] == 0.4
    assert repr(data["end_s"]) == "0.7"
    assert data["total_s"] == 0.4


def _report_of(run_dir: str) -> dict[str, object]:
    """A report whose write record names two files in ``run_dir`` and one in a sibling
    directory whose name ``run_dir`` begins, and whose item message holds a path."""
    return {
        "run_dir": run_dir,
        "target": run_dir.rsplit("/", 1)[0],
        "items": [{"message": f"read {run_dir}/read/__0_0.distcp from the cache"}],
        "write": {
            "ranks": [
                {
                    "path": f"{run_dir}/write/step-1/__0_0.distcp",
                    "files": [{"path": f"{run_dir}/write/step-1/__0_0.distcp", "bytes": 1}],
                    "ranges": [[f"{run_dir}/write/step-1/__1_0.distcp", 0, 1]],
                    "other": f"{run_dir}-2/write/__0_0.distcp",
                }
            ]
        },
    }


def test_paths_inside_the_run_directory_are_written_relative_to_it(tmp_path: Path):
    run_dir = "/lustre/scratch/ckpt/ckptgate-20261206T160852Z-node0001-704236"
    path = tmp_path / "run.json"
    write_report_json(_report_of(run_dir), str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    record = data["write"]["ranks"][0]
    assert record["path"] == record["files"][0]["path"] == "write/step-1/__0_0.distcp"
    assert record["ranges"] == [["write/step-1/__1_0.distcp", 0, 1]]
    assert record["other"] == f"{run_dir}-2/write/__0_0.distcp"  # not inside the run directory
    assert data["run_dir"] == run_dir and data["target"] == "/lustre/scratch/ckpt"
    assert data["items"][0]["message"] == f"read {run_dir}/read/__0_0.distcp from the cache"


def test_a_run_directory_that_json_escapes_is_matched_as_encoded(tmp_path: Path):
    run_dir = '/mnt/réseau "a"\\b/ckptgate-1'  # non-ASCII, a quote and a backslash
    path = tmp_path / "run.json"
    write_report_json(_report_of(run_dir), str(path))
    record = json.loads(path.read_text(encoding="utf-8"))["write"]["ranks"][0]
    assert record["path"] == "write/step-1/__0_0.distcp"
    assert record["other"] == f"{run_dir}-2/write/__0_0.distcp"


def test_a_report_without_a_run_directory_keeps_its_paths(tmp_path: Path):
    data = _report_of("/dev/shm/ckptgate-1")
    del data["run_dir"]
    path = tmp_path / "run.json"
    write_report_json(data, str(path))
    assert json.loads(path.read_text(encoding="utf-8")) == data


def test_a_quoted_path_inside_a_message_and_a_run_dir_with_a_slash_stay_whole(tmp_path: Path):
    """A message that quotes a path of the run directory in double quotes (``OSError`` does
    when the path holds a ``'``) was rewritten after its escaped quote; a ``run_dir`` given
    with a trailing slash blanked the report's own ``run_dir``; ``run_dir//x`` became ``/x``."""
    run_dir = "/mnt/t/ckptgate-1"
    data = {
        "run_dir": f"{run_dir}/",
        "message": f'could not open "{run_dir}/write/x"',
        "double": f"{run_dir}//x",
        "path": f"{run_dir}/write/x",
    }
    path = tmp_path / "run.json"
    write_report_json(data, str(path))
    back = json.loads(path.read_text(encoding="utf-8"))
    assert back == {**data, "path": "write/x"}


def _collections_during(work: Callable[[], object]) -> int:
    """How many cyclic garbage collections started while ``work`` ran (after a pause, the
    first allocation past the threshold may start one, for the objects counted meanwhile)."""
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        work()
    finally:
        gc.callbacks.remove(count)
    return len(started)


def test_reading_and_writing_a_large_report_pause_the_cyclic_collector(tmp_path: Path):
    """``compare`` reads and node 0 writes a tree of every rank's records, freed by reference
    counting: with the collector on, each collection scanned the whole growing tree (compare
    of a 2,048-node report 3.18 s on, 2.46 s paused; ``engine.collector``)."""
    path = tmp_path / "run.json"
    write_report_json(saved_run_at(256), str(path))
    assert _collections_during(lambda: load_report(path)) <= 1
    report = GateReport(checklist=checklist(), meta={"profile": "tmpfs"})
    report.section("write", saved_run_at(256)["write"])
    json_path, csv_path = str(tmp_path / "g.json"), str(tmp_path / "g.csv")
    assert (
        _collections_during(lambda: write_outputs(report, json_path=json_path, csv_path=csv_path))
        <= 1
    )
    assert gc.isenabled()
