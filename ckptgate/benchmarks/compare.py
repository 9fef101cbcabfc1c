"""The suite's drivers against fio, IOR and mdtest on the same target, interleaved, as ratios.

    ckptgate bench write --target /dev/shm --ranks 4 --bytes-per-rank 256MiB \\
        --transfer 4MiB --repeats 5 [--peer ior]

Each repeat runs the suite and the peer, with the same ranks, files, sizes and transfer size,
so that the noise of a shared machine falls on both alike; the verdict is the median of the
per-repeat ratios suite/peer, never an absolute time (``ckptgate.benchmarks.pairs``).
Everything either side writes lies in a new run directory under ``--target``; files are
registered before they are created and removed (untimed) between repeats, and the run
directory goes at the end, also on failure.

``write`` (issues 3, 16): the write burst against fio's ``rw=write`` (one file per job, fsync
on close) or IOR's ``-w -e`` (``--peer ior``).
``read`` (issues 4, 16): the readback against fio's ``rw=read`` of the same files, same cache
treatment, or IOR's ``-r -E -C`` of the same files (hard links under its names) with its
pages dropped alike.
``create`` (issue 5): the metadata storm's create+close rate against fio's ``filecreate``.
``metadata`` (issue 16): the storm's create, stat and unlink phases against mdtest's
``-F -C -T -r``, three comparisons from the same repeats; ``--variant checklist`` (issue 27)
runs both sides as the checklist runs the storm, a 4 KiB write and an fsync per file
(``checks/metadata.py``; mdtest ``-w 4096 -y``), ``pure`` (the default) neither.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.benchmarks import fio, hpc
from ckptgate.benchmarks.command import add_pair_options, run_in_directory
from ckptgate.benchmarks.pairs import (
    Comparison,
    Pair,
    PeerError,
    render,
    timed_pairs,
)
from ckptgate.engine.interrupts import sigterm_unwinds
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import BurstResult, detail_as
from ckptgate.sizing.units import GB, KB, MB, GiB, KiB, MiB
from ckptgate.storage import pagecache
from ckptgate.storage.manifest import Writer
from ckptgate.storage.target import Target
from ckptgate.workloads.readback import ReadFilesDetail, ReadResult, run_readback
from ckptgate.workloads.storm import (
    WRITE_BYTES,
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    storm_files,
)
from ckptgate.workloads.write_burst import (
    ShardFile,
    WriteDetail,
    peak_rss_bytes,
    run_write_burst,
    shard_file_name,
)

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
    peer: str | None = None
    """The tool on the other side (``--peer``): fio or ior for write and read, fio for
    create, mdtest for metadata; None: the kind's first (``PEERS``)."""
    ior: str | None = None
    """IOR's path (``--ior``); None: ior on PATH."""
    mdtest: str | None = None
    """mdtest's path (``--mdtest``); None: mdtest on PATH."""
    variant: str = "pure"
    """metadata: ``pure`` (create+close, mdtest ``-C``) or ``checklist`` (create, a 4 KiB
    stamped write, fsync, close, as ``checks/metadata.py`` runs the storm; mdtest
    ``-C -w 4096 -y``), ``VARIANTS``."""

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.repeats < 1 or self.warmup < 0:
            raise ValueError("--ranks and --repeats must be positive, --warmup not negative")
        if self.variant not in VARIANTS:
            raise ValueError(f"--variant {self.variant}: use {' or '.join(VARIANTS)}")

    @property
    def storm_write_bytes(self) -> int:
        """Bytes each storm file gets written (both sides): 0, or the checklist's 4 KiB."""
        return WRITE_BYTES if self.variant == "checklist" else 0

    @property
    def storm_fsync(self) -> bool:
        """Whether each storm file is fsynced after its write (both sides)."""
        return self.variant == "checklist"

    def peer_for(self, kind: str) -> str:
        """The peer tool this comparison runs against; ``ValueError`` for one the kind lacks
        (or a variant other than pure for a kind without variants)."""
        allowed = PEERS[kind]
        peer = self.peer or allowed[0]
        if peer not in allowed:
            raise ValueError(f"--peer {peer}: {kind} compares with {' or '.join(allowed)}")
        if self.variant != "pure" and kind != "metadata":
            raise ValueError(f"--variant {self.variant}: only metadata has variants, not {kind}")
        return peer

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
            peer=args.peer,
            ior=args.ior,
            mdtest=args.mdtest,
            variant=args.variant,
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


