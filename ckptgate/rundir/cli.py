"""``ckptgate verify RUN_DIR`` and ``ckptgate clean TARGET``: a kept run re-checked, a dead
run's leftovers removed. Both read the run's manifest (``ckptgate.rundir.manifest``) and touch
nothing it does not list; a user mistake is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ckptgate.rundir.clean import clean_run
from ckptgate.rundir.lease import FORCE_STALE_AFTER_S, LEASE_FRESH_S
from ckptgate.rundir.manifest import ManifestDamaged, ManifestError
from ckptgate.rundir.runs import find_runs, judge_run
from ckptgate.rundir.verify import DEFAULT_JOBS, Problem, verify_run


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """The arguments, or the exit status where parsing ended (``--help``: 0, a mistake: 2)."""
    try:
        return parser.parse_args(list(argv))
    except SystemExit as stop:
        return int(stop.code or 0)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def _verify_parser() -> _Parser:
    parser = _Parser(
        prog="ckptgate verify",
        description=(
            "Re-check every byte of a run directory kept with --keep, after a power cut or a "
            "failover of the storage: each file its manifest lists is read and every stamped "
            "byte recomputed; files the suite did not stamp (PyTorch DCP's) are checked by "
            "size. Nothing the manifest does not list is read. One line per problem (file, "
            "offset), then a summary; exit status 0 only if every listed byte verified, 1 if "
            "something did not, 2 for a usage error."
        ),
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="the kept run directory (<target>/ckptgate-...)"
    )
    parser.add_argument(
        "--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
        help="files read and checked at once (default: %(default)s, this machine's cores up "
        "to 8): one stream reads a big checkpoint at one stream's speed",
    )  # fmt: skip
    return parser


def verify_main(argv: Sequence[str]) -> int:
    """``ckptgate verify``."""
    args = _parse(_verify_parser(), argv)
    if isinstance(args, int):
        return args
    if not os.path.isdir(args.run_dir):
        print(f"ckptgate verify: {args.run_dir}: no such directory", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"ckptgate verify: --jobs {args.jobs}: allowed: 1 or more", file=sys.stderr)
        return 2

    def show(problem: Problem) -> None:
        print(f"ckptgate verify: {problem.line()}", flush=True)

    try:
        report = verify_run(args.run_dir, on_problem=show, jobs=args.jobs)
    except ManifestDamaged as error:
        print(
            f"ckptgate verify {args.run_dir}: FAILED: {error}: the run's own record of what it "
            "wrote did not survive, so nothing in it can be vouched for"
        )
        return 1
    except ManifestError as error:
        print(
            f"ckptgate verify: {error} (a run kept with --keep holds one per node)",
            file=sys.stderr,
        )
        return 2
    for note in report.notes:
        print(f"ckptgate verify: note: {note}")
    print(report.summary())
    return 0 if report.ok else 1


def _clean_parser() -> _Parser:
    parser = _Parser(
        prog="ckptgate clean",
        description=(
            "Remove what dead ckptgate runs left on a target: for each run directory "
            "(TARGET/ckptgate-*, or TARGET itself if it is one) whose run is provably dead "
            "(its host is this one and its process is gone), unlink each file its manifest "
            "lists, then rmdir the directories it lists, deepest first. Nothing else is "
            "removed: anything else found stays and is reported. A live run (fresh lease, or "
            "its process running here) is refused. Exit status 0 when every dead run found "
            "was removed whole and none refused, 1 otherwise, 2 for a usage error."
        ),
    )
    parser.add_argument("target", metavar="TARGET", help="the target directory, or one run dir")
    parser.add_argument(
        "--force-stale",
        action="store_true",
        help=(
            "also remove runs that cannot be proved dead (another host), once their lease is "
            "older than --stale-after-s (default: off)"
        ),
    )
    parser.add_argument(
        "--stale-after-s",
        metavar="SECONDS",
        type=float,
        default=FORCE_STALE_AFTER_S,
        help=f"how old a lease --force-stale needs (default: {FORCE_STALE_AFTER_S:.0f})",
    )
    parser.add_argument(
        "--include-kept",
        action="store_true",
        help="also remove runs kept with --keep under TARGET (default: they stay)",
    )
    return parser


def clean_main(argv: Sequence[str]) -> int:
    """``ckptgate clean``."""
    args = _parse(_clean_parser(), argv)
    if isinstance(args, int):
        return args
    root = args.target.rstrip("/") or "/"
    if not os.path.isdir(root):
        print(f"ckptgate clean: {args.target}: no such directory", file=sys.stderr)
        return 2
    if args.stale_after_s < LEASE_FRESH_S:
        print(
            f"ckptgate clean: --stale-after-s {args.stale_after_s:g}: below the "
            f"{LEASE_FRESH_S:.0f} s after which a lease counts as stale",
            file=sys.stderr,
        )
        return 2
    single = judge_run(root)
    runs = [single] if single is not None else find_runs(root)
    include_kept = args.include_kept or single is not None
    if not runs:
        print(f"ckptgate clean: no ckptgate run directories with a manifest under {root}")
        return 0
    status = 0
    for run in runs:
        for problem in run.problems:
            print(f"ckptgate clean: {problem}")
            status = 1
        if run.state == "ended" and not include_kept:
            print(f"ckptgate clean: kept: {run.run_dir} (--include-kept removes it)")
            continue
        result = clean_run(run, force_stale=args.force_stale, stale_after_s=args.stale_after_s)
        if result.refused is not None:
            print(f"ckptgate clean: {result.refused}")
            status = 1
            continue
        print(
            f"ckptgate clean: {run.run_dir}: removed {result.removed_files} files and "
            f"{result.removed_dirs} directories its manifest lists"
        )
        for left in result.left:
            print(f"ckptgate clean: left in place (holds what the run did not list): {left}")
            status = 1
        for error in result.errors:
            print(f"ckptgate clean: could not remove {error}")
            status = 1
    return status
