"""A transformer shape and its parameter counts (SPEC.md's counting rule, Llama 3 layout).

The rule counts what a decoder-only transformer with untied embeddings holds:

- token embedding and a separate output head, vocab x hidden each;
- per layer, attention with grouped-query K/V: hidden x (heads x head_dim) for Q and for O,
  and hidden x (kv_heads x head_dim) for K and for V; head_dim is the architecture's explicit
  head_dim (Megatron-LM's kv_channels), else hidden // heads, when Q and O are hidden x hidden
  (also where heads do not divide hidden: DLIO's convention, which MLPerf Storage's Llama 3 1T
  shape, hidden 25,872 over 192 heads, relies on: dlio_benchmark's checkpointing takes the
  query and output projections as hidden x hidden and K, V as hidden x kv_heads x
  (hidden // heads));
- per layer, a gated MLP (gate, up, down): 3 x hidden x ffn_hidden;
- per layer, two RMSNorm weight vectors (hidden each), and one final norm (hidden).

No biases (Llama has none). Source: The Llama 3 Herd of Models (Meta, 2024), Table 3 shapes.

``tied_embeddings``: the output head is the token embedding's weight (Llama 3.2 1B and 3B,
Gemma): Ψ counts it once, and the optimizer holds its state once; the model's state dict still
lists it under both names (``nn.Module.state_dict`` and DCP's ``get_state_dict``, torch 2.13),
so a DCP save writes its data twice (``model_state_shapes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptgate.sizing.reader import meta

_POSITIVE = meta(gt=0)


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer shape (Llama 3 layout: the counting rule above).

    ``head_dim`` is optional and explicit, as Megatron-LM's ``kv_channels`` and Hugging Face's
    ``head_dim`` are: given, Q and O are hidden x heads*head_dim and K, V hidden x
    kv_heads*head_dim, whatever hidden is (MLPerf Storage's 1T shape: hidden 25872, 192 heads).
    Absent, it is hidden // heads; where heads do not divide hidden, Q and O are hidden x
    hidden (DLIO's convention, stated in the sizing output: convention_note)."""

    hidden: int = field(metadata=_POSITIVE)
    ffn_hidden: int = field(metadata=_POSITIVE)
    layers: int = field(metadata=_POSITIVE)
    heads: int = field(metadata=_POSITIVE)
    kv_heads: int = field(metadata=_POSITIVE)
    vocab: int = field(metadata=_POSITIVE)
    head_dim: int | None = field(default=None, metadata=_POSITIVE)
    tied_embeddings: bool = False
    """The output head is the token embedding's weight (one parameter; module docstring)."""


TENSORS_PER_LAYER = 9
"""Parameter tensors in one block: two RMSNorms, Q, K, V, O, and the MLP's gate, up, down."""


def embedding_parameters(arch: Architecture) -> int:
    """Token embedding: vocab x hidden (the output head is the same size, untied)."""
    return arch.vocab * arch.hidden


def output_head_parameters(arch: Architecture) -> int:
    """Output projection to the vocabulary: vocab x hidden; none of its own where tied."""
    return 0 if arch.tied_embeddings else arch.vocab * arch.hidden


def head_dim(arch: Architecture) -> int:
    """Width of one attention head: the explicit head_dim, else hidden // heads."""
    return arch.head_dim if arch.head_dim is not None else arch.hidden // arch.heads


def q_width(arch: Architecture) -> int:
    """Width of Q (and of O's input): heads x the explicit head_dim, else hidden (which is
    heads x hidden // heads when heads divide hidden, and DLIO's convention when not)."""
    return arch.heads * arch.head_dim if arch.head_dim is not None else arch.hidden


def kv_width(arch: Architecture) -> int:
    """Width of K and of V with grouped-query attention: kv_heads x head_dim."""
    return arch.kv_heads * head_dim(arch)


