"""Checkpoint payload: unique per block, incompressible, verifiable at any offset."""

from __future__ import annotations

import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptgate.engine import keystream
from ckptgate.engine.datagen import BLOCK_BYTES, BlockStamper, DataMismatch, StampKey

KEY = StampKey(run_id=123456789, global_rank=42)
TRANSFER_BYTES = 64 * 1024


def file_bytes(stamper: BlockStamper, size_bytes: int) -> bytes:
    """What a writer puts in a file of ``size_bytes``, one transfer at a time."""
    parts, offset = [], 0
    while offset < size_bytes:
        view = stamper.fill(offset, min(stamper.step_bytes, size_bytes - offset))
        parts.append(bytes(view))
        offset += len(view)
    return b"".join(parts)


def test_every_block_of_a_file_is_unique() -> None:
    data = file_bytes(BlockStamper(KEY, TRANSFER_BYTES), 1 << 20)
    blocks = {data[i : i + BLOCK_BYTES] for i in range(0, len(data), BLOCK_BYTES)}
    assert len(blocks) == len(data) // BLOCK_BYTES


def test_two_ranks_share_no_block() -> None:
    one = file_bytes(BlockStamper(KEY, TRANSFER_BYTES), 256 * 1024)
    other = file_bytes(BlockStamper(StampKey(KEY.run_id, 43), TRANSFER_BYTES), 256 * 1024)
    blocks = {one[i : i + BLOCK_BYTES] for i in range(0, len(one), BLOCK_BYTES)}
    assert not blocks & {other[i : i + BLOCK_BYTES] for i in range(0, len(other), BLOCK_BYTES)}


def test_payload_does_not_compress() -> None:
    data = file_bytes(BlockStamper(KEY, TRANSFER_BYTES), 1 << 20)
    # zlib at its best level saves under 1 % on random bytes with a 32-byte stamp per 4 KiB
    assert len(zlib.compress(data, 9)) > 0.99 * len(data)


@given(offset=st.integers(0, 600_000), length=st.integers(0, 200_000))
@example(offset=0, length=TRANSFER_BYTES)  # exactly one transfer
@example(offset=TRANSFER_BYTES - 1, length=2)  # straddles two transfers
@example(offset=4095, length=33)  # straddles a block's stamp
def test_expected_bytes_match_what_was_written_at_any_range(offset: int, length: int) -> None:
    stamper = BlockStamper(KEY, TRANSFER_BYTES)
    written = file_bytes(BlockStamper(KEY, TRANSFER_BYTES), offset + length)
    assert stamper.expected(offset, length).tobytes() == written[offset : offset + length]


def test_one_flipped_byte_is_found_with_its_offset() -> None:
    stamper = BlockStamper(KEY, TRANSFER_BYTES)
    data = bytearray(file_bytes(stamper, 300_000))
    data[123_457] ^= 0x01
    with pytest.raises(DataMismatch, match=r"shard\.bin: byte at offset 123457 differs"):
        stamper.verify(np.frombuffer(bytes(data), dtype=np.uint8), 0, "shard.bin")


def test_a_transfer_that_is_not_whole_blocks_rounds_up() -> None:
    stamper = BlockStamper(KEY, 10_000)
    assert stamper.step_bytes == 3 * BLOCK_BYTES


