"""What node 0 spends on a run's coordination as the node count grows, from 4 to 16,384 nodes.

    ckptgate bench scale [--nodes 4,16,...] [--ranks-per-node 8] [--json PATH]

Each part runs the suite's own code on node 0 of N simulated nodes (``benchmarks.simnodes``:
an in-process communicator whose other nodes send what the suite's code builds for them), with
only the storage I/O made small:

- ``start-up``: ``MpiNodes.learn_hosts``, ``check_same_everywhere`` on the shipped 405b
  profile's facts, and the run id's and run directory's broadcasts;
- ``common start``: the rank pool's gate (``pool_gate``), once;
- ``records gather``: one write burst's records from every node (``run_everywhere``, then
  ``merge_nodes`` and the burst's JSON), each rank's record with its transfer histogram;
- ``heartbeat``: one beat period of node 0's heartbeat (a beat to every node, every node's beat
  drained, ``Liveness.silent`` over all of them);
- ``manifests``: N manifest parts written by ``ManifestWriter`` (the ranks' files listed), then
  ``ckptgate verify`` and ``ckptgate clean`` of that run directory (tiny files on ``--target``);
- ``report``: node 0's end of a run with ``--report-json``, ``--report-csv`` and
  ``--report-html``: a real run's JSON report (``ckptgate run --profile=tmpfs``, made once) with
  every burst's records made N nodes' worth, as a ``GateReport``, through the run's own
  ``write_outputs`` and the terminal's latency lines;
- ``compare``: ``ckptgate compare`` of that JSON with itself.

For each N it prints node 0's seconds (the peers' value building excluded), its peak Python
memory (tracemalloc, in a second pass so the timing pays no tracing), the messages and bytes it
sent and received, its probes, and the report files' sizes; then each column's growth exponent
b of a least-squares fit of log(value) = a + b log(N) over the points from 64 nodes up
(1: linear, 2: quadratic). Times are one process's on this machine: the growth is the point.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ckptgate.benchmarks import coordination, pageload
from ckptgate.benchmarks.command import node_counts
from ckptgate.benchmarks.coordination import (
    facts_405b,
    host_name,
    named,
    node_burst,
)
from ckptgate.benchmarks.simnodes import ANY_SOURCE, Counts, SimComm, SimStatus
from ckptgate.checks.table import checklist, report_parts
from ckptgate.cluster.heartbeat import HEARTBEAT_TAG, Heartbeat
from ckptgate.cluster.nodes import MpiNodes
from ckptgate.report.gate import GateReport

NODE_COUNTS = (4, 16, 64, 256, 1024, 4096, 16384)
FIT_FROM_NODES = 64
"""The fit uses the points from this node count up: below it fixed costs hide the growth."""


@dataclass
class PartResult:
    """One part at one node count: node 0's figures."""

    seconds: float
    counts: Counts
    peak_bytes: int = 0
    files: dict[str, int] = field(default_factory=dict)
    """Report files' sizes in bytes, by name."""
    open_s: float | None = None
    """Seconds headless Chromium takes to open the HTML page beyond a blank page
    (``pageload``; None: not measured)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "peak_bytes": self.peak_bytes,
            **dataclasses.asdict(self.counts),
            **({"files": self.files} if self.files else {}),
            **({"open_s": self.open_s} if self.open_s is not None else {}),
        }


def _nodes(comm: SimComm) -> MpiNodes:
    return named(
        MpiNodes(
            comm, clock=comm.clock, sleep=comm.clock.sleep, any_source=ANY_SOURCE, status=SimStatus
        )
    )


def start_up(count: int, ranks: int) -> tuple[SimComm, Callable[[], object]]:
    from ckptgate.fixtures.run.startup import digest

    facts = facts_405b()
    facts_digest = digest(facts)
    comm = SimComm(count)
    nodes = _nodes(comm)
    base = nodes.tag_base

    def peer_value(peer: int, tag: int) -> Any:
        step = tag - base
        if step == 1:  # learn_hosts: the host names
            return host_name(peer)
        if step == 3:  # learn_hosts: the next node's host name (node 1 sends it)
            return host_name(peer)
        if step == 4:  # the digest
            return facts_digest
        return None  # the broadcasts' gathers carry nothing

    comm.peer_value = peer_value
    return comm, lambda: coordination.start_up(nodes, facts)


def common_start(count: int, ranks: int) -> tuple[SimComm, Callable[[], object]]:
    comm = SimComm(count, peer_value=lambda peer, tag: True)
    nodes = _nodes(comm)
    return comm, lambda: coordination.common_start(nodes)


def records_gather(count: int, ranks: int) -> tuple[SimComm, Callable[[], object]]:
    own = node_burst(0, ranks)
    comm = SimComm(
        count, peer_value=lambda peer, tag: (host_name(peer), node_burst(peer, ranks), None)
    )
    nodes = _nodes(comm)
    return comm, lambda: coordination.records_gather(nodes, own)


def heartbeat(count: int, ranks: int) -> tuple[SimComm, Callable[[], object]]:
    progress = {"bytes": 3_430_000_000 * ranks, "files": ranks, "phase": "write"}
    comm = SimComm(count, peer_value=lambda peer, tag: (peer, None, progress))
    beats = Heartbeat(comm, ANY_SOURCE, clock=comm.clock)

    def run() -> object:
        comm.again(HEARTBEAT_TAG)
        beats.beat()
        while beats.drain():
            pass
        return beats.liveness.silent(beats.peers, 30.0, refresh=False)

    return comm, run


Part = Callable[[int, int], tuple[SimComm, Callable[[], object]]]
"""A part: given the node count and ranks per node, node 0's communicator and its step."""

