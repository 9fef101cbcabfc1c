"""The storage's measured ceiling: whether a sweep's points show the storage saturated, at what
level, and what limited the trial's largest point (the clients or the storage). Pure: no I/O.

A sweep measures the aggregate throughput X(n, r) of n nodes each driving r streams (ranks
per node); the storage sees c = n r concurrent streams. Where more streams and more nodes no
longer raise the aggregate, the storage is the limit and its level is measured, not guessed:
the USL's κ (Gunther, *Guerrilla Capacity Planning*, 2007, ch. 4) need not be extrapolated
over a factor of hundreds in clients to bound it.

``ceiling`` finds the widest set of the largest concurrencies (``c >= c0``, up to the largest
measured ``c_top``) that is flat: at least two node counts (more nodes did not help, so the
clients were not the limit; a point short of the same concurrency spread over more nodes is
its clients' limit and left out), a span ``c_top / c0`` of at least ``MIN_FLAT_SPAN``, every
point's mean within ``FLAT_TOLERANCE`` of the set's mean (two of its standard errors allowed
beyond), an equivalence test on the trend (Schuirmann's two one-sided tests, *J.
Pharmacokinet. Biopharm.* 15, 1987: the 90 % bootstrap interval of the change across the
span, from the least-squares slope of log X on log c, lies within ±``FLAT_TOLERANCE``), so
that flat is shown, not merely not refuted; and not falling at ``c_top`` (``_falling``: a USL
past its peak inside the set keeps falling beyond it).

Its level at ``c_top`` is the plateau less the coherency the points can show: the fitted
log-linear trend at ``c_top`` (a decline across the plateau, its interval included, lowers
it), times one new measurement's deviation, as a 95 % percentile bootstrap prediction
interval (Davison and Hinkley, *Bootstrap Methods and their Application*, 1997, sec. 6.3.3).
No trial can see a decline that starts beyond ``c_top``: the projection built on this level
assumes none and says so (``Ceiling.assumption``).

``limiter`` says what limited the largest node count's point:

- ``storage``: the storage is shown saturated (flat across node counts at the top) while each
  node delivered less than a node was shown to deliver (headroom);
- ``client``: at the largest node count more streams per node no longer raised the aggregate
  while more nodes still did, or each node reached its own measured limit (a NIC, the suite's
  own memory copy: ``NodeLimit``): each node's own ceiling;
- ``none``: more streams and more nodes both still raised it: no ceiling reached;
- ``unknown``: one stream count at the largest node count and no flat aggregate: the trial
  cannot tell (sweep ranks per node).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ckptgate.projection.usl import BOOTSTRAP_RESAMPLES, CONFIDENCE, Interval, repeat_deviations

Grid = Mapping[int, Mapping[int, Sequence[float]]]
"""node count -> ranks per node -> repeated aggregate throughputs."""

Limiter = Literal["storage", "client", "none", "unknown"]

Format = Callable[[float], str]
"""A rate in the metric's unit as words (``sizing.requirements.format_value``)."""


def plain(value: float) -> str:
    return f"{value:.4g}"


FLAT_TOLERANCE = 0.08
"""A flat set's points lie within this of its mean, and its trend's 90 % interval across the
span within ± this: below it, a curve still rising or falling is not told from a plateau at the
few percent of noise a storage's repeats show."""

MIN_FLAT_SPAN = 4.0
"""The least c_top / c0 a plateau must span: two doublings of concurrency without a gain."""

GROWTH = 0.15
"""A doubling of nodes or streams that raises the aggregate by at least this still scales."""

NODE_LIMIT_REACHED = 0.9
"""Each node at this share of its own measured limit (``NodeLimit``) has reached it."""

FALLING_CONFIDENCE = 0.8
"""A plateau whose slope at its largest concurrency is below zero in this share of the
resamples is falling, not flat (``_falling``): a lenient test, since a missed fall is unsafe
and a plateau taken for a fall only widens the band back to the USL's."""

