"""Parameter counts from a transformer shape (SPEC.md's counting rule, Llama 3 layout).

The rule counts what a decoder-only transformer with untied embeddings holds:

- token embedding and a separate output head, vocab x hidden each;
- per layer, attention with grouped-query K/V: hidden x hidden for Q and for O, and
  hidden x (kv_heads x head_dim) for K and for V, head_dim = hidden / heads;
- per layer, a gated MLP (gate, up, down): 3 x hidden x ffn_hidden;
- per layer, two RMSNorm weight vectors (hidden each), and one final norm (hidden).

No biases (Llama has none). Source: The Llama 3 Herd of Models (Meta, 2024), Table 3 shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckptgate.sizing.schema import Architecture


def embedding_parameters(arch: Architecture) -> int:
    """Token embedding: vocab x hidden (the output head is the same size, untied)."""
    return arch.vocab * arch.hidden


def output_head_parameters(arch: Architecture) -> int:
    """Output projection to the vocabulary: vocab x hidden."""
    return arch.vocab * arch.hidden


def layer_parameters(arch: Architecture) -> int:
    """One transformer block: Q, O (h*h each), K, V (h*kv_heads*head_dim each), gated MLP
    (3*h*ffn), two RMSNorms (h each)."""
    h = arch.hidden
    head_dim = h // arch.heads
    kv_width = arch.kv_heads * head_dim
    attention = 2 * h * h + 2 * h * kv_width
    mlp = 3 * h * arch.ffn_hidden
    norms = 2 * h
    return attention + mlp + norms


def final_norm_parameters(arch: Architecture) -> int:
    """The final RMSNorm before the output head: hidden."""
    return arch.hidden


def count_parameters(arch: Architecture) -> int:
    """Ψ for the shape: embedding + layers x per-layer + final norm + output head."""
    return (
        embedding_parameters(arch)
        + arch.layers * layer_parameters(arch)
        + final_norm_parameters(arch)
        + output_head_parameters(arch)
    )
