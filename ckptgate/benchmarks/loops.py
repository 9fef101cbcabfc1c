"""The storm's per-file loops against bare Python loops of the same system calls, one process.

    python -m ckptgate.benchmarks.loops --target /dev/shm --files 16384 --repeats 8

Each loop the storm and the restore listing run per file, as a rank runs it (the rank task
itself, in this process, with a real progress slot: ``ckptgate.engine.pool.inline_context``),
against a loop that makes only the same system calls through ``os`` and reads the clock
twice, around the whole loop:

- ``create``: create (O_CREAT|O_EXCL) and close, the benchmark's pure storm (mdtest ``-C``);
- ``create-write-fsync``: create, one 4 KiB write, fsync, close: the checklist's storm
  (``checks/metadata.py``; mdtest ``-C -w 4096 -y``);
- ``stat``: the restore listing's stat of every file (mdtest ``-T``);
- ``unlink``: the delete storm (mdtest ``-r``).

Same count and names either side (each side its own directory, so both create into an empty
one; both stat and unlink their own), interleaved and order alternated per repeat, the median
of the per-repeat ratios suite/bare with its 90 % bootstrap interval (``benchmarks.pairs``).
The suite's figure is files over its task's span (release to the phase's mark), what a storm's
rate is made of; the bare loop's is files over its two clock reads.

The suite's own floor: every loop's suite rate is also held against ``LOOP_FLOOR_FILES_PER_S``
(the documented floor that ``tests/workloads/test_storm_floor.py`` keeps every shipped
profile's metadata requirement ten times under): on a memory-backed target, where the storage
costs least, a loop below it fails the run (exit status 1), since the floor the test relies
on would then not hold; on a disk the storage's own time is in the loop, and the line is
shown without a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.benchmarks.command import add_pair_options, run_in_directory
from ckptgate.benchmarks.pairs import Comparison, Pair, render, timed_pairs
from ckptgate.engine.interrupts import sigterm_unwinds
from ckptgate.engine.pool import FILES_DONE, inline_context
from ckptgate.engine.records import RankResult
from ckptgate.rundir.manifest import Writer
from ckptgate.rundir.target import Target
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.storm import WRITE_BYTES, floor, storm_files
from ckptgate.workloads.storm.create import create_task
from ckptgate.workloads.storm.delete import unlink_task
from ckptgate.workloads.storm.listing import stat_task

LOOPS = ("create", "create-write-fsync", "stat", "unlink")
"""The per-file loops, in the order each side runs them."""

PEER = "bare"
"""The other side's name in the tables: a bare ``os`` loop in the same process."""
RECORDED = "bare-recorded"
"""The bare loop with each operation's clock read and the files-done store (``--peer``)."""

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_MODE = 0o644  # the POSIX backend's FILE_MODE

Figures = dict[str, tuple[float, dict[str, Any]]]


@dataclass(frozen=True)
class LoopSettings:
    """What the benchmark runs (each field is the option of the same name)."""

    files: int = 16384
    repeats: int = 8
    warmup: int = 1
    settle_s: float = 0.0

    def __post_init__(self) -> None:
        if self.files < 1 or self.repeats < 1 or self.warmup < 0:
            raise ValueError("--files and --repeats must be positive, --warmup not negative")


def _span_s(result: RankResult) -> float:
    """A task's span: its release to its last phase mark (monotonic seconds)."""
    return result.marks_mono[-1][1] - result.start_mono


def _rate(files: int, seconds: float) -> tuple[float, dict[str, Any]]:
    return files / seconds, {"span_s": seconds, "per_file_s": seconds / files}


def _suite_side(target: Target, settings: LoopSettings, run_id: int) -> Callable[[str], Figures]:
    """Each loop as the storm's rank task runs it, in this process."""
    ctx = inline_context()
    plain = RunOptions(target.spec, fsync=False)
    durable = RunOptions(target.spec, fsync=True)
    n = settings.files

    def suite(tag: str) -> Figures:
        directory = target.new_dir(f"{tag}-suite")
        files = storm_files(directory, n, n)
        paths = [f.path for f in files]
        target.register(paths, writer=Writer.BENCHMARK)
        figures = {
            "create": create_task(ctx, options=plain, files=files, run_id=run_id, write_bytes=0)
        }
        figures["stat"] = stat_task(ctx, options=plain, paths=paths)
        figures["unlink"] = unlink_task(ctx, options=plain, paths=paths)
        figures["create-write-fsync"] = create_task(
            ctx, options=durable, files=files, run_id=run_id, write_bytes=WRITE_BYTES
        )
        target.remove_files(paths)  # untimed
        target.remove_dirs([directory])  # each side ends with its directory gone
        return {loop: _rate(n, _span_s(figures[loop])) for loop in LOOPS}

    return suite


