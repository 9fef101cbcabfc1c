"""The target's placement facts: a directory's own layout, else its nearest ancestor's up to
the mount point, and nothing on a filesystem without them."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ckptgate.storage.fsfacts import local_fs_facts
from ckptgate.storage.placement import fs_placement

POOL = "ceph.dir.layout.pool"


def fake_layouts(monkeypatch: pytest.MonkeyPatch, layouts: dict[str, str]) -> list[str]:
    """``os.getxattr`` answering ``POOL`` from ``layouts`` (path -> pool) as CephFS does: a
    directory with no layout of its own has no such attribute (ENODATA)."""
    asked: list[str] = []

    def getxattr(path: str, name: str) -> bytes:
        asked.append(path)
        if name == POOL and path in layouts:
            return layouts[path].encode()
        raise OSError(errno.ENODATA, "No data available", path)

    monkeypatch.setattr(os, "getxattr", getxattr)
    return asked


def test_a_directory_without_a_layout_reports_its_nearest_ancestors_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    fake_layouts(monkeypatch, {str(tmp_path): "replicated", str(tmp_path / "a"): "single"})
    assert fs_placement(str(deep), str(tmp_path)) == {POOL: "single"}
    assert fs_placement(str(tmp_path), str(tmp_path)) == {POOL: "replicated"}


def test_the_walk_stops_at_the_mount_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mount = tmp_path / "mnt"
    (mount / "run").mkdir(parents=True)
    asked = fake_layouts(monkeypatch, {str(tmp_path): "outside"})  # above the mount: not ours
    assert fs_placement(str(mount / "run"), str(mount)) == {}
    assert str(tmp_path) not in asked


def test_a_filesystem_without_placement_attributes_reports_none(tmp_path: Path) -> None:
    assert fs_placement(str(tmp_path), "/") == {}
    assert local_fs_facts(str(tmp_path)).placement == {}
