"""DCP .metadata size: tensors and chunks from the layout, bytes as measured on real DCP saves
(tests/dcp/test_metadata.py measures the constants)."""

import dataclasses

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from ckptgate.sizing import SHIPPED_PROFILES, dcp_metadata_bytes, dcp_metadata_chunks, load_profile
from ckptgate.sizing.metadata import (
    DCP_BYTE_ENTRIES,
    DCP_METADATA_BYTES_PER_BYTE_ENTRY,
    DCP_METADATA_BYTES_PER_CHUNK,
    DCP_METADATA_BYTES_PER_RANK,
    DCP_METADATA_BYTES_PER_TENSOR,
    dcp_metadata_tensors,
    parameter_tensors,
)
from tests.sizing.test_layout import laid_out_profiles

SHIPPED = {name: load_profile(name) for name in SHIPPED_PROFILES}


def test_405b_chunks_count_every_state_tensor_slice():
    # 126 layers x 9 tensors + embedding + head + final norm = 1,137 parameter tensors, each
    # split over tp 8; ZeRO-1 shards the 3 optimizer tensors over dp 128, the bf16 weight is
    # saved once (dedup), and one Adam step per parameter tensor.
    profile = SHIPPED["405b"]
    assert sum(parameter_tensors(profile).values()) == 1137
    assert dcp_metadata_chunks(profile) == 1137 * 8 * (3 * 128 + 1) + 1137
    assert dcp_metadata_tensors(profile) == 1137 * 5
    assert dcp_metadata_bytes(profile) == (
        1137 * 5 * 160 + dcp_metadata_chunks(profile) * 171 + 13 * 56 + 16384 * 260
    )


def test_replicas_all_saves_every_copy_as_a_chunk():
    profile = load_profile("405b", overrides=["cluster.parallelism.replicas_write=all"])
    assert dcp_metadata_chunks(profile) == 1137 * 8 * (3 * 128 + 128) + 1137


def test_meta_layout_chunks_follow_each_component():
    # Layers: ZeRO-3 over dp_shard 64, 4 kinds sharded, group 0 writes: 8 x 4 x 64 per tensor;
    # embedding and head + final norm: nothing sharded, 4 replicated kinds written once: 8 x 4.
    profile = SHIPPED["405b-meta"]
    layers, edges = 126 * 9, 3
    assert dcp_metadata_chunks(profile) == layers * 8 * 4 * 64 + edges * 8 * 4 + 1137


def test_a_tp_replicated_embedding_is_one_slice():
    split = dcp_metadata_chunks(SHIPPED["405b"])
    whole = dcp_metadata_chunks(load_profile("405b", ["cluster.layout.embedding.tp=replicate"]))
    assert split - whole == 7 * (3 * 128 + 1)


@settings(max_examples=80, deadline=None)
@given(laid_out_profiles())
@example(SHIPPED["405b"])
@example(SHIPPED["405b-meta"])
def test_metadata_bytes_are_tensors_and_chunks_at_the_measured_figures(profile):
    chunks, tensors = dcp_metadata_chunks(profile), dcp_metadata_tensors(profile)
    assert chunks >= tensors // 4  # every parameter tensor saves at least its step and a kind
    assert dcp_metadata_bytes(profile) == (
        tensors * DCP_METADATA_BYTES_PER_TENSOR
        + chunks * DCP_METADATA_BYTES_PER_CHUNK
        + DCP_BYTE_ENTRIES * DCP_METADATA_BYTES_PER_BYTE_ENTRY
        + profile.cluster.gpus * DCP_METADATA_BYTES_PER_RANK
    )


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SHIPPED_PROFILES), st.integers(0, 2))
def test_more_zero_sharding_never_saves_fewer_chunks(name, zero_stage):
    base = SHIPPED[name]
    # writer dcp knows zero_stage 0 and 3 only (test_dcp_writer.py holds 3 >= 0)
    assume(base.cluster.layout.writer != "dcp")

    def at(stage):
        par = dataclasses.replace(base.cluster.parallelism, zero_stage=stage)
        cluster = dataclasses.replace(base.cluster, parallelism=par)
        return dcp_metadata_chunks(dataclasses.replace(base, cluster=cluster))

    assert at(zero_stage + 1) >= at(zero_stage)