def _bare_side(target: Target, settings: LoopSettings) -> Callable[[str], Figures]:
    """The same system calls in plain ``os`` loops, one clock read before and one after."""
    n, clock = settings.files, time.monotonic
    open_, close, write, fsync, stat, unlink = (
        os.open, os.close, os.write, os.fsync, os.stat, os.unlink
    )  # fmt: skip

    def bare(tag: str) -> Figures:
        directory = target.new_dir(f"{tag}-bare")
        paths = [f.path for f in storm_files(directory, n, n)]
        target.register(paths, writer=Writer.BENCHMARK)
        t0 = clock()
        for path in paths:
            close(open_(path, _CREATE_FLAGS, _MODE))
        t1 = clock()
        for path in paths:
            stat(path)
        t2 = clock()
        for path in paths:
            unlink(path)
        t3 = clock()
        # a buffer per file made just before, as the suite's task makes its stamped payloads
        # before its start: the same bytes in memory either side, not one buffer kept hot
        payloads = [secrets.token_bytes(WRITE_BYTES) for _ in paths]
        t4 = clock()
        for path, payload in zip(paths, payloads, strict=True):
            fd = open_(path, _CREATE_FLAGS, _MODE)
            write(fd, payload)
            fsync(fd)
            close(fd)
        t5 = clock()
        target.remove_files(paths)
        target.remove_dirs([directory])
        # the payloads' making (t3 to t4) is in neither span: it was in the unlink's
        spans = {"create": t1 - t0, "stat": t2 - t1, "unlink": t3 - t2}
        spans["create-write-fsync"] = t5 - t4
        return {loop: _rate(n, spans[loop]) for loop in LOOPS}

    return bare


def _recorded_side(target: Target, settings: LoopSettings) -> Callable[[str], Figures]:
    """The bare loops plus what the report needs of every file and nothing else: one
    ``perf_counter`` read after each call, appended to a list (each operation's latency, for
    p50, p99 and max), and one files-done store per file into a real progress slot (the stall
    watch's hung file). Python's floor for a loop that records every operation: the suite
    against it is what the suite adds beyond the recording."""
    n, clock = settings.files, time.perf_counter
    open_, close, write, fsync, stat, unlink = (
        os.open, os.close, os.write, os.fsync, os.stat, os.unlink
    )  # fmt: skip
    done = inline_context().files_done()

    def recorded(tag: str) -> Figures:
        directory = target.new_dir(f"{tag}-recorded")
        paths = [f.path for f in storm_files(directory, n, n)]
        target.register(paths, writer=Writer.BENCHMARK)
        spans: dict[str, float] = {}
        stamps: list[float] = []  # a list of its own per loop, as each rank task has
        stamp = stamps.append
        start = clock()
        for i, path in enumerate(paths):
            done[FILES_DONE] = i
            fd = open_(path, _CREATE_FLAGS, _MODE)
            stamp(clock())
            close(fd)
            stamp(clock())
        spans["create"] = clock() - start
        stamps = []
        stamp = stamps.append
        start = clock()
        for i, path in enumerate(paths):
            done[FILES_DONE] = i
            stat(path)
            stamp(clock())
        spans["stat"] = clock() - start
        stamps = []
        stamp = stamps.append
        start = clock()
        for i, path in enumerate(paths):
            done[FILES_DONE] = i
            unlink(path)
            stamp(clock())
        spans["unlink"] = clock() - start
        payloads = [secrets.token_bytes(WRITE_BYTES) for _ in paths]
        stamps = []
        stamp = stamps.append
        start = clock()
        for i, path in enumerate(paths):
            done[FILES_DONE] = i
            fd = open_(path, _CREATE_FLAGS, _MODE)
            stamp(clock())
            write(fd, payloads[i])
            stamp(clock())
            fsync(fd)
            stamp(clock())
            close(fd)
            stamp(clock())
        spans["create-write-fsync"] = clock() - start
        target.remove_files(paths)
        return {loop: _rate(n, spans[loop]) for loop in LOOPS}

    return recorded


