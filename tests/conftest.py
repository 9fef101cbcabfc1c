"""Fixtures shared by the suite's own tests."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.beds import BED_MARKERS, BEDS_HELP, BEDS_MARKER
from tests.s3server import S3Server, s3_server

try:
    from hypothesis import settings
except ImportError:
    # The README's main job, `ckptgate run` in a checkout after `pip install -e .` (no test
    # extra), loads this file too (pytest looks for conftests in the invocation directory's
    # test* folders): it must not need what only the suite's own tests need.
    pass
else:
    # The machines that run this suite are shared and noisy: a per-example deadline would
    # fail property tests for the machine's load, not for the property. Examples stay bounded.
    settings.register_profile("ckptgate", deadline=None, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ckptgate"))


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own tests' markers: ``beds`` and one per bed (tests/beds/conftest.py puts
    them on). Registered here, not by the ckptgate plugin, whose markers are a user's."""
    config.addinivalue_line("markers", f"{BEDS_MARKER}: {BEDS_HELP}")
    for marker, text in BED_MARKERS.values():
        config.addinivalue_line("markers", f"{marker}: {text}")


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_as_python_default() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` while the suite's own tests run, and every process
    they start sees Ctrl-C, whatever this process inherited: a job started in the background by
    a non-interactive shell (``pytest &``, ``nohup``, a CI runner's step) begins with SIGINT
    ignored, an ignored signal stays ignored across ``exec``, and the tests that send SIGINT
    (to themselves or to a run they started) would see nothing happen. A handled signal is
    reset to its default in a child at ``exec``, so children see SIGINT too. A run of the
    acceptance tests alone (a user's) does not load this file."""
    inherited = signal.getsignal(signal.SIGINT)
    if inherited != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.fixture(params=["tmp_path", "dev-shm"])
def directory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A directory on the machine's disk (tmp_path) and one on /dev/shm (memory-backed);
    the /dev/shm one is removed after the test (it is the test's own new directory)."""
    if request.param == "tmp_path":
        yield tmp_path
        return
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this machine")
    path = Path(tempfile.mkdtemp(prefix="ckptgate-test-", dir="/dev/shm"))
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """moto's S3 server on loopback, with a bucket (``tests/s3server.py``); stopped after the
    session, and skipped where moto or s3fs is not installed."""
    with s3_server() as server:
        yield server
