"""The fio side of the benchmarks: job text, JSON parsing, and a tiny real run on /dev/shm."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ckptgate.benchmarks import compare, fio, pairs, storms
from ckptgate.rundir.target import Target

MiB = 2**20


def sections(job_text: str) -> dict[str, dict[str, str]]:
    """fio's job format is ini; ``$jobname`` must stay as it is (no interpolation)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(job_text)
    return {name: dict(parser[name]) for name in parser.sections()}


# Trimmed from `fio --output-format=json` (fio 3.33, Debian), 2 jobs x 64 MiB, bs=4m, tmpfs;
# the second job carries made-up figures so that the aggregate differs from either job's.
FIO_SAMPLE = {
    "fio version": "fio-3.33",
    "global options": {"rw": "write", "bs": "4194304", "end_fsync": "1"},
    "jobs": [
        {
            "jobname": "write",
            "groupid": 0,
            "error": 0,
            "job_runtime": 31,
            "read": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0, "total_ios": 0},
            "write": {
                "io_bytes": 67108864,
                "bw_bytes": 3728270222,
                "iops": 888.888889,
                "runtime": 18,
                "total_ios": 16,
            },
        },
        {
            "jobname": "write",
            "groupid": 0,
            "error": 0,
            "job_runtime": 40,
            "read": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0, "total_ios": 0},
            "write": {
                "io_bytes": 67108864,
                "bw_bytes": 2097152000,
                "iops": 500.0,
                "runtime": 32,
                "total_ios": 16,
            },
        },
    ],
}


def test_write_job_is_one_new_file_per_rank_fsynced_before_close():
    job = sections(fio.write_job("/t/run/w0-fio", 4, 256 * MiB, 4 * MiB))
    assert list(job) == ["write"]
    options = job["write"]
    assert options["numjobs"] == "4"
    assert options["nrfiles"] == "1"
    assert options["filename_format"] == "$jobname.$jobnum.$filenum"
    assert options["directory"] == "/t/run/w0-fio"
    assert options["bs"] == str(4 * MiB)
    assert options["size"] == str(256 * MiB)
    assert options["rw"] == "write"
    assert options["end_fsync"] == "1"
    assert options["fsync_on_close"] == "1"
    assert options["direct"] == "0"
    assert options["create_on_open"] == "1"  # created inside the timed run, not laid out first
    assert options["fallocate"] == "none"
    assert options["unlink"] == "0"  # the benchmark removes what it registered
    assert options["thread"] == "1"  # jobs share the caller's scheduling group, as ranks do


def test_write_job_direct_is_passed_through():
    job = sections(fio.write_job("/d", 1, MiB, MiB, direct=True))
    assert job["write"]["direct"] == "1"


def test_write_job_paths_follow_the_filename_format():
    assert fio.write_job_paths("/t/d", 3) == ["/t/d/write.0.0", "/t/d/write.1.0", "/t/d/write.2.0"]


def test_read_job_reads_each_given_file_whole_with_the_cache_dropped():
    job = sections(fio.read_job(["/t/a", "/t/b"], 64 * MiB, 16 * MiB))
    assert job["global"]["rw"] == "read"
    assert job["global"]["bs"] == str(16 * MiB)
    assert job["global"]["size"] == str(64 * MiB)
    assert job["global"]["invalidate"] == "1"
    assert job["global"]["allow_file_create"] == "0"
    assert job["global"]["unlink"] == "0"
    assert [job[name]["filename"] for name in ("read0", "read1")] == ["/t/a", "/t/b"]


def test_read_job_escapes_colons_in_file_names():
    job = sections(fio.read_job(["/t/a:b"], MiB, MiB))
    assert job["read0"]["filename"] == r"/t/a\:b"