FLAT_CONFIDENCE = 0.90
"""The equivalence test's interval (two one-sided tests at 5 % each: Schuirmann 1987)."""


@dataclass(frozen=True)
class NodeLimit:
    """A node's own ceiling, measured on the node: what it is and its rate per node."""

    name: str
    """What limits (``the suite's own data path (memory copy and stamping, null sink)``)."""
    per_node: float
    """Its rate per node, in the metric's unit."""


@dataclass(frozen=True)
class Point:
    """One (nodes, ranks per node) point of a grid: its repeats and their mean."""

    nodes: int
    ranks_per_node: int
    values: tuple[float, ...]

    @property
    def streams(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)


@dataclass(frozen=True)
class Ceiling:
    """What a grid shows of the storage's ceiling, and what limited its largest point."""

    limiter: Limiter
    limiter_words: str
    largest: Point
    """The largest concurrency measured at the largest node count (its best stream count)."""
    top_streams: int
    """c_top: the largest concurrency (nodes x streams per node) the grid measured."""
    top_nodes: int
    top_ranks_per_node: int
    saturated: bool = False
    level: Interval | None = None
    """The plateau's level at c_top with its 95 % prediction interval (``saturated`` only)."""
    decline: float = 0.0
    """The largest decline across the plateau the points can show (the trend's bootstrap
    bound, 0 where they show a rise), as a fraction."""
    flat_from_streams: int = 0
    """c0: the plateau's smallest concurrency."""
    flat_nodes: tuple[int, ...] = ()
    flat_ranks_per_node: tuple[int, ...] = ()

    @property
    def assumption(self) -> str:
        return (
            f"assumes no decline (nor rise) beyond {self.top_streams:,} streams "
            f"({self.top_nodes} nodes x {self.top_ranks_per_node} per node), the largest "
            "concurrency measured: no trial can see a decline that starts beyond it"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "limiter": self.limiter,
            "limiter_words": self.limiter_words,
            "saturated": self.saturated,
            "top_streams": self.top_streams,
            "top_nodes": self.top_nodes,
            "top_ranks_per_node": self.top_ranks_per_node,
            "level": self.level.to_json() if self.level else None,
            "decline": self.decline,
            "flat_from_streams": self.flat_from_streams,
            "flat_nodes": list(self.flat_nodes),
            "flat_ranks_per_node": list(self.flat_ranks_per_node),
            "assumption": self.assumption if self.saturated else "",
        }


def grid_points(grid: Grid) -> list[Point]:
    """Every (nodes, ranks per node) point that has repeats, by concurrency then nodes."""
    points = [
        Point(n, r, tuple(float(v) for v in values))
        for n, by_ranks in grid.items()
        for r, values in by_ranks.items()
        if values
    ]
    return sorted(points, key=lambda p: (p.streams, p.nodes))


def _trend(
    points: Sequence[Point], top: int, rng: np.random.Generator, resamples: int, degree: int
) -> np.ndarray:
    """Least-squares polynomials of ``degree`` in log(c / c_top) for log X over every repeat:
    the fit itself (row 0) and ``resamples`` resamples of each point's repeats with
    replacement (rows 1...); columns highest power first, so the last is log X at c_top and
    the one before it the slope there."""
    logs = [np.log(np.asarray(p.values, dtype=float)) for p in points]
    x = np.concatenate([np.full(len(p.values), math.log(p.streams / top)) for p in points])
    rows = [np.polyfit(x, np.concatenate(logs), degree)]
    for _ in range(resamples):
        drawn = [rng.choice(v, size=v.size, replace=True) for v in logs]
        rows.append(np.polyfit(x, np.concatenate(drawn), degree))
    return np.asarray(rows)


def _deviations(points: Sequence[Point]) -> np.ndarray:
    """One measurement's relative deviation from its point's mean (``usl.repeat_deviations``);
    none: zeros."""
    return np.asarray(repeat_deviations(p.values for p in points) or [0.0])


