"""The realistic payload (``run.payload: realistic``): bytes with a real checkpoint's
reducibility, for a user whose storage compresses and who wants the benefit a real job would
get, and no more.

A mixed-precision job's checkpoint holds, per parameter, bf16 weights (2 B, where the profile's
K is 14 or 16: K - 12 bytes of bf16), fp32 master weights and the fp32 Adam moments (4 B each).
A float's low mantissa bits are as good as random; what a compressor finds is in the sign and
exponent, whose distribution is narrow for trained weights and narrower for the second moment.
So each value here is drawn from the distribution of its kind's top 9 bits (sign and exponent)
measured on a real PyTorch DCP save of a small model trained 200 steps on CPU with AdamW
(``tests/dcp/payload_calibration.py``, ``TOP9``), with its mantissa from the keystream; bf16
values are the same draw's top 16 bits. The kinds lie in 512 KiB regions in the proportions
of K (a cycle of K regions: K - 12 of bf16, 4 each of master, exp_avg and exp_avg_sq), as a
DCP file holds whole tensors one after another. Every value comes from the keystream word at
its own index, so any range is recomputable and verified as the default payload is, and each
4 KiB block keeps its 32-byte stamp.

``tests/dcp/test_realistic_payload.py`` makes the save again and holds this payload's zstd
(level 3) and lz4 ratios within 5 % of the save's. Source of the approach: the exponent is where
floating-point checkpoint data compresses (Hershcovitch et al., "ZipNN: lossless compression
for AI models", 2024, which splits the exponent byte from the mantissa bytes for that reason).
"""

from __future__ import annotations

import functools

import numpy as np

from ckptgate.engine import keystream

__all__ = ["KINDS", "REGION_BYTES", "TOP9", "fill_realistic", "kind_at", "region_cycle"]

REGION_BYTES = 512 * 1024
"""One kind's stretch of bytes: tensors lie whole, one after another, in a checkpoint file."""
INDEX_BITS = 12
"""The keystream bits that draw a value's top 9 bits from its kind's table (4,096 slots)."""

TOP9: dict[str, tuple[tuple[int, float], ...]] = {
    'master': (
        (378, 0.150677), (377, 0.121631), (122, 0.118997), (121, 0.112782), (376, 0.066023),
        (120, 0.064105), (379, 0.062408), (123, 0.039877), (375, 0.033687), (119, 0.032966),
        (126, 0.020713), (382, 0.020667), (383, 0.018821), (127, 0.018594), (374, 0.016836),
        (118, 0.016696), (381, 0.012749), (125, 0.012748), (124, 0.009933), (380, 0.009527),
        (117, 0.008415), (373, 0.008401), (372, 0.004202), (116, 0.004158), (384, 0.003106),
        (128, 0.003028), (371, 0.002068), (115, 0.002008), (114, 0.001066), (370, 0.001041),
        (113, 0.00052), (369, 0.000506), (112, 0.000274), (368, 0.000242), (367, 0.000141),
        (111, 0.000121), (366, 6.8e-05), (110, 5.8e-05), (109, 3.5e-05), (365, 3.2e-05),
        (364, 1.8e-05), (108, 1.4e-05), (107, 1.1e-05), (129, 5e-06), (385, 5e-06),
        (363, 5e-06), (362, 4e-06), (104, 2e-06), (106, 2e-06), (105, 1e-06),
        (360, 1e-06), (103, 1e-06), (102, 1e-06), (361, 1e-06), (357, 1e-06),
        (359, 1e-06),
    ),
    'exp_avg': (
        (367, 0.107232), (368, 0.102455), (111, 0.072026), (112, 0.069146), (115, 0.065461),
        (366, 0.062156), (114, 0.061276), (113, 0.057172), (371, 0.054476), (110, 0.051976),
        (370, 0.049572), (365, 0.03874), (369, 0.038574), (109, 0.030112), (372, 0.026614),
        (116, 0.026209), (364, 0.020224), (108, 0.017054), (363, 0.010533), (107, 0.009979),
        (362, 0.005531), (106, 0.005456), (361, 0.003023), (373, 0.003017), (105, 0.00287),
        (117, 0.00215), (360, 0.001617), (104, 0.001544), (359, 0.000864), (103, 0.000829),
        (358, 0.000473), (102, 0.000468), (101, 0.000243), (357, 0.000228), (374, 0.000167),
        (356, 0.000136), (100, 0.00012), (99, 7e-05), (355, 5.9e-05), (354, 2.7e-05),
        (98, 2.6e-05), (118, 2e-05), (97, 1.8e-05), (353, 1.8e-05), (352, 1e-05),
        (375, 8e-06), (351, 6e-06), (96, 5e-06), (95, 3e-06), (350, 3e-06),
        (93, 2e-06), (94, 1e-06), (349, 1e-06), (92, 1e-06),
    ),
    'exp_avg_sq': (
        (105, 0.227794), (102, 0.133152), (101, 0.122139), (104, 0.104762), (103, 0.080593),
        (96, 0.075702), (100, 0.065129), (95, 0.048093), (99, 0.034098), (97, 0.030419),
        (106, 0.023423), (98, 0.019342), (94, 0.01658), (93, 0.012142), (92, 0.004049),
        (107, 0.001152), (108, 0.000632), (91, 0.00049), (109, 0.000298), (110, 1.1e-05),
    ),
}  # fmt: skip
"""Per kind of fp32 tensor, each value's top 9 bits (sign, 8 exponent bits) and their share,
measured by ``tests/dcp/payload_calibration.py`` (torch 2.13, CPU, seed 0, 200 steps)."""
KINDS = ("bf16", "master", "exp_avg", "exp_avg_sq")


