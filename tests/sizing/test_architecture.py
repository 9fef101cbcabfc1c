"""Parameter counts from a transformer shape (SPEC.md's rule) against Llama 3's published sizes."""

import pytest
from ckptgate.sizing.architecture import count_parameters, layer_parameters
from ckptgate.sizing.schema import Architecture

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