@given(
    offset=st.integers(0, 400_000),
    length=st.integers(1, 200_000),
    flip=st.floats(0, 1, exclude_max=True),
    shift=st.integers(0, 7),
)
@example(offset=0, length=3 * TRANSFER_BYTES, flip=0.0, shift=0)  # on the grid, first byte
@example(offset=0, length=3 * TRANSFER_BYTES, flip=0.99999, shift=0)  # on the grid, last byte
@example(offset=TRANSFER_BYTES - 3, length=TRANSFER_BYTES + 7, flip=0.0, shift=1)  # ragged head
@example(offset=TRANSFER_BYTES - 3, length=TRANSFER_BYTES + 7, flip=0.99999, shift=3)  # tail
@example(offset=4095, length=33, flip=0.5, shift=5)  # inside a block's stamp
@example(offset=TRANSFER_BYTES, length=2 * TRANSFER_BYTES, flip=0.5, shift=3)  # hashed, unaligned
@example(offset=TRANSFER_BYTES, length=TRANSFER_BYTES + BLOCK_BYTES, flip=0.99999, shift=0)
def test_verify_takes_any_range_at_any_address_and_names_a_flipped_byte(
    offset: int, length: int, flip: float, shift: int
) -> None:
    """Both checks (the hash on the grid, the comparison off it), at any memory alignment of
    the data (a resharded slice starts anywhere): every byte is checked, none is skipped, and
    the data is as read afterwards, whether it passed or not."""
    stamper = BlockStamper(KEY, TRANSFER_BYTES)
    written = file_bytes(BlockStamper(KEY, TRANSFER_BYTES), offset + length)
    storage = np.zeros(length + 8, dtype=np.uint8)
    data = storage[shift : shift + length]
    data[:] = np.frombuffer(written[offset:], dtype=np.uint8)
    stamper.verify(data, offset, "shard.bin")
    stamper.verify(bytes(data), offset, "shard.bin")
    assert data.tobytes() == written[offset:]
    bad = int(flip * length)
    data[bad] ^= 0x80
    with pytest.raises(DataMismatch, match=rf"shard\.bin: byte at offset {offset + bad} differs"):
        stamper.verify(data, offset, "shard.bin")
    data[bad] ^= 0x80
    assert data.tobytes() == written[offset:]


def test_verify_on_the_grid_allocates_no_expected_copy() -> None:
    """Verification compares with ``fill``'s view in place: verifying a transfer allocates
    nothing near its size (the old path built an expected array and a byte-wide bool array)."""
    transfer = 4 << 20
    stamper = BlockStamper(KEY, transfer)
    data = np.frombuffer(bytes(stamper.fill(8 * transfer, transfer)), dtype=np.uint8)
    stamper.verify(data, 8 * transfer, "shard.bin")  # warm: first-call allocations
    tracemalloc.start()
    try:
        stamper.verify(data, 8 * transfer, "shard.bin")
        stamper.verify(data[5:], 8 * transfer + 5, "shard.bin")  # off the grid too
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_verify_refuses_data_that_is_not_bytes() -> None:
    stamper = BlockStamper(KEY, TRANSFER_BYTES)
    with pytest.raises(TypeError, match="uint8"):
        stamper.verify(np.zeros(16, dtype=np.uint64), 0, "shard.bin")