def test_create_job_creates_files_per_rank_with_filecreate():
    options = sections(fio.create_job("/t/c", 2, 500))["create"]
    assert options["ioengine"] == "filecreate"
    assert options["numjobs"] == "2"
    assert options["nrfiles"] == "500"
    assert options["openfiles"] == "1"
    assert options["filesize"] == options["bs"]  # one counted I/O per file
    assert options["unlink"] == "0"
    paths = fio.create_job_paths("/t/c", 2, 500)
    assert len(paths) == 1000
    assert paths[0] == "/t/c/create.0.0"
    assert paths[-1] == "/t/c/create.1.499"


def test_parse_output_aggregates_as_group_reporting_does():
    result = fio.parse_output(FIO_SAMPLE)
    assert result.version == "fio-3.33"
    assert [job.direction for job in result.jobs] == ["write", "write"]
    assert [job.runtime_s for job in result.jobs] == [0.018, 0.032]
    assert result.jobs[1].job_runtime_s == 0.040
    assert result.total_bytes == 2 * 67108864
    assert result.span_s == 0.032
    assert result.aggregate_bytes_per_s == pytest.approx(2 * 67108864 / 0.032, rel=1e-12)
    assert result.aggregate_iops == pytest.approx(32 / 0.032, rel=1e-12)
    assert result.jobs[0].iops == pytest.approx(888.888889)
    json.dumps(result.to_json())  # serialisable for --json


def test_parse_output_names_a_failed_job():
    sample = json.loads(json.dumps(FIO_SAMPLE))
    sample["jobs"][1]["error"] = 28
    with pytest.raises(fio.FioError, match="error 28"):
        fio.parse_output(sample)


def test_parse_version():
    assert fio.parse_version("fio-3.33\n") == (3, 33)
    with pytest.raises(fio.FioError, match="cannot read"):
        fio.parse_version("fio version unknown")


def test_missing_fio_says_how_to_install_it():
    with pytest.raises(fio.FioError, match="apt-get install fio"):
        fio.fio_binary("no-such-fio-binary-ckptgate")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("256MiB", 256 * MiB), ("4m", 4 * MiB), ("1GB", 10**9), ("4096", 4096), ("1 GiB", 2**30)],
)
def test_parse_size(text, expected):
    assert compare.parse_size(text) == expected


def test_parse_size_refuses_an_unknown_unit():
    with pytest.raises(Exception, match="invalid size"):
        compare.parse_size("4 parsecs")


needs_fio_shm = pytest.mark.skipif(
    shutil.which("fio") is None or not os.path.isdir("/dev/shm"),
    reason="needs fio on PATH and /dev/shm",
)


@pytest.fixture
def shm_target():
    """A Target on /dev/shm with a new run directory; removes exactly what it registered."""
    target = Target("/dev/shm")
    target.create_run_dir()
    yield target
    report = target.cleanup()
    assert not report.left
    assert target.run_dir is not None and not os.path.exists(target.run_dir)


@needs_fio_shm
def test_tiny_real_fio_run_writes_reads_and_creates_only_the_registered_files(shm_target):
    target = shm_target
    write_dir = target.new_dir("w")
    paths = fio.write_job_paths(write_dir, 2)
    target.register(paths)
    written = fio.run_fio(fio.write_job(write_dir, 2, 2 * MiB, MiB))
    assert sorted(os.listdir(write_dir)) == sorted(os.path.basename(p) for p in paths)
    assert all(os.path.getsize(p) == 2 * MiB for p in paths)
    assert written.total_bytes == 4 * MiB
    assert len(written.jobs) == 2
    assert written.aggregate_bytes_per_s > 0

    read = fio.run_fio(fio.read_job(paths[::-1], 2 * MiB, MiB))
    assert read.total_bytes == 4 * MiB
    assert {job.direction for job in read.jobs} == {"read"}
    assert sorted(os.listdir(write_dir)) == sorted(os.path.basename(p) for p in paths)

    create_dir = target.new_dir("c")
    created = fio.create_job_paths(create_dir, 2, 10)
    target.register(created)
    storm = fio.run_fio(fio.create_job(create_dir, 2, 10))
    assert storm.total_ios == 20
    assert sorted(os.listdir(create_dir)) == sorted(os.path.basename(p) for p in created)


