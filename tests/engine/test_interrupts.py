"""How the main process meets a cancel: SIGTERM unwinds as Ctrl-C does, the cleanup on the way
out ignores a second one, and a step that must not be cut in two holds one until it is done.
Each test raises a real signal in this process (``signal.raise_signal``), never a stand-in."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptgate.engine.interrupts import signals_deferred, signals_postponed, sigterm_unwinds

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def unwinding() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while the test runs; the old handler after."""
    previous = signal.getsignal(signal.SIGTERM)
    sigterm_unwinds()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_unwinds_as_ctrl_c_does(unwinding: None) -> None:
    with pytest.raises(KeyboardInterrupt, match=f"signal {signal.SIGTERM}"):
        signal.raise_signal(signal.SIGTERM)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_postponed_signal_lets_the_step_finish_and_then_unwinds(
    unwinding: None, signum: int
) -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with signals_postponed():
            steps.append("made")
            signal.raise_signal(signum)
            steps.append("recorded")  # reached: the signal is held, not raised here
        steps.append("after")  # not reached: the held signal is delivered at the block's end
    assert steps == ["made", "recorded"]


def test_a_postponed_block_without_a_signal_changes_nothing(unwinding: None) -> None:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with signals_postponed():
        pass
    assert {s: signal.getsignal(s) for s in handlers} == handlers


def test_a_signal_in_the_cleanup_is_ignored_not_delivered_after(unwinding: None) -> None:
    with signals_deferred():
        signal.raise_signal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):  # the handler is back
        signal.raise_signal(signal.SIGTERM)


def test_the_signal_tests_pass_in_a_run_started_with_ctrl_c_ignored() -> None:
    """A background job of a non-interactive shell starts with SIGINT ignored (CI's lanes under
    ``nohup`` did): before tests/conftest.py's ``ctrl_c_as_python_default``, the SIGINT cases
    here saw no ``KeyboardInterrupt`` and failed for how the suite was started."""
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                   "-k", "not ctrl_c_ignored"]  # fmt: skip
    result = subprocess.run(  # the shell ignores SIGINT, then becomes pytest: as nohup's job
        ["sh", "-c", 'trap "" INT && exec "$0" "$@"', *pytest_argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
