"""DLIO's checkpoint layout (sizing.dlio), held to DLIO's own arithmetic re-derived by hand.

DLIO (MLPerf Storage's checkpointing) writes the model (2 B/parameter) from data-parallel rank
0 only, one file per layer and tensor rank, gives the extra layers to the first pipeline
stages, and splits the optimizer evenly over every rank whatever the ZeRO stage; no
.metadata. For MLPerf's 405B config (TP 8, PP 32, DP 2) that is 13.23 GB on the first stage's
dp rank 0, 9.51 GB on a dp rank 1 and 1,544 files (ckptgate issue 25).
"""

from __future__ import annotations

import pytest

from ckptgate.sizing import ProfileError, derive, load_profile, storm_file_count
from ckptgate.sizing.dlio import dlio_layout

H, FFN, VOCAB = 16384, 53248, 128256
LAYER_405B = 2 * H * H + 2 * H * 8 * 128 + 3 * H * FFN + 2 * H
"""One 405B block by hand: Q, O (h x h), K, V (h x 8 kv heads x 128), gated MLP, two norms."""
PSI_405B = 2 * VOCAB * H + 126 * LAYER_405B + H


def test_405b_ranks_hold_what_dlio_writes() -> None:
    layout = dlio_layout(load_profile("mlperf-405b"))
    optimizer = PSI_405B * 12 // 512
    # 126 layers on 32 stages: 4 on the first 30, 3 on the last 2; rank 0 also the embedding.
    rank0 = optimizer + 4 * LAYER_405B * 2 // 8 + VOCAB * H * 2 // 8
    assert layout.per_rank_bytes[0] == pytest.approx(rank0, abs=2)
    assert round(layout.per_rank_bytes[0] / 1e9, 2) == 13.23
    dp1 = 8  # global rank of stage 0, dp rank 1, tp rank 0 (Megatron order)
    assert layout.per_rank_bytes[dp1] == pytest.approx(optimizer, abs=1)
    assert round(layout.per_rank_bytes[dp1] / 1e9, 2) == 9.51
    assert layout.file_count == 1544
    # dp rank 1: 1; stages 1-29: optimizer + 4 layers; stage 30: + 3; stages 0 and 31: 6
    assert {len(f) for f in layout.files} == {1, 4, 5, 6}
    assert sorted(layout.files[0])[:2] == [
        "layer_00-model_00-model_states.pt",
        "layer_01-model_00-model_states.pt",
    ]
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in layout.files[dp1]


@pytest.mark.parametrize("name", ["mlperf-8b", "mlperf-70b", "mlperf-405b", "mlperf-1t"])
def test_every_mlperf_profile_uses_dlios_files_and_totals(name: str) -> None:
    profile = load_profile(name)
    par = profile.cluster.parallelism
    layout = dlio_layout(profile)
    arch = profile.model.architecture
    assert arch is not None
    # one optimizer file per rank; per tp rank a file per layer, the embedding, norm and head
    assert layout.file_count == par.tp * par.pp * par.dp + par.tp * (arch.layers + 3)
    assert layout.total_bytes == profile.parameters * profile.model.bytes_per_parameter
    dist = derive(profile).distribution
    assert dist is not None and dist.per_rank_bytes == layout.per_rank_bytes
    assert "DLIO's layout" in dist.policy_note


def test_the_megatron_writer_is_what_the_other_profiles_keep() -> None:
    assert load_profile("405b").cluster.layout.writer == "megatron"
    with pytest.raises(ProfileError) as refused:
        load_profile("405b", ["cluster.layout.writer=deepspeed"])
    assert "cluster.layout.writer" in str(refused.value) and "dlio" in str(refused.value)


def test_a_dlio_profile_counts_dlios_files_and_no_metadata() -> None:
    s = derive(load_profile("mlperf-405b"))
    assert s.files_per_checkpoint == 1544 and s.dcp_metadata_bytes == 0
    assert s.save_bytes == s.written_bytes


def test_the_metadata_storm_creates_as_many_files_as_dlio_writes() -> None:
    """The storm made gpus x files_per_rank = 512 files for a 1,544-file checkpoint."""
    profile = load_profile("mlperf-405b")
    assert storm_file_count(profile) == derive(profile).files_per_checkpoint == 1544
    assert storm_file_count(load_profile("mlperf-405b", ["run.metadata_files=100"])) == 100
    assert storm_file_count(load_profile("405b")) == 16384  # and the .metadata at commit
