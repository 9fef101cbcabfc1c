"""The start skew: how far apart the ranks leave the common start, futex against pipe release.

    python -m ckptgate.benchmarks.skew --ranks 8 --repeats 200

Two pools of ``--ranks`` rank processes, one released by the start line's single futex wake
(``ckptgate.engine.startline``, the suite's default) and one by a pipe message per rank (the
fallback, and the engine before issue 16), run an empty task alternately, the order swapped
every repeat. Each run's skew is its last rank's release minus its first's, each read on the
node's monotonic clock right after the rank returns from the wait (what every burst's
``start_skew_s`` reports). The table gives each method's median, 90th percentile and maximum.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from ckptgate.engine.pool import RELEASES, RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankResult,
    records_from_results,
    run_ranks,
)


def released_task(ctx: RankContext) -> RankResult:
    """Rank task: leave the common start and stop."""
    return PhaseMarks.start(ctx).result(ctx.local_rank, 0)


def skew_s(pool: RankPool, timeout_s: float) -> float:
    """One release of every rank of ``pool``: first to last rank's release, in seconds."""
    results = run_ranks(pool, released_task, [{}] * pool.ranks, timeout_s)
    return BurstResult("start", tuple(records_from_results(results))).start_skew_s


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_s": statistics.median(ordered),
        "p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max_s": ordered[-1],
        "under_1ms": sum(v < 1e-3 for v in ordered) / len(ordered),
    }


def measure(ranks: int, repeats: int, warmup: int = 5, timeout_s: float = 60.0) -> dict[str, Any]:
    """``repeats`` skews per release method, interleaved, the order swapped every repeat."""
    pools = {release: RankPool(ranks, release=release) for release in sorted(RELEASES)}
    skews: dict[str, list[float]] = {release: [] for release in pools}
    try:
        for repeat in range(-warmup, repeats):
            order = sorted(pools) if repeat % 2 == 0 else sorted(pools, reverse=True)
            for release in order:
                value = skew_s(pools[release], timeout_s)
                if repeat >= 0:
                    skews[release].append(value)
    finally:
        for pool in pools.values():
            pool.close()
    return {
        "ranks": ranks,
        "repeats": repeats,
        "releases": {release: summary(values) for release, values in skews.items()},
    }


def render(figures: dict[str, Any]) -> str:
    lines = [f"start skew, {figures['ranks']} ranks, {figures['repeats']} releases each"]
    lines.append(f"{'release':>8}  {'median':>9}  {'p90':>9}  {'max':>9}  under 1 ms")
    for release, row in figures["releases"].items():
        lines.append(
            f"{release:>8}  {row['median_s'] * 1e3:7.3f}ms  {row['p90_s'] * 1e3:7.3f}ms  "
            f"{row['max_s'] * 1e3:7.3f}ms  {row['under_1ms']:.0%}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckptgate.benchmarks.skew")
    parser.add_argument("--ranks", type=int, default=8, metavar="N", help="default: 8")
    parser.add_argument("--repeats", type=int, default=200, metavar="K", help="default: 200")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures here")
    args = parser.parse_args(argv)
    if args.ranks < 1 or args.repeats < 1:
        parser.error(f"--ranks and --repeats must be positive, got {args.ranks}, {args.repeats}")
    figures = measure(args.ranks, args.repeats)
    print(render(figures))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
