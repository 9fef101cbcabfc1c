"""The parent's view of a run's progress, sampled from the ranks' slots off the timed path.

Ranks already report their bytes and files done into shared memory (``ProgressSlot``, a few
stores per transfer; ``ckptgate.engine.pool``). The pool's watch loop, which wakes every
``POLL_S`` anyway to look for stalled ranks, hands the slots to a ``ProgressSampler``: it reads
them (no rank does any extra work), keeps this node's ``NodeProgress`` for the live display and
the heartbeat, and records a bandwidth-over-time ``Series`` per run and node for the JSON report.

The series is sampled every ``interval_s`` (0.5 s) from the release at the common start to the
run's end; a run longer than ``max_samples`` intervals halves its series and doubles its
interval (adaptive), so memory stays bounded however long a burst takes. On node 0 the sampler
also records the other nodes' progress as it arrives with their heartbeats (every
``cluster.heartbeat.BEAT_S``), so the JSON holds a series per node; a peer's series may stop up
to one beat before its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

SAMPLE_INTERVAL_S = 0.5
"""How often the series samples the slots (the watch loop polls every ``POLL_S``, 0.2 s)."""
MAX_SAMPLES = 2048
"""Samples per series before it is halved and its interval doubled."""
TOTAL_BYTES = 3
"""Where a slot's ``values`` hold the bytes its task says it will move (0: it said nothing;
``RankContext.progress(total_bytes=...)``): a task that learns its total only once it runs (a
DCP load plans its reads inside ``dcp.load``) gives the ETA that way, where ``Expected`` has
no bytes."""


@dataclass(frozen=True)
class Expected:
    """What a run is counted against: its phase's name and each rank's total.

    ``rank_bytes`` and ``rank_files`` are each participating rank's totals, in rank order
    (empty: not known, so no ETA)."""

    phase: str
    rank_bytes: tuple[int, ...] = ()
    rank_files: tuple[int, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(self.rank_bytes)

    @property
    def total_files(self) -> int:
        return sum(self.rank_files)


@dataclass(frozen=True)
class NodeProgress:
    """One node's progress in one run, as the parent read its slots (picklable and small: it
    travels to node 0 in the heartbeat)."""

    node: int
    phase: str
    nth: int
    """Which run of this phase on this node (0, 1, ...): the write rounds share a phase name."""
    elapsed_s: float
    """Since the release at the common start (0 while the ranks prepare)."""
    bytes: int
    files: int
    total_bytes: int
    total_files: int
    ranks: int
    slowest: str
    """The rank furthest behind (least of its own total done; least done without totals)."""
    slowest_fraction: float | None
    """How much of its own total the slowest rank has done (None without totals)."""
    running: bool = True
    """False in the last snapshot of a run, taken when it ended."""
    released: bool = True
    """False while the ranks prepare before the common start (``elapsed_s`` stays 0)."""

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def files_per_s(self) -> float:
        return self.files / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class Series:
    """Bandwidth over time of one run on one node: the bytes and files done at each sample."""

    phase: str
    nth: int
    node: int
    interval_s: float
    t_s: list[float] = field(default_factory=list)
    done_bytes: list[int] = field(default_factory=list)
    done_files: list[int] = field(default_factory=list)

    def add(self, t_s: float, done_bytes: int, done_files: int) -> None:
        self.t_s.append(t_s)
        self.done_bytes.append(done_bytes)
        self.done_files.append(done_files)

    def halve(self) -> None:
        """Keep every other sample (and the last), and double the interval."""
        keep = list(range(0, len(self.t_s), 2))
        if keep[-1] != len(self.t_s) - 1:
            keep.append(len(self.t_s) - 1)
        self.t_s = [self.t_s[i] for i in keep]
        self.done_bytes = [self.done_bytes[i] for i in keep]
        self.done_files = [self.done_files[i] for i in keep]
        self.interval_s *= 2

    def bytes_per_s(self) -> list[float]:
        """Each interval's rate: bytes between consecutive samples over the time between them
        (so the rates times their intervals sum to the bytes done)."""
        pairs = zip(self.t_s, self.t_s[1:], self.done_bytes, self.done_bytes[1:], strict=False)
        return [(b1 - b0) / (t1 - t0) if t1 > t0 else 0.0 for t0, t1, b0, b1 in pairs]

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "nth": self.nth,
            "node": self.node,
            "interval_s": self.interval_s,
            "t_s": self.t_s,
            "done_bytes": self.done_bytes,
            "done_files": self.done_files,
            "bytes_per_s": self.bytes_per_s(),
        }


Peers = Callable[[], dict[int, NodeProgress]]
"""The other nodes' latest progress (node 0: from their heartbeats; elsewhere none)."""


def _no_peers() -> dict[int, NodeProgress]:
    return {}