def _count_comparisons(stamper: BlockStamper, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the length of every piece that ``verify`` compares byte for byte."""
    compared: list[int] = []
    compare = stamper._compare

    def counting(piece: np.ndarray, *args: object) -> None:
        compared.append(len(piece))
        compare(piece, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(stamper, "_compare", counting)
    return compared


def test_whole_transfers_on_the_grid_are_hashed_not_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a reader verifies after ``expect`` (whole transfers read into its own buffer) takes
    the one-pass hash; only a ragged tail is compared with the expected bytes, and a range
    nobody prepared is compared in full."""
    stamper = BlockStamper(KEY, TRANSFER_BYTES)
    compared = _count_comparisons(stamper, monkeypatch)
    size = 5 * TRANSFER_BYTES + 1000
    data = np.frombuffer(file_bytes(stamper, size), dtype=np.uint8).copy()
    assert stamper.expect(0, size) == 5
    stamper.verify(data, 0, "shard.bin")
    assert compared == [1000]
    fresh = BlockStamper(KEY, TRANSFER_BYTES)
    compared_fresh = _count_comparisons(fresh, monkeypatch)
    fresh.verify(bytes(data[:TRANSFER_BYTES]), 0, "shard.bin")  # nothing prepared: compared
    assert compared_fresh == [TRANSFER_BYTES]


def test_a_block_from_the_next_transfer_fails_the_hash_and_is_named() -> None:
    """Block 3 of two transfers, swapped: their stamps differ first at the offset word, and
    every keystream word after it differs too; the comparison names the first bad byte."""
    stamper = BlockStamper(KEY, TRANSFER_BYTES)
    data = np.frombuffer(file_bytes(stamper, 2 * TRANSFER_BYTES), dtype=np.uint8).copy()
    first, second = 3 * BLOCK_BYTES, TRANSFER_BYTES + 3 * BLOCK_BYTES
    block = data[first : first + BLOCK_BYTES].copy()
    data[first : first + BLOCK_BYTES] = data[second : second + BLOCK_BYTES]
    data[second : second + BLOCK_BYTES] = block
    words = data[first + 32 : first + BLOCK_BYTES].view(np.uint64)
    assert not (words == block[32:].view(np.uint64)).any()
    # the offset is the block's fourth 8-byte word, little-endian; 64 KiB apart: its third byte
    with pytest.raises(DataMismatch, match=rf"shard\.bin: byte at offset {first + 24 + 2} "):
        stamper.verify(data, 0, "shard.bin")


def test_the_c_keystream_and_numpys_are_the_same_function() -> None:
    """An install without a compiler writes and verifies the very same bytes."""
    module = keystream.native()
    if module is None:
        pytest.skip("the C keystream is not built in this install (no C compiler at install)")
    seed = keystream.seed_of(KEY.run_id, KEY.global_rank)
    c_words = np.empty(3 * keystream.BLOCK_WORDS, dtype=np.uint64)
    module.fill_blocks(c_words, seed, 5 * keystream.BLOCK_WORDS, 1, 2, 3)
    numpy_words = np.empty_like(c_words)
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patched:
        patched.setattr(keystream, "native", lambda: None)
        keystream.fill_blocks(numpy_words, seed, 5 * keystream.BLOCK_WORDS, 1, 2, 3)
    assert (c_words == numpy_words).all()


def test_no_two_words_of_a_run_repeat_across_blocks_transfers_ranks_or_files() -> None:
    """The keystream's words (the stamps aside) are all distinct over two ranks, several
    transfers and a later file's stamp offsets: nothing for dedup or a long window to fold."""
    words = []
    for rank in (0, 1):
        stamper = BlockStamper(StampKey(KEY.run_id, rank), TRANSFER_BYTES)
        for offset in (0, TRANSFER_BYTES, 7 * TRANSFER_BYTES):
            blocks = np.frombuffer(stamper.fill(offset, TRANSFER_BYTES), dtype=np.uint64)
            words.append(
                blocks.reshape(-1, keystream.BLOCK_WORDS)[:, keystream.STAMP_WORDS :].copy()
            )
    every = np.concatenate([w.ravel() for w in words])
    assert len(np.unique(every)) == len(every)


def test_two_checkpoints_of_one_rank_share_no_word() -> None:
    """Each checkpoint directory has its own generation, so a round written beside the latest
    (the contended round) or after it repeats none of its bytes: a storage that deduplicates
    inline stores all of each (the review of issue 53 found the contended round a copy)."""
    from ckptgate.workloads.fileplan import generation_of

    generations = [generation_of(d) for d in ("/r/write/step-1", "/r/write/step-2", "/r/c/step-0")]
    assert len(set(generations)) == 3 and 0 not in generations
    words = []
    for generation in generations:
        stamper = BlockStamper(StampKey(KEY.run_id, 5, generation), TRANSFER_BYTES)
        blocks = np.frombuffer(stamper.fill(0, TRANSFER_BYTES), dtype=np.uint64)
        words.append(blocks.reshape(-1, keystream.BLOCK_WORDS)[:, keystream.STAMP_WORDS :].copy())
    every = np.concatenate([w.ravel() for w in words])
    assert len(np.unique(every)) == len(every)