@needs_fio_shm
def test_read_job_never_creates_a_missing_file(shm_target):
    directory = shm_target.new_dir("r")
    with pytest.raises(fio.FioError):
        fio.run_fio(fio.read_job([f"{directory}/absent"], MiB, MiB))
    assert os.listdir(directory) == []


@needs_fio_shm
def test_compare_write_end_to_end_leaves_nothing_behind(tmp_path, capsys):
    report = tmp_path / "write.json"
    argv = ["write", "--target", "/dev/shm", "--ranks", "1", "--bytes-per-rank", "1MiB"]
    argv += ["--transfer", "256KiB", "--repeats", "1", "--warmup", "0", "--json", str(report)]
    assert compare.main(argv) == 0
    out = capsys.readouterr().out
    assert "median ratio suite/fio" in out
    figures = json.loads(report.read_text())
    assert figures["kind"] == "write"
    assert len(figures["repeats"]) == 1
    assert figures["memory"]["peak_rss_bytes"][0] > 0
    assert figures["run_dir"].startswith("/dev/shm/ckptgate-")
    assert not os.path.exists(figures["run_dir"])


@needs_fio_shm
def test_compare_create_with_file_names_peer_creates_fio_s_names_from_the_command_line(
    tmp_path, capsys, monkeypatch
):
    """``--file-names peer`` reaches the suite's storm from the command line: it creates
    fio's names, rank by rank (7 files on 2 ranks: 4 each, as both sides round up), and the
    header and the JSON say so."""
    named = []
    make_files = storms.storm_files

    def recording(directory, files, files_per_rank, rank_names=None):
        named.append(rank_names)
        return make_files(directory, files, files_per_rank, rank_names)

    monkeypatch.setattr(storms, "storm_files", recording)
    report = tmp_path / "create.json"
    argv = ["create", "--target", "/dev/shm", "--ranks", "2", "--files", "7"]
    argv += ["--file-names", "peer", "--repeats", "1", "--warmup", "0", "--json", str(report)]
    assert compare.main(argv) == 0
    assert "file_names=peer" in capsys.readouterr().out
    assert named == [[fio.create_job_names(0, 4), fio.create_job_names(1, 4)]]
    figures = json.loads(report.read_text())
    assert figures["settings"]["file_names"] == "peer" and figures["settings"]["files"] == 8
    assert not os.path.exists(figures["run_dir"])


def test_file_names_are_refused_for_a_kind_that_makes_no_storm():
    with pytest.raises(ValueError, match="--file-names peer: only create and metadata name a"):
        compare.BenchSettings(file_names="peer").peer_for("write")
    assert compare.BenchSettings(file_names="peer").peer_for("create") == "fio"


def test_the_median_interval_is_tight_for_steady_ratios_and_wide_for_noisy_ones():
    steady = pairs.bootstrap_median_interval([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0])
    noisy = pairs.bootstrap_median_interval([0.6, 1.5, 0.7, 1.4, 0.9, 1.2, 0.65])
    assert steady[0] <= 1.0 <= steady[1] and steady[1] - steady[0] <= 0.03
    assert noisy[0] <= 0.9 <= noisy[1] and noisy[1] - noisy[0] >= 0.5
    assert pairs.bootstrap_median_interval([2.0]) == (2.0, 2.0)


def test_timed_pairs_alternate_who_goes_first_and_leave_out_the_warmup(
    monkeypatch: pytest.MonkeyPatch,
):
    calls: list[str] = []

    def side(name):
        def run(tag):
            calls.append(f"{name}:{tag}")
            return name

        return run

    settings = compare.BenchSettings(warmup=1, repeats=3, settle_s=0.0)
    flush = lambda: calls.append("sync")  # noqa: E731
    got = list(pairs.timed_pairs(settings, "w", side("suite"), side("fio"), flush))
    assert got == [("suite", "fio", "suite"), ("suite", "fio", "peer"), ("suite", "fio", "suite")]
    assert calls[1::2] == [
        "fio:warmup1", "suite:warmup1",
        "suite:w0", "fio:w0",
        "fio:w1", "suite:w1",
        "suite:w2", "fio:w2",
    ]  # fmt: skip
    assert calls[::2] == ["sync"] * 8  # every run starts with what the one before left flushed


