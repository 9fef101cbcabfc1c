"""Shard distribution: exact sums, order, the Llama 3 pipeline layout, and played ranks."""

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ckptgate.sizing import SHIPPED_PROFILES, load_profile, played_ranks, shard_distribution
from ckptgate.sizing.architecture import Architecture
from ckptgate.sizing.schema import Layout, ModelSpec, Parallelism
from ckptgate.sizing.shards import layers_per_stage

SHIPPED = {name: load_profile(name) for name in SHIPPED_PROFILES}


@st.composite
def cluster_profiles(draw):
    """A shipped profile re-shaped: parallelism, ZeRO stage, replica policy, K, Ψ, shape."""
    base = SHIPPED[draw(st.sampled_from(SHIPPED_PROFILES))]
    tp, pp, dp = (
        draw(st.sampled_from([1, 2, 4, 8])),
        draw(st.integers(1, 6)),
        draw(st.integers(1, 12)),
    )
    gpn = draw(st.sampled_from([d for d in (1, 2, 4, 8) if (tp * pp * dp) % d == 0]))
    arch = draw(
        st.none()
        | st.builds(
            Architecture,
            hidden=st.integers(1, 64).map(lambda x: 8 * x),
            ffn_hidden=st.integers(1, 4096),
            layers=st.integers(pp, 64),
            heads=st.just(8),
            kv_heads=st.sampled_from([1, 2, 8]),
            vocab=st.integers(1, 200_000),
        )
    )
    params = (
        draw(st.integers(1, 10**12)) if arch is None else draw(st.none() | st.integers(1, 10**12))
    )
    model = ModelSpec(
        parameters=params, bytes_per_parameter=draw(st.integers(1, 20)), architecture=arch
    )
    par = Parallelism(
        tp=tp,
        pp=pp,
        dp=dp,
        zero_stage=draw(st.integers(0, 3)),
        replicas_write=draw(st.sampled_from(["one", "all", "spread"])),
    )
    # The single-policy model: the default layout (tests/sizing/test_layout.py varies it).
    cluster = dataclasses.replace(
        base.cluster, gpus=tp * pp * dp, gpus_per_node=gpn, parallelism=par, layout=Layout()
    )
    return dataclasses.replace(base, model=model, cluster=cluster)


def shipped_examples(test):
    for name in SHIPPED_PROFILES:
        test = example(SHIPPED[name])(test)
    return test


@settings(max_examples=80, deadline=None)
@given(cluster_profiles())
@shipped_examples
def test_distribution_sums_exactly(profile):
    dist = shard_distribution(profile)
    assert dist.checkpoint_bytes == profile.parameters * profile.model.bytes_per_parameter
    assert len(dist.per_rank_bytes) == profile.cluster.gpus
    assert sum(dist.stage_parameters) == profile.parameters
    model_bytes = dist.written_bytes - dist.extra_state_bytes - dist.framing_bytes
    if profile.cluster.parallelism.replicas_write == "all":
        assert model_bytes >= dist.checkpoint_bytes
    else:
        assert model_bytes == dist.checkpoint_bytes
    assert sum(dist.node_bytes(i) for i in range(profile.nodes)) == dist.written_bytes


@settings(max_examples=80, deadline=None)
@given(cluster_profiles())
@shipped_examples
def test_largest_at_least_mean_at_least_smallest(profile):
    dist = shard_distribution(profile)
    assert dist.largest_bytes >= dist.mean_bytes >= dist.smallest_bytes
    assert dist.per_rank_bytes[dist.largest_rank] == dist.largest_bytes
    assert dist.quantile(0) == dist.smallest_bytes and dist.quantile(1) == dist.largest_bytes
    assert dist.smallest_bytes <= dist.quantile(0.5) <= dist.largest_bytes
    assert dist.largest_node_bytes * profile.nodes >= dist.written_bytes


