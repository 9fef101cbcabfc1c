"""DCP .metadata size: chunks from the layout, bytes per chunk as measured on real DCP saves."""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptgate.sizing import SHIPPED_PROFILES, dcp_metadata_bytes, dcp_metadata_chunks, load_profile
from ckptgate.sizing.metadata import DCP_METADATA_BYTES_PER_CHUNK, parameter_tensors_per_stage

SHIPPED = {name: load_profile(name) for name in SHIPPED_PROFILES}


def test_405b_chunks_count_every_state_tensor_slice():
    # 126 layers x 9 tensors + embedding + head + final norm = 1,137 parameter tensors, each
    # split over tp 8; ZeRO-1 shards the 3 optimizer tensors over dp 128, the bf16 weight is
    # saved once (dedup), and one Adam step per parameter tensor.
    profile = SHIPPED["405b"]
    assert sum(parameter_tensors_per_stage(profile)) == 1137
    assert dcp_metadata_chunks(profile) == 1137 * 8 * (3 * 128 + 1) + 1137
    assert dcp_metadata_bytes(profile) == dcp_metadata_chunks(profile) * 219


def test_replicas_all_saves_every_copy_as_a_chunk():
    base = SHIPPED["405b"]
    par = dataclasses.replace(base.cluster.parallelism, replicas_write="all")
    profile = dataclasses.replace(base, cluster=dataclasses.replace(base.cluster, parallelism=par))
    assert dcp_metadata_chunks(profile) == 1137 * 8 * (3 * 128 + 128) + 1137


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(SHIPPED_PROFILES), st.integers(0, 3))
def test_metadata_bytes_are_chunks_times_the_measured_figure(name, zero_stage):
    base = SHIPPED[name]
    par = dataclasses.replace(base.cluster.parallelism, zero_stage=zero_stage)
    profile = dataclasses.replace(base, cluster=dataclasses.replace(base.cluster, parallelism=par))
    chunks = dcp_metadata_chunks(profile)
    assert chunks >= profile.cluster.parallelism.tp * len(parameter_tensors_per_stage(profile))
    assert dcp_metadata_bytes(profile) == chunks * DCP_METADATA_BYTES_PER_CHUNK