def test_the_settings_are_the_command_line_s_defaults_and_its_options():
    parser = compare.build_parser()
    assert compare.BenchSettings.from_args(parser.parse_args(["write", "--target", "d"])) == (
        compare.BenchSettings()
    )
    argv = ["read", "--target", "d", "--ranks", "2", "--bytes-per-rank", "1MiB", "--transfer"]
    argv += ["64KiB", "--shift", "3", "--direct", "--settle-s", "0.5", "--fio", "/opt/fio"]
    settings = compare.BenchSettings.from_args(parser.parse_args(argv))
    assert (settings.ranks, settings.bytes_per_rank, settings.transfer) == (2, MiB, 64 * 1024)
    assert (settings.shift, settings.direct, settings.settle_s) == (3, True, 0.5)
    assert settings.fio == "/opt/fio"
    assert settings.file_names == "dcp"
    argv = ["metadata", "--target", "d", "--file-names", "peer"]
    assert compare.BenchSettings.from_args(parser.parse_args(argv)).file_names == "peer"


@pytest.mark.parametrize(
    "bad", [{"ranks": 0}, {"repeats": 0}, {"warmup": -1}], ids=lambda bad: str(bad)
)
def test_settings_out_of_range_are_refused(bad):
    with pytest.raises(ValueError, match="must be positive"):
        compare.BenchSettings(**bad)


@needs_fio_shm
def test_a_benchmark_cancelled_by_sigterm_removes_its_run_directory(tmp_path):
    """A batch scheduler cancels with SIGTERM: the benchmark unwinds, removes its run
    directory with what it wrote in it, and says it was interrupted."""
    command = [sys.executable, "-m", "ckptgate.benchmarks.compare", "write"]
    command += ["--target", str(tmp_path), "--ranks", "1", "--bytes-per-rank", "1MiB"]
    command += ["--transfer", "256KiB", "--repeats", "100000", "--warmup", "0"]
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # a safety net: the run dir fills within seconds
        while time.monotonic() < deadline and bench.poll() is None:
            if any(os.listdir(d) for d in tmp_path.glob("ckptgate-*")):
                break  # files written: the benchmark is under way
            time.sleep(0.05)
        assert bench.poll() is None, bench.communicate()
        bench.send_signal(signal.SIGTERM)
        _, err = bench.communicate(timeout=120)
    finally:
        bench.kill()
    assert bench.returncode == 130, err
    assert "interrupted (signal 15): the run directory is removed" in err
    assert list(tmp_path.glob("ckptgate-*")) == []


_SIGTERM_AFTER_RUN_DIR = """
import os, signal, sys
from ckptgate.benchmarks import command, compare
class CancelledTarget(command.Target):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        made = self.create_run_dir
        def create_then_cancelled():
            made()
            os.kill(os.getpid(), signal.SIGTERM)  # the scheduler's cancel, the dir just made
        self.create_run_dir = create_then_cancelled
command.Target = CancelledTarget  # the run directory is made in benchmarks.command
sys.exit(compare.main(sys.argv[1:]))
"""


@needs_fio_shm
def test_a_sigterm_the_instant_the_run_directory_exists_still_removes_it(tmp_path):
    """No window between making the run directory and SIGTERM unwinding: the signal is sent
    from inside the process right after ``create_run_dir``, so the test is exact."""
    args = ["write", "--target", str(tmp_path), "--ranks", "1", "--bytes-per-rank", "1MiB"]
    done = subprocess.run(
        [sys.executable, "-c", _SIGTERM_AFTER_RUN_DIR, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted (signal 15): the run directory is removed" in done.stderr
    assert list(tmp_path.glob("ckptgate-*")) == []
