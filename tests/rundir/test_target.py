"""The target: a new run directory per session, refusal of bad targets, exact cleanup."""

from __future__ import annotations

import os
import pickle
import re
import signal
from pathlib import Path

import pytest

from ckptgate.engine.pool import RankFailure, RankPool
from ckptgate.rundir.target import FLUSH_BOUND_S, Target, TargetError
from ckptgate.workloads.write_burst import ShardFile, run_write_burst
from tests.mounts import small_tmpfs

MiB = 2**20


def test_run_dir_is_new_and_named_for_time_host_and_chance(tmp_path: Path) -> None:
    first, second = Target(str(tmp_path)), Target(str(tmp_path))
    one, two = first.create_run_dir(), second.create_run_dir()
    assert one != two
    assert re.fullmatch(r"ckptgate-\d{8}T\d{6}Z-[^-/]+-[0-9a-f]{6}", os.path.basename(one))


def test_cleanup_removes_what_the_run_created_and_spares_the_neighbours(tmp_path: Path) -> None:
    neighbour = tmp_path / "someone-elses-checkpoint.pt"
    neighbour.write_bytes(b"precious")
    target = Target(str(tmp_path))
    target.create_run_dir()
    directory = target.new_dir("write")
    files = [f"{directory}/__{rank}_0.distcp" for rank in range(3)]
    target.register(files)
    for path in files[:2]:  # the third was registered but never created
        Path(path).write_bytes(b"x")
    report = target.cleanup()
    assert (report.removed_files, report.removed_dirs, report.left) == (2, 2, [])
    assert neighbour.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == [neighbour.name]


def test_a_file_the_run_did_not_create_survives_cleanup(tmp_path: Path) -> None:
    target = Target(str(tmp_path))
    run_dir = target.create_run_dir()
    foreign = Path(run_dir, "notes.txt")
    foreign.write_text("not ours")
    report = target.cleanup()
    assert report.left == [run_dir]
    assert foreign.read_text() == "not ours"


def test_an_emptied_directory_of_the_run_is_removed_before_its_end(tmp_path: Path) -> None:
    """``remove_dirs``: a directory the run made and emptied goes at once (a benchmark's
    repeat, as mdtest removes its tree); one that holds a file stays, registered, and the
    cleanup still finds it; a directory the run did not make, and the run directory itself,
    are refused."""
    target = Target(str(tmp_path))
    run_dir = target.create_run_dir()
    emptied, holding = target.new_dir("emptied"), target.new_dir("holding")
    Path(holding, "not-ours").write_text("keep")
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    assert target.remove_dirs([emptied, holding]) == [holding]
    assert not os.path.exists(emptied)
    assert holding in target.run.dirs and emptied not in target.run.dirs
    for refused in (str(stranger), run_dir):
        with pytest.raises(ValueError, match="refusing to remove"):
            target.remove_dirs([refused])
    assert stranger.is_dir() and os.path.isdir(run_dir)
    assert target.cleanup().left == [holding]
    assert Path(holding, "not-ours").read_text() == "keep"


def test_a_shared_runs_directories_are_never_removed_before_its_end(tmp_path: Path) -> None:
    """Many nodes write in a shared run's directories, and node 0 removes them last: another
    node may still be filling an emptied one, so ``remove_dirs`` refuses there."""
    target = Target(str(tmp_path))
    target.create_run_dir()
    target.share()
    emptied = target.new_dir("emptied")
    with pytest.raises(ValueError, match="shared target: another node may still be filling"):
        target.remove_dirs([emptied])
    assert os.path.isdir(emptied)
    target.cleanup()


def test_removing_an_unregistered_file_is_refused(tmp_path: Path) -> None:
    target = Target(str(tmp_path))
    target.create_run_dir()
    precious = tmp_path / "precious"
    precious.write_text("keep")
    with pytest.raises(ValueError, match="did not register"):
        target.remove_files([str(precious)])
    assert precious.exists()


def test_a_missing_target_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match=r"no such directory"):
        Target(str(tmp_path / "absent"))


def test_a_file_as_target_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises(TargetError, match=r"is a file, not a directory"):
        Target(str(path))


def test_a_read_only_target_is_refused() -> None:
    with small_tmpfs(MiB, read_only=True) as point:
        target = Target(point)
        with pytest.raises(TargetError, match=r"read-only"):
            target.create_run_dir()
        assert os.listdir(point) == []


def test_a_target_without_room_is_refused_before_the_run() -> None:
    with small_tmpfs(MiB) as point:
        target = Target(point)
        with pytest.raises(TargetError, match=r"GB free, this run needs .* GB"):
            target.check_room(8 * MiB, "two checkpoints")


def test_a_target_that_fills_mid_burst_fails_with_one_line_and_keeps_nothing() -> None:
    with small_tmpfs(4 * MiB) as point, RankPool(2) as pool:
        target = Target(point)
        target.create_run_dir()
        directory = target.new_dir("write")
        shards = [
            ShardFile(rank, f"{directory}/__{rank}_0.distcp", 3 * MiB, 1, MiB) for rank in (0, 1)
        ]
        target.register([s.path for s in shards])
        with pytest.raises(RankFailure, match=r"No space left on device") as failure:
            run_write_burst(pool, target.spec, shards, timeout_s=60)
        assert "\n" not in str(failure.value)
        target.cleanup()
        assert os.listdir(point) == []


