"""``ckptgate bench create`` and ``metadata``: the metadata storm's create+close rate against
fio's ``filecreate``, and its create, stat and unlink phases against mdtest's ``-F -C -T -r``
(``--variant checklist``: a 4 KiB write and an fsync per file on both sides), as interleaved
pairs (ckptgate.benchmarks.compare says how they are timed and judged).
"""

from __future__ import annotations

import dataclasses
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
from ckptgate.engine.pool import RankPool
from ckptgate.rundir.manifest import Writer
from ckptgate.rundir.target import Target
from ckptgate.workloads.storm import (
    run_delete_storm,
    run_metadata_storm,
    run_restore_listing,
    storm_files,
)

PEER_FILE_NAMES: dict[str, Callable[[int, int], list[str]]] = {
    "mdtest": hpc.mdtest_file_names,
    "fio": fio.create_job_names,
}
"""Each storm peer's names for a rank's files (``--file-names peer``)."""


def compare_create(target: Target, settings: BenchSettings) -> Comparison:
    """The storm's create+close rate against fio's ``filecreate``."""
    return compare_storm(target, settings, "create")[0]


def compare_metadata(target: Target, settings: BenchSettings) -> list[Comparison]:
    """The storm's create, stat and unlink against mdtest's ``-F -C -T -r``."""
    return compare_storm(target, settings, "metadata")


def storm_names(settings: BenchSettings, peer: str) -> list[list[str]] | None:
    """Each rank's storm file names: None for DCP's (``storm_files``'s own), or the peer's
    (``--file-names peer``), so that both sides create the same names in one directory."""
    if settings.file_names == "dcp":
        return None
    return [PEER_FILE_NAMES[peer](rank, settings.files_per_rank) for rank in range(settings.ranks)]


def _suite_storm(
    target: Target,
    settings: BenchSettings,
    pool: RankPool,
    run_id: int,
    phases: tuple[str, ...],
    peer: str,
) -> Callable[[str], dict[str, tuple[float, dict[str, Any]]]]:
    """One storm in a new directory: a pure create+close (fio's filecreate, mdtest's ``-C``
    without ``-w``), or the checklist's create, 4 KiB write, fsync and close (``--variant
    checklist``), then, where asked, a stat of every file and an unlink of every file, each
    phase from a common start over the pool's ranks; each rank's file names DCP's or, with
    ``--file-names peer``, ``peer``'s (``storm_names``)."""
    ranks, per_rank = settings.ranks, settings.files_per_rank
    names = storm_names(settings, peer)
    spec = dataclasses.replace(target.spec, loop=settings.storm_loop)

    def suite(tag: str) -> dict[str, tuple[float, dict[str, Any]]]:
        suite_dir = target.new_dir(f"{tag}-suite")
        files_ = storm_files(suite_dir, per_rank * ranks, per_rank, names)
        paths = [f.path for f in files_]
        target.register(paths, writer=Writer.BENCHMARK)
        storm = run_metadata_storm(
            pool,
            spec,
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
                {
                    "span_s": storm.create.span_s,
                    "io": storm.io,
                    "loop": storm.loop,
                    "ops": list(storm.create.raw_s),
                },
            )
        }
        if "stat" in phases:
            listing = run_restore_listing(pool, spec, suite_dir, settings.timeout_s)
            figures["stat"] = (listing.stat.rate_per_s, {"span_s": listing.stat.span_s})
        if "unlink" in phases:
            unlink = run_delete_storm(pool, spec, paths, settings.timeout_s)
            target.forget_removed(paths)
            figures["unlink"] = (unlink.rate_per_s, {"span_s": unlink.span_s})
        else:
            target.remove_files(paths)
        target.remove_dirs([suite_dir])  # as mdtest removes its tree: no emptied directory
        return figures

    return suite


def _storm_peer(
    target: Target, settings: BenchSettings, peer: str
) -> Callable[[str], dict[str, tuple[float, dict[str, Any]]]]:
    ranks, per_rank = settings.ranks, settings.files_per_rank

    def with_fio(tag: str) -> dict[str, tuple[float, dict[str, Any]]]:
        fio_dir = target.new_dir(f"{tag}-fio")
        paths = fio.create_job_paths(fio_dir, ranks, per_rank)
        target.register(paths, writer=Writer.BENCHMARK)
        result = fio.run_fio(
            fio.create_job(fio_dir, ranks, per_rank, thread=not settings.fio_processes),
            settings.fio,
        )
        target.remove_files(paths)
        target.remove_dirs([fio_dir])
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
        target.remove_dirs([directory])
        return {phase: (rate, {}) for phase, rate in result.rates_per_s.items()}

    return with_mdtest if peer == "mdtest" else with_fio


def compare_storm(target: Target, settings: BenchSettings, kind: str) -> list[Comparison]:
    """``create`` (against fio: one comparison) or ``metadata`` (against mdtest: create,
    stat and unlink, three comparisons from the same interleaved repeats)."""
    peer_name = settings.peer_for(kind)
    phases = ("create",) if kind == "create" else tuple(hpc.MDTEST_PHASES)
    ranks, per_rank = settings.ranks, settings.files_per_rank
    facts = {
        "target": target.url,
        "ranks": ranks,
        "files": per_rank * ranks,
        "file_names": settings.file_names,
    }
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
        suite = _suite_storm(target, settings, pool, run_id, phases, peer_name)
        peer = _storm_peer(target, settings, peer_name)
        for ours, theirs, first in timed_pairs(settings, "c", suite, peer, target.flush):
            for phase, comparison in comparisons.items():
                (mine, my_detail), (their, their_detail) = ours[phase], theirs[phase]
                comparison.pairs.append(Pair(mine, their, my_detail, their_detail, first))
    finally:
        pool.close()
    return list(comparisons.values())
