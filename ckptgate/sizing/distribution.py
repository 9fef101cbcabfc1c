"""A profile's checkpoint bytes by global rank, as a value: ``ShardDistribution``, with its
totals, nearest-rank quantiles and text histogram (the sizing table and the run header print
them). sizing.shards computes it from the profile.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ShardDistribution:
    """Bytes each global rank writes per checkpoint, and the rule that produced them."""

    per_rank_bytes: tuple[int, ...]
    checkpoint_bytes: int
    policy_note: str
    gpus_per_node: int
    tp: int
    pp: int
    dp: int
    stage_parameters: tuple[int, ...]
    extra_state_bytes: int = 0
    """Fixed extra state over all ranks (cluster.layout.extra_state_bytes_per_rank x gpus)."""
    framing_bytes: int = 0
    """Bytes the files hold besides the state (DCP's torch.save framing, Adam's steps and the
    param-group entries, under ``writer: dcp``), counted in per_rank_bytes."""
    tied_copy_bytes: int = 0
    """A tied head's second copy in the model's state (``writer: dcp``: DCP writes the weight
    under both names), counted in per_rank_bytes."""
    rank_files: tuple[tuple[tuple[str, int], ...], ...] | None = None
    """Each rank's files as (name, bytes), where the writer's rule gives them (``dcp``,
    ``dlio``); None where each rank's shard is split evenly (rank_file_bytes)."""

    @property
    def gpus(self) -> int:
        return len(self.per_rank_bytes)

    @property
    def written_bytes(self) -> int:
        """Bytes all ranks write: checkpoint_bytes, plus the duplicates under replicas 'all',
        plus the fixed extra state of every rank."""
        return sum(self.per_rank_bytes)

    @property
    def largest_bytes(self) -> int:
        return max(self.per_rank_bytes)

    @property
    def largest_rank(self) -> int:
        """The lowest global rank that holds the largest shard."""
        return self.per_rank_bytes.index(self.largest_bytes)

    @property
    def smallest_bytes(self) -> int:
        return min(self.per_rank_bytes)

    @property
    def mean_bytes(self) -> float:
        return self.written_bytes / self.gpus

    def quantile(self, q: float) -> int:
        """Nearest-rank quantile of the per-rank bytes (Hyndman & Fan 1996, definition 1):
        quantile(0) is the smallest shard, quantile(1) the largest."""
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q!r} outside [0, 1]")
        ordered = sorted(self.per_rank_bytes)
        index = max(0, math.ceil(q * len(ordered)) - 1)
        return ordered[index]

    QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
    """The quantiles the sizing table prints (nearest rank)."""

    @property
    def histogram_log_spaced(self) -> bool:
        """Whether histogram() spaces its bins in log(bytes): the largest at least twice the
        smallest (taken as at least 1 B)."""
        return self.largest_bytes >= 2 * max(self.smallest_bytes, 1)

    def histogram(self, bins: int = 8) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(edges, counts): ranks per shard-size bin from the smallest shard to the largest;
        bin i holds edges[i] <= bytes < edges[i + 1], the last bin includes the largest.

        Bins are evenly spaced in log(bytes) when the largest is at least twice the smallest
        (at least 1 B), so a 1 MB to 4 GB spread reads at a glance, else evenly in bytes.
        Edges are whole bytes, duplicates dropped; one bin when every shard is equal."""
        if bins < 1:
            raise ValueError(f"histogram needs bins >= 1, got {bins}")
        low, high = self.smallest_bytes, self.largest_bytes
        if high == low:
            return (low, high), (self.gpus,)
        if self.histogram_log_spaced:
            ratio = math.log(high / max(low, 1))
            inner = [round(max(low, 1) * math.exp(ratio * i / bins)) for i in range(1, bins)]
        else:
            inner = [low + (high - low) * i // bins for i in range(1, bins)]
        edges = [low, *sorted({e for e in inner if low < e < high}), high]
        counts = [0] * (len(edges) - 1)
        for size in self.per_rank_bytes:
            counts[min(bisect.bisect_right(edges, size) - 1, len(counts) - 1)] += 1
        return tuple(edges), tuple(counts)

    def node_bytes(self, node_index: int, gpus_per_node: int | None = None) -> int:
        """Bytes the ranks of one node write (node i holds ranks i*gpus_per_node onward)."""
        per_node = gpus_per_node or self.gpus_per_node
        start = node_index * per_node
        return sum(self.per_rank_bytes[start : start + per_node])

    @property
    def nodes(self) -> int:
        return self.gpus // self.gpus_per_node

    @property
    def largest_node_bytes(self) -> int:
        return max(self.node_bytes(i) for i in range(self.nodes))

    @property
    def largest_node(self) -> int:
        """The lowest node index whose ranks write the most."""
        sums = [self.node_bytes(i) for i in range(self.nodes)]
        return sums.index(max(sums))

    def written_parts(self) -> str:
        """The bytes written in words: checkpoint, replica copies, extra state (those not 0)."""
        from ckptgate.sizing.units import format_bytes

        copies = (
            self.written_bytes
            - self.checkpoint_bytes
            - self.extra_state_bytes
            - self.framing_bytes
            - self.tied_copy_bytes
        )
        parts = [f"{format_bytes(self.checkpoint_bytes)} checkpoint"]
        if copies:
            parts.append(f"{format_bytes(copies)} replica copies")
        if self.extra_state_bytes:
            parts.append(f"{format_bytes(self.extra_state_bytes)} extra state")
        if self.tied_copy_bytes:
            parts.append(f"{format_bytes(self.tied_copy_bytes)} the tied head's second copy")
        if self.framing_bytes:
            parts.append(f"{format_bytes(self.framing_bytes)} DCP framing and small entries")
        return " + ".join(parts)

    def summary(self) -> str:
        """One line: largest (rank), p50, mean, smallest, largest node."""
        from ckptgate.sizing.units import format_bytes

        return (
            f"largest {format_bytes(self.largest_bytes)} (rank {self.largest_rank}), "
            f"median {format_bytes(self.quantile(0.5))}, mean {format_bytes(self.mean_bytes)}, "
            f"smallest {format_bytes(self.smallest_bytes)}; "
            f"largest node {format_bytes(self.largest_node_bytes)} (node {self.largest_node})"
        )

    def quantile_text(self) -> str:
        """The QUANTILES as one line: p0 (smallest) ... p100 (largest), nearest rank."""
        from ckptgate.sizing.units import format_bytes

        return ", ".join(f"p{q * 100:g} {format_bytes(self.quantile(q))}" for q in self.QUANTILES)

    def histogram_lines(self, bins: int = 8, width: int = 40) -> list[str]:
        """histogram() as text: one line per bin, its byte range, a bar scaled to the fullest
        bin (any non-empty bin shows at least one mark) and its rank count. Bins whose edges
        print alike (3 significant digits) are merged, so every line reads as its own range."""
        from ckptgate.sizing.units import format_bytes, format_count

        edges, counts = self.histogram(bins)
        kept_edges = [edges[0]]
        kept_counts: list[int] = []
        for edge, count in zip(edges[1:], counts, strict=True):
            if kept_counts and format_bytes(edge) == format_bytes(kept_edges[-1]):
                kept_counts[-1] += count
                kept_edges[-1] = edge
            else:
                kept_edges.append(edge)
                kept_counts.append(count)
        labels = [
            f"{format_bytes(lo)} - {format_bytes(hi)}" for lo, hi in itertools.pairwise(kept_edges)
        ]
        pad = max(len(label) for label in labels)
        most = max(kept_counts)
        lines = []
        for label, n in zip(labels, kept_counts, strict=True):
            bar = "#" * max(1 if n else 0, round(width * n / most))
            lines.append(f"{label.ljust(pad)} | {bar.ljust(width)} {format_count(n)}")
        return lines
