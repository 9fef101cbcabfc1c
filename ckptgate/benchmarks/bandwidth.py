"""``ckptgate bench write`` and ``read``: the write burst against fio's ``rw=write`` or IOR's
``-w -e``, and the readback against fio's ``rw=read`` or IOR's ``-r -E -C`` of the same files,
with the same ranks, files, sizes and transfer size, as interleaved pairs
(ckptgate.benchmarks.compare says how they are timed and judged).
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable
from typing import Any

from ckptgate.benchmarks import fio, hpc
from ckptgate.benchmarks.pairs import (
    Comparison,
    Pair,
    timed_pairs,
)
from ckptgate.benchmarks.settings import BenchSettings
from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import BurstResult, detail_as
from ckptgate.rundir.manifest import Writer
from ckptgate.rundir.target import Target
from ckptgate.storage import pagecache
from ckptgate.workloads.readback import ReadFilesDetail, ReadResult, run_readback
from ckptgate.workloads.write_burst import (
    ShardFile,
    WriteDetail,
    peak_rss_bytes,
    run_write_burst,
    shard_file_name,
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

        for burst, (figure, detail), first in timed_pairs(settings, "w", suite, peer, target.flush):
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

        for read, (figure, detail), first in timed_pairs(settings, "r", suite, peer, target.flush):
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
