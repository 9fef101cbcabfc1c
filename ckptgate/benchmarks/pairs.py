"""Interleaved pairs, suite against a peer tool, and the ratio a person reads from them.

Each repeat runs the suite and the peer (fio, IOR or mdtest) on the same target with the same
shape; the verdict is the median of the per-repeat ratios suite/peer, with a bootstrap
interval, never an absolute time (benchmarks/README.md, "What is compared").
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

TARGET_RATIO = {
    # (kind, peer) -> the issues' target for the median ratio suite/peer
    ("write", "fio"): 0.95,
    ("read", "fio"): 0.95,
    ("verify", "fio"): 0.95,  # issue 31: ckptgate verify at the read speed of the same files
    ("create", "fio"): 0.8,  # issue 5, on tmpfs; fio's filecreate is C around one syscall
    # issue 53: the payload's keystream at half a memory copy's speed or more, one core
    ("generate", "memcpy"): 0.5,
    ("write", "ior"): 0.95,  # issue 16
    ("read", "ior"): 0.95,
    ("create", "mdtest"): 0.95,
    ("stat", "mdtest"): 0.95,
    ("unlink", "mdtest"): 0.95,
    # issue 27: each per-file loop against a bare os loop of the same calls (benchmarks.loops)
    ("create", "bare"): 0.95,
    ("create-write-fsync", "bare"): 0.95,
    ("stat", "bare"): 0.95,
    ("unlink", "bare"): 0.95,
    # the same, against the bare loop with the report's per-operation recording
    ("create", "bare-recorded"): 0.95,
    ("create-write-fsync", "bare-recorded"): 0.95,
    ("stat", "bare-recorded"): 0.95,
    ("unlink", "bare-recorded"): 0.95,
}


class PeerError(RuntimeError):
    """A peer tool is missing, failed, or did less than asked."""


class PairSettings(Protocol):
    """What times a benchmark's pairs (``timed_pairs``, ``command.add_pair_options``)."""

    @property
    def warmup(self) -> int: ...
    @property
    def repeats(self) -> int: ...
    @property
    def settle_s(self) -> float: ...


SuiteRun = TypeVar("SuiteRun")
PeerRun = TypeVar("PeerRun")


def timed_pairs(
    settings: PairSettings,
    prefix: str,
    suite: Callable[[str], SuiteRun],
    peer: Callable[[str], PeerRun],
    flush: Callable[[], None],
) -> Iterator[tuple[SuiteRun, PeerRun, str]]:
    """Run ``settings.warmup`` untimed pairs, then yield ``settings.repeats`` timed ones:
    (suite's result, the peer's result, which side went first: ``suite`` or ``peer``). Each
    side gets the repeat's tag (``{prefix}K``, or ``warmupK``) to name what it creates.

    The suite runs first on even repeats and the peer first on odd ones: whatever the first
    run leaves behind (a storage cache below the client warmed by its reads, a device still
    writing back) then falls on each side alike. Each side starts after ``flush()``, the
    target's bounded ``syncfs`` (``Target.flush``): what the run before left dirty, its
    journal and an ext4 ``discard`` of what it removed are written back before the clock
    starts, not in the next run's time (without it, on ext4 mounted with ``discard``, a
    2-rank create run right after the suite's own ran at half mdtest's rate;
    benchmarks/README.md, issue 33), and ``settle_s`` of idle time: a target
    that throttles with a burst allowance (a cloud or virtual disk) then starts each run
    with the same allowance, instead of the second run of a pair finding it spent.
    """

    def settled(run: Callable[[str], Any], tag: str) -> Any:
        flush()
        time.sleep(settings.settle_s)
        return run(tag)

    for repeat in range(-settings.warmup, settings.repeats):
        tag = f"{prefix}{repeat}" if repeat >= 0 else f"warmup{-repeat}"
        if repeat % 2 == 0:
            ours = settled(suite, tag)
            theirs, first = settled(peer, tag), "suite"
        else:
            theirs = settled(peer, tag)
            ours, first = settled(suite, tag), "peer"
        if repeat >= 0:
            yield ours, theirs, first


