"""The bandwidth series of one run across its nodes: the aggregate and the per-node spread.

The sampler (``ckptgate.engine.sampler``) records, per run and node, the samples' times since
the run's common start and the rate between each two (``bandwidth_series`` in the JSON, read
as ``schema.SeriesRun``). A figure with one line
per node stops reading at a few nodes; this module puts a run's nodes on one time grid and gives,
per interval of it, the aggregate rate (the sum over nodes) and the slowest, mean and fastest
node's rate, so that a figure draws one line and one band per run at any node count.

Each node's cumulative bytes are interpolated linearly between its samples onto the grid (the
union of the nodes' sample times, thinned to ``MAX_POINTS``); the rate of an interval is the
bytes done in it over its length, so rates times lengths sum to the bytes the samples saw. A node
counts in the spread only over intervals inside its own samples (a peer's series, carried by its
heartbeat, may stop up to a beat before the run's end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckptgate.report.schema import SeriesRun

MAX_POINTS = 512
"""Grid points per run at most (a figure 9 inches wide shows no more)."""


@dataclass(frozen=True)
class RunBandwidth:
    """One run (a phase's ``nth`` run) over its nodes, on one grid of ``edges_s``: each array
    below has one value per interval between consecutive edges, in bytes per second."""

    phase: str
    nth: int
    nodes: int
    edges_s: np.ndarray
    total_bytes_per_s: np.ndarray
    slowest_node_bytes_per_s: np.ndarray
    mean_node_bytes_per_s: np.ndarray
    fastest_node_bytes_per_s: np.ndarray

    @property
    def label(self) -> str:
        return f"{self.phase} #{self.nth}"


def by_run(runs: Sequence[SeriesRun]) -> list[RunBandwidth]:
    """Every run of the ``bandwidth_series`` section with a rate or more, in the order the
    runs first appear, its nodes combined (see the module docstring)."""
    groups: dict[tuple[str, int], list[SeriesRun]] = {}
    for run in runs:
        if len(run.t_s) > 1 and len(run.bytes_per_s) == len(run.t_s) - 1:
            groups.setdefault((run.phase, run.nth), []).append(run)
    return [_combine(phase, nth, nodes) for (phase, nth), nodes in groups.items()]


def _combine(phase: str, nth: int, nodes: Sequence[SeriesRun]) -> RunBandwidth:
    times = [np.asarray(n.t_s, dtype=float) for n in nodes]
    # bytes since the node's first sample: its rates times its intervals, summed
    done = [
        np.concatenate(([0.0], np.cumsum(np.asarray(n.bytes_per_s, dtype=float) * np.diff(t))))
        for n, t in zip(nodes, times, strict=True)
    ]
    edges = np.unique(np.concatenate(times))
    if len(edges) > MAX_POINTS:
        edges = np.linspace(edges[0], edges[-1], MAX_POINTS)
    widths = np.diff(edges)
    # rows: nodes; columns: intervals of the grid
    cumulative = [np.interp(edges, t, d) for t, d in zip(times, done, strict=True)]
    rates = np.stack([np.diff(c) / widths for c in cumulative])
    inside = np.stack([edges[1:] <= t[-1] for t in times])
    counted = np.where(inside, rates, np.nan)
    any_inside = inside.any(axis=0)
    with np.errstate(all="ignore"):
        slowest = np.where(any_inside, np.nanmin(np.where(any_inside, counted, 0.0), axis=0), 0.0)
        fastest = np.where(any_inside, np.nanmax(np.where(any_inside, counted, 0.0), axis=0), 0.0)
        mean = np.where(any_inside, np.nanmean(np.where(any_inside, counted, 0.0), axis=0), 0.0)
    return RunBandwidth(
        phase=phase,
        nth=nth,
        nodes=len(nodes),
        edges_s=edges,
        total_bytes_per_s=rates.sum(axis=0),
        slowest_node_bytes_per_s=slowest,
        mean_node_bytes_per_s=mean,
        fastest_node_bytes_per_s=fastest,
    )
