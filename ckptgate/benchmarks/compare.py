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
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ckptgate.benchmarks import fio, hpc
from ckptgate.benchmarks.bandwidth import compare_read, compare_write
from ckptgate.benchmarks.command import add_pair_options, run_in_directory
from ckptgate.benchmarks.pairs import (
    Comparison,
    PeerError,
    render,
)
from ckptgate.benchmarks.settings import FILE_NAMES, PEERS, VARIANTS, BenchSettings, parse_size
from ckptgate.benchmarks.storms import _suite_storm, compare_create, compare_metadata, compare_storm
from ckptgate.engine.interrupts import sigterm_unwinds
from ckptgate.rundir.target import Target
from ckptgate.sizing.units import MiB
from ckptgate.workloads.storm.loops import LOOP_CHOICES

__all__ = [
    "COMPARISONS",
    "DEFAULTS",
    "PEERS",
    "VARIANTS",
    "BenchSettings",
    "_suite_storm",
    "build_parser",
    "compare_create",
    "compare_metadata",
    "compare_read",
    "compare_storm",
    "compare_write",
    "main",
    "parse_size",
]
"""The command line's names, and those of the comparisons' modules (settings, bandwidth,
storms) that callers import from here."""


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
    parser.add_argument(
        "--storm-loop", default=DEFAULTS.storm_loop, choices=LOOP_CHOICES,
        help="metadata: the storm's per-file loop (native: C; python). Default: auto",
    )  # fmt: skip
    parser.add_argument(
        "--file-names", default=DEFAULTS.file_names, choices=FILE_NAMES,
        help="create, metadata: the suite's file names: dcp (__R_I.distcp, as the checklist) or "
        f"peer (the peer's own: file.mdtest.R.I, create.R.I) (default: {DEFAULTS.file_names})",
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