PeerFigure = tuple[float, dict[str, Any]]
"""What one peer run gives a pair: its figure (bytes/s, files/s) and details for the JSON."""


def _write_peer(target: Target, settings: BenchSettings, peer: str) -> Callable[[str], PeerFigure]:
    """One timed write of every rank's file by fio or IOR, in a new directory per repeat."""
    ranks, size, transfer = settings.ranks, settings.bytes_per_rank, settings.transfer

    def with_fio(tag: str) -> PeerFigure:
        fio_dir = target.new_dir(f"{tag}-fio")
        target.register(fio.write_job_paths(fio_dir, ranks), writer=Writer.BENCHMARK)
        result = fio.run_fio(
            fio.write_job(fio_dir, ranks, size, transfer, thread=not settings.fio_processes),
            settings.fio,
        )
        target.remove_files(fio.write_job_paths(fio_dir, ranks))
        if result.total_bytes != ranks * size:
            raise fio.FioError(f"fio wrote {result.total_bytes} B, expected {ranks * size}")
        runtimes = [j.runtime_s for j in result.jobs]
        return result.aggregate_bytes_per_s, {"span_s": result.span_s, "runtimes_s": runtimes}

    def with_ior(tag: str) -> PeerFigure:
        prefix = f"{target.new_dir(f'{tag}-ior')}/ior"
        paths = hpc.ior_paths(prefix, ranks)
        target.register(paths, writer=Writer.BENCHMARK)
        result = hpc.run_ior(
            "write", prefix, ranks, size, transfer, ior=settings.ior, timeout_s=settings.timeout_s
        )
        target.remove_files(paths)
        return result.bytes_per_s, result.to_json()

    return with_ior if peer == "ior" else with_fio