def _flat(points: Sequence[Point], top: int, trend: np.ndarray) -> tuple[bool, float]:
    """Whether ``points`` are flat (every mean within ``FLAT_TOLERANCE`` of theirs, two of
    its own standard errors allowed beyond it, from the repeats' spread; the trend's
    ``FLAT_CONFIDENCE`` interval across the span within ± it) and the largest decline across
    the span the points can show (the trend's lower ``FLAT_CONFIDENCE`` bound)."""
    means = np.array([p.mean for p in points])
    spread = float(np.std(_deviations(points)))
    allowed = FLAT_TOLERANCE + 2.0 * spread / np.sqrt([len(p.values) for p in points])
    if np.any(np.abs(means / means.mean() - 1.0) > allowed):
        return False, 0.0
    span = math.log(top / points[0].streams)
    changes = np.expm1(trend[1:, 0] * span)
    tail = (1.0 - FLAT_CONFIDENCE) / 2.0 * 100.0
    low, high = np.percentile(changes, [tail, 100.0 - tail])
    flat = low >= -FLAT_TOLERANCE and high <= FLAT_TOLERANCE
    return bool(flat), float(max(-low, 0.0))


def _falling(points: Sequence[Point], top: int, rng: np.random.Generator, resamples: int) -> bool:
    """Whether the points show the aggregate falling at c_top: the slope there of a quadratic
    in log c (a peak inside the set bends it; a straight trend would average a rise and a
    fall to nothing) is below zero in at least ``FALLING_CONFIDENCE`` of the resamples. A USL
    past its peak keeps falling (X ~ λ / (κ c) for large c, Gunther 2007, eq. 4.31), so such
    a set is no plateau to project from."""
    if len({p.streams for p in points}) < 3:
        return False
    slopes = _trend(points, top, rng, resamples, 2)[1:, 1]
    return float(np.mean(slopes < 0.0)) >= FALLING_CONFIDENCE


def ceiling(
    grid: Grid,
    node_limit: NodeLimit | None = None,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    fmt: Format = plain,
) -> Ceiling | None:
    """What ``grid`` (node count -> ranks per node -> repeats) shows of the storage's ceiling
    and what limited its largest point; None for an empty grid."""
    points = grid_points(grid)
    if not points:
        return None
    rng = np.random.default_rng(seed)
    top = points[-1]
    k = max(p.nodes for p in points)
    at_k = [p for p in points if p.nodes == k]
    largest = max(at_k, key=lambda p: p.mean)
    base: dict[str, Any] = {
        "largest": largest,
        "top_streams": top.streams,
        "top_nodes": top.nodes,
        "top_ranks_per_node": top.ranks_per_node,
    }
    for start in sorted({p.streams for p in points}):
        if top.streams / start < MIN_FLAT_SPAN:
            break
        flat_set = [p for p in points if p.streams >= start and not _client_bound(p, points)]
        if len({p.nodes for p in flat_set}) < 2:
            continue
        trend = _trend(flat_set, top.streams, rng, resamples, 1)
        flat, decline = _flat(flat_set, top.streams, trend)
        if not flat or _falling(flat_set, top.streams, rng, resamples):
            continue
        noise = rng.choice(_deviations(flat_set), size=resamples, replace=True)
        levels = np.exp(trend[1:, 1]) * (1.0 + noise)
        tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
        low, high = np.percentile(levels, [tail, 100.0 - tail])
        level = Interval(float(math.exp(trend[0, 1])), float(low), float(high))
        words = _storage_words(flat_set, largest, points, node_limit, fmt)
        return Ceiling(
            limiter="storage",
            limiter_words=words,
            saturated=True,
            level=level,
            decline=decline,
            flat_from_streams=start,
            flat_nodes=tuple(sorted({p.nodes for p in flat_set})),
            flat_ranks_per_node=tuple(sorted({p.ranks_per_node for p in flat_set})),
            **base,
        )
    limiter, words = _unsaturated(points, largest, node_limit, fmt)
    return Ceiling(limiter=limiter, limiter_words=words, **base)