def region_cycle(bytes_per_parameter: int) -> tuple[str, ...]:
    """The kinds of K consecutive regions: K - 12 of bf16 weights, then 4 each of the fp32
    master weights, ``exp_avg`` and ``exp_avg_sq`` (the bytes per parameter of each)."""
    bf16 = max(0, bytes_per_parameter - 12)
    return ("bf16",) * bf16 + ("master",) * 4 + ("exp_avg",) * 4 + ("exp_avg_sq",) * 4


def kind_at(offset: int, bytes_per_parameter: int) -> str:
    """The kind of the region holding stamp offset ``offset``."""
    cycle = region_cycle(bytes_per_parameter)
    return cycle[offset // REGION_BYTES % len(cycle)]


@functools.cache
def _table(kind: str) -> np.ndarray:
    """The inverse of the kind's top-9-bit distribution: 4,096 slots, each a top-9 value, as
    many slots per value as its share (the largest remainders get the rounding)."""
    source = TOP9["master" if kind == "bf16" else kind]
    slots = 1 << INDEX_BITS
    shares = np.array([share for _, share in source])
    shares = shares / shares.sum() * slots
    counts = np.floor(shares).astype(np.int64)
    for index in np.argsort(-(shares - counts))[: slots - counts.sum()]:
        counts[index] += 1
    return np.repeat(np.array([value for value, _ in source], dtype=np.uint32), counts)


def _values(kind: str, seed: int, first_value: int, count: int) -> np.ndarray:
    """``count`` values of ``kind`` from index ``first_value``, as their raw bits (uint32 for
    fp32, uint16 for bf16): each from the keystream word at its own index, its top 12 bits
    drawing the sign and exponent from the kind's table, its low bits the mantissa. In C where
    built (``fill_values``), else numpy: the same bits."""
    width = 2 if kind == "bf16" else 4
    out = np.empty(count, dtype=np.uint16 if width == 2 else np.uint32)
    module = keystream.native()
    if module is not None:
        module.fill_values(out, seed & keystream.MASK, first_value, _table(kind), width)
        return out
    words = np.empty(count, dtype=np.uint64)
    keystream.fill_words(words, seed, first_value)
    top = _table(kind)[(words >> np.uint64(64 - INDEX_BITS)).astype(np.int64)]
    if width == 2:
        out[:] = (top << np.uint32(7)) | (words & np.uint64(0x7F)).astype(np.uint32)
    else:
        out[:] = (top << np.uint32(23)) | (words & np.uint64(0x7FFFFF)).astype(np.uint32)
    return out


def fill_realistic(
    buffer: np.ndarray,
    seed: int,
    first_word: int,
    magic: int,
    run: int,
    rank: int,
    bytes_per_parameter: int,
) -> None:
    """Whole stamped 4 KiB blocks of the realistic payload into ``buffer`` (uint64 words on
    the block grid, as ``keystream.fill_blocks``): each region's values, then the stamps."""
    out = buffer.view(np.uint8)
    start = first_word * 8
    position, end = start, start + len(out)
    while position < end:
        region_end = min(end, (position // REGION_BYTES + 1) * REGION_BYTES)
        kind = kind_at(position, bytes_per_parameter)
        width = 2 if kind == "bf16" else 4
        values = _values(kind, seed, position // width, (region_end - position) // width)
        out[position - start : region_end - start] = values.view(np.uint8)
        position = region_end
    blocks = buffer.reshape(-1, keystream.BLOCK_WORDS)
    blocks[:, 0] = np.uint64(magic & keystream.MASK)
    blocks[:, 1] = np.uint64(run & keystream.MASK)
    blocks[:, 2] = np.uint64(rank & keystream.MASK)
    blocks[:, 3] = np.arange(start, end, keystream.BLOCK_BYTES, dtype=np.uint64)
