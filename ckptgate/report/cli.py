"""``ckptgate report`` and ``ckptgate compare``: saved JSON reports rendered again.

``ckptgate report RUN.json [--html OUT.html] [--csv OUT.csv]`` prints the gate table and
writes the files; ``ckptgate compare A.json B.json [...] [--html OUT.html]`` puts runs side by
side.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ckptgate.report.gate import item_table
from ckptgate.report.saved import items_of, load_report
from ckptgate.report.sections import ReportPart


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=description)


def report_main(argv: Sequence[str], parts: Sequence[ReportPart] = ()) -> int:
    """Print a saved report's verdict and gate table; write HTML and CSV from it (``parts``:
    the checks' own sections, from the check table)."""
    parser = _parser("ckptgate report", "Render a saved JSON gate report (--report-json).")
    parser.add_argument("json", metavar="RUN.json", help="a report written by --report-json")
    parser.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    parser.add_argument(
        "--csv", metavar="PATH", help="write the items to PATH, per-rank records to PATH-ranks"
    )
    args = parser.parse_args(argv)
    try:
        data = load_report(args.json)
    except ValueError as error:
        print(f"ckptgate report: {error}", file=sys.stderr)
        return 2
    print(data.verdict.line)
    print()
    for line in item_table(items_of(data)):
        print(line)
    if args.csv:
        from ckptgate.report.csvfiles import write_csv

        for path in write_csv(data, args.csv, parts):
            print(f"wrote {path}")
    if args.html:
        from ckptgate.report.html import write_html

        write_html(data, args.html, source=args.json, parts=parts)
        print(f"wrote {args.html}")
    return 0


def compare_main(argv: Sequence[str]) -> int:
    """Saved reports side by side in the terminal, and in HTML with --html."""
    from ckptgate.report.compare import load_runs, render_html, render_text

    parser = _parser("ckptgate compare", "Put two or more saved JSON gate reports side by side.")
    parser.add_argument("json", metavar="RUN.json", nargs="+", help="reports (--report-json)")
    parser.add_argument("--html", metavar="PATH", help="write the comparison as HTML")
    args = parser.parse_args(argv)
    if len(args.json) < 2:
        parser.error("compare needs at least two reports")
    try:
        runs = load_runs(args.json)
    except ValueError as error:
        print(f"ckptgate compare: {error}", file=sys.stderr)
        return 2
    for line in render_text(runs):
        print(line)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as handle:
            handle.write(render_html(runs))
        print(f"wrote {args.html}")
    return 0
