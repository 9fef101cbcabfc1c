"""python -m ckptgate.sizing PROFILE [--set key=value ...] [--json] [--sweep]: the sizing."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ckptgate.sizing.profile import SHIPPED_PROFILES, ProfileError, load_profile
from ckptgate.sizing.requirements import derive, sweep
from ckptgate.sizing.table import render, render_sweep
from ckptgate.sizing.units import UnitError
from ckptgate.sizing.writer_default import profile_notes


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, exit 2, like every other usage error of this tool.
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sizing",
        description="Storage requirements for training checkpoints, derived from a cluster "
        "profile (SPEC.md's formulas).",
    )
    parser.add_argument(
        "profile",
        metavar="PROFILE",
        help=f"a shipped cluster profile ({', '.join(SHIPPED_PROFILES)}) or a path to a YAML file",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a profile key, e.g. --set checkpoint.interval_s='10 min' (repeatable)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object")
    output.add_argument(
        "--sweep",
        action="store_true",
        help="print lost work, stall budget and bandwidth over a range of intervals",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile, overrides=args.overrides)
        sizing = derive(profile)
    except (ProfileError, UnitError) as exc:
        print(f"sizing: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**sizing.to_json(), "profile_notes": profile_notes(profile)}, indent=2))
    elif args.sweep:
        print(render_sweep(profile, sizing, sweep(profile)))
    else:
        print(render(profile, sizing))
    return 0
