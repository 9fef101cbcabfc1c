"""What every benchmark's command line shares: the options that time its pairs, and the run
directory it works in, made under ``--target`` and removed at the end, also on failure."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TypeVar

from ckptgate.benchmarks.pairs import Comparison, PairSettings, render
from ckptgate.engine.interrupts import signals_deferred
from ckptgate.fixtures.run.cleanup import what_stayed
from ckptgate.rundir.janitor import TargetHung
from ckptgate.rundir.target import Target, TargetError

Outcome = TypeVar("Outcome")


def add_pair_options(parser: argparse.ArgumentParser, defaults: PairSettings) -> None:
    """``--repeats``, ``--warmup`` and ``--settle-s`` (``benchmarks.pairs.timed_pairs``)."""
    parser.add_argument(
        "--repeats", type=int, default=defaults.repeats, metavar="K",
        help=f"timed pairs (default: {defaults.repeats})",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", type=int, default=defaults.warmup, metavar="K",
        help=f"untimed pairs first (default: {defaults.warmup})",
    )  # fmt: skip
    parser.add_argument(
        "--settle-s", type=float, default=defaults.settle_s, metavar="S",
        help=f"idle seconds before every timed run, either side (default: {defaults.settle_s:g}; "
        "see benchmarks/README.md)",
    )  # fmt: skip


def show(comparison: Comparison, json_path: str | None) -> None:
    """Print the comparison's table, and write its JSON to ``json_path`` where given."""
    print(render(comparison))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(comparison.to_json(), handle, indent=2)


def run_in_directory(
    path: str,
    needs: str,
    run: Callable[[Target], Outcome],
    failures: tuple[type[Exception], ...] = (),
) -> tuple[Target, Outcome] | int:
    """``run`` in a new run directory under ``path``, a local directory: the target and what
    ``run`` returned, or the exit status after one line on stderr: 2 for a target that is not
    a local directory (``needs`` says who needs one) or a ``TargetError``, 1 for one of
    ``failures`` (a peer tool's) or a hung target (a bounded call that did not return, during
    the benchmark or its cleanup), 130 for Ctrl-C or SIGTERM (``sigterm_unwinds``).

    The directory is removed at the end, also on failure or a cancel, with signals deferred
    while it goes, and what stays (not empty, or kept by a hung target) is named. A function,
    not a context manager: a signal between a context manager's ``__enter__`` and its block
    would skip its ``__exit__`` and leave the directory."""
    try:
        target = Target(path)
        try:
            if not target.is_local:
                raise TargetError(f"--target {path}: {needs} needs a local (POSIX) directory")
            target.create_run_dir()
            outcome = run(target)
        finally:
            if target.run_dir is not None:
                with signals_deferred():
                    report = target.cleanup()
                for words in what_stayed(target, report):
                    print(f"warning: {words}", file=sys.stderr)
        if target.hung is not None:  # the figures stand; what the target kept is named above
            print(f"error: the target hung after the benchmark: {target.hung}", file=sys.stderr)
            return 1
        return target, outcome
    except TargetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except TargetHung as error:  # a bounded call (a flush, a removal) did not return
        print(f"error: {error}", file=sys.stderr)
        return 1
    except failures as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as error:
        print(f"interrupted ({error or 'Ctrl-C'}): the run directory is removed", file=sys.stderr)
        return 130


def node_counts(parser: argparse.ArgumentParser, text: str, option: str = "--nodes") -> list[int]:
    """``option``'s comma-separated node counts, each 2 or more, sorted and without repeats;
    a parser error naming the option, what was given and what is allowed otherwise."""
    try:
        counts = sorted({int(n) for n in text.split(",")})
    except ValueError:
        counts = []
    if not counts or counts[0] < 2:
        parser.error(f"{option} {text!r}: allowed: node counts >= 2, comma-separated")
    return counts
