"""The wheel installs one namespace, ``ckptgate.*``, and registers the plugin and the command.

The checkout's folder ``ckptgate/`` is the package (sizing/, fixtures/, ... inside it), so
nothing generic lands at the top of site-packages (PyPI has a ``fixtures``). These tests build
the wheel from a copy of what the build reads (so a stale ``build/`` of the checkout cannot leak
into it) and read its RECORD and entry points.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
DIST_INFO = f"ckptgate-{VERSION}.dist-info"
PACKAGE = ROOT / "ckptgate"
"""The package's folder in the checkout: the folder is the package."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    """The wheel, built in a temporary directory (module scope; pytest removes the directory)."""
    pytest.importorskip("build", reason="needs the 'build' package (the dev extra)")
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        PACKAGE, source / "ckptgate", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("*.whl")
    with zipfile.ZipFile(path) as opened:
        yield opened


def _record(wheel: zipfile.ZipFile) -> list[str]:
    text = wheel.read(f"{DIST_INFO}/RECORD").decode("utf-8")
    return [line.split(",")[0] for line in text.splitlines() if line]


def _entry_points(wheel: zipfile.ZipFile) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(f"{DIST_INFO}/entry_points.txt").decode("utf-8"))
    return parser


def test_the_wheel_installs_nothing_but_the_ckptgate_namespace(wheel: zipfile.ZipFile) -> None:
    record = _record(wheel)
    strays = [p for p in record if not p.startswith(("ckptgate/", f"{DIST_INFO}/"))]
    assert strays == []
    assert sorted(set(wheel.namelist())) == sorted(set(record))
    assert wheel.read(f"{DIST_INFO}/top_level.txt").decode().split() == ["ckptgate"]


def test_every_module_of_every_folder_is_inside(wheel: zipfile.ZipFile) -> None:
    record = set(_record(wheel))
    expected = {module.relative_to(ROOT).as_posix() for module in PACKAGE.rglob("*.py")}
    assert len(expected) > 100
    assert expected <= record, sorted(expected - record)
    assert "ckptgate/acceptance/test_checklist.py" in record  # the checklist itself


def test_the_storms_c_loop_is_built_into_the_wheel_where_a_compiler_is(
    wheel: zipfile.ZipFile,
) -> None:
    """Built from its C source (the checkout's own build is left out of the copy), beside the
    source itself; a machine without a compiler gets a wheel without it (the build goes on)."""
    record = _record(wheel)
    built = [
        p for p in record if p.startswith("ckptgate/workloads/storm/_loops.") and p.endswith(".so")
    ]
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        assert built == []
    else:
        assert len(built) == 1, record


def test_the_shipped_cluster_profiles_are_inside(wheel: zipfile.ZipFile) -> None:
    profiles = sorted(p.name for p in (PACKAGE / "sizing" / "profiles").glob("*.yaml"))
    assert "tmpfs.yaml" in profiles
    record = set(_record(wheel))
    assert {f"ckptgate/sizing/profiles/{name}" for name in profiles} <= record


def test_the_plugin_and_the_command_are_registered(wheel: zipfile.ZipFile) -> None:
    entry_points = _entry_points(wheel)
    assert dict(entry_points["pytest11"]) == {"ckptgate": "ckptgate.fixtures.plugin"}
    assert dict(entry_points["console_scripts"]) == {"ckptgate": "ckptgate.cli:main"}
