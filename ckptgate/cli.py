"""The ``ckptgate`` command: one front for the common tasks.

    ckptgate run --profile=405b --target=/lustre/ckpt [pytest options]   # the checklist
    ckptgate sizing 405b [--set k=v] [--json] [--sweep]                  # requirements only
    ckptgate bench write|read|create --target DIR                        # suite vs fio
    ckptgate bench scale [--nodes 4,16,...]                # node 0's coordination vs N
    ckptgate bench predict [--nodes 64,128]                # the harness vs a real mpirun
    ckptgate bench verify --target DIR                     # ckptgate verify against fio
    ckptgate bench payload                                 # the payload's generator vs memcpy
    ckptgate verify RUN_DIR                   # re-check a run kept with --keep, every byte
    ckptgate clean TARGET [--force-stale]     # remove what dead runs left, by their manifests
    ckptgate report RUN.json [--html OUT.html] [--csv OUT.csv]           # a saved report
    ckptgate compare A.json B.json [...] [--html OUT.html]               # runs side by side

``run`` is ``pytest --pyargs ckptgate.acceptance`` with the arguments passed on, so it works
from any directory once ckptgate is installed; every pytest option works after it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence

from ckptgate.pipes import quiet_on_closed_pipe

USAGE = """usage: ckptgate COMMAND [ARGS]

commands:
  run     run the checklist against a target (pytest --pyargs ckptgate.acceptance ARGS)
  sizing  print the requirements a cluster profile implies (no I/O)
  bench   compare the suite's drivers with fio on a target
  verify  re-check every byte of a run directory kept with --keep (after a power cut)
  clean   remove exactly what dead runs' manifests list from a target
  report  render a saved JSON report: the gate table, --html, --csv
  compare put saved JSON reports side by side, unfair differences first

'ckptgate COMMAND --help' shows each command's options."""


def cache_dir() -> str:
    """Where an installed run keeps pytest's cache and pytest-benchmark's storage, so that
    ``ckptgate run`` leaves nothing in the directory it was started from:
    ``$XDG_CACHE_HOME/ckptgate`` (``~/.cache/ckptgate`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ckptgate")


def run_argv(argv: Sequence[str]) -> list[str]:
    """pytest's arguments for ``ckptgate run ARGS``: the installed checklist, with pytest's
    cache and pytest-benchmark's storage in :func:`cache_dir` unless ARGS choose their own."""
    given = " ".join(argv)
    placed = []
    cache_off = "no:cacheprovider" in given  # then pytest knows no cache_dir option
    if "cache_dir=" not in given and not cache_off:
        placed += ["-o", f"cache_dir={os.path.join(cache_dir(), 'pytest')}"]
    if "--benchmark-storage" not in given:
        placed += [f"--benchmark-storage=file://{os.path.join(cache_dir(), 'benchmarks')}"]
    return ["--pyargs", "ckptgate.acceptance", *placed, *argv]


def _run_help(argv: Sequence[str]) -> int:
    """pytest's help, under ckptgate run's own usage line (pytest names itself there)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *run_argv(argv)], capture_output=True, text=True
    )
    text = done.stdout.replace("usage: python -m pytest", "usage: ckptgate run", 1)
    head, _, rest = text.partition("\n")
    print(head)
    print(RUN_HELP)
    print(rest, end="")
    sys.stderr.write(done.stderr)
    return done.returncode


RUN_HELP = """
ckptgate run is pytest --pyargs ckptgate.acceptance: the suite's own options are under
"ckptgate" below (--profile and --target first), and every pytest option works too."""


def _run(argv: Sequence[str]) -> int:
    if "-h" in argv or "--help" in argv:
        return _run_help(argv)
    # A fresh interpreter: pytest rewrites the asserts of the plugin's package, which this one
    # has already imported (ckptgate.cli), and Ctrl-C goes straight to pytest.
    command = [sys.executable, "-m", "pytest", *run_argv(argv)]
    os.execv(sys.executable, command)
    return 1  # not reached: execv replaces this process


def _sizing(argv: Sequence[str]) -> int:
    from ckptgate.sizing.cli import main

    return main(argv)


def _bench(argv: Sequence[str]) -> int:
    if argv[:1] == ["scale"]:
        from ckptgate.benchmarks.scale import main as scale_main

        return scale_main(argv[1:])
    if argv[:1] == ["predict"]:
        from ckptgate.benchmarks.prediction import main as predict_main

        return predict_main(argv[1:])
    if argv[:1] == ["verify"]:
        from ckptgate.benchmarks.verify_speed import main as verify_main

        return verify_main(argv[1:])
    if argv[:1] == ["payload"]:
        from ckptgate.benchmarks.payload_speed import main as payload_main

        return payload_main(argv[1:])
    from ckptgate.benchmarks.compare import main

    return main(argv)


def _verify(argv: Sequence[str]) -> int:
    from ckptgate.rundir.cli import verify_main

    return verify_main(argv)


def _clean(argv: Sequence[str]) -> int:
    from ckptgate.rundir.cli import clean_main

    return clean_main(argv)


def _report(argv: Sequence[str]) -> int:
    from ckptgate.checks.table import report_parts
    from ckptgate.report.cli import report_main

    return report_main(argv, report_parts())


def _compare(argv: Sequence[str]) -> int:
    from ckptgate.report.cli import compare_main

    return compare_main(argv)


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "run": _run,
    "sizing": _sizing,
    "bench": _bench,
    "verify": _verify,
    "clean": _clean,
    "report": _report,
    "compare": _compare,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command = COMMANDS.get(args[0])
    if command is None:
        print(
            f"ckptgate: unknown command {args[0]!r}; allowed: {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    return quiet_on_closed_pipe(lambda: command(args[1:]))
