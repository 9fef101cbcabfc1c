"""The session's helper processes (bounded calls, the manifest's appends) outlive the signals
a terminal or a batch scheduler sends to every process of the job, and a manifest part
survives the loss of the helper that held it open.

A Slurm job ended by a node's failure: slurmstepd sent SIGTERM to every process of the step,
the helpers died with the session, the session's cleanup recorded its removals into a fresh
helper without the part's descriptor (``KeyError``), and the run failed a round instead of
saying ``interrupted``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ckptgate.rundir.appender import BoundedAppend, LocalAppender
from ckptgate.rundir.janitor import Janitor, TargetHung
from ckptgate.rundir.manifest import parse_manifest


class _Probe:
    """A filesystem for the helper whose one call says which process answered."""

    def pid(self, path: str) -> int:
        return os.getpid()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_helper_outlives_a_signal_sent_to_the_whole_job(signum: int) -> None:
    janitor = Janitor(_Probe(), stall_s=30.0)
    try:
        helper = janitor.one("pid", "-")
        # sent by another process (kill(1)), as slurmstepd or a terminal does
        subprocess.run(["kill", f"-{signum}", str(helper)], check=True, timeout=30)
        assert janitor.one("pid", "-") == helper  # the same helper answered: it lived
    finally:
        janitor.close()


def test_the_parent_still_ends_its_helper_with_sigterm() -> None:
    """multiprocessing's exit terminates daemonic children with SIGTERM and joins them: the
    helper must end then, or the session's exit would wait for it forever."""
    janitor = Janitor(_Probe(), stall_s=30.0)
    try:
        janitor.one("pid", "-")
        process = janitor._process
        assert process is not None
        process.terminate()  # SIGTERM from the parent
        process.join(30)
        assert not process.is_alive()
    finally:
        janitor.close()


def test_an_append_after_the_helper_died_continues_the_part(tmp_path: Path) -> None:
    part = tmp_path / "part.jsonl"
    sink = BoundedAppend(stall_s=30.0)
    try:
        sink.create(str(part), b'{"kind": "run"}\n')
        process = sink.janitor._process
        assert process is not None
        os.kill(process.pid or 0, signal.SIGKILL)
        process.join(30)
        sink.append(str(part), b'{"kind": "dir", "path": "a"}\n')  # a fresh helper
    finally:
        sink.close(str(part))
    assert part.read_bytes() == b'{"kind": "run"}\n{"kind": "dir", "path": "a"}\n'


def test_a_line_the_dead_helper_left_torn_is_cut_before_the_next(tmp_path: Path) -> None:
    part = tmp_path / "part.jsonl"
    first = LocalAppender()
    first.create(str(part), b'{"kind": "run", "nodes": 1}\n{"kind": "dir", "pa')  # torn
    # a new helper's appender knows no descriptor: it reopens the part
    LocalAppender().append(str(part), b'{"kind": "dir", "path": "b"}\n')
    first.close(str(part))
    data = part.read_bytes()
    assert data == b'{"kind": "run", "nodes": 1}\n{"kind": "dir", "path": "b"}\n'
    assert parse_manifest(str(part), data.splitlines(keepends=True)).dirs == ["b"]


def test_a_reopen_never_creates_a_part(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LocalAppender().append(str(tmp_path / "nobody.jsonl"), b"{}\n")
    assert not (tmp_path / "nobody.jsonl").exists()


class _Blocking:
    """A filesystem whose ``block`` says it began (a file) and waits for a file to return
    (bounded), and whose ``pid`` says which helper answered."""

    def __init__(self, began: str, release: str) -> None:
        self.began, self.release = began, release

    def block(self, path: str) -> str:
        open(self.began, "w").close()
        for _ in range(3000):  # 30 s at most
            if os.path.exists(self.release):
                break
            time.sleep(0.01)
        return "released"

    def pid(self, path: str) -> int:
        return os.getpid()


def test_an_interrupt_between_a_request_and_its_answer_never_leaves_a_stale_answer(
    tmp_path: Path,
) -> None:
    """Ctrl-C while a cleanup's removal waited on the helper: the answers to it were read as
    the next request's, a removal counted done that was not, and a run directory stayed with
    its manifest and lease and no word of it."""
    began, release = tmp_path / "began", tmp_path / "release"
    janitor = Janitor(_Blocking(str(began), str(release)), stall_s=30.0)

    def interrupt_once_it_began() -> None:
        for _ in range(3000):
            if began.exists():
                os.kill(os.getpid(), signal.SIGINT)  # wakes the main thread's wait
                return
            time.sleep(0.01)

    try:
        first = janitor.one("pid", "-")
        watcher = threading.Thread(target=interrupt_once_it_began, daemon=True)
        watcher.start()
        with pytest.raises(KeyboardInterrupt):
            janitor.call("block", ["a", "b"])
        watcher.join(30)
        release.touch()  # a helper still alive would answer the interrupted request now
        second = janitor.one("pid", "-")
        assert second != first  # a new helper, with no answer left over
        assert janitor.call("pid", ["x", "y"]).done == {"x": second, "y": second}
    finally:
        release.touch()
        janitor.close()


class _Slow:
    """A filesystem whose one call takes the seconds it is given on a path named ``slow*``,
    and returns at once on any other."""

    def nap(self, path: str, seconds: float) -> str:
        time.sleep(seconds if path.startswith("slow") else 0.0)
        return path


def test_a_call_may_have_a_bound_of_its_own() -> None:
    """``bound_s``: a call slow by nature (writing back a filesystem's dirty data) gets its
    own bound; the janitor's stays for the others, and past either the target is hung (a
    call's first answer also waits out the helper's start: the hang is the second path's)."""
    janitor = Janitor(_Slow(), stall_s=0.2)
    try:
        assert janitor.one("nap", "slow-a", bound_s=30.0, seconds=0.5) == "slow-a"
        outcome = janitor.call("nap", ["b", "slow-c"], bound_s=30.0, seconds=0.5)
        assert list(outcome.done) == ["b", "slow-c"] and outcome.hung is None
        outcome = janitor.call("nap", ["d", "slow-e", "f"], seconds=30.0)
        assert outcome.left == ["slow-e", "f"], outcome
        assert outcome.hung == "nap slow-e did not return within 0.2 s"
        with pytest.raises(TargetHung, match=r"the target is hung"):
            janitor.one("nap", "g", seconds=0.0)
    finally:
        janitor.close()


def test_syncfs_writes_back_the_target_s_filesystem_and_names_a_missing_path(
    tmp_path: Path,
) -> None:
    janitor = Janitor(None, stall_s=30.0)
    try:
        Path(tmp_path, "dirty").write_bytes(b"x" * 65536)
        assert janitor.one("syncfs", str(tmp_path)) is None
        with pytest.raises(FileNotFoundError):
            janitor.one("syncfs", str(tmp_path / "gone"))
    finally:
        janitor.close()