PARTS: dict[str, Part] = {
    "start-up": start_up,
    "common start": common_start,
    "records gather": records_gather,
    "heartbeat": heartbeat,
}
"""The communicator's parts: each builds node 0's end and returns the step to measure."""


def _timed(step: Callable[[], object]) -> float:
    """Seconds of one run of ``step`` (its result dropped after the clock stops)."""
    gc.collect()
    started = time.perf_counter()
    kept = step()
    seconds = time.perf_counter() - started
    del kept
    return seconds


def _peak(step: Callable[[], object]) -> int:
    """The peak traced Python memory of one run of ``step``, in bytes (tracing slows a run,
    so a part's time is never taken in the same run)."""
    gc.collect()
    tracemalloc.start()
    kept = step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return peak


def node0_seconds(make: Part, count: int, ranks: int) -> tuple[float, Counts]:
    """A part's node 0 seconds (the peers' value building excluded) and counts, one run."""
    comm, run = make(count, ranks)
    return _timed(run) - comm.excluded_s, comm.counts


def measure(make: Part, count: int, ranks: int) -> PartResult:
    """A part's node 0 seconds and counts, then its peak memory in a second, traced run."""
    seconds, counts = node0_seconds(make, count, ranks)
    return PartResult(seconds, counts, _peak(make(count, ranks)[1]))


def write_manifest_part(run_dir: str, node: int, count: int, ranks: int) -> None:
    """Node ``node``'s manifest part of ``ranks`` files in ``run_dir``'s ``round-1`` (which
    node 0 makes), each file made empty (I/O made small)."""
    from ckptgate.rundir.appender import LocalAppender, ManifestSink
    from ckptgate.rundir.manifest import ManifestWriter

    round_dir = f"{run_dir}/round-1"
    sink = cast(ManifestSink, LocalAppender())  # the run's own, unbounded: no helper
    writer = ManifestWriter(run_dir, node, sink=sink, nodes=count, run_id=1)
    paths = [f"{round_dir}/__{node * ranks + r}_0.distcp" for r in range(ranks)]
    if node == 0:
        os.mkdir(round_dir)
        writer.add_dirs([run_dir, round_dir])
    writer.add_files(paths, sizes=[0] * ranks)
    for path in paths:
        with open(path, "wb"):
            pass
    writer.ended(kept=True)
    writer.close()


def manifests(count: int, ranks: int, root: str) -> dict[str, PartResult]:
    """N manifest parts of ``ranks`` files each (``write_manifest_part``, every node's from
    this one process), then ``ckptgate verify`` and ``ckptgate clean`` of the run directory."""
    from ckptgate.rundir.clean import clean_run
    from ckptgate.rundir.runs import judge_run
    from ckptgate.rundir.verify import verify_run

    run_dir = tempfile.mkdtemp(prefix="ckptgate-scale-", dir=root)

    def write_parts() -> None:
        for node in range(count):
            write_manifest_part(run_dir, node, count, ranks)

    results: dict[str, PartResult] = {}
    started = time.perf_counter()
    write_parts()
    results["manifests"] = PartResult(time.perf_counter() - started, Counts())
    verify_s, verify_peak = _timed(lambda: verify_run(run_dir)), _peak(lambda: verify_run(run_dir))
    report = verify_run(run_dir)
    if not report.ok or report.files != count * ranks:
        raise RuntimeError(f"verify of the harness's run: {report.summary()}")
    results["verify"] = PartResult(verify_s, Counts(), verify_peak)
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    state = judge_run(run_dir)
    assert state is not None
    cleaned = clean_run(state)
    clean_s = time.perf_counter() - started
    _, clean_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if cleaned.refused or cleaned.left or cleaned.removed_files < count * ranks:
        raise RuntimeError(f"clean of the harness's run: {cleaned}")
    results["clean"] = PartResult(clean_s, Counts(), clean_peak)  # traced: one run only
    return results


