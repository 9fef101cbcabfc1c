"""Imports resolve for people and tools: the checkout's ``ckptgate/`` folder is the package.

A plain copy of the package folder (no install, no import hook, no PYTHONPATH) imports every
``ckptgate.*`` module from itself and runs ``python -m ckptgate.sizing``; the type checker that
CI runs (``[tool.mypy]`` in pyproject.toml) is clean over the package and the tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_IMPORT_ALL = """
import importlib, json, pkgutil, sys
import ckptgate
names = [m.name for m in pkgutil.walk_packages(ckptgate.__path__, "ckptgate.")
         if not m.name.endswith("__main__")]
files = {name: importlib.import_module(name).__file__ for name in names}
json.dump({"package": ckptgate.__file__, "files": files}, sys.stdout)
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
    copy = _plain_copy(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL],
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
