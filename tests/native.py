"""The storm's C loop in the tests: skipped, with one line, where this install has none, except
where ``CKPTGATE_NATIVE_LOOP_REQUIRED`` is set (``.ci/run`` sets it where a C compiler is
present), which fails the test instead: a CI run that silently tested one loop proves less."""

from __future__ import annotations

import os

import pytest

from ckptgate.workloads.storm.loops import native_module

REQUIRED = "CKPTGATE_NATIVE_LOOP_REQUIRED"


def require_native() -> None:
    """Return where the C loop is built; else skip the test (fail it where REQUIRED is set)."""
    if native_module() is not None:
        return
    if os.environ.get(REQUIRED):
        pytest.fail(f"{REQUIRED} is set, but the storm's C loop is not built in this install")
    pytest.skip("the storm's C loop is not built in this install (no C compiler at install)")
