"""A MooseFS client's ``.params`` as the suite reads it (``ckptgate.storage.moosefs``): the
master, both versions and the cache mode for the report, and nothing where the file is not a
MooseFS client's."""

from __future__ import annotations

from pathlib import Path

from ckptgate.storage.moosefs import PARAMS, MooseParams, mount_params, parse_params

PARAMS_TEXT = """\
mfsmaster: 198.18.0.50
mfsport: 9421
mfscachemode: YES
working_keep_cache_mode: YES
moosefs_master_version: 3.0.117
moosefs_mount_version: 3.0.117
no colon on this line
"""
"""Lines in the shape of an mfsmount 3.0 client's ``.params`` (``name: value``)."""


def test_params_are_the_name_value_lines() -> None:
    params = parse_params(PARAMS_TEXT)
    assert params["mfsmaster"] == "198.18.0.50" and params["mfsport"] == "9421"
    assert "no colon on this line" not in params and len(params) == 6


def test_the_placement_names_master_version_and_cache_mode(tmp_path: Path) -> None:
    (tmp_path / PARAMS).write_text(PARAMS_TEXT)
    params = mount_params(str(tmp_path))
    assert params is not None
    placement = params.placement(str(tmp_path))
    assert placement["moosefs.master"] == "198.18.0.50:9421"
    assert placement["moosefs.version"] == "3.0.117"
    assert placement["moosefs.cachemode"] == "YES"


def test_an_unset_cache_mode_is_moosefs_default_auto() -> None:
    assert MooseParams({"mfscachemode": "(not defined)"}).cache_mode == "AUTO"
    assert MooseParams({}).cache_mode == "AUTO"


def test_a_mount_without_a_moosefs_params_file_has_none(tmp_path: Path) -> None:
    assert mount_params(str(tmp_path)) is None
    (tmp_path / PARAMS).write_text("some: other\n")  # not a MooseFS client's
    assert mount_params(str(tmp_path)) is None
