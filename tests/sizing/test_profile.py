"""Cluster profiles: shipped ones load, overrides apply, dump/load round-trips, bad input is
one clear line naming the file (or --set), the key, the value and what is allowed."""

import dataclasses

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ckptgate.sizing import SHIPPED_PROFILES, ProfileError, load_profile
from ckptgate.sizing.architecture import Architecture
from ckptgate.sizing.profile import dump_profile, profile_from_dict, profile_to_dict
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.units import DAY_S, MB, MiB

SHIPPED = {name: load_profile(name) for name in SHIPPED_PROFILES}


def write_profile(tmp_path, mutate=None, name="405b", text=None):
    """A copy of a shipped profile as a file, changed by ``mutate(raw_dict)``."""
    path = tmp_path / "cluster.yaml"
    if text is None:
        raw = profile_to_dict(SHIPPED[name])
        if mutate is not None:
            mutate(raw)
        text = yaml.safe_dump(raw, sort_keys=False)
    path.write_text(text)
    return path


def error_from(path_or_name, overrides=()):
    with pytest.raises(ProfileError) as info:
        load_profile(path_or_name, overrides=overrides)
    message = str(info.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("name", SHIPPED_PROFILES)
def test_shipped_profiles_load_by_name(name):
    profile = SHIPPED[name]
    assert profile.name == name
    assert profile.source == f"sizing/profiles/{name}.yaml"
    par = profile.cluster.parallelism
    assert par.tp * par.pp * par.dp == profile.cluster.gpus
    assert profile.failures.window_s == 54 * DAY_S


def test_405b_profile_is_spec_md():
    p = SHIPPED["405b"]
    assert p.parameters == 405 * 10**9 and p.model.bytes_per_parameter == 14
    assert (p.cluster.gpus, p.cluster.gpus_per_node, p.nodes) == (16384, 8, 2048)
    par = p.cluster.parallelism
    assert (par.tp, par.pp, par.dp, par.zero_stage, par.replicas_write) == (8, 16, 128, 1, "spread")
    assert (p.failures.interruptions, p.failures.observed_gpus, p.failures.restart_s) == (
        419,
        16384,
        0.0,
    )
    c = p.checkpoint
    assert (c.interval_s, c.overhead_budget, c.mode, c.async_headroom) == (600, 0.01, "async", 2.5)
    assert (c.staging_buffers, c.files_per_rank, p.restart.read_s) == (1, 1, 120)
    assert (p.retention.count, p.retention.protection_overhead) == (10, 0.0)
    assert p.model.architecture == Architecture(16384, 53248, 126, 128, 8, 128256)


def test_tmpfs_run_section_uses_units():
    run = SHIPPED["tmpfs"].run
    assert (run.transfer_bytes, run.rounds) == (4 * MiB, 3)
    assert (run.readers, run.reader_bytes) == (2, 64 * MB)
    assert SHIPPED["405b"].run.transfer_bytes == 16 * MiB  # the default


def test_overrides_apply_with_units():
    p = load_profile(
        "405b",
        overrides=[
            "checkpoint.interval_s=10 min",
            "failures.window_days=27",
            "run.shard_bytes_cap=1 GiB",
            "checkpoint.mode=sync",
        ],
    )
    assert p.checkpoint.interval_s == 600.0
    assert p.failures.window_s == 27 * DAY_S
    assert p.run.shard_bytes_cap == 2**30
    assert p.checkpoint.mode == "sync"


def test_override_can_drop_parameters_and_count_from_architecture():
    p = load_profile("405b", overrides=["model.parameters="])
    assert p.model.parameters is None
    assert p.parameters == 405_853_388_800


def test_override_adds_an_architecture():
    p = load_profile("7b", overrides=["model.architecture.hidden=8192"])
    assert p.model.architecture is not None and p.model.architecture.hidden == 8192


def test_partial_section_fills_in_from_its_default():
    p = load_profile("tmpfs", overrides=["dcp.architecture.layers=2", "dcp.world_size=4"])
    assert p.dcp.architecture.layers == 2 and p.dcp.architecture.hidden == 512
    assert p.dcp.world_size == 4 and p.dcp.checkpointer == "thread"


def test_window_days_accepts_a_unit_string(tmp_path):
    path = write_profile(tmp_path, lambda raw: raw["failures"].update(window_days="54 d"))
    assert load_profile(path).failures.window_s == 54 * DAY_S


def test_a_path_loads_and_names_itself(tmp_path):
    path = write_profile(tmp_path)
    p = load_profile(str(path))
    assert p == SHIPPED["405b"]
    assert p.source == str(path)


# --- bad input ---------------------------------------------------------------------------------


def test_unknown_key_names_file_key_and_nearest(tmp_path):
    def typo(raw):
        raw["checkpoint"]["intervall_s"] = raw["checkpoint"].pop("interval_s")

    path = write_profile(tmp_path, typo)
    message = error_from(path)
    assert str(path) in message
    assert "'checkpoint.intervall_s'" in message
    assert "did you mean 'checkpoint.interval_s'" in message


def test_unknown_top_level_key(tmp_path):
    path = write_profile(tmp_path, lambda raw: raw.update(clustr={}))
    message = error_from(path)
    assert "'clustr'" in message and "did you mean 'cluster'" in message


def test_wrong_type_names_value_and_allowed(tmp_path):
    path = write_profile(tmp_path, lambda raw: raw["cluster"].update(gpus="many"))
    message = error_from(path)
    assert str(path) in message and "cluster.gpus" in message
    assert "'many'" in message and "whole number" in message


@pytest.mark.parametrize(
    ("override", "key", "allowed"),
    [
        ("cluster.gpus=0", "cluster.gpus", "> 0"),
        ("cluster.gpus=-8", "cluster.gpus", "> 0"),
        ("checkpoint.interval_s=0", "checkpoint.interval_s", "> 0"),
        ("restart.read_s=-1 min", "restart.read_s", "> 0"),
        ("model.parameters=-5", "model.parameters", "> 0"),
        ("checkpoint.overhead_budget=1.5", "checkpoint.overhead_budget", "in (0, 1)"),
        ("checkpoint.overhead_budget=0", "checkpoint.overhead_budget", "in (0, 1)"),
        ("checkpoint.async_headroom=0.5", "checkpoint.async_headroom", ">= 1"),
        ("checkpoint.mode=fast", "checkpoint.mode", "one of sync, async"),
        (
            "cluster.parallelism.replicas_write=some",
            "cluster.parallelism.replicas_write",
            "one of one, all, spread",
        ),
        ("cluster.parallelism.zero_stage=4", "cluster.parallelism.zero_stage", "in [0, 3]"),
        ("run.direct_io=maybe", "run.direct_io", "true or false"),
        ("run.transfer_bytes=4k", "run.transfer_bytes", "MiB"),
    ],
    ids=lambda v: str(v),
)
def test_bad_value_from_set_names_the_set_key_value_and_allowed(override, key, allowed):
    message = error_from("405b", [override])
    assert message.startswith(f"--set {override}: {key} = ")
    assert repr(yaml.safe_load(override.partition("=")[2])) in message
    assert allowed in message


def test_parallelism_must_multiply_to_gpus():
    message = error_from("405b", ["cluster.parallelism.dp=64"])
    assert "tp*pp*dp = 8*16*64 = 8192" in message and "cluster.gpus = 16384" in message
    assert "--set cluster.parallelism.dp=64" in message


def test_gpus_must_fill_whole_nodes(tmp_path):
    def odd(raw):
        raw["cluster"].update(gpus=12, gpus_per_node=8)
        raw["cluster"]["parallelism"].update(tp=1, pp=1, dp=12)

    path = write_profile(tmp_path, odd)
    message = error_from(path)
    assert str(path) in message and "gpus = 12" in message and "gpus_per_node = 8" in message


def test_unknown_profile_name_lists_shipped():
    message = error_from("406b")
    assert "406b" in message
    for name in SHIPPED_PROFILES:
        assert name in message


def test_malformed_yaml_gives_line_and_column(tmp_path):
    path = write_profile(tmp_path, text="name: x\nmodel: [1, 2\ncluster: {gpus: 8}\n")
    message = error_from(path)
    assert f"{path}:3:" in message and "malformed YAML" in message


DUPLICATES = """\
name: dup
description: a profile with a key written twice
model: {parameters: 7e9, bytes_per_parameter: 14}
cluster:
  gpus: 8
  gpus_per_node: 8
  parallelism: {tp: 1, pp: 1, dp: 8}
failures: {interruptions: 419, window_days: 54, observed_gpus: 16384}
checkpoint:
  interval_s: 600
  overhead_budget: 0.01
  mode: async
  async_headroom: 2.5
  staging_buffers: 1
  files_per_rank: 1
  interval_s: 1200
restart: {read_s: 120}
retention: {count: 10, protection_overhead: 0.0}
"""


ONCE_EACH = DUPLICATES.replace("  interval_s: 1200\n", "")


def test_duplicate_key_in_a_nested_section_names_file_line_and_key_path(tmp_path):
    path = write_profile(tmp_path, text=DUPLICATES)
    message = error_from(path)
    assert message == (
        f"{path}:16: duplicate key checkpoint.interval_s (first at line 10); allowed: each key once"
    )


def test_duplicate_key_at_top_level_and_in_flow_mappings(tmp_path):
    top = write_profile(tmp_path, text=ONCE_EACH.replace("name: dup\n", "name: a\nname: b\n"))
    assert error_from(top).startswith(f"{top}:2: duplicate key name (first at line 1)")
    flow = write_profile(
        tmp_path, text=ONCE_EACH.replace("{tp: 1, pp: 1, dp: 8}", "{tp: 1, pp: 1, dp: 8, tp: 2}")
    )
    message = error_from(flow)
    assert message.startswith(f"{flow}:7: duplicate key cluster.parallelism.tp (first at line 7)")


def test_set_of_a_key_the_file_has_is_not_a_duplicate(tmp_path):
    # --set overrides a key of the file, and a later --set of the same key wins.
    path = write_profile(tmp_path, text=ONCE_EACH)
    overrides = ["checkpoint.interval_s=900", "checkpoint.interval_s=1200"]
    assert load_profile(path, overrides=overrides).checkpoint.interval_s == 1200


def test_top_level_must_be_a_mapping(tmp_path):
    message = error_from(write_profile(tmp_path, text="- 1\n- 2\n"))
    assert "mapping" in message


def test_missing_key_is_named(tmp_path):
    path = write_profile(tmp_path, lambda raw: raw["checkpoint"].pop("mode"))
    message = error_from(path)
    assert "missing key 'checkpoint.mode'" in message and "sync, async" in message


def test_model_needs_parameters_or_architecture():
    message = error_from("405b", ["model.parameters=", "model.architecture="])
    assert "neither parameters nor architecture" in message


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("checkpoint.interval_s", "not of the form key.path=value"),
        ("=5", "not of the form key.path=value"),
        ("checkpoint..mode=sync", "empty part"),
        ("checkpoint.interval_s.unit=s", "checkpoint.interval_s is a value"),
        ("checkpoint.intervall_s=600", "did you mean 'checkpoint.interval_s'"),
    ],
    ids=str,
)
def test_bad_set(override, expected):
    message = error_from("405b", [override])
    assert message.startswith(f"--set {override}")
    assert expected in message