def _client_bound(point: Point, points: Sequence[Point]) -> bool:
    """Whether ``point`` fell short, by more than ``FLAT_TOLERANCE``, of the same concurrency
    spread over more nodes: its nodes' clients were its limit, not the storage (left out of a
    plateau, which is the storage's level where the clients had headroom)."""
    wider = [q.mean for q in points if q.streams == point.streams and q.nodes > point.nodes]
    return bool(wider) and point.mean < (1.0 - FLAT_TOLERANCE) * max(wider)


def _per_node_best(points: Sequence[Point]) -> Point:
    """The point whose nodes each delivered the most: what a node was shown able to do."""
    return max(points, key=lambda p: p.mean / p.nodes)


def _storage_words(
    flat_set: Sequence[Point],
    largest: Point,
    points: Sequence[Point],
    node_limit: NodeLimit | None,
    fmt: Format,
) -> str:
    nodes = ", ".join(str(n) for n in sorted({p.nodes for p in flat_set}))
    ranks = ", ".join(str(r) for r in sorted({p.ranks_per_node for p in flat_set}))
    best = _per_node_best(points)
    headroom = (
        f"each of its {largest.nodes} nodes delivered {fmt(largest.mean / largest.nodes)}"
        f" where {best.nodes} node(s) delivered {fmt(best.mean / best.nodes)} each"
    )
    if node_limit is not None:
        headroom += f" and a node's own limit, {node_limit.name}, is {fmt(node_limit.per_node)}"
    return (
        f"storage-limited: the aggregate is flat from {flat_set[0].streams:,} to "
        f"{flat_set[-1].streams:,} streams across {nodes} nodes at {ranks} stream(s) per node "
        f"while the clients had headroom ({headroom})"
    )


def _unsaturated(
    points: Sequence[Point], largest: Point, node_limit: NodeLimit | None, fmt: Format
) -> tuple[Limiter, str]:
    """The limiter of a grid whose top is not flat: the clients, nothing yet, or unknown."""
    k = largest.nodes
    per_node = largest.mean / k
    if node_limit is not None and per_node >= NODE_LIMIT_REACHED * node_limit.per_node:
        return "client", (
            f"client-limited: each of the {k} nodes delivered {fmt(per_node)}, at its own "
            f"limit ({node_limit.name}: {fmt(node_limit.per_node)} per node); the storage was "
            "not shown its ceiling"
        )
    at_k = sorted((p for p in points if p.nodes == k), key=lambda p: p.ranks_per_node)
    smaller = [p for p in points if p.nodes < k]
    grew_nodes = bool(smaller) and largest.mean >= (1.0 + GROWTH) * max(
        p.mean for p in smaller if p.nodes == max(q.nodes for q in smaller)
    )
    if len(at_k) < 2:
        return "unknown", (
            f"limit unknown: one stream count at {k} nodes, so whether each node reached its "
            "own ceiling is not measured (sweep ranks per node: --sweep-ranks)"
        )
    more, fewer = at_k[-1], at_k[-2]
    streams_flat = more.mean < (1.0 + GROWTH) * fewer.mean
    if streams_flat and grew_nodes:
        return "client", (
            f"client-limited: at {k} nodes {more.ranks_per_node} streams per node gave no more "
            f"than {fewer.ranks_per_node} ({fmt(more.mean)} against {fmt(fewer.mean)}) while more "
            "nodes still raised the aggregate: each node's own ceiling, "
            f"{fmt(largest.mean / k)} per node; the storage was not shown its ceiling"
        )
    if not streams_flat and grew_nodes:
        return "none", (
            f"no ceiling reached: at {k} nodes more streams per node and more nodes still "
            "raised the aggregate (neither the clients' nor the storage's limit was reached)"
        )
    return "unknown", (
        f"limit unknown: the aggregate at {k} nodes neither grew with nodes nor is shown flat "
        f"across {MIN_FLAT_SPAN:g}x of concurrency within {FLAT_TOLERANCE:.0%}"
    )
