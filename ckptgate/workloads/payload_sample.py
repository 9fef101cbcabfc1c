"""How reducible a run's bytes are: a bounded sample of what it wrote, read back and measured
as a data-reducing storage would see it.

A storage sold for this workload may reduce data inline: compression with a long window,
block deduplication, similarity (delta) engines that fold blocks alike but for a header. The
suite's numbers hold only if its bytes give such a storage nothing to fold, as a real
checkpoint's fp32 and bf16 tensors give it little (issue 53; fio's docs say of its own
``scramble_buffers`` that it defeats naive dedup only). So every run reads back a sample of
its files, spread over its ranks and files (``plan_sample``), and measures three ratios of
logical bytes to stored bytes (``reduction_ratios``):

- a long-window compressor: zstd at level 3 with long-distance matching and a window that
  covers the whole sample (``zstd -3 --long``), so a repeat anywhere in the sample is found;
- block deduplication at 4 KiB and at 8 KiB: blocks on the file's grid, counted against the
  distinct ones (XXH3-128 of each);
- a header-blind fold: 4 KiB blocks compared without their first 64 bytes, what a similarity
  engine that ignores a block header folds.

A ratio of 1 means nothing was folded; the payload's check fails a ratio above its limit.
"""

from __future__ import annotations

import errno
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xxhash
import zstandard

from ckptgate.rundir.janitor import Janitor
from ckptgate.workloads.fileplan import ShardFile

__all__ = [
    "PIECE_BYTES",
    "Piece",
    "ReductionRatios",
    "plan_sample",
    "read_sample",
    "reduction_ratios",
]

PIECE_BYTES = 1 << 20
"""The largest piece read in one place: a sample spread over many places of every file."""
BLOCK_BYTES = 4096
HEADER_BYTES = 64
"""What the header-blind fold ignores at the head of each 4 KiB block (issue 53: a similarity
engine compares blocks without their first bytes)."""
ZSTD_LEVEL = 3
MIN_WINDOW_LOG, MAX_WINDOW_LOG = 20, 31
"""zstd's window, as a power of two: the sample's size rounded up, within zstd's limits."""


@dataclass(frozen=True)
class Piece:
    """A range of one file to read: its path, where it starts and how long it is."""

    path: str
    offset: int
    length: int


@dataclass(frozen=True)
class ReductionRatios:
    """Logical bytes over the bytes a reducing storage would store, for one sample."""

    sample_bytes: int
    files: int
    pieces: int
    compress_long: float
    """zstd -3 with long-distance matching, the window over the whole sample."""
    dedup_4k: float
    dedup_8k: float
    fold_4k_headerless: float
    """4 KiB blocks alike but for their first ``HEADER_BYTES``."""

    def worst(self) -> float:
        return max(self.compress_long, self.dedup_4k, self.dedup_8k, self.fold_4k_headerless)


def plan_sample(files: Sequence[ShardFile], budget_bytes: int) -> list[Piece]:
    """About ``budget_bytes`` spread over the files: each file gets an equal share, read in
    pieces of at most ``PIECE_BYTES`` placed evenly from its head to its end (the last piece
    ends at the file's last byte, so an uneven last transfer is in the sample; a file read in
    one piece is read at its end), each starting on the 4 KiB grid. A file smaller than its
    share is read whole. Where the budget holds less than 4 KiB a file, every so many files are
    sampled (evenly over the list, the first and last included) rather than overrun it; each
    piece's ragged tail may add up to 4 KiB a file."""
    files = [f for f in files if f.bytes > 0]
    if not files or budget_bytes <= 0:
        return []
    fit = max(1, budget_bytes // BLOCK_BYTES)
    if len(files) > fit:
        files = [files[i * (len(files) - 1) // max(1, fit - 1)] for i in range(fit)]
    share = max(BLOCK_BYTES, budget_bytes // len(files) // BLOCK_BYTES * BLOCK_BYTES)
    pieces = []
    for file in files:
        if file.bytes <= share:
            pieces.append(Piece(file.path, 0, file.bytes))
            continue
        size = min(PIECE_BYTES, share)
        count = max(1, share // size)
        last_start = (file.bytes - size) // BLOCK_BYTES * BLOCK_BYTES
        for index in range(count):
            start = last_start if count == 1 else last_start * index // (count - 1)
            start -= start % BLOCK_BYTES
            length = size if index < count - 1 else file.bytes - last_start
            pieces.append(Piece(file.path, start, length))
    return pieces


def read_sample(janitor: Janitor, pieces: Sequence[Piece]) -> list[bytes]:
    """Each piece's bytes, read on the target's filesystem through the session's bounded
    helper (``fs.cat_file``: a call that does not return within the stall timeout is
    ``TargetHung``, never a hang of the run); its page cache may serve them: what is measured
    is the content, not the speed. A short read is an OSError naming the file and offset."""
    out = []
    for piece in pieces:
        data = janitor.one(
            "cat_file", piece.path, start=piece.offset, end=piece.offset + piece.length
        )
        if len(data) != piece.length:
            raise OSError(
                errno.EIO,
                f"short read: {len(data)} of {piece.length} bytes at offset {piece.offset}",
                piece.path,
            )
        out.append(bytes(data))
    return out


def reduction_ratios(pieces: Sequence[bytes], files: int = 0) -> ReductionRatios:
    """The three ratios of the module docstring for the pieces read (each starts on its file's
    4 KiB grid, so blocks are counted as a storage would cut them)."""
    total = sum(len(p) for p in pieces)
    if total == 0:
        raise ValueError("an empty sample has no reduction ratio")
    return ReductionRatios(
        sample_bytes=total,
        files=files,
        pieces=len(pieces),
        compress_long=total / _zstd_long_bytes(b"".join(pieces)),
        dedup_4k=_dedup(pieces, BLOCK_BYTES, 0),
        dedup_8k=_dedup(pieces, 2 * BLOCK_BYTES, 0),
        fold_4k_headerless=_dedup(pieces, BLOCK_BYTES, HEADER_BYTES),
    )


def _zstd_long_bytes(data: bytes) -> int:
    """Bytes of ``data`` under zstd -3 with long-distance matching over a window covering it."""
    window_log = min(MAX_WINDOW_LOG, max(MIN_WINDOW_LOG, math.ceil(math.log2(max(2, len(data))))))
    params = zstandard.ZstdCompressionParameters.from_level(
        ZSTD_LEVEL, window_log=window_log, enable_ldm=True
    )
    return len(zstandard.ZstdCompressor(compression_params=params).compress(data))


def _dedup(pieces: Sequence[bytes], block_bytes: int, skip_bytes: int) -> float:
    """Blocks of ``block_bytes`` (each without its first ``skip_bytes``) over distinct ones; a
    piece's ragged tail is a block of its own."""
    seen: set[bytes] = set()
    blocks = 0
    for piece in pieces:
        data = np.frombuffer(piece, dtype=np.uint8)
        for start in range(0, len(data), block_bytes):
            block = data[start + skip_bytes : start + block_bytes]
            if not len(block):
                continue
            seen.add(xxhash.xxh3_128_digest(block))  # type: ignore[arg-type]
            blocks += 1
    return blocks / len(seen)
