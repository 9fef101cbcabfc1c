"""The per-component checkpoint layout: defaults reproduce the single-policy model, sums stay
exact, HSDP shard groups and tp-replicated components place bytes where they say, Meta's
reported 1 MB to 4 GB per GPU for Llama 3 405B, and clear errors for a bad layout."""

import dataclasses
import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ckptgate.sizing import ProfileError, load_profile, shard_distribution
from ckptgate.sizing.schema import COMPONENTS, ComponentLayout, Layout
from ckptgate.sizing.units import MB
from tests.sizing.test_shards import SHIPPED, cluster_profiles, shipped_examples


@st.composite
def laid_out_profiles(draw):
    """A re-shaped profile (test_shards.cluster_profiles) with a random per-component layout."""
    profile = draw(cluster_profiles())
    par = profile.cluster.parallelism
    divisors = [d for d in range(1, par.dp + 1) if par.dp % d == 0]

    def component():
        return st.builds(
            ComponentLayout,
            tp=st.sampled_from(["split", "replicate"]),
            zero_stage=st.none() | st.integers(0, 3),
            replicas_write=st.none() | st.sampled_from(["one", "all", "spread"]),
            dp_shard=st.none() | st.sampled_from(divisors),
        )

    arch = profile.model.architecture
    per_stage = None
    if arch is not None and draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(0, arch.layers), min_size=par.pp - 1,
                                    max_size=par.pp - 1)))  # fmt: skip
        bounds = [0, *cuts, arch.layers]
        per_stage = tuple(b - a for a, b in itertools.pairwise(bounds))
    layout = Layout(
        embedding=draw(component()),
        head=draw(component()),
        layers=draw(component()),
        extra_state_bytes_per_rank=draw(st.integers(0, 10**7)),
        layers_per_stage=per_stage,
    )
    return dataclasses.replace(profile, cluster=dataclasses.replace(profile.cluster, layout=layout))


def _policies(profile):
    par = profile.cluster.parallelism
    return {
        getattr(profile.cluster.layout, c).replicas_write or par.replicas_write for c in COMPONENTS
    }


@settings(max_examples=150, deadline=None)
@given(laid_out_profiles())
@example(SHIPPED["405b-meta"])
@shipped_examples
def test_per_rank_bytes_sum_to_the_checkpoint_plus_extra_state(profile):
    dist = shard_distribution(profile)
    extra = profile.cluster.layout.extra_state_bytes_per_rank * profile.cluster.gpus
    assert dist.extra_state_bytes == extra
    assert sum(dist.stage_parameters) == profile.parameters
    if "all" in _policies(profile):
        assert dist.written_bytes >= dist.checkpoint_bytes + extra
    else:  # DCP's planner (writer dcp) writes its framing and small entries besides
        assert dist.written_bytes == dist.checkpoint_bytes + extra + dist.framing_bytes
    assert dist.framing_bytes <= 0.01 * dist.checkpoint_bytes
    assert sum(dist.node_bytes(i) for i in range(profile.nodes)) == dist.written_bytes
    assert min(dist.per_rank_bytes) >= profile.cluster.layout.extra_state_bytes_per_rank


@settings(max_examples=150, deadline=None)
@given(laid_out_profiles())
@example(SHIPPED["405b-meta"])
def test_largest_at_least_mean_at_least_smallest(profile):
    dist = shard_distribution(profile)
    assert dist.largest_bytes >= dist.mean_bytes >= dist.smallest_bytes
    qs = [dist.quantile(q) for q in (0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1)]
    assert qs == sorted(qs) and qs[0] == dist.smallest_bytes and qs[-1] == dist.largest_bytes
    assert sum(dist.histogram()[1]) == profile.cluster.gpus


@settings(max_examples=100, deadline=None)
@given(cluster_profiles())
@shipped_examples
def test_a_layout_spelling_out_the_parallelism_changes_nothing(profile):
    profile = dataclasses.replace(
        profile, cluster=dataclasses.replace(profile.cluster, layout=Layout())
    )
    par = profile.cluster.parallelism
    same = ComponentLayout("split", par.zero_stage, par.replicas_write, par.dp)
    arch = profile.model.architecture
    explicit = Layout(same, same, same)
    if arch is not None and par.pp <= arch.layers:
        from ckptgate.sizing.shards import layers_per_stage

        explicit = dataclasses.replace(
            explicit, layers_per_stage=tuple(layers_per_stage(arch.layers, par.pp))
        )
    spelled = dataclasses.replace(
        profile, cluster=dataclasses.replace(profile.cluster, layout=explicit)
    )
    assert shard_distribution(spelled).per_rank_bytes == shard_distribution(profile).per_rank_bytes


def test_hybrid_shard_group_zero_writes_the_shards():
    # tmpfs: tp 1, pp 2, dp 2; ZeRO-3 over a shard group of 1, group 0 writes: dp rank 1 of each
    # stage holds the other replica group's copy and writes only its extra state.
    profile = load_profile(
        "tmpfs",
        overrides=[
            "cluster.layout.layers={zero_stage: 3, dp_shard: 1, replicas_write: one}",
            "cluster.layout.embedding={zero_stage: 3, dp_shard: 1, replicas_write: one}",
            "cluster.layout.head={zero_stage: 3, dp_shard: 1, replicas_write: one}",
            "cluster.layout.extra_state_bytes_per_rank=1000",
        ],
    )
    dist = shard_distribution(profile)
    assert dist.per_rank_bytes[1] == dist.per_rank_bytes[3] == 1000
    assert dist.per_rank_bytes[0] + dist.per_rank_bytes[2] == dist.checkpoint_bytes + 2000
    assert "dp_shard 1 of dp 2" in dist.policy_note