def template_report(root: str) -> dict[str, Any]:
    """A real run's JSON report: ``ckptgate run --profile=tmpfs`` on ``root``, once."""
    with tempfile.TemporaryDirectory(prefix="ckptgate-scale-report-", dir=root) as folder:
        path = os.path.join(folder, "r.json")
        command = [sys.executable, "-m", "ckptgate", "run", "--profile=tmpfs", f"--target={root}"]
        command += [f"--report-json={path}", "-q", "-p", "no:cacheprovider"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if not os.path.exists(path):
            said = (done.stdout[-400:] + done.stderr[-400:]).strip()
            raise RuntimeError(f"the template run wrote no report: {said}")
        with open(path, encoding="utf-8") as handle:
            data: dict[str, Any] = json.load(handle)
    return data


def scaled_report(template: dict[str, Any], count: int, ranks: int) -> dict[str, Any]:
    """``template`` with every burst's records made ``count`` nodes of ``ranks`` each (each
    record a copy of one of the template's, renumbered)."""

    def scale(value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key == "ranks" and isinstance(item, list) and item and isinstance(item[0], dict):
                    out[key] = [
                        {
                            **item[(n * ranks + r) % len(item)],
                            "rank": r,
                            "global_rank": n * ranks + r,
                            "node": n,
                            "host": host_name(n),
                        }
                        for n in range(count)
                        for r in range(ranks)
                    ]
                elif key == "node_bytes_per_s" and isinstance(item, dict) and item:
                    first = next(iter(item.values()))
                    out[key] = {str(n): first for n in range(count)}
                else:
                    out[key] = scale(item)
            return out
        if isinstance(value, list):
            return [scale(item) for item in value]
        return value

    data = scale(template)
    data.update(nodes=count, ranks=count * ranks, ranks_per_node=ranks)
    return data


def gate_report(data: dict[str, Any]) -> GateReport:
    """A run's ``GateReport`` holding ``data``: its items read back through the schema, every
    other key as it is (the verdict is decided again from those items, as the run decides it)."""
    from ckptgate.report.schema import load_saved

    items = list(load_saved(data, "the scaled report").items)
    not_measured = dict(data.get("not_measured", {}))
    meta = {k: v for k, v in data.items() if k not in ("verdict", "items", "not_measured")}
    return GateReport(meta=meta, items=items, not_measured=not_measured, checklist=checklist())


def report_files(
    template: dict[str, Any], count: int, ranks: int, root: str, browser: bool = False
) -> dict[str, PartResult]:
    """Node 0's end of a run of ``count`` nodes with every report file asked for: the real
    ``write_outputs`` (JSON, CSV, HTML) and the terminal's latency lines, on a ``GateReport``
    of the scaled records (``report``); then ``compare`` of the JSON with itself (``compare``;
    ``browser``: and the HTML's opening in headless Chromium, ``pageload``)."""
    from ckptgate.report.compare import load_runs, render_text
    from ckptgate.report.outputs import write_outputs

    report = gate_report(scaled_report(template, count, ranks))
    out = tempfile.mkdtemp(prefix="ckptgate-scale-files-", dir=root)
    paths = {name: os.path.join(out, f"report.{name}") for name in ("json", "csv", "html")}

    def end_of_run() -> None:
        problems = write_outputs(
            report,
            json_path=paths["json"],
            csv_path=paths["csv"],
            html_path=paths["html"],
            parts=report_parts(),
        )
        if problems:
            raise RuntimeError("; ".join(problems))
        report.latency_lines()

    def compare() -> None:
        render_text(load_runs([paths["json"], paths["json"]]))

    try:
        seconds, peak = _timed(end_of_run), _peak(end_of_run)
        open_s = pageload.open_seconds(paths["html"]) if browser else None
        files = {name: os.path.getsize(os.path.join(out, name)) for name in sorted(os.listdir(out))}
        compared = PartResult(_timed(compare), Counts(), _peak(compare))
    finally:
        for name in os.listdir(out):
            os.remove(os.path.join(out, name))
        os.rmdir(out)
    return {"report": PartResult(seconds, Counts(), peak, files, open_s), "compare": compared}


def run_count(
    count: int,
    ranks: int,
    root: str,
    template: dict[str, Any] | None,
    parts: Sequence[str] | None = None,
    browser: bool = False,
) -> dict[str, PartResult]:
    """Every part at one node count (``parts``: only these communicator parts; ``browser``:
    the HTML's opening in Chromium too)."""
    chosen = PARTS if parts is None else {p: PARTS[p] for p in parts}
    results = {name: measure(make, count, ranks) for name, make in chosen.items()}
    if parts is not None:
        return results
    results.update(manifests(count, ranks, root))
    if template is not None:
        results.update(report_files(template, count, ranks, root, browser))
    return results


def growth(counts: Sequence[int], values: Sequence[float]) -> float | None:
    """The exponent b of the least-squares fit log(value) = a + b log(N) over the points from
    ``FIT_FROM_NODES`` nodes up (None with fewer than two positive points)."""
    points = [
        (math.log(n), math.log(v))
        for n, v in zip(counts, values, strict=True)
        if n >= FIT_FROM_NODES and v > 0
    ]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return sxy / sxx if sxx > 0 else None


COLUMNS = (
    ("seconds", "s", lambda p: p.seconds),
    ("peak MiB", "peak", lambda p: p.peak_bytes / 2**20),
    ("messages", "msgs", lambda p: p.counts.sent_messages + p.counts.received_messages),
    ("MB moved", "MB", lambda p: (p.counts.sent_bytes + p.counts.received_bytes) / 1e6),
    ("probes", "probes", lambda p: p.counts.probes),
)


def render(rows: dict[int, dict[str, PartResult]]) -> str:
    counts = sorted(rows)
    lines = []
    for part in rows[counts[0]]:
        lines.append(f"{part}: node 0")
        lines.append(f"{'nodes':>7}" + "".join(f"  {title:>11}" for title, _, _ in COLUMNS))
        for n in counts:
            result = rows[n][part]
            cells = "".join(f"  {value(result):>11.4g}" for _, _, value in COLUMNS)
            lines.append(f"{n:>7}{cells}")
        fits = []
        for _, _, value in COLUMNS:
            b = growth(counts, [value(rows[n][part]) for n in counts])
            fits.append(f"  {'-' if b is None else f'N^{b:.2f}':>11}")
        lines.append(f"{'growth':>7}" + "".join(fits))
        files = rows[counts[-1]][part].files
        if files:
            for name in files:
                sizes = ", ".join(f"{rows[n][part].files[name] / 1e6:.3g}" for n in counts)
                lines.append(f"  {name} MB by node count: {sizes}")
        if rows[counts[-1]][part].open_s is not None:
            opened = ", ".join(f"{rows[n][part].open_s or 0:.2f}" for n in counts)
            lines.append(f"  report.html opens in Chromium (s beyond a blank page): {opened}")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ckptgate bench scale", description=__doc__)
    parser.add_argument(
        "--nodes", default=",".join(map(str, NODE_COUNTS)),
        help="simulated node counts, comma-separated (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--ranks-per-node", type=int, default=8, help="default: 8")
    parser.add_argument(
        "--target", default="/dev/shm", help="where the manifest parts and tiny files go "
        "(a run directory made and removed there; default: /dev/shm)",
    )  # fmt: skip
    parser.add_argument("--no-report", action="store_true", help="skip the report part")
    parser.add_argument(
        "--browser", action="store_true",
        help="time the HTML page's opening in headless Chromium too (benchmarks.pageload)",
    )  # fmt: skip
    parser.add_argument(
        "--parts", default=None, metavar="P,P",
        help=f"only these communicator parts ({', '.join(PARTS)}; default: all, with the "
        "manifests and the report)",
    )  # fmt: skip
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    counts = node_counts(parser, args.nodes)
    if args.ranks_per_node < 1:
        parser.error(f"--ranks-per-node {args.ranks_per_node}: allowed: 1 or more")
    if not os.path.isdir(args.target):
        parser.error(f"--target {args.target}: not a directory")
    parts = None if args.parts is None else [p.strip() for p in args.parts.split(",")]
    unknown = [p for p in parts or [] if p not in PARTS]
    if unknown:
        parser.error(f"--parts {args.parts!r}: {unknown[0]!r} is not one of {', '.join(PARTS)}")
    template = None if args.no_report or parts else template_report(args.target)
    rows = {}
    for n in counts:
        rows[n] = run_count(n, args.ranks_per_node, args.target, template, parts, args.browser)
        print(f"ckptgate bench scale: {n} nodes done", file=sys.stderr, flush=True)
    print(render(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            figures = {str(n): {p: r.to_json() for p, r in rows[n].items()} for n in counts}
            json.dump({"ranks_per_node": args.ranks_per_node, "nodes": figures}, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
