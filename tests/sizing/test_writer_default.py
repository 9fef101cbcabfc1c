"""Issue 35 item 3, the default a DCP user gets: a profile that says DCP saves it and leaves
``cluster.layout.writer`` to its default keeps Megatron's layout (its numbers do not change)
and is told so in one line, with how to change it or why ``writer: dcp`` does not apply."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ckptgate.sizing import SHIPPED_PROFILES, ProfileError, derive, load_profile
from ckptgate.sizing.reader import key_paths
from ckptgate.sizing.schema import dcp_writer_refusals
from ckptgate.sizing.writer_default import writer_default_note

DCP_APPLIES = [
    "model.parameters=null",
    "cluster.parallelism.pp=1",
    "cluster.parallelism.dp=4",
    "cluster.parallelism.zero_stage=3",
]
"""tmpfs (which has a dcp: section) as a 4-rank FSDP job that ``writer: dcp`` can plan."""

TMPFS_YAML = Path(__file__).resolve().parents[2] / "ckptgate" / "sizing" / "profiles" / "tmpfs.yaml"

TOLD = "writer: megatron (the default): the burst is laid out as Megatron's, though "


def _note(name: str, overrides: list[str] | None = None) -> str | None:
    profile = load_profile(name, overrides or [])
    return writer_default_note(profile, profile.given_keys)


def test_a_dcp_section_without_a_writer_is_told_megatron_and_how_to_change_it() -> None:
    note = _note("tmpfs", DCP_APPLIES)
    assert note == (
        f"{TOLD}this profile's dcp: section has the checklist save with PyTorch DCP; "
        "set cluster.layout.writer: dcp "
        "for DCP's own layout (its planner over model.architecture's tensors, rank by rank and "
        "file by file)"
    )
    # the advice holds: the same profile with the writer set loads, and lays out as DCP does
    dcp = load_profile("tmpfs", [*DCP_APPLIES, "cluster.layout.writer=dcp"])
    dist = derive(dcp).distribution
    assert dist is not None and "DCP's planner" in dist.policy_note


def test_the_default_is_kept_so_the_numbers_do_not_change() -> None:
    told = load_profile("tmpfs", DCP_APPLIES)
    megatron = load_profile("tmpfs", [*DCP_APPLIES, "cluster.layout.writer=megatron"])
    assert told.cluster.layout.writer == "megatron"
    assert derive(told) == derive(megatron)


def test_where_dcp_would_be_refused_the_line_says_why_instead_of_advising_it() -> None:
    """Shipped tmpfs: pp 2, ZeRO-1, Ψ scaled off the architecture's count: every reason is
    named, and the loader, given writer dcp, refuses with the first."""
    note = _note("tmpfs")
    assert note is not None and note.startswith(TOLD)
    assert "set cluster.layout.writer: dcp" not in note
    assert note.endswith(
        "; cluster.layout.writer: dcp does not apply to it (cluster.parallelism tp 1, pp 2: "
        "writer dcp plans a data-parallel save; cluster.parallelism.zero_stage 1: has no DCP "
        "state layout under cluster.layout.writer: dcp; model.parameters 16000000: differs "
        "from the 14,618,880 the architecture counts; writer dcp plans the architecture's own "
        "tensors)"
    )
    with pytest.raises(ProfileError) as refused:
        load_profile("tmpfs", ["cluster.layout.writer=dcp"])
    assert "cluster.parallelism = 'tp 1, pp 2': writer dcp plans a data-parallel save" in str(
        refused.value
    )


def test_without_an_architecture_the_line_says_dcp_needs_one() -> None:
    note = _note("405b", ["model.architecture=null", "dcp.world_size=4"])
    assert note is not None and note.startswith(TOLD)
    assert note.endswith(
        "cluster.layout.writer: dcp does not apply to it (needs model.architecture (its tensors))"
    )


def test_an_async_save_with_a_dcp_checkpointer_is_named() -> None:
    note = _note("7b", ["dcp.checkpointer=process"])
    assert note is not None
    assert note.startswith(
        f"{TOLD}this profile's async save is DCP's (checkpoint.mode: async, "
        "dcp.checkpointer: process); cluster.layout.writer: dcp does not apply to it ("
    )
    sync = _note("7b", ["dcp.checkpointer=process", "checkpoint.mode=sync"])
    words = "this profile's dcp: section has the checklist save with PyTorch DCP"
    assert sync is not None and words in sync


@pytest.mark.parametrize("writer", ["megatron", "dcp", "dlio"])
def test_a_writer_the_profile_gives_is_not_remarked_on(tmp_path: Path, writer: str) -> None:
    """Given in the YAML file (either value, or DLIO's), or by --set: the user chose."""
    raw = yaml.safe_load(TMPFS_YAML.read_text())
    raw["cluster"]["layout"] = {"writer": writer}
    path = tmp_path / "dcp-job.yaml"
    path.write_text(yaml.safe_dump(raw))
    overrides = DCP_APPLIES if writer == "dcp" else []
    profile = load_profile(path, overrides)
    assert "dcp" in profile.given_keys
    assert writer_default_note(profile, profile.given_keys) is None
    assert _note("tmpfs", [*overrides, f"cluster.layout.writer={writer}"]) is None


@pytest.mark.parametrize("name", SHIPPED_PROFILES)
def test_only_the_shipped_profile_with_a_dcp_section_and_no_writer_is_told(name: str) -> None:
    """tmpfs has a dcp: section (its real DCP run's model) and no writer; 405b-fsdp gives
    ``writer: dcp``, the mlperf profiles ``dlio``; the rest have no dcp: section."""
    assert (_note(name) is not None) == (name == "tmpfs")


def test_nothing_that_says_dcp_means_no_line() -> None:
    profile = load_profile("405b")  # async, no dcp: section
    assert profile.checkpoint.mode == "async"
    assert writer_default_note(profile, profile.given_keys) is None
    # the decision reads the given keys, not the profile's values (dcp has defaults always)
    assert writer_default_note(profile, {"dcp"}) is not None
    assert writer_default_note(profile, {"dcp", "cluster.layout.writer"}) is None


def test_the_profile_records_the_keys_its_yaml_and_set_gave() -> None:
    profile = load_profile("tmpfs", ["cluster.layout.writer=megatron"])
    given = profile.given_keys
    assert {"dcp", "dcp.architecture", "dcp.architecture.kv_heads", "run.metadata_files"} <= given
    assert {"cluster.layout", "cluster.layout.writer"} <= given  # by the --set
    assert "dcp.world_size" not in given and "run.direct_io" not in given  # defaults
    assert "model.architecture.hidden" in given and "cluster.parallelism.tp" in given
    assert "name" in given and load_profile("tmpfs").given_keys == given - {
        "cluster.layout",
        "cluster.layout.writer",
    }
    assert profile == load_profile("tmpfs")  # not compared: the same profile either way


def test_key_paths_name_sections_and_keys_but_not_list_items() -> None:
    raw = {"a": {"b": 1, "c": {"d": [{"e": 2}]}}, "f": None}
    assert key_paths(raw) == {"a", "a.b", "a.c", "a.c.d", "f"}


def test_every_refusal_is_listed_in_the_loaders_order() -> None:
    profile = load_profile(
        "tmpfs",
        [*DCP_APPLIES, "cluster.parallelism.tp=2", "cluster.parallelism.dp=2",
         "cluster.parallelism.replicas_write=one", "cluster.parallelism.zero_stage=2",
         "model.bytes_per_parameter=10"],
    )  # fmt: skip
    keys = [r.key for r in dcp_writer_refusals(profile)]
    assert keys == [
        "cluster.parallelism",
        "cluster.parallelism.replicas_write",
        "cluster.parallelism.zero_stage",
        "model.bytes_per_parameter",
    ]
    assert dcp_writer_refusals(load_profile("tmpfs", DCP_APPLIES)) == ()
