"""The suite's drivers against fio on the same target, interleaved, as ratios.

    ckptgate bench write --target /dev/shm --ranks 4 --bytes-per-rank 256MiB \\
        --transfer 4MiB --repeats 5

Each repeat runs the suite, then fio, with the same ranks, files, sizes and transfer size, so
that the noise of a shared machine falls on both alike; the verdict is the median of the
per-repeat ratios suite/fio, never an absolute time. Everything either side writes lies in a
new run directory under ``--target``; files are registered before they are created and removed
(untimed) between repeats, and the run directory goes at the end, also on failure.

``write`` (issue 3): the write burst against ``rw=write``, one file per job, fsync on close.
``read`` (issue 4): the readback against ``rw=read`` of the same files, same cache treatment.
``create`` (issue 5): the metadata storm's create+close rate against ``ioengine=filecreate``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ckptgate.benchmarks import fio
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import BurstResult
from ckptgate.sizing.units import GB, KB, MB, GiB, KiB, MiB
from ckptgate.storage.target import Target, TargetError
from ckptgate.workloads.metadata_storm import StormResult, run_metadata_storm, storm_files
from ckptgate.workloads.readback import ReadResult, run_readback
from ckptgate.workloads.write_burst import (
    ShardFile,
    peak_rss_bytes,
    run_write_burst,
    shard_file_name,
)

TARGET_RATIO = {
    # (kind, memory-backed target?) -> the target for the median ratio suite/fio
    ("write", True): 0.95,
    ("write", False): 0.95,
    ("read", True): 0.95,
    ("read", False): 0.95,
    ("create", True): 0.8,
    ("create", False): 0.95,
}

_UNITS = {
    # fio's own suffixes (k, m, g) are binary; the constants are ckptgate.sizing.units'
    "": 1,
    "b": 1,
    "k": KiB,
    "kib": KiB,
    "m": MiB,
    "mib": MiB,
    "g": GiB,
    "gib": GiB,
    "kb": KB,
    "mb": MB,
    "gb": GB,
}


def parse_size(text: str) -> int:
    """``256MiB`` / ``4m`` (binary, as fio reads ``bs=4m``) / ``1GB`` (decimal) -> bytes."""
    found = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = found.group(2).lower() if found else None
    if found is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use an integer with B, KiB, MiB, GiB (or k, m, g), KB, MB, GB"
        )
    return int(found.group(1)) * _UNITS[unit]


@dataclass(frozen=True)
class BenchSettings:
    """What one comparison runs: the shape both sides share and how the pairs are timed.

    ``main`` builds it once from the command line (each field is the option of the same name,
    ``--bytes-per-rank`` as ``bytes_per_rank``); a test or a script builds it directly. The
    defaults are the command line's. Sizes are bytes, times seconds.
    """

    ranks: int = 4
    """Rank processes on the suite's side, fio jobs on the other."""
    bytes_per_rank: int = 256 * MiB
    """write and read: each rank's file, in bytes."""
    transfer: int = 4 * MiB
    """write and read: the size of each write or read call, in bytes."""
    files: int = 20000
    """create: files in all (rounded up to a whole number per rank)."""
    repeats: int = 5
    """Timed pairs."""
    warmup: int = 1
    """Untimed pairs before the timed ones."""
    settle_s: float = 0.0
    """Idle seconds before every run, either side."""
    shift: int = 1
    """read: rank i reads the file rank i + shift wrote."""
    direct: bool = False
    """read: O_DIRECT on both sides."""
    timeout_s: float = 600.0
    """The suite's deadline for each burst."""
    fio_processes: bool = False
    """fio's jobs as processes (fio's default) instead of threads (``fio.SCHEDULING``)."""
    fio: str = "fio"
    """fio's name on PATH, or its path (``--fio``)."""

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.repeats < 1 or self.warmup < 0:
            raise ValueError("--ranks and --repeats must be positive, --warmup not negative")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchSettings:
        """The settings that ``build_parser``'s parsed arguments ask for; ``ValueError`` when
        they are out of range."""
        return cls(
            ranks=args.ranks,
            bytes_per_rank=args.bytes_per_rank,
            transfer=args.transfer,
            files=args.files,
            repeats=args.repeats,
            warmup=args.warmup,
            settle_s=args.settle_s,
            shift=args.shift,
            direct=args.direct,
            timeout_s=args.timeout_s,
            fio_processes=args.fio_processes,
            fio=args.fio or "fio",
        )


