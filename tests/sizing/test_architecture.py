"""Parameter counts from a transformer shape (SPEC.md's rule) against Llama 3's published sizes."""

import dataclasses

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptgate.sizing.architecture import (
    Architecture,
    convention_note,
    count_parameters,
    dlio_convention,
    layer_parameters,
)

LLAMA3_8B = Architecture(
    hidden=4096, ffn_hidden=14336, layers=32, heads=32, kv_heads=8, vocab=128256
)
LLAMA3_70B = Architecture(
    hidden=8192, ffn_hidden=28672, layers=80, heads=64, kv_heads=8, vocab=128256
)
LLAMA3_405B = Architecture(
    hidden=16384, ffn_hidden=53248, layers=126, heads=128, kv_heads=8, vocab=128256
)


@pytest.mark.parametrize(
    ("arch", "published"),
    [
        pytest.param(LLAMA3_8B, 8.03e9, id="llama3-8b"),
        pytest.param(LLAMA3_70B, 70.6e9, id="llama3-70b"),
        pytest.param(LLAMA3_405B, 405.8e9, id="llama3-405b"),
    ],
)
def test_count_matches_published_llama3_sizes(arch, published):
    # Published sizes (Hugging Face model cards) to 3-4 digits; the rule must land within 0.5 %.
    assert abs(count_parameters(arch) - published) <= 0.005 * published


def test_count_is_exact_for_llama3_8b():
    # Worked by hand: 2 x 128256 x 4096 + 32 x (2 x 4096^2 + 2 x 4096 x 1024
    # + 3 x 4096 x 14336 + 2 x 4096) + 4096.
    layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert layer_parameters(LLAMA3_8B) == layer
    assert count_parameters(LLAMA3_8B) == 2 * 128256 * 4096 + 32 * layer + 4096 == 8_030_261_248


def test_grouped_query_attention_shrinks_k_and_v():
    full = Architecture(hidden=4096, ffn_hidden=14336, layers=1, heads=32, kv_heads=32, vocab=1)
    grouped = Architecture(hidden=4096, ffn_hidden=14336, layers=1, heads=32, kv_heads=8, vocab=1)
    assert layer_parameters(full) - layer_parameters(grouped) == 2 * 4096 * (4096 - 1024)


@given(
    heads=st.sampled_from([8, 32, 64, 128]),
    per_head=st.integers(1, 256),
    kv_div=st.sampled_from([1, 2, 4, 8]),
)
@example(heads=32, per_head=128, kv_div=4)  # 7b / mlperf-8b
@example(heads=64, per_head=128, kv_div=8)  # 70b
@example(heads=128, per_head=64, kv_div=16)  # mlperf-70b
@example(heads=128, per_head=128, kv_div=16)  # 405b, mlperf-405b
@example(heads=4, per_head=64, kv_div=1)  # tmpfs
def test_explicit_head_dim_equal_to_hidden_over_heads_changes_nothing(heads, per_head, kv_div):
    implicit = Architecture(heads * per_head, 1000, 2, heads, heads // kv_div, 100)
    explicit = dataclasses.replace(implicit, head_dim=per_head)
    assert count_parameters(explicit) == count_parameters(implicit)


def test_explicit_head_dim_sets_q_o_and_k_v_widths():
    # MLPerf Storage's 1T shape: hidden 25872 is not a multiple of 192 heads.
    arch = Architecture(25872, 98304, 1, 192, 32, 1, head_dim=134)
    h = 25872
    assert layer_parameters(arch) == 2 * h * 192 * 134 + 2 * h * 32 * 134 + 3 * h * 98304 + 2 * h


def test_heads_that_do_not_divide_hidden_take_dlios_convention():
    # MLPerf Storage's 1T shape as MLPerf and DLIO write it: no head_dim; Q and O are
    # hidden x hidden, K and V 32 kv heads x (25872 // 192 = 134).
    arch = Architecture(25872, 98304, 1, 192, 32, 1)
    h = 25872
    assert dlio_convention(arch)
    assert layer_parameters(arch) == 2 * h * h + 2 * h * 32 * 134 + 3 * h * 98304 + 2 * h
    assert "DLIO's convention" in (convention_note(arch) or "")
    assert convention_note(Architecture(4096, 14336, 1, 32, 8, 1)) is None
