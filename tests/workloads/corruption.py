"""Corrupting a written file in place, between its write and its read (the readback tests)."""

from __future__ import annotations


def flip_byte(path: str, offset: int, mask: int) -> None:
    """XOR the byte at ``offset`` of ``path`` with ``mask``, in place."""
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ mask]))
