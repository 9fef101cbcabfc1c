"""``ckptgate verify`` against fio reading the same files: does verify run at the read speed?

    ckptgate bench verify --target DIR [--files 2] [--file-mib 1024] [--jobs 2] [--repeats 7]

Under ``--target`` the benchmark makes a run directory with ``--files`` stamped files of
``--file-mib`` each, written and listed in the run's manifest as a write burst writes them
(``BlockStamper`` on the stamp grid, ``register_shards``); then, interleaved and the order
alternated (``benchmarks.pairs.timed_pairs``), ``verify_run`` of the directory with ``--jobs``
files at a time, and fio reading the same files whole, one job per file (``read_job``; jobs as
threads). The figure on both sides is bytes over seconds: every byte verify checked over its
wall time, fio's group bandwidth. Neither drops the page cache (verify does not: it reads what
the storage gives a client now), so on a disk target both read what the writes left cached,
the worst case for verify's own CPU cost, which is the question. The directory is removed at
the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.benchmarks import fio
from ckptgate.benchmarks.command import add_pair_options, run_in_directory, show
from ckptgate.benchmarks.pairs import Comparison, Pair, timed_pairs
from ckptgate.engine.datagen import StampKey, write_stamped
from ckptgate.rundir.manifest import Writer
from ckptgate.rundir.target import Target
from ckptgate.rundir.verify import DEFAULT_JOBS, verify_run
from ckptgate.workloads.fileplan import ShardFile

MiB = 2**20
TRANSFER_BYTES = 16 * MiB
RUN_ID = 31


@dataclass(frozen=True)
class Settings:
    warmup: int = 1
    repeats: int = 7
    settle_s: float = 0.0


def _files(target: Target, count: int, size: int, transfer: int) -> list[str]:
    directory = target.new_dir("verify")
    shards = [
        ShardFile(rank, f"{directory}/__{rank}_0.distcp", size, RUN_ID, transfer)
        for rank in range(count)
    ]
    target.register_shards(shards, writer=Writer.WRITE_BURST)
    for shard in shards:
        stamp = StampKey(RUN_ID, shard.global_rank)
        write_stamped(shard.path, stamp, transfer, size)
    return [shard.path for shard in shards]


def compare_verify(
    target: Target, files: int, size: int, jobs: int, settings: Settings
) -> Comparison:
    transfer = min(TRANSFER_BYTES, size)  # fio refuses a file smaller than its block
    paths = _files(target, files, size, transfer)
    run_dir = target.run_dir
    assert run_dir is not None
    comparison = Comparison(
        "verify",
        "bytes/s",
        {"files": files, "file_bytes": size, "jobs": jobs, "transfer_bytes": transfer},
        target.facts.memory_backed,
    )
    job = fio.read_job(paths, size, transfer, invalidate=False)

    def suite(tag: str) -> dict[str, Any]:
        started = time.perf_counter()
        report = verify_run(run_dir, jobs=jobs)
        seconds = time.perf_counter() - started
        if not report.ok or report.verified_bytes != files * size:
            raise RuntimeError(f"the benchmark's own run did not verify: {report.summary()}")
        return {"bytes_per_s": report.verified_bytes / seconds, "seconds": seconds}

    def peer(tag: str) -> fio.FioResult:
        return fio.run_fio(job)

    for ours, theirs, first in timed_pairs(settings, "verify", suite, peer, target.flush):
        comparison.pairs.append(
            Pair(ours["bytes_per_s"], theirs.aggregate_bytes_per_s, ours, theirs.to_json(), first)
        )
    return comparison


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ckptgate bench verify", description=__doc__)
    parser.add_argument("--target", required=True, help="a local directory (a run dir is made)")
    parser.add_argument("--files", type=int, default=DEFAULT_JOBS, help="default: %(default)s")
    parser.add_argument("--file-mib", type=int, default=1024, help="default: %(default)s")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="default: %(default)s")
    add_pair_options(parser, Settings())
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    for name in ("files", "file_mib", "jobs", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: allowed: 1 or more")
    settings = Settings(args.warmup, args.repeats, args.settle_s)
    size = args.file_mib * MiB

    def run(target: Target) -> Comparison:
        return compare_verify(target, args.files, size, args.jobs, settings)

    done = run_in_directory(args.target, "ckptgate bench verify", run, (fio.FioError,))
    if isinstance(done, int):
        return done
    _, comparison = done
    show(comparison, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