def test_all_replicas_write_duplicates_of_replicated_state():
    profile = load_profile("tmpfs", overrides=["cluster.parallelism.replicas_write=all"])
    dist = shard_distribution(profile)
    # ZeRO-1 at K = 14: 2 of 14 bytes per parameter are replicated over dp = 2 replicas.
    assert dist.written_bytes == dist.checkpoint_bytes + profile.parameters * 2
    assert "every dp replica" in dist.policy_note


def test_one_replica_writes_replicated_state():
    profile = load_profile(
        "tmpfs",
        overrides=["cluster.parallelism.replicas_write=one", "cluster.parallelism.zero_stage=0"],
    )
    dist = shard_distribution(profile)
    # tp 1, pp 2, dp 2; rank = pp_idx * 2 + dp_idx: dp rank 1 of each stage writes nothing.
    assert dist.per_rank_bytes[1] == dist.per_rank_bytes[3] == 0
    assert dist.per_rank_bytes[0] + dist.per_rank_bytes[2] == dist.checkpoint_bytes


def test_llama3_405b_pipeline_layout():
    # 126 layers on 16 stages: one fewer on the first and last stage (Llama 3, Meta 2024).
    assert layers_per_stage(126, 16) == [7] + [8] * 14 + [7]
    assert layers_per_stage(80, 4) == [20] * 4
    assert layers_per_stage(10, 4) == [2, 3, 3, 2]
    assert layers_per_stage(11, 4) == [3, 3, 3, 2]
    assert layers_per_stage(5, 1) == [5]


def test_405b_shards():
    dist = shard_distribution(SHIPPED["405b"])
    assert dist.checkpoint_bytes == dist.written_bytes == 5_670_000_000_000
    # Stage 1 (8 layers, no embedding) holds the most; its first rank is 1 * 128 * 8.
    assert dist.largest_rank == 1024
    assert 340e6 < dist.mean_bytes < dist.largest_bytes < 350e6


def test_no_architecture_spreads_uniformly():
    profile = load_profile("405b", overrides=["model.architecture="])
    dist = shard_distribution(profile)
    assert dist.policy_note.startswith("uniform: no architecture")
    assert dist.largest_bytes - dist.smallest_bytes <= 2


# --- played ranks -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(profile=cluster_profiles(), data=st.data())
def test_played_ranks_include_the_largest_and_are_distinct(profile, data):
    dist = shard_distribution(profile)
    nodes = data.draw(st.integers(1, 2 * profile.nodes), label="nodes")
    ranks_per_node = data.draw(st.integers(1, 2 * profile.cluster.gpus_per_node), label="rpn")
    played = [played_ranks(dist, ranks_per_node, i, nodes) for i in range(nodes)]
    everyone = [r for ranks in played for r in ranks]
    assert len(everyone) == len(set(everyone)) == min(nodes * ranks_per_node, profile.cluster.gpus)
    assert all(len(ranks) <= ranks_per_node for ranks in played)
    assert dist.largest_rank in everyone
    full_cluster = ranks_per_node == profile.cluster.gpus_per_node and nodes >= profile.nodes
    if not full_cluster:  # a representative set: the largest shard is played on node 0
        assert played[0][0] == dist.largest_rank
    if nodes * ranks_per_node <= profile.cluster.gpus:
        assert all(len(ranks) == ranks_per_node for ranks in played)


@pytest.mark.parametrize("name", SHIPPED_PROFILES)
def test_full_node_count_plays_every_rank_once(name):
    profile = SHIPPED[name]
    dist = shard_distribution(profile)
    gpn = profile.cluster.gpus_per_node
    played = [played_ranks(dist, gpn, i, profile.nodes) for i in range(profile.nodes)]
    assert sorted(r for ranks in played for r in ranks) == list(range(profile.cluster.gpus))
    assert played[0] == list(range(gpn))


@pytest.mark.parametrize("name", SHIPPED_PROFILES)
def test_one_node_plays_the_largest_shard(name):
    dist = shard_distribution(SHIPPED[name])
    ranks = played_ranks(dist, 4, 0, 1)
    assert len(ranks) == 4
    assert dist.largest_rank in ranks
    assert dist.smallest_bytes in [dist.per_rank_bytes[r] for r in ranks]