def test_a_tp_replicated_component_is_written_by_tp_rank_zero():
    profile = load_profile(
        "70b", overrides=["cluster.layout.embedding.tp=replicate", "model.parameters="]
    )
    split = shard_distribution(load_profile("70b", overrides=["model.parameters="]))
    dist = shard_distribution(profile)
    arch = profile.model.architecture
    assert arch is not None
    emb_bytes = arch.vocab * arch.hidden * 14 // profile.cluster.parallelism.dp
    # Stage 0, dp 0: tp rank 0 gains the 7 other slices of the embedding, tp 1..7 lose theirs.
    assert dist.per_rank_bytes[0] - split.per_rank_bytes[0] == pytest.approx(
        emb_bytes * 7 / 8, abs=16
    )
    assert split.per_rank_bytes[1] - dist.per_rank_bytes[1] == pytest.approx(emb_bytes / 8, abs=16)
    assert dist.written_bytes == split.written_bytes
    assert "tp-replicated" in dist.policy_note


def test_explicit_layers_per_stage_move_the_layers():
    profile = load_profile(
        "tmpfs", overrides=["model.parameters=", "cluster.layout.layers_per_stage=[0, 8]"]
    )
    dist = shard_distribution(profile)
    arch = profile.model.architecture
    assert arch is not None
    assert dist.stage_parameters[0] == arch.vocab * arch.hidden
    assert "explicit: 0/8" in dist.policy_note


def test_meta_405b_layout_spans_1_mb_to_4_gb_per_gpu():
    """The Llama 3 paper's 1 MB to 4 GB of checkpoint state per GPU (Meta, 2024)."""
    dist = shard_distribution(SHIPPED["405b-meta"])
    assert dist.smallest_bytes == 1 * MB
    assert 4.0e9 <= dist.largest_bytes <= 4.4e9  # 4.28 GB = 3.99 GiB
    assert dist.largest_rank == 15 * 128 * 8  # last stage (head), dp 0, tp 0
    assert dist.quantile(0.5) == 1 * MB  # the second HSDP replica group writes only its own state
    assert dist.written_bytes == 405 * 10**9 * 14 + 16384 * MB


@pytest.mark.parametrize(
    ("override", "words"),
    [
        (
            "cluster.layout.layers.dp_shard=48",
            "cluster.layout.layers.dp_shard = 48: does not divide cluster.parallelism.dp (128)",
        ),
        (
            "cluster.layout.layers_per_stage=[8, 8]",
            "cluster.layout.layers_per_stage = [8, 8]: 2 stages, cluster.parallelism.pp is 16",
        ),
        (
            "cluster.layout.layers_per_stage=[8]*16",
            "cluster.layout.layers_per_stage = '[8]*16': wrong type; allowed: a list of",
        ),
        (
            "cluster.layout.layers_per_stage=[8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]",
            "sums to 128 layers, model.architecture.layers is 126",
        ),
        ("cluster.layout.head.tp=column", "cluster.layout.head.tp = 'column': not a known choice"),
        ("cluster.layout.extra_state_bytes_per_rank=-1", "out of range"),
        ("cluster.layout.embeddings.tp=split", "unknown key 'cluster.layout.embeddings'"),
    ],
    ids=["dp_shard", "stages", "type", "sum", "tp", "extra", "key"],
)
def test_a_bad_layout_names_the_key_the_value_and_what_is_allowed(override, words):
    with pytest.raises(ProfileError) as info:
        load_profile("405b", overrides=[override])
    message = str(info.value)
    assert words in message, message
    assert "allowed" in message and "\n" not in message


def test_a_bad_list_item_names_its_index_and_the_set_that_gave_it():
    text = "cluster.layout.layers_per_stage=[2, -1, 3, 4]"
    with pytest.raises(ProfileError) as info:
        load_profile("70b", overrides=[text])
    assert str(info.value).startswith(
        f"--set {text}: cluster.layout.layers_per_stage[1] = -1: out of range; allowed: a list"
    ), str(info.value)


def test_layers_per_stage_needs_an_architecture():
    with pytest.raises(ProfileError, match=r"layers_per_stage .* given without model.architecture"):
        load_profile(
            "405b", overrides=["model.architecture=", "cluster.layout.layers_per_stage=[1]"]
        )


def test_the_sizing_table_shows_quantiles_a_histogram_and_the_largest_node():
    from ckptgate.sizing import derive
    from ckptgate.sizing.table import render

    profile = SHIPPED["405b-meta"]
    text = render(profile, derive(profile))
    assert "shard quantiles (nearest rank): p0 1.00 MB, p1 1.00 MB" in text
    assert "p100 4.28 GB" in text
    assert "largest node 34.2 GB (node 1920)" in text
    bars = [line for line in text.splitlines() if " | " in line and line.startswith("  ")]
    assert bars[0].startswith("  1.00 MB - ") and bars[0].endswith(" 8,192")
    assert bars[-1].endswith(" 4.28 GB | #" + " " * 39 + " 16")
    assert "(5.67 TB checkpoint + 16.4 GB extra state)" in text


def test_equal_shards_make_one_histogram_bin():
    dist = shard_distribution(load_profile("7b", ["cluster.parallelism.dp=64"]))
    assert dist.largest_bytes == dist.smallest_bytes
    assert dist.histogram() == ((dist.smallest_bytes,) * 2, (64,))


def test_shards_that_print_alike_share_one_histogram_line():
    # tmpfs: 4 shards within 2 kB of 56.0 MB: 8 bins of 245 B, all printed as 56.0 MB.
    dist = shard_distribution(load_profile("tmpfs"))
    assert len(dist.histogram()[1]) == 8 and not dist.histogram_log_spaced
    assert dist.histogram_lines() == ["56.0 MB - 56.0 MB | " + "#" * 40 + " 4"]