def dlio_convention(arch: Architecture) -> bool:
    """Whether the shape needs DLIO's convention: no explicit head_dim and heads do not divide
    hidden (Q and O hidden x hidden, K and V kv_heads x (hidden // heads) wide)."""
    return arch.head_dim is None and arch.hidden % arch.heads != 0


def convention_note(arch: Architecture) -> str | None:
    """The sentence the sizing output states when dlio_convention() applies, else None."""
    if not dlio_convention(arch):
        return None
    return (
        f"hidden {arch.hidden} is not a multiple of {arch.heads} heads: Q and O taken as "
        f"hidden x hidden, K and V as {arch.kv_heads} kv heads x {head_dim(arch)} "
        "(hidden // heads), DLIO's convention"
    )


def layer_parameters(arch: Architecture) -> int:
    """One transformer block: Q, O (h x q_width each), K, V (h x kv_width each), gated MLP
    (3*h*ffn), two RMSNorms (h each)."""
    h = arch.hidden
    attention = 2 * h * q_width(arch) + 2 * h * kv_width(arch)
    mlp = 3 * h * arch.ffn_hidden
    norms = 2 * h
    return attention + mlp + norms


def final_norm_parameters(arch: Architecture) -> int:
    """The final RMSNorm before the output head: hidden."""
    return arch.hidden


def count_parameters(arch: Architecture) -> int:
    """Ψ for the shape: embedding + layers x per-layer + final norm + output head (none where
    tied)."""
    return (
        embedding_parameters(arch)
        + arch.layers * layer_parameters(arch)
        + final_norm_parameters(arch)
        + output_head_parameters(arch)
    )


EMBEDDING = "tok_embeddings.weight"
"""The token embedding's name."""

TIED_HEAD = "output.weight"
"""The output head's name, which a tied head shares with ``EMBEDDING``."""


def parameter_shapes(arch: Architecture) -> dict[str, tuple[int, ...]]:
    """Every parameter's global shape, by fully qualified name, in model order (the tensor
    list the counting rule above sums and the optimizer holds; Llama's names as torchtitan
    spells them; no ``output.weight`` where tied).

    Weights are (out_features, in_features) as nn.Linear stores them; Q is q_width rows
    (hidden, unless head_dim is explicit), K and V kv_width.
    """
    h, f = arch.hidden, arch.ffn_hidden
    q, kv = q_width(arch), kv_width(arch)
    shapes: dict[str, tuple[int, ...]] = {EMBEDDING: (arch.vocab, h)}
    for i in range(arch.layers):
        p = f"layers.{i}."
        shapes[p + "attention_norm.weight"] = (h,)
        shapes[p + "attention.wq.weight"] = (q, h)
        shapes[p + "attention.wk.weight"] = (kv, h)
        shapes[p + "attention.wv.weight"] = (kv, h)
        shapes[p + "attention.wo.weight"] = (h, q)
        shapes[p + "ffn_norm.weight"] = (h,)
        shapes[p + "feed_forward.w1.weight"] = (f, h)
        shapes[p + "feed_forward.w2.weight"] = (h, f)
        shapes[p + "feed_forward.w3.weight"] = (f, h)
    shapes["norm.weight"] = (h,)
    if not arch.tied_embeddings:
        shapes[TIED_HEAD] = (arch.vocab, h)
    return shapes


def model_state_shapes(arch: Architecture) -> dict[str, tuple[int, ...]]:
    """The model's state dict, by name, in model order: every parameter, and a tied head
    again under its own name (the embedding's weight, listed last as the module is), which
    ``state_dict`` keeps and a DCP save writes a second time."""
    shapes = parameter_shapes(arch)
    if arch.tied_embeddings:
        shapes[TIED_HEAD] = (arch.vocab, arch.hidden)
    return shapes


def tied_source(arch: Architecture, fqn: str) -> str:
    """The parameter a model-state name holds: the embedding for a tied head, else itself."""
    return EMBEDDING if arch.tied_embeddings and fqn == TIED_HEAD else fqn
