"""Exact integer apportionment: a total split as evenly as integers allow, or counts scaled to
sum exactly to a total.

The shard model (sizing.shards) and DLIO's layout (sizing.dlio) both cut parameters and bytes
with these, so that every rank's share is an int and the shares sum to the whole, exactly.
"""

from __future__ import annotations


def split_even(total: int, parts: int) -> list[int]:
    """total split into parts that differ by at most one, the extra ones to the lowest."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def scale_exact(counts: list[int], total: int) -> list[int]:
    """counts scaled to sum exactly to ``total`` (largest remainder, ties to the lowest index;
    Hamilton's method): a stage's parameters to exactly Ψ, or a rank's files cut down in
    proportion to a trial's cap on its shard."""
    whole = sum(counts)
    if whole == total:
        return list(counts)
    floors = [c * total // whole for c in counts]
    remainders = [c * total % whole for c in counts]
    short = total - sum(floors)
    order = sorted(range(len(counts)), key=lambda i: (-remainders[i], i))
    for i in order[:short]:
        floors[i] += 1
    return floors