def idle_rank_task(ctx: RankContext) -> dict[str, Any]:
    """Rank task: the peak and current RSS of a rank that has imported the drivers, idle."""
    ctx.start()
    with open("/proc/self/statm", encoding="ascii") as statm:
        resident_pages = int(statm.read().split()[1])
    return {
        "peak_rss_bytes": peak_rss_bytes(),
        "rss_bytes": resident_pages * os.sysconf("SC_PAGE_SIZE"),
    }


SuiteRun = TypeVar("SuiteRun")
FioRun = TypeVar("FioRun")


def timed_pairs(
    settings: BenchSettings,
    prefix: str,
    suite: Callable[[str], SuiteRun],
    peer: Callable[[str], FioRun],
) -> Iterator[tuple[SuiteRun, FioRun, str]]:
    """Run ``settings.warmup`` untimed pairs, then yield ``settings.repeats`` timed ones:
    (suite's result, fio's result, which side went first). Each side gets the repeat's tag
    (``{prefix}K``, or ``warmupK``) to name what it creates.

    The suite runs first on even repeats and fio first on odd ones: whatever the first run
    leaves behind (a storage cache below the client warmed by its reads, a device still
    writing back) then falls on each side alike. Each side starts after ``settle_s`` of
    idle time: a target that throttles with a burst allowance (a cloud or virtual disk) then
    starts each run with the same allowance, instead of the second run of a pair finding it
    spent.
    """

    def settled(run: Callable[[str], Any], tag: str) -> Any:
        time.sleep(settings.settle_s)
        return run(tag)

    for repeat in range(-settings.warmup, settings.repeats):
        tag = f"{prefix}{repeat}" if repeat >= 0 else f"warmup{-repeat}"
        if repeat % 2 == 0:
            ours = settled(suite, tag)
            theirs, first = settled(peer, tag), "suite"
        else:
            theirs = settled(peer, tag)
            ours, first = settled(suite, tag), "fio"
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
    """One repeat: the suite's figure and fio's, in the same unit (bytes/s or files/s)."""

    suite: float | None
    fio: float
    suite_detail: dict[str, Any] = field(default_factory=dict)
    fio_detail: dict[str, Any] = field(default_factory=dict)
    first: str = "suite"
    """Which side ran first in this repeat."""

    @property
    def ratio(self) -> float | None:
        return None if self.suite is None or self.fio <= 0 else self.suite / self.fio


