"""The payload's keystream: every 8-byte word of a rank's bytes from (run, rank, offset) alone.

A checkpoint's bytes must be as irreducible as a real one, so that a storage that compresses,
deduplicates or folds similar blocks is credited for no byte it did not store. A pool of random
bytes reused for every transfer is not (a long-window compressor folds it 13x: issue 53); a
counter-based generator is. Word ``n`` of the stream of seed ``s`` is wyrand's output
``mum(x, x ^ P1)`` with ``x = s + (n + 1) * P0`` (Wang Yi's wyhash, public domain; ``mum``
folds the 128-bit product into 64 bits). It depends on ``n`` alone, as a counter-based
generator's output does (Salmon et al., SC11), so any range is recomputable and verification
reads every byte as before; wyrand passes BigCrush and PractRand.

The seed is SplitMix64 (Steele, Lea and Flood, OOPSLA 2014) of the run id, the global rank and
the checkpoint's generation (``seed_of``), so every rank's stream is its own, and so is every
checkpoint's: a write round, the contended round written beside the latest one, a sweep point.
Each 4 KiB block keeps its 32-byte stamp (magic, run, rank, the block's offset): it names a
misplaced block, and the other 508 words are the keystream at their own offsets. A rank's later
files continue its stream (their stamp offsets do), so no two blocks of a checkpoint, nor of two
checkpoints, share more than chance, at any alignment. (The metadata storm's one-block files
and the readers' dataset have generation 0: they are not the checkpoint's bytes.)

In C where built (``ckptgate.engine._keystream``: about a memory copy's speed a core on the
project's 2-core machine; ``ckptgate bench payload`` measures the ratio); else the same function
in numpy, the same bytes about 60 times slower (0.19 GB/s a core here): the run's header names
which (``keystream_words``), and the load generator item shows what it costs.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import numpy as np

__all__ = [
    "BLOCK_WORDS",
    "fill_blocks",
    "fill_blocks_numpy",
    "fill_words",
    "keystream_words",
    "native",
    "seed_of",
    "words_from",
]

P0 = 0xA0761D6478BD642F
P1 = 0xE7037ED1A0B428DB
BLOCK_BYTES = 4096
BLOCK_WORDS = BLOCK_BYTES // 8
"""Words of one 4 KiB block (``ckptgate.engine.datagen.BLOCK_BYTES`` / 8)."""
STAMP_WORDS = 4
"""The stamp's words at the head of each block (magic, run, rank, offset)."""
MASK = 2**64 - 1


def _splitmix64(value: int) -> int:
    """SplitMix64's finaliser (Steele, Lea and Flood, OOPSLA 2014) of ``value``."""
    z = (value + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def seed_of(run_id: int, global_rank: int, generation: int = 0) -> int:
    """The stream's seed for one rank of one run, and of one checkpoint of it (``generation``:
    each checkpoint directory's own, so that no round, contended round or sweep point repeats
    another's bytes; 0 for the rank's stream that every generation 0 file shares)."""
    seed = _splitmix64(_splitmix64(run_id & MASK) ^ (global_rank & MASK))
    return _splitmix64(seed ^ _splitmix64(generation & MASK)) if generation else seed


@functools.cache
def native() -> ModuleType | None:
    """The C keystream, or None where this install has none (no C compiler at install)."""
    try:
        return importlib.import_module("ckptgate.engine._keystream")
    except ImportError:
        return None


def keystream_words() -> str:
    """The header's words: which keystream this install generates the payload with."""
    if native() is not None:
        return "C (wyrand, one multiply per 8 bytes)"
    return "numpy (the C keystream is not built in this install: no C compiler at install)"


def words_from(seed: int, first_word: int, count: int) -> np.ndarray:
    """``count`` keystream words from index ``first_word``, in numpy (the C loop's function:
    each 64x64-bit product split into 32-bit limbs, since numpy has no 128-bit product)."""
    n = np.arange(first_word + 1, first_word + 1 + count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = np.uint64(seed) + n * np.uint64(P0)
        y = x ^ np.uint64(P1)
        low32 = np.uint64(0xFFFFFFFF)
        a_lo, a_hi = x & low32, x >> np.uint64(32)
        b_lo, b_hi = y & low32, y >> np.uint64(32)
        lo_lo, lo_hi = a_lo * b_lo, a_lo * b_hi
        hi_lo, hi_hi = a_hi * b_lo, a_hi * b_hi
        middle = (lo_lo >> np.uint64(32)) + (lo_hi & low32) + (hi_lo & low32)
        low = (lo_lo & low32) | (middle << np.uint64(32))
        high = (
            hi_hi + (lo_hi >> np.uint64(32)) + (hi_lo >> np.uint64(32)) + (middle >> np.uint64(32))
        )
    return low ^ high


def fill_words(buffer: np.ndarray, seed: int, first_word: int) -> None:
    """The plain keystream (no stamps) into ``buffer`` (uint64 words), its first word at the
    stream's index ``first_word``: the realistic payload draws its values from it."""
    module = native()
    if module is not None:
        module.fill_words(buffer, seed & MASK, first_word)
        return
    buffer[:] = words_from(seed, first_word, buffer.size)


def fill_blocks(
    buffer: np.ndarray, seed: int, first_word: int, magic: int, run: int, rank: int
) -> None:
    """Write whole stamped 4 KiB blocks of the stream into ``buffer`` (uint64 words, a multiple
    of ``BLOCK_WORDS``), its first word at the stream's index ``first_word`` (on the block
    grid): the stamp's four words, then the keystream at each word's own index."""
    module = native()
    if module is not None:
        module.fill_blocks(buffer, seed & MASK, first_word, magic & MASK, run & MASK, rank & MASK)
        return
    fill_blocks_numpy(buffer, seed, first_word, magic, run, rank)


def fill_blocks_numpy(
    buffer: np.ndarray, seed: int, first_word: int, magic: int, run: int, rank: int
) -> None:
    """``fill_blocks`` in numpy alone: the same bytes, where no C keystream is built."""
    blocks = buffer.reshape(-1, BLOCK_WORDS)
    blocks[:] = words_from(seed, first_word, buffer.size).reshape(-1, BLOCK_WORDS)
    blocks[:, 0] = np.uint64(magic & MASK)
    blocks[:, 1] = np.uint64(run & MASK)
    blocks[:, 2] = np.uint64(rank & MASK)
    blocks[:, 3] = np.arange(
        first_word, first_word + buffer.size, BLOCK_WORDS, dtype=np.uint64
    ) * np.uint64(8)