def test_hidden_not_a_multiple_of_heads_is_taken_with_dlios_convention():
    # MLPerf Storage and DLIO write the 1T shape without a head_dim (25,872 over 192 heads).
    accepted = load_profile("405b", ["model.architecture.heads=96"])
    assert accepted.model.architecture is not None
    assert accepted.model.architecture.head_dim is None
    profile = load_profile(
        "405b", ["model.architecture.heads=96", "model.architecture.head_dim=128"]
    )
    assert profile.model.architecture is not None
    assert profile.model.architecture.head_dim == 128


def test_architecture_shape_is_checked():
    message = error_from("405b", ["model.architecture.kv_heads=7"])
    assert "model.architecture.kv_heads = 7" in message and "divisor of heads" in message


# --- dump and load -----------------------------------------------------------------------------


@st.composite
def raw_profiles(draw):
    """Valid raw profile mappings with varied values, units and optional sections."""
    tp, pp, dp = draw(st.sampled_from([1, 2, 8])), draw(st.integers(1, 4)), draw(st.integers(1, 8))
    gpus = tp * pp * dp
    model = {"bytes_per_parameter": draw(st.sampled_from([12, 14, 16]))}
    if draw(st.booleans()):
        model["parameters"] = draw(st.integers(1, 10**13))
    if "parameters" not in model or draw(st.booleans()):
        heads = draw(st.sampled_from([4, 8]))
        model["architecture"] = {
            "hidden": heads * draw(st.integers(1, 64)),
            "ffn_hidden": draw(st.integers(1, 999)),
            "layers": draw(st.integers(pp, 40)),
            "heads": heads,
            "kv_heads": heads // 2,
            "vocab": draw(st.integers(1, 10**5)),
        }
    replicas = draw(st.sampled_from(["one", "all", "spread"]))
    raw = {
        "name": draw(st.text("abcdefgh0123456789-", min_size=1, max_size=8)),
        "description": draw(st.text(max_size=20)),
        "model": model,
        "cluster": {
            "gpus": gpus,
            "gpus_per_node": draw(st.sampled_from([1, tp])),
            "parallelism": {
                "tp": tp,
                "pp": pp,
                "dp": dp,
                "zero_stage": draw(st.integers(0, 3)),
                "replicas_write": replicas,
            },
        },
        "failures": {
            "interruptions": draw(st.integers(1, 10**4)),
            "window_days": draw(st.one_of(st.floats(0.01, 1000), st.just("54 d"), st.just("36 h"))),
            "observed_gpus": draw(st.integers(1, 10**5)),
            "restart_s": draw(st.floats(0, 10**4)),
        },
        "checkpoint": {
            "interval_s": draw(st.one_of(st.floats(1, 10**5), st.just("10 min"))),
            "overhead_budget": draw(st.floats(0.001, 0.5)),
            "mode": "async",
            "async_headroom": draw(st.floats(1, 4)),
            "staging_buffers": 2,
            "files_per_rank": draw(st.integers(1, 4)),
        },
        "restart": {"read_s": draw(st.floats(1, 1000))},
        "retention": {
            "count": draw(st.integers(1, 20)),
            "protection_overhead": draw(st.floats(0, 2)),
        },
    }
    if draw(st.booleans()):
        raw["checkpoint"]["goodput_budget"] = draw(st.floats(0.01, 0.5))
    if draw(st.booleans()):
        raw["run"] = {
            "transfer_bytes": "4 MiB",
            "shard_bytes_cap": draw(st.integers(1, 10**12)),
            "max_reader_slowdown": 0.25,
            "direct_io": True,
        }
    if draw(st.booleans()):
        raw["dcp"] = {
            "world_size": 4,
            "checkpointer": "process",
            "architecture": {
                "hidden": 64,
                "ffn_hidden": 128,
                "layers": 2,
                "heads": 4,
                "kv_heads": 4,
                "vocab": 1000,
            },
        }
    return raw


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(raw_profiles())
def test_profile_dumped_and_loaded_is_equal(raw):
    profile = profile_from_dict(raw, "strategy")
    again = profile_from_dict(yaml.safe_load(dump_profile(profile)), "dumped")
    assert again == profile


@pytest.mark.parametrize("name", SHIPPED_PROFILES)
def test_shipped_profile_dumped_and_loaded_is_equal(name, tmp_path):
    path = tmp_path / f"{name}.yaml"
    path.write_text(dump_profile(SHIPPED[name]))
    assert load_profile(path) == SHIPPED[name]


@given(st.floats(min_value=1e-3, max_value=1e7))
@example(54 * DAY_S)  # shipped profiles' window
@example(0.1 + 0.2)
def test_window_dumped_and_loaded_is_exact(window_s):
    profile = dataclasses.replace(
        SHIPPED["tmpfs"], failures=dataclasses.replace(SHIPPED["tmpfs"].failures, window_s=window_s)
    )
    assert profile_from_dict(profile_to_dict(profile)).failures.window_s == window_s


def test_profile_fields_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SHIPPED["405b"].cluster.gpus = 8  # type: ignore[misc]
    assert isinstance(SHIPPED["405b"], Profile)
