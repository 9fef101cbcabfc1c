"""The backend registry: a name or a protocol to a class imported on first use, with a hint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ckptgate.storage import registry
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.fsfacts import LOCAL_PROTOCOLS
from ckptgate.storage.registry import BackendEntry, BackendUnavailable
from tests.storage import registered_backend

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("protocol", "chosen"),
    [("file", "posix"), ("local", "posix"), ("memory", "fsspec"), ("s3", "fsspec")],
    ids=lambda value: str(value),
)
def test_auto_takes_the_entry_that_claims_the_protocol_else_the_catch_all(
    protocol: str, chosen: str
) -> None:
    assert BackendSpec(protocol).resolved == chosen


def test_a_registered_name_is_a_backend_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="backend 'counting': expected auto, posix or fsspec"):
        BackendSpec("file", backend="counting")
    monkeypatch.setitem(registry.BACKENDS, "counting", registered_backend.ENTRY)
    spec = BackendSpec("file", backend="counting")
    assert isinstance(spec.open(), registered_backend.CountingBackend)
    with pytest.raises(ValueError, match="expected auto, posix, fsspec or counting"):
        BackendSpec("file", backend="nfs")
    with pytest.raises(ValueError, match="backend 'counting' needs a local target, not s3"):
        BackendSpec("s3", backend="counting")


def test_an_entry_that_claims_a_protocol_wins_auto_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``auto`` follows the registry's order: a new entry before the catch-all serves its
    protocols."""
    entries = dict(registry.BACKENDS)
    claiming = BackendEntry(
        registered_backend.ENTRY.class_path, frozenset({"memory"}), "memory", "none"
    )
    monkeypatch.setattr(registry, "BACKENDS", {"counting": claiming, **entries})
    assert BackendSpec("memory").resolved == "counting"
    assert BackendSpec("file").resolved == "posix"
    assert BackendSpec("s3").resolved == "fsspec"


def test_a_backend_whose_module_does_not_import_names_its_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = BackendEntry(
        "ckptgate_no_such_package.Backend", LOCAL_PROTOCOLS, "a local target", "pip install x"
    )
    monkeypatch.setitem(registry.BACKENDS, "missing", missing)
    spec = BackendSpec("file", backend="missing")  # the name is known: no import yet
    with pytest.raises(BackendUnavailable, match=r"backend 'missing' .* pip install x$"):
        spec.open()


def test_the_registry_imports_no_backend() -> None:
    """The registry names classes by path: importing it (and the spec) loads no backend."""
    probe = (
        "import json, sys, ckptgate.storage.backend; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ckptgate.storage.'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stdout)
    assert "ckptgate.storage.posix" not in loaded
    assert "ckptgate.storage.fsspec_backend" not in loaded
    assert "ckptgate.storage.registry" in loaded
