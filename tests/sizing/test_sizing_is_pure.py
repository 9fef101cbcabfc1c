"""sizing/ is pure arithmetic: importing and using it pulls in no test, filesystem-abstraction
or array library, and nothing that talks to the network or starts processes."""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "pytest",
    "_pytest",
    "fsspec",
    "numpy",
    "torch",
    "hypothesis",
    "socket",
    "subprocess",
    "multiprocessing",
    "urllib.request",
    "http",
)

PROBE = """
import sys
import ckptgate.sizing as sizing
from ckptgate.sizing.cli import main
from ckptgate.sizing.table import render
profile = sizing.load_profile("405b", overrides=["checkpoint.interval_s=10 min"])
s = sizing.derive(profile)
render(profile, s)
sizing.sweep(profile)
print(" ".join(sorted(sys.modules)))
"""


def test_importing_and_deriving_loads_no_forbidden_module():
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(result.stdout.split())
    assert "ckptgate.sizing.requirements" in loaded
    leaked = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN or m in FORBIDDEN)
    assert leaked == []


def test_only_profile_module_opens_files():
    # Static check: no module but profile.py reads files (read_text, open, importlib.resources).
    for path in sorted((REPO / "ckptgate" / "sizing").glob("*.py")):
        if path.name == "profile.py":
            continue
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "open" not in names, path.name
        assert not {"read_text", "read_bytes", "write_text", "write_bytes"} & attrs, path.name