class ProgressSampler:
    """Reads the slots of a running pool (``begin``, ``released``, ``poll``, ``end``, all
    called by the pool's watch loop in the parent) and keeps ``latest`` and ``series``.

    ``on_sample`` gets each new snapshot of this node (the live display); ``peers`` gives the
    other nodes' latest progress, recorded into their series on node 0.
    """

    def __init__(
        self,
        node: int = 0,
        *,
        interval_s: float = SAMPLE_INTERVAL_S,
        max_samples: int = MAX_SAMPLES,
        on_sample: Callable[[NodeProgress], None] | None = None,
        peers: Peers = _no_peers,
    ) -> None:
        self.node = node
        self.interval_s = interval_s
        self.max_samples = max_samples
        self.on_sample = on_sample
        self.peers = peers
        self.latest: NodeProgress | None = None
        self.series: list[Series] = []
        self._runs: dict[str, int] = {}
        self._slots: Sequence[Any] = ()
        self._labels: Sequence[str] = ()
        self._expected = Expected("")
        self._nth = 0
        self._released_at: float | None = None
        self._next_sample = 0.0
        self._mine: Series | None = None
        self._theirs: dict[int, Series] = {}

    def companion(self) -> ProgressSampler:
        """A sampler for a pool whose runs go on beside this one's (the dataloader readers',
        on another thread): it feeds the same display, and its series go into this
        sampler's ``series``, so the JSON report holds them with every other run's. Its runs'
        phases must be its own (``nth`` counts each sampler's runs apart)."""
        other = ProgressSampler(
            self.node,
            interval_s=self.interval_s,
            max_samples=self.max_samples,
            on_sample=self.on_sample,
        )
        other.series = self.series  # list.append holds the GIL: two threads may add
        return other

    def begin(
        self, expected: Expected, slots: Sequence[Any], labels: Sequence[str], now: float
    ) -> None:
        """A run starts on ``slots`` (one per participating rank, the values already reset)."""
        self._expected, self._slots = expected, slots
        self._labels = [label.split(" (")[0] for label in labels]
        self._nth = self._runs.get(expected.phase, 0)
        self._runs[expected.phase] = self._nth + 1
        self._released_at = None
        self._mine = None
        self._theirs = {}
        self._snapshot(now, running=True)

    def released(self, now: float) -> None:
        """The ranks left the common start: the clock of the run and of its series starts."""
        self._released_at = now
        self._mine = Series(self._expected.phase, self._nth, self.node, self.interval_s)
        # The origin: at the release no rank has moved a byte of this run (every task reports
        # bytes only after its start). Sampled here instead, a busy parent would read the
        # slots after the ranks had raced ahead, and the series would miss what they wrote.
        self._mine.add(0.0, 0, 0)
        self.series.append(self._mine)
        self._next_sample = now + self.interval_s
        self._snapshot(now, running=True)

    def poll(self, now: float) -> None:
        """Sample if the interval has passed since the last sample (called every watch step)."""
        if self._released_at is None:
            self._snapshot(now, running=True)
            return
        if now < self._next_sample:
            return
        self._next_sample = now + self._current_interval()
        self._sample(now, running=True)

    def end(self, now: float) -> None:
        """The run ended (done, failed or interrupted): a last sample, marked not running."""
        if self._released_at is None:
            self._snapshot(now, running=False)
        else:
            self._sample(now, running=False)
        self._slots = ()

    def _current_interval(self) -> float:
        return self._mine.interval_s if self._mine is not None else self.interval_s

    def _sample(self, now: float, running: bool) -> None:
        progress = self._snapshot(now, running)
        mine = self._mine
        if mine is not None:
            mine.add(progress.elapsed_s, progress.bytes, progress.files)
            if len(mine.t_s) > self.max_samples:
                mine.halve()
        for node, theirs in self.peers().items():
            if (theirs.phase, theirs.nth) != (self._expected.phase, self._nth):
                continue
            series = self._theirs.get(node)
            if series is None:
                series = Series(theirs.phase, theirs.nth, node, self.interval_s)
                self._theirs[node] = series
                self.series.append(series)
            if not series.t_s or theirs.elapsed_s > series.t_s[-1]:
                series.add(theirs.elapsed_s, theirs.bytes, theirs.files)
                if len(series.t_s) > self.max_samples:
                    series.halve()

    def _totals(self) -> Expected:
        """The run's totals: the parent's ``Expected``, or, where it names no bytes, what the
        ranks reported into their slots (``TOTAL_BYTES``) once any did."""
        expected = self._expected
        if expected.rank_bytes:
            return expected
        reported = tuple(int(slot.values[TOTAL_BYTES]) for slot in self._slots)
        return replace(expected, rank_bytes=reported) if any(reported) else expected

    def _snapshot(self, now: float, running: bool) -> NodeProgress:
        expected = self._totals()
        done_bytes = [int(slot.values[1]) for slot in self._slots]
        done_files = [int(slot.values[2]) for slot in self._slots]
        slowest, fraction = self._slowest(expected, done_bytes, done_files)
        released = self._released_at
        progress = NodeProgress(
            node=self.node,
            phase=expected.phase,
            nth=self._nth,
            elapsed_s=now - released if released is not None else 0.0,
            bytes=sum(done_bytes),
            files=sum(done_files),
            total_bytes=expected.total_bytes,
            total_files=expected.total_files,
            ranks=len(done_bytes),
            slowest=slowest,
            slowest_fraction=fraction,
            running=running,
            released=released is not None,
        )
        self.latest = progress
        if self.on_sample is not None:
            self.on_sample(progress)
        return progress

    def _slowest(
        self, expected: Expected, done_bytes: list[int], done_files: list[int]
    ) -> tuple[str, float | None]:
        """The rank furthest behind: least of its own bytes (or files) done."""
        if not done_bytes:
            return "", None
        if len(expected.rank_bytes) == len(done_bytes) and expected.total_bytes:
            done, totals = done_bytes, expected.rank_bytes
        elif len(expected.rank_files) == len(done_files) and expected.total_files:
            done, totals = done_files, expected.rank_files
        else:
            index = min(range(len(done_bytes)), key=lambda i: (done_bytes[i], done_files[i]))
            return self._label(index), None
        fractions = [d / t if t else 1.0 for d, t in zip(done, totals, strict=True)]
        index = min(range(len(fractions)), key=fractions.__getitem__)
        return self._label(index), fractions[index]

    def _label(self, index: int) -> str:
        return self._labels[index] if index < len(self._labels) else f"rank {index}"

    def series_json(self) -> list[dict[str, Any]]:
        """Every run's series on every node this sampler saw, in the order the runs began."""
        return [series.to_json() for series in self.series]