def compare_write(target: Target, settings: BenchSettings) -> Comparison:
    ranks, size, transfer = settings.ranks, settings.bytes_per_rank, settings.transfer
    peer_name = settings.peer_for("write")
    comparison = Comparison(
        "write",
        "bytes/s",
        {"target": target.url, "ranks": ranks, "bytes_per_rank": size, "transfer": transfer},
        target.facts.memory_backed,
        peer_name,
    )
    target.check_room(ranks * size * 2, f"one suite and one {peer_name} checkpoint")
    run_id = secrets.randbits(63)
    pool, idle = _pool_with_idle_rss(ranks, settings.timeout_s)
    peaks = [0] * ranks
    peer = _write_peer(target, settings, peer_name)
    try:

        def suite(tag: str) -> BurstResult:
            suite_dir = target.new_dir(f"{tag}-suite")
            shards = _shards(suite_dir, ranks, size, transfer, run_id)
            target.register([s.path for s in shards], writer=Writer.BENCHMARK)
            burst = run_write_burst(pool, target.spec, shards, settings.timeout_s)
            target.remove_files([s.path for s in shards])
            return burst

        for burst, (figure, detail), first in timed_pairs(settings, "w", suite, peer):
            for record in burst.ranks:
                peaks[record.rank] = max(
                    peaks[record.rank], detail_as(record, WriteDetail).peak_rss_bytes
                )
            comparison.pairs.append(
                Pair(
                    burst.aggregate_bytes_per_s,
                    figure,
                    {
                        "span_s": burst.span_s,
                        "start_skew_s": burst.start_skew_s,
                        "slowest_phases_s": burst.slowest.phases_s,
                        "generate_s_max": max(
                            detail_as(r, WriteDetail).generate_s for r in burst.ranks
                        ),
                    },
                    detail,
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


def _read_peer(
    target: Target,
    settings: BenchSettings,
    peer: str,
    suite_paths: list[str],
    notes: list[str],
) -> Callable[[str], PeerFigure]:
    """One timed read by fio or IOR of the suite's own files (IOR through hard links under
    its names; where the target refuses links, of files IOR writes once here, untimed, and
    ``notes`` says so); either way rank i reads the file rank i + shift wrote, its pages
    dropped first as the suite's readback drops them."""
    ranks, size, transfer = settings.ranks, settings.bytes_per_rank, settings.transfer
    if peer == "fio":
        order = [suite_paths[(rank + settings.shift) % ranks] for rank in range(ranks)]
        job = fio.read_job(
            order,
            size,
            transfer,
            direct=settings.direct,
            invalidate=True,
            thread=not settings.fio_processes,
        )

        def with_fio(_tag: str) -> PeerFigure:
            result = fio.run_fio(job, settings.fio)
            if result.total_bytes != ranks * size:
                raise fio.FioError(f"fio read {result.total_bytes} B, expected {ranks * size}")
            return result.aggregate_bytes_per_s, {"span_s": result.span_s}

        return with_fio

    prefix = f"{target.new_dir('read-ior')}/ior"
    paths = hpc.ior_paths(prefix, ranks)
    target.register(paths, writer=Writer.BENCHMARK)
    refused = _link_all(suite_paths, paths)
    if refused is None:
        notes.append("IOR read the suite's own files (hard links under IOR's names)")
    else:
        # Files written at another time can sit in other memory: on tmpfs here, files written
        # later read up to a fifth faster, whatever the reader; the same files rule that out.
        notes.append(f"IOR read files it wrote itself: the target refused hard links ({refused})")
        hpc.run_ior(
            "write", prefix, ranks, size, transfer, ior=settings.ior, timeout_s=settings.timeout_s
        )

    def with_ior(_tag: str) -> PeerFigure:
        for path in paths:
            pagecache.drop_pages(path)
        result = hpc.run_ior(
            "read",
            prefix,
            ranks,
            size,
            transfer,
            shift=settings.shift,
            direct=settings.direct,
            ior=settings.ior,
            timeout_s=settings.timeout_s,
        )
        return result.bytes_per_s, result.to_json()

    return with_ior


def _link_all(sources: list[str], links: list[str]) -> str | None:
    """Hard-link each of ``sources`` as its ``links`` entry (registered, inside the run
    directory); None when all are made, else why not (what was made is left for cleanup)."""
    for source, link in zip(sources, links, strict=True):
        try:
            os.link(source, link)
        except OSError as error:
            return errno.errorcode.get(error.errno or 0, str(error.errno))
    return None


def compare_read(target: Target, settings: BenchSettings) -> Comparison:
    ranks, size, transfer = settings.ranks, settings.bytes_per_rank, settings.transfer
    peer_name = settings.peer_for("read")
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
        peer_name,
    )
    copies = 2 if peer_name == "ior" else 1
    target.check_room(ranks * size * copies, "the checkpoints to read back")
    run_id = secrets.randbits(63)
    pool = RankPool(ranks)
    try:
        directory = target.new_dir("read")
        shards = _shards(directory, ranks, size, transfer, run_id)
        target.register([s.path for s in shards], writer=Writer.BENCHMARK)
        run_write_burst(pool, target.spec, shards, settings.timeout_s)  # untimed: the files
        peer = _read_peer(target, settings, peer_name, [s.path for s in shards], comparison.notes)

        def suite(_tag: str) -> ReadResult:
            # Rank i reads what rank i+shift wrote, as the suite's readback does.
            return run_readback(
                pool,
                target.spec,
                shards,
                settings.timeout_s,
                shift=settings.shift,
                direct=settings.direct,
                drop_cache=True,
            )

        for read, (figure, detail), first in timed_pairs(settings, "r", suite, peer):
            comparison.pairs.append(
                Pair(
                    read.burst.aggregate_bytes_per_s,
                    figure,
                    {
                        "span_s": read.burst.span_s,
                        "start_skew_s": read.burst.start_skew_s,
                        "resident_fraction": read.resident_fraction,
                        "memory_backed": read.memory_backed,
                        "direct": read.direct,
                        "ranks": [
                            {
                                "rank": r.rank,
                                "start_s": r.start_s,
                                "end_s": r.end_s,
                                **r.phases_s,
                                "verify_s": detail_as(r, ReadFilesDetail).verify_s,
                            }
                            for r in read.burst.ranks
                        ],
                    },
                    detail,
                    first,
                )
            )
    finally:
        pool.close()
    return comparison


def compare_create(target: Target, settings: BenchSettings) -> Comparison:
    """The storm's create+close rate against fio's ``filecreate``."""
    return compare_storm(target, settings, "create")[0]


def compare_metadata(target: Target, settings: BenchSettings) -> list[Comparison]:
    """The storm's create, stat and unlink against mdtest's ``-F -C -T -r``."""
    return compare_storm(target, settings, "metadata")


def _suite_storm(
    target: Target, settings: BenchSettings, pool: RankPool, run_id: int, phases: tuple[str, ...]
) -> Callable[[str], dict[str, tuple[float, dict[str, Any]]]]:
    """One storm in a new directory: a pure create+close (fio's filecreate, mdtest's ``-C``
    without ``-w``), or the checklist's create, 4 KiB write, fsync and close (``--variant
    checklist``), then, where asked, a stat of every file and an unlink of every file, each
    phase from a common start over the pool's ranks."""
    ranks, files = settings.ranks, settings.files
    per_rank = -(-files // ranks)

    def suite(tag: str) -> dict[str, tuple[float, dict[str, Any]]]:
        suite_dir = target.new_dir(f"{tag}-suite")
        files_ = storm_files(suite_dir, per_rank * ranks, per_rank)
        paths = [f.path for f in files_]
        target.register(paths, writer=Writer.BENCHMARK)
        storm = run_metadata_storm(
            pool,
            target.spec,
            suite_dir,
            files_,
            settings.timeout_s,
            run_id=run_id,
            write_bytes=settings.storm_write_bytes,
            fsync=settings.storm_fsync,
            commit=False,
        )
        figures = {
            "create": (
                storm.create_close_rate_per_s,
                {"span_s": storm.create.span_s, "io": storm.io, "ops": list(storm.create.raw_s)},
            )
        }
        if "stat" in phases:
            listing = run_restore_listing(pool, target.spec, suite_dir, settings.timeout_s)
            figures["stat"] = (listing.stat.rate_per_s, {"span_s": listing.stat.span_s})
        if "unlink" in phases:
            unlink = run_delete_storm(pool, target.spec, paths, settings.timeout_s)
            target.forget_removed(paths)
            figures["unlink"] = (unlink.rate_per_s, {"span_s": unlink.span_s})
        else:
            target.remove_files(paths)
        return figures

    return suite


def _storm_peer(
    target: Target, settings: BenchSettings, peer: str
) -> Callable[[str], dict[str, tuple[float, dict[str, Any]]]]:
    ranks, files = settings.ranks, settings.files
    per_rank = -(-files // ranks)

    def with_fio(tag: str) -> dict[str, tuple[float, dict[str, Any]]]:
        fio_dir = target.new_dir(f"{tag}-fio")
        paths = fio.create_job_paths(fio_dir, ranks, per_rank)
        target.register(paths, writer=Writer.BENCHMARK)
        result = fio.run_fio(
            fio.create_job(fio_dir, ranks, per_rank, thread=not settings.fio_processes),
            settings.fio,
        )
        target.remove_files(paths)
        if result.total_ios != len(paths):
            raise fio.FioError(f"fio created {result.total_ios} files, expected {len(paths)}")
        return {"create": (result.aggregate_iops, {"span_s": result.span_s})}

    def with_mdtest(tag: str) -> dict[str, tuple[float, dict[str, Any]]]:
        directory = target.new_dir(f"{tag}-mdtest")
        try:
            result = hpc.run_mdtest(
                f"{directory}/tree",
                ranks,
                per_rank,
                write_bytes=settings.storm_write_bytes,
                sync=settings.storm_fsync,
                mdtest=settings.mdtest,
                timeout_s=settings.timeout_s,
            )
        finally:
            target.claim_tree(
                directory, writer=Writer.BENCHMARK
            )  # what a failed mdtest left, for the cleanup
        return {phase: (rate, {}) for phase, rate in result.rates_per_s.items()}

    return with_mdtest if peer == "mdtest" else with_fio


def compare_storm(target: Target, settings: BenchSettings, kind: str) -> list[Comparison]:
    """``create`` (against fio: one comparison) or ``metadata`` (against mdtest: create,
    stat and unlink, three comparisons from the same interleaved repeats)."""
    peer_name = settings.peer_for(kind)
    phases = ("create",) if kind == "create" else tuple(hpc.MDTEST_PHASES)
    ranks, files = settings.ranks, settings.files
    per_rank = -(-files // ranks)
    facts = {"target": target.url, "ranks": ranks, "files": per_rank * ranks}
    if kind == "metadata":
        facts["variant"] = settings.variant
    comparisons = {
        phase: Comparison(phase, "files/s", dict(facts), target.facts.memory_backed, peer_name)
        for phase in phases
    }
    run_id = secrets.randbits(63)
    pool = RankPool(ranks)
    try:
        pool.pids()  # start the ranks before the first timed storm
        suite = _suite_storm(target, settings, pool, run_id, phases)
        peer = _storm_peer(target, settings, peer_name)
        for ours, theirs, first in timed_pairs(settings, "c", suite, peer):
            for phase, comparison in comparisons.items():
                (mine, my_detail), (their, their_detail) = ours[phase], theirs[phase]
                comparison.pairs.append(Pair(mine, their, my_detail, their_detail, first))
    finally:
        pool.close()
    return list(comparisons.values())


PEERS: dict[str, tuple[str, ...]] = {
    "write": ("fio", "ior"),
    "read": ("fio", "ior"),
    "create": ("fio",),
    "metadata": ("mdtest",),
}
"""Each kind's peer tools; the first is the default."""

VARIANTS = ("pure", "checklist")
"""The metadata storm's variants (``--variant``): no write and no fsync, or the checklist's."""

COMPARISONS: dict[str, Callable[[Target, BenchSettings], Comparison | list[Comparison]]] = {
    "write": compare_write,
    "read": compare_read,
    "create": compare_create,
    "metadata": compare_metadata,
}


DEFAULTS = BenchSettings()
"""The command line's defaults are the settings' own."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ckptgate.benchmarks.compare",
        description="Compare a suite driver with fio, IOR or mdtest on the same target, "
        "interleaved.",
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
    add_pair_options(parser, DEFAULTS)
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
    parser.add_argument(
        "--peer", default=None, choices=sorted({p for peers in PEERS.values() for p in peers}),
        help="the tool to compare with: " + "; ".join(
            f"{kind}: {' or '.join(peers)}" for kind, peers in PEERS.items()
        ) + " (default: the first)",
    )  # fmt: skip
    parser.add_argument("--ior", default=None, metavar="PATH", help="default: ior on PATH")
    parser.add_argument("--mdtest", default=None, metavar="PATH", help="default: mdtest on PATH")
    parser.add_argument(
        "--variant", default=DEFAULTS.variant, choices=VARIANTS,
        help="metadata: pure (create+close; mdtest -C) or checklist (create, 4 KiB write, "
        f"fsync, close; mdtest -C -w 4096 -y) (default: {DEFAULTS.variant})",
    )  # fmt: skip
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures here")
    return parser


def _peer_version(settings: BenchSettings, peer: str) -> str:
    """The peer's version (fio) or path (IOR, mdtest, with mpirun); ``PeerError`` if absent."""
    if peer == "fio":
        major, minor = fio.fio_version(fio.fio_binary(settings.fio))
        return f"fio {major}.{minor}"
    tool = hpc.find_tool(peer, settings.ior if peer == "ior" else settings.mdtest)
    return f"{tool} under {hpc.find_tool('mpirun')}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = BenchSettings.from_args(args)
        peer = settings.peer_for(args.kind)
    except ValueError as error:
        parser.error(str(error))
    sigterm_unwinds()  # from the first instant: a cancel at any point removes what was made
    try:
        version = _peer_version(settings, peer)
    except PeerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    ran = run_in_directory(
        args.target, peer, lambda target: COMPARISONS[args.kind](target, settings), (PeerError,)
    )
    if isinstance(ran, int):
        return ran
    target, outcome = ran
    comparisons = outcome if isinstance(outcome, list) else [outcome]
    for comparison in comparisons:
        comparison.settings["fs_type"] = target.facts.fs_type
        comparison.settings["peer"] = version
        if peer == "fio":
            comparison.settings["fio_jobs"] = "processes" if settings.fio_processes else "threads"
        comparison.settings["settle_s"] = settings.settle_s
        comparison.run_dir = target.run_dir
    print("\n\n".join(render(c) for c in comparisons))
    if args.json:
        figures: Any = (
            comparisons[0].to_json()
            if len(comparisons) == 1
            else {"comparisons": [c.to_json() for c in comparisons]}
        )
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