PEERS: dict[str, Callable[[Target, LoopSettings], Callable[[str], Figures]]] = {
    PEER: _bare_side,
    RECORDED: _recorded_side,
}
"""``--peer``: what the suite's loops are held against."""


def compare_loops(target: Target, settings: LoopSettings, peer: str = PEER) -> list[Comparison]:
    """Every loop, suite against ``peer`` (``PEERS``), from the same interleaved repeats."""
    facts = {"target": target.url, "files": settings.files, "process": "one"}
    comparisons = {
        loop: Comparison(loop, "files/s", dict(facts), target.facts.memory_backed, peer)
        for loop in LOOPS
    }
    suite = _suite_side(target, settings, secrets.randbits(63))
    bare = PEERS[peer](target, settings)
    for ours, theirs, first in timed_pairs(settings, "l", suite, bare, target.flush):
        for loop, comparison in comparisons.items():
            (mine, my_detail), (their, their_detail) = ours[loop], theirs[loop]
            comparison.pairs.append(Pair(mine, their, my_detail, their_detail, first))
    return list(comparisons.values())


def floor_lines(comparisons: Sequence[Comparison], memory_backed: bool) -> tuple[list[str], bool]:
    """Each loop's median suite rate against ``LOOP_FLOOR_FILES_PER_S`` and against the
    shipped profiles' per-process requirement (``floor.per_process_rate_per_s``); whether
    every loop holds the floor (always True off a memory-backed target: no verdict there)."""
    asked = floor.shipped_per_process_rates()
    worst = max((rate, name) for name, rate in asked.items())
    lines, held = [], True
    for comparison in comparisons:
        median = statistics.median(p.suite for p in comparison.pairs if p.suite is not None)
        below = median < floor.LOOP_FLOOR_FILES_PER_S
        if memory_backed and below:
            verdict, held = "BELOW the documented floor: the floor test no longer holds", False
        elif memory_backed:
            verdict = "holds the documented floor"
        else:
            verdict = "not memory-backed: the storage's time is in the loop, no verdict"
        lines.append(
            f"floor: {comparison.kind} loop {median:,.0f} files/s per process against "
            f"LOOP_FLOOR_FILES_PER_S {floor.LOOP_FLOOR_FILES_PER_S:,} ({verdict}); the most any "
            f"shipped profile asks of one process: {worst[0]:.3g} files/s ({worst[1]}), "
            f"{median / worst[0]:,.0f}x under this loop"
        )
    return lines, held


def build_parser() -> argparse.ArgumentParser:
    defaults = LoopSettings()
    parser = argparse.ArgumentParser(
        prog="python -m ckptgate.benchmarks.loops",
        description="The storm's per-file loops against bare os loops, one process, interleaved.",
    )
    parser.add_argument("--target", required=True, metavar="DIR", help="a local directory")
    parser.add_argument(
        "--files", type=int, default=defaults.files, metavar="N",
        help=f"files per loop (default: {defaults.files})",
    )  # fmt: skip
    parser.add_argument(
        "--peer", choices=sorted(PEERS), default=PEER,
        help=f"'{PEER}': the system calls alone (default); '{RECORDED}': with the clock read "
        "after each call and the files-done store per file that the report needs",
    )  # fmt: skip
    add_pair_options(parser, defaults)
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = LoopSettings(args.files, args.repeats, args.warmup, args.settle_s)
    except ValueError as error:
        parser.error(str(error))
    sigterm_unwinds()  # from the first instant: a cancel at any point removes what was made
    ran = run_in_directory(
        args.target,
        "the loops benchmark",
        lambda target: compare_loops(target, settings, args.peer),
    )
    if isinstance(ran, int):
        return ran
    target, comparisons = ran
    for comparison in comparisons:
        comparison.settings["fs_type"] = target.facts.fs_type
        comparison.run_dir = target.run_dir
    lines, held = floor_lines(comparisons, target.facts.memory_backed)
    print("\n\n".join(render(c) for c in comparisons))
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            figures = {"comparisons": [c.to_json() for c in comparisons], "floor": lines}
            json.dump(figures, out, indent=2)
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