def test_a_file_removed_before_its_rank_made_it_is_still_removed_at_cleanup(
    tmp_path: Path,
) -> None:
    """An interrupt can drop a round while a rank has yet to create its file."""
    target = Target(str(tmp_path))
    target.create_run_dir()
    directory = target.new_dir("write")
    path = f"{directory}/__0_0.distcp"
    target.register([path])
    assert target.remove_files([path]) == 0  # not there yet
    Path(path).write_bytes(b"late")  # the rank gets there after all
    report = target.cleanup()
    assert report.removed_files == 1 and report.left == []
    assert list(tmp_path.iterdir()) == []


def test_a_path_outside_the_run_directory_is_refused(tmp_path: Path) -> None:
    target = Target(str(tmp_path))
    target.create_run_dir()
    with pytest.raises(ValueError, match="outside the run directory"):
        target.register([str(tmp_path / "elsewhere.distcp")])


def test_a_rank_gets_a_target_without_the_manifest_or_the_lease(tmp_path: Path) -> None:
    """The copy a rank process receives (``fixtures.run.startup`` sends the target) carries no
    manifest descriptor and no lease thread; the session's own target keeps both."""
    target = Target(str(tmp_path))
    run_dir = target.create_run_dir()
    target.start_lease(period_s=3600.0)
    try:
        copy = pickle.loads(pickle.dumps(target))
        assert (copy.run_dir, copy.manifest, copy.lease.keeper) == (run_dir, None, None)
        assert copy.path("x") == f"{run_dir}/x"  # the copy's methods are the copy's parts'
        assert target.manifest is not None and target.lease.keeper is not None
    finally:
        report = target.cleanup()
        target.close()
    assert report.removed_dirs == 1 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("moment", ["after the mkdir", "during the probe"])
def test_a_cancel_while_the_run_directory_is_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """A batch scheduler's SIGTERM between the mkdir and the run directory's being recorded
    (seen in CI: during the probe write) still has the cleanup on the way out remove it."""
    from ckptgate.benchmarks.command import run_in_directory
    from ckptgate.engine.interrupts import sigterm_unwinds
    from ckptgate.rundir import directory as rundir

    def cancelled(call, *, after: bool):  # the scheduler's SIGTERM, with the real call
        def wrapped(*args, **kwargs):
            if not after:
                signal.raise_signal(signal.SIGTERM)
            made = call(*args, **kwargs)
            if after:
                signal.raise_signal(signal.SIGTERM)
            return made

        return wrapped

    if moment == "after the mkdir":
        monkeypatch.setattr(rundir.os, "mkdir", cancelled(os.mkdir, after=True))
    else:
        monkeypatch.setattr(rundir, "open", cancelled(open, after=False), raising=False)
    previous = signal.getsignal(signal.SIGTERM)
    sigterm_unwinds()
    try:
        status = run_in_directory(str(tmp_path), "the test", lambda target: None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert status == 130
    assert list(tmp_path.iterdir()) == []


def test_flush_writes_back_the_target_s_filesystem_through_the_janitor(tmp_path: Path) -> None:
    """The benchmarks' flush before each timed run: the target's syncfs, through the bounded
    helper (a hung target fails it named, where ``os.sync()`` waited on every mount)."""
    target = Target(str(tmp_path))
    calls: list[tuple[str, str, float | None]] = []
    real_one = target.janitor.one

    def one(op: str, path: str, *, bound_s: float | None = None, **kwargs: object) -> object:
        calls.append((op, path, bound_s))
        return real_one(op, path, bound_s=bound_s, **kwargs)

    target.janitor.one = one  # type: ignore[method-assign]
    try:
        target.flush()  # before the run directory: the root
        run_dir = target.create_run_dir()
        target.flush()  # then the run directory: ours to open, where the root may not be
    finally:
        target.cleanup()
        target.close()
    assert [call for call in calls if call[0] == "syncfs"] == [
        ("syncfs", str(tmp_path), FLUSH_BOUND_S),
        ("syncfs", run_dir, FLUSH_BOUND_S),
    ]


def test_a_benchmark_on_a_target_that_hangs_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bounded call that does not return during a benchmark (its flush before a timed run)
    ends it with one line naming the call, exit 1; it was a traceback."""
    from ckptgate.benchmarks.command import run_in_directory
    from ckptgate.rundir.janitor import TargetHung

    def hung(self: Target) -> None:
        raise TargetHung(110, "the target is hung: syncfs did not return within 300 s", "/t")

    monkeypatch.setattr(Target, "flush", hung)
    assert run_in_directory(str(tmp_path), "the test", lambda target: target.flush()) == 1
    err = capsys.readouterr().err
    assert "error: " in err and "syncfs did not return within 300 s" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