def bootstrap_median_interval(
    values: Sequence[float], confidence: float = 0.9, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values`` (Efron & Tibshirani 1993,
    ch. 13): the median of ``resamples`` draws with replacement, its middle ``confidence``."""
    draw = random.Random(seed)
    medians = sorted(
        statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples)
    )
    tail = int((1 - confidence) / 2 * resamples)
    return medians[tail], medians[resamples - 1 - tail]


@dataclass
class Pair:
    """One repeat: the suite's figure and the peer's, in the same unit (bytes/s or files/s)."""

    suite: float | None
    peer: float
    suite_detail: dict[str, Any] = field(default_factory=dict)
    peer_detail: dict[str, Any] = field(default_factory=dict)
    first: str = "suite"
    """Which side ran first in this repeat: ``suite`` or ``peer``."""

    @property
    def ratio(self) -> float | None:
        return None if self.suite is None or self.peer <= 0 else self.suite / self.peer


@dataclass
class Comparison:
    """One kind's repeats against one peer tool, and the verdict on them."""

    kind: str
    unit: str
    settings: dict[str, Any]
    memory_backed: bool
    peer: str = "fio"
    pairs: list[Pair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    run_dir: str | None = None

    @property
    def target_ratio(self) -> float:
        return TARGET_RATIO[(self.kind, self.peer)]

    @property
    def ratios(self) -> list[float]:
        return [p.ratio for p in self.pairs if p.ratio is not None]

    @property
    def median_ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def median_interval(self) -> tuple[float, float] | None:
        """90 % bootstrap interval of the median ratio: how far the noise lets it move."""
        return bootstrap_median_interval(self.ratios) if len(self.ratios) > 1 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "unit": self.unit,
            "peer": self.peer,
            "settings": self.settings,
            "memory_backed": self.memory_backed,
            "median_ratio": self.median_ratio,
            "median_interval_90": self.median_interval,
            "target_ratio": self.target_ratio,
            "repeats": [
                {
                    "suite": p.suite,
                    "peer": p.peer,
                    "ratio": p.ratio,
                    "first": p.first,
                    "suite_detail": p.suite_detail,
                    "peer_detail": p.peer_detail,
                }
                for p in self.pairs
            ],
            "memory": self.memory,
            "notes": self.notes,
            "run_dir": self.run_dir,
        }


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value / 1e9:8.3f} GB/s" if unit == "bytes/s" else f"{value:10.0f} files/s"


def render(comparison: Comparison) -> str:
    """The table a person reads: per repeat suite, peer, ratio; then the verdict and memory."""
    settings = ", ".join(f"{k}={v}" for k, v in comparison.settings.items())
    peer = comparison.peer
    lines = [
        f"{comparison.kind}: {settings}",
        f"{'repeat':>6}  {'first':>5}  {'suite':>15}  {peer:>15}  ratio",
    ]
    for index, pair in enumerate(comparison.pairs):
        ratio = f"{pair.ratio:.3f}" if pair.ratio is not None else "-"
        ours, theirs = _rate(pair.suite, comparison.unit), _rate(pair.peer, comparison.unit)
        first = "suite" if pair.first == "suite" else peer
        lines.append(f"{index:>6}  {first:>5}  {ours:>15}  {theirs:>15}  {ratio}")
    median = comparison.median_ratio
    if median is None:
        lines.append(f"median ratio suite/{peer}: - (target >= {comparison.target_ratio})")
    else:
        verdict = "meets" if median >= comparison.target_ratio else "BELOW"
        backed = ", memory-backed target" if comparison.memory_backed else ""
        lines.append(
            f"median ratio suite/{peer}: {median:.3f} ({verdict} target >= "
            f"{comparison.target_ratio}{backed})"
        )
        interval = comparison.median_interval
        if interval is not None:
            low, high = interval
            lines.append(
                f"90 % bootstrap interval of the median: {low:.3f} to {high:.3f} "
                f"({len(comparison.ratios)} repeats)"
            )
    memory = comparison.memory
    if memory:
        transfer = memory["transfer_bytes"]
        lines.append(
            f"rank memory: idle peak RSS {memory['idle_peak_rss_bytes'] / 2**20:.1f} MiB, "
            f"transfer buffer {transfer / 2**20:.1f} MiB"
        )
        for rank, peak in enumerate(memory["peak_rss_bytes"]):
            over = peak - memory["idle_peak_rss_bytes"]
            lines.append(
                f"  rank {rank}: peak RSS {peak / 2**20:.1f} MiB = idle + {over / 2**20:.1f} MiB"
                f" ({over / transfer:.2f} transfer buffers)"
            )
    lines.extend(f"note: {note}" for note in comparison.notes)
    return "\n".join(lines)
