"""Imports resolve for people and tools: the checkout's ``ckptgate/`` folder is the package.

A plain copy of the package folder (no install, no import hook, no PYTHONPATH) imports every
``ckptgate.*`` module from itself (those that need an optional part where it is installed) and
runs ``python -m ckptgate.sizing``; the type checker that CI runs (``[tool.mypy]`` in
pyproject.toml) is clean over the package and the tests, with or without the optional parts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

OPTIONAL_PARTS = {"torch": "torch", "mpi4py": "mpi"}
"""Optional imports -> the extra that installs each (pyproject's optional-dependencies). A module
that needs one imports only where it is installed; a contributor's venv (``.[dev]``) has neither."""

_IMPORT_ALL = """
import importlib, json, pkgutil, sys
import pytest
import ckptgate
optional = set(sys.argv[1:])
names = [m.name for m in pkgutil.walk_packages(ckptgate.__path__, "ckptgate.")
         if not m.name.endswith("__main__")]
files, needs = {}, {}
for name in names:
    try:
        files[name] = importlib.import_module(name).__file__
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] not in optional:
            raise
        needs[name] = missing.name.partition(".")[0]
    except pytest.skip.Exception as skipped:  # an acceptance module's importorskip
        needs[name] = str(skipped)
json.dump({"package": ckptgate.__file__, "files": files, "needs": needs}, sys.stdout)
"""


def _plain_copy(tmp_path: Path) -> Path:
    """The package folder and pyproject.toml, copied as a clone has them (no caches)."""
    copy = tmp_path / "checkout"
    copy.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    shutil.copytree(
        ROOT / "ckptgate", copy / "ckptgate", ignore=shutil.ignore_patterns("__pycache__")
    )
    return copy


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_every_module_imports_from_the_checkout_itself(tmp_path: Path) -> None:
    """Every module imports, except those that need an optional part this venv lacks (the
    DCP modules without torch): where every extra is installed (CI), every module imports."""
    absent = sorted(n for n in OPTIONAL_PARTS if importlib.util.find_spec(n) is None)
    copy = _plain_copy(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, *absent],
        cwd=copy,
        env=_plain_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert Path(found["package"]).is_relative_to(copy)
    outside = {n: f for n, f in found["files"].items() if not Path(f).is_relative_to(copy)}
    assert outside == {}, "served from elsewhere than the checkout"
    if not absent:
        assert found["needs"] == {}
    for name, why in found["needs"].items():
        assert any(part in why for part in absent), f"{name} left out: {why}"
    assert {"ckptgate.engine.pool", "ckptgate.sizing.requirements", "ckptgate.acceptance"} <= set(
        found["files"]
    )


def test_python_m_ckptgate_sizing_runs_from_the_checkout(tmp_path: Path) -> None:
    copy = _plain_copy(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "ckptgate.sizing", "405b", "--json"],
        cwd=copy,
        env=_plain_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["checkpoint_bytes"] == 405 * 10**9 * 14


def test_the_type_checker_is_clean() -> None:
    pytest.importorskip("mypy", reason="needs mypy (the dev extra)")
    done = subprocess.run(
        [sys.executable, "-m", "mypy"],  # files and flags from pyproject's [tool.mypy]
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