@dataclass
class Comparison:
    kind: str
    unit: str
    settings: dict[str, Any]
    memory_backed: bool
    pairs: list[Pair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    run_dir: str | None = None

    @property
    def target_ratio(self) -> float:
        return TARGET_RATIO[(self.kind, self.memory_backed)]

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
            "settings": self.settings,
            "memory_backed": self.memory_backed,
            "median_ratio": self.median_ratio,
            "median_interval_90": self.median_interval,
            "target_ratio": self.target_ratio,
            "repeats": [
                {
                    "suite": p.suite,
                    "fio": p.fio,
                    "ratio": p.ratio,
                    "first": p.first,
                    "suite_detail": p.suite_detail,
                    "fio_detail": p.fio_detail,
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
    """The table a person reads: per repeat suite, fio, ratio; then the verdict and memory."""
    settings = ", ".join(f"{k}={v}" for k, v in comparison.settings.items())
    lines = [
        f"{comparison.kind}: {settings}",
        f"{'repeat':>6}  {'first':>5}  {'suite':>15}  {'fio':>15}  ratio",
    ]
    for index, pair in enumerate(comparison.pairs):
        ratio = f"{pair.ratio:.3f}" if pair.ratio is not None else "-"
        suite, fio_rate = _rate(pair.suite, comparison.unit), _rate(pair.fio, comparison.unit)
        lines.append(f"{index:>6}  {pair.first:>5}  {suite:>15}  {fio_rate:>15}  {ratio}")
    median = comparison.median_ratio
    if median is None:
        lines.append(f"median ratio suite/fio: - (target >= {comparison.target_ratio})")
    else:
        verdict = "meets" if median >= comparison.target_ratio else "BELOW"
        lines.append(
            f"median ratio suite/fio: {median:.3f} ({verdict} target >= {comparison.target_ratio}"
            f"{', memory-backed target' if comparison.memory_backed else ''})"
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


def _shards(directory: str, ranks: int, size: int, transfer: int, run_id: int) -> list[ShardFile]:
    return [
        ShardFile(rank, f"{directory}/{shard_file_name(rank)}", size, run_id, transfer)
        for rank in range(ranks)
    ]


def _pool_with_idle_rss(ranks: int, timeout_s: float) -> tuple[RankPool, list[dict[str, Any]]]:
    pool = RankPool(ranks)
    try:
        idle = pool.run(idle_rank_task, [{}] * ranks, timeout_s)
    except BaseException:
        pool.close()
        raise
    return pool, idle


def compare_write(target: Target, settings: BenchSettings) -> Comparison:
    ranks, size, transfer = settings.ranks, settings.bytes_per_rank, settings.transfer
    comparison = Comparison(
        "write",
        "bytes/s",
        {"target": target.url, "ranks": ranks, "bytes_per_rank": size, "transfer": transfer},
        target.facts.memory_backed,
    )
    target.check_room(ranks * size * 2, "one suite and one fio checkpoint")
    run_id = secrets.randbits(63)
    pool, idle = _pool_with_idle_rss(ranks, settings.timeout_s)
    peaks = [0] * ranks
    try:

        def suite(tag: str) -> BurstResult:
            suite_dir = target.new_dir(f"{tag}-suite")
            shards = _shards(suite_dir, ranks, size, transfer, run_id)
            target.register([s.path for s in shards])
            burst = run_write_burst(pool, target.fs_spec, shards, settings.timeout_s)
            target.remove_files([s.path for s in shards])
            return burst

        def peer(tag: str) -> fio.FioResult:
            fio_dir = target.new_dir(f"{tag}-fio")
            target.register(fio.write_job_paths(fio_dir, ranks))
            result = fio.run_fio(
                fio.write_job(fio_dir, ranks, size, transfer, thread=not settings.fio_processes),
                settings.fio,
            )
            target.remove_files(fio.write_job_paths(fio_dir, ranks))
            if result.total_bytes != ranks * size:
                raise fio.FioError(f"fio wrote {result.total_bytes} B, expected {ranks * size}")
            return result

        for burst, result, first in timed_pairs(settings, "w", suite, peer):
            for record in burst.ranks:
                peaks[record.rank] = max(peaks[record.rank], record.extra["peak_rss_bytes"])
            comparison.pairs.append(
                Pair(
                    burst.aggregate_bytes_per_s,
                    result.aggregate_bytes_per_s,
                    {
                        "span_s": burst.span_s,
                        "slowest_phases_s": burst.slowest.phases_s,
                        "generate_s_max": max(r.extra["generate_s"] for r in burst.ranks),
                    },
                    {"span_s": result.span_s, "runtimes_s": [j.runtime_s for j in result.jobs]},
                    first,
                )
            )
    finally:
        pool.close()
    comparison.memory = {
        "transfer_bytes": transfer,
        "idle_peak_rss_bytes": max(r["peak_rss_bytes"] for r in idle),
        "idle_rss_bytes": [r["rss_bytes"] for r in idle],
        "peak_rss_bytes": peaks,
    }
    return comparison


def compare_read(target: Target, settings: BenchSettings) -> Comparison:
    ranks, size, transfer = settings.ranks, settings.bytes_per_rank, settings.transfer
    comparison = Comparison(
        "read",
        "bytes/s",
        {
            "target": target.url,
            "ranks": ranks,
            "bytes_per_rank": size,
            "transfer": transfer,
            "shift": settings.shift,
            "direct": settings.direct,
        },
        target.facts.memory_backed,
    )
    target.check_room(ranks * size, "one checkpoint to read back")
    run_id = secrets.randbits(63)
    pool = RankPool(ranks)
    try:
        directory = target.new_dir("read")
        shards = _shards(directory, ranks, size, transfer, run_id)
        target.register([s.path for s in shards])
        run_write_burst(pool, target.fs_spec, shards, settings.timeout_s)  # untimed: the files
        # Rank i reads what rank i+shift wrote, as the suite's readback does.
        order = [shards[(rank + settings.shift) % ranks].path for rank in range(ranks)]
        job = fio.read_job(
            order,
            size,
            transfer,
            direct=settings.direct,
            invalidate=True,
            thread=not settings.fio_processes,
        )

        def suite(_tag: str) -> ReadResult:
            return run_readback(
                pool,
                target.fs_spec,
                shards,
                settings.timeout_s,
                shift=settings.shift,
                direct=settings.direct,
                drop_cache=True,
            )

        def peer(_tag: str) -> fio.FioResult:
            result = fio.run_fio(job, settings.fio)
            if result.total_bytes != ranks * size:
                raise fio.FioError(f"fio read {result.total_bytes} B, expected {ranks * size}")
            return result

        for read, result, first in timed_pairs(settings, "r", suite, peer):
            comparison.pairs.append(
                Pair(
                    read.burst.aggregate_bytes_per_s,
                    result.aggregate_bytes_per_s,
                    {
                        "span_s": read.burst.span_s,
                        "resident_fraction": read.resident_fraction,
                        "memory_backed": read.memory_backed,
                        "direct": read.direct,
                        "ranks": [
                            {
                                "rank": r.rank,
                                "start_s": r.start_s,
                                "end_s": r.end_s,
                                **r.phases_s,
                                "verify_s": r.extra["verify_s"],
                            }
                            for r in read.burst.ranks
                        ],
                    },
                    {"span_s": result.span_s},
                    first,
                )
            )
    finally:
        pool.close()
    return comparison


def compare_create(target: Target, settings: BenchSettings) -> Comparison:
    ranks, files = settings.ranks, settings.files
    per_rank = -(-files // ranks)
    comparison = Comparison(
        "create",
        "files/s",
        {"target": target.url, "ranks": ranks, "files": per_rank * ranks},
        target.facts.memory_backed,
    )
    run_id = secrets.randbits(63)
    pool = RankPool(ranks)
    try:
        pool.pids()  # start the ranks before the first timed storm

        def suite(tag: str) -> StormResult:
            suite_dir = target.new_dir(f"{tag}-suite")
            files_ = storm_files(suite_dir, per_rank * ranks, per_rank)
            target.register([f.path for f in files_])
            # A pure create+close storm, as fio's filecreate: no write, fsync or commit.
            storm = run_metadata_storm(
                pool,
                target.fs_spec,
                suite_dir,
                files_,
                settings.timeout_s,
                run_id=run_id,
                write_bytes=0,
                fsync=False,
                commit=False,
            )
            target.remove_files([f.path for f in files_])
            return storm

        def peer(tag: str) -> fio.FioResult:
            fio_dir = target.new_dir(f"{tag}-fio")
            paths = fio.create_job_paths(fio_dir, ranks, per_rank)
            target.register(paths)
            result = fio.run_fio(
                fio.create_job(fio_dir, ranks, per_rank, thread=not settings.fio_processes),
                settings.fio,
            )
            target.remove_files(paths)
            if result.total_ios != len(paths):
                raise fio.FioError(f"fio created {result.total_ios} files, expected {len(paths)}")
            return result

        for storm, result, first in timed_pairs(settings, "c", suite, peer):
            comparison.pairs.append(
                Pair(
                    storm.create_close_rate_per_s,
                    result.aggregate_iops,
                    {"span_s": storm.create.span_s, "io": storm.io},
                    {"span_s": result.span_s},
                    first,
                )
            )
    finally:
        pool.close()
    return comparison


COMPARISONS: dict[str, Callable[[Target, BenchSettings], Comparison]] = {
    "write": compare_write,
    "read": compare_read,
    "create": compare_create,
}


DEFAULTS = BenchSettings()
"""The command line's defaults are the settings' own."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ckptgate.benchmarks.compare",
        description="Compare a suite driver with fio on the same target, interleaved.",
    )
    parser.add_argument("kind", choices=sorted(COMPARISONS))
    parser.add_argument("--target", required=True, metavar="DIR", help="a local directory")
    parser.add_argument(
        "--ranks", type=int, default=DEFAULTS.ranks, metavar="N",
        help=f"default: {DEFAULTS.ranks}",
    )  # fmt: skip
    parser.add_argument(
        "--bytes-per-rank", type=parse_size, default=DEFAULTS.bytes_per_rank, metavar="SIZE",
        help=f"default: {DEFAULTS.bytes_per_rank // MiB}MiB",
    )  # fmt: skip
    parser.add_argument(
        "--transfer", type=parse_size, default=DEFAULTS.transfer, metavar="SIZE",
        help=f"default: {DEFAULTS.transfer // MiB}MiB",
    )  # fmt: skip
    parser.add_argument(
        "--files", type=int, default=DEFAULTS.files, metavar="N",
        help=f"default: {DEFAULTS.files}",
    )  # fmt: skip
    parser.add_argument(
        "--repeats", type=int, default=DEFAULTS.repeats, metavar="K",
        help=f"default: {DEFAULTS.repeats}",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", type=int, default=DEFAULTS.warmup, metavar="K",
        help=f"default: {DEFAULTS.warmup}",
    )  # fmt: skip
    parser.add_argument(
        "--settle-s", type=float, default=DEFAULTS.settle_s, metavar="S",
        help=f"idle seconds before every timed run, either side (default: {DEFAULTS.settle_s:g}; "
        "see README)",
    )  # fmt: skip
    parser.add_argument(
        "--shift", type=int, default=DEFAULTS.shift, help="read: rank i reads rank i+shift"
    )
    parser.add_argument("--direct", action="store_true", help="read: O_DIRECT on both sides")
    parser.add_argument(
        "--timeout-s", type=float, default=DEFAULTS.timeout_s,
        help=f"default: {DEFAULTS.timeout_s:g}",
    )  # fmt: skip
    parser.add_argument(
        "--fio-processes",
        action="store_true",
        help="run fio's jobs as processes (fio's default) instead of threads; see fio.SCHEDULING",
    )
    parser.add_argument("--fio", default=None, metavar="PATH", help="default: fio on PATH")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = BenchSettings.from_args(args)
    except ValueError as error:
        parser.error(str(error))
    try:
        version = fio.fio_version(fio.fio_binary(settings.fio))
        target = Target(args.target)
        if not target.is_local:
            raise TargetError(f"--target {args.target}: fio needs a local (POSIX) directory")
        target.create_run_dir()
    except (fio.FioError, TargetError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        comparison = COMPARISONS[args.kind](target, settings)
    except fio.FioError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        report = target.cleanup()
        if report.left:
            print(f"warning: left in place (not empty): {report.left}", file=sys.stderr)
    comparison.settings["fs_type"] = target.facts.fs_type
    comparison.settings["fio"] = f"{version[0]}.{version[1]}"
    comparison.settings["fio_jobs"] = "processes" if settings.fio_processes else "threads"
    comparison.settings["settle_s"] = settings.settle_s
    comparison.run_dir = target.run_dir
    print(render(comparison))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(comparison.to_json(), out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
