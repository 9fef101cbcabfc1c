"""The scale harness against a real MPI run of the same N: does the harness predict node 0?

    ckptgate bench predict --nodes 64,128 [--repeats 5] [--inner 5] [--json PATH]

For each N, alternately (the harness first on even repeats, the real run first on odd ones),
the harness's communicator parts that a real run has without a heartbeat thread (the
start-up, the common start, the records gather: ``coordination``'s steps) and
``benchmarks.collectives`` under ``mpirun -np N`` on this machine (oversubscribed), each step
``--inner`` times (its median kept). Node 0's figure of the real run is its main thread's CPU
seconds: on N processes sharing two cores its wall seconds are mostly waiting for the others
to be scheduled, which no cluster has; its CPU seconds are its own work, which is what the
harness measures. Printed per part and N: both medians, the median of the per-repeat ratios
real/harness with their range, the real wall seconds, and both runs' messages, bytes and
probes at node 0 (the same code on the same values: the messages and bytes match; the probes
differ by the polls that found nothing while the real peers were late).

The harness has no MPI library under it, so what the library costs node 0 per message and per
byte is measured at the first node count (the calibration) and added to the harness's figure
at every other: per message from the common start (one byte-sized value a node), per byte from
the records gather (5 kB a node) less its messages' share, both from the medians of the
repeats. The ratios with that cost added, at the node counts it was not measured at, say
whether the harness and one measured transport predict the real run (``+ transport``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptgate.benchmarks import collectives, scale
from ckptgate.benchmarks.command import node_counts
from ckptgate.benchmarks.coordination import TIMEOUT_S

PARTS = collectives.STEPS
"""The parts both runs have (the heartbeat needs a thread that the MPI benchmark leaves off)."""
WITHIN = 0.25
"""The harness predicts a part when the median ratio is within this fraction of 1."""
CALIBRATION = "common start"
"""The part whose real cost is nearly all the transport's (one byte-sized value a node): its
real less its harness seconds per message is the transport's cost of a message, measured."""
BYTES_CALIBRATION = "records gather"
"""The part that moves the most bytes (a node's records, 5 kB): its real less its harness
seconds, less its messages' cost, per byte is the transport's cost of a byte, measured."""


@dataclass
class Compared:
    """One part at one node count: the harness's and the real run's node 0 figures."""

    part: str
    nodes: int
    harness_s: list[float] = field(default_factory=list)
    real_cpu_s: list[float] = field(default_factory=list)
    real_wall_s: list[float] = field(default_factory=list)
    harness_counts: dict[str, float] = field(default_factory=dict)
    real_counts: dict[str, float] = field(default_factory=dict)

    transport_s: list[float] = field(default_factory=list)
    """Per repeat, the transport's measured cost of this part's messages and bytes at node 0
    (``Transport.seconds``, from the calibration at the smallest node count)."""

    def messages(self) -> float:
        return self.harness_counts["sent_messages"] + self.harness_counts["received_messages"]

    def bytes(self) -> float:
        return self.harness_counts["sent_bytes"] + self.harness_counts["received_bytes"]

    def extra_s(self) -> float:
        """The real run's median CPU seconds beyond the harness's median."""
        return statistics.median(self.real_cpu_s) - statistics.median(self.harness_s)

    def ratios(self, transport: bool = False) -> list[float]:
        """Real CPU seconds over the harness's, per repeat (``transport``: the harness's
        seconds plus the transport's measured cost of its messages)."""
        added = self.transport_s if transport else [0.0] * len(self.harness_s)
        pairs = zip(self.real_cpu_s, self.harness_s, added, strict=True)
        return [r / (h + a) for r, h, a in pairs if h + a > 0]

    def median_ratio(self, transport: bool = False) -> float:
        return statistics.median(self.ratios(transport))

    def predicted(self, transport: bool = False) -> bool:
        return abs(self.median_ratio(transport) - 1) <= WITHIN

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "nodes": self.nodes,
            "harness_s": self.harness_s,
            "real_cpu_s": self.real_cpu_s,
            "real_wall_s": self.real_wall_s,
            "transport_s": self.transport_s,
            "median_ratio": self.median_ratio(),
            "predicted": self.predicted(),
            "median_ratio_with_transport": self.median_ratio(transport=True),
            "predicted_with_transport": self.predicted(transport=True),
            "harness_counts": self.harness_counts,
            "real_counts": self.real_counts,
        }


def _harness(nodes: int, ranks: int, inner: int, into: dict[str, Compared]) -> None:
    for part in PARTS:
        runs = [scale.node0_seconds(scale.PARTS[part], nodes, ranks) for _ in range(inner)]
        into[part].harness_s.append(statistics.median(seconds for seconds, _ in runs))
        into[part].harness_counts = dataclasses.asdict(runs[-1][1])


def _real(nodes: int, ranks: int, inner: int, timeout_s: float, into: dict[str, Compared]) -> None:
    row = collectives.run_size(nodes, inner, ranks, timeout_s)
    for part in PARTS:
        step = row["steps"][part]
        into[part].real_cpu_s.append(statistics.median(step["node0_cpu_s"]))
        into[part].real_wall_s.append(statistics.median(step["node0_wall_s"]))
        into[part].real_counts = step["node0_counts"]


def compare(
    counts: Sequence[int], ranks: int, repeats: int, inner: int, timeout_s: float
) -> list[Compared]:
    """Every part at every node count, the two runs interleaved, order alternated."""
    rows: list[Compared] = []
    for nodes in counts:
        here = {part: Compared(part, nodes) for part in PARTS}
        for repeat in range(repeats):
            for real in (False, True) if repeat % 2 == 0 else (True, False):
                if real:
                    _real(nodes, ranks, inner, timeout_s, here)
                else:
                    _harness(nodes, ranks, inner, here)
        rows.extend(here.values())
    _transport(rows)
    return rows


@dataclass(frozen=True)
class Transport:
    """What the MPI library costs node 0, measured at one node count (``nodes``)."""

    nodes: int
    per_message_s: float
    per_byte_s: float

    def seconds(self, row: Compared) -> float:
        return self.per_message_s * row.messages() + self.per_byte_s * row.bytes()


def calibrate(rows: Sequence[Compared]) -> Transport:
    """The transport's cost per message and per byte from the smallest node count's
    calibration parts (``CALIBRATION``, then ``BYTES_CALIBRATION`` less its messages)."""
    nodes = min(row.nodes for row in rows)
    at = {row.part: row for row in rows if row.nodes == nodes}
    messages = at[CALIBRATION]
    per_message_s = max(messages.extra_s(), 0.0) / messages.messages()
    moved = at[BYTES_CALIBRATION]
    per_byte_s = max(moved.extra_s() - per_message_s * moved.messages(), 0.0) / moved.bytes()
    return Transport(nodes, per_message_s, per_byte_s)


def _transport(rows: Sequence[Compared]) -> None:
    """Each row's transport cost (one per repeat), from the calibration's measured costs."""
    transport = calibrate(rows)
    for row in rows:
        row.transport_s = [transport.seconds(row)] * len(row.harness_s)


def calibrates(row: Compared, nodes: int) -> bool:
    """Whether ``row`` is one the transport was measured on (its ratio is 1 by construction)."""
    return row.nodes == nodes and row.part in (CALIBRATION, BYTES_CALIBRATION)


def _pair(counts: dict[str, float], real: dict[str, float], *keys: str) -> str:
    return f"{sum(counts[k] for k in keys):,.0f}/{sum(real[k] for k in keys):,.0f}"


def _ratio(row: Compared, transport: bool) -> str:
    ratios = row.ratios(transport)
    words = "within 25 %" if row.predicted(transport) else "NOT within 25 %"
    return f"{row.median_ratio(transport):.2f} [{min(ratios):.2f}, {max(ratios):.2f}] {words}"


def render(rows: Sequence[Compared]) -> str:
    transport = calibrate(rows)
    lines = [
        "the harness against mpirun -np N (oversubscribed): node 0, harness / real",
        "ratio: real CPU s / harness s, median [range] of the repeats; + transport: the harness "
        f"plus the transport's cost, measured at {transport.nodes} nodes: "
        f"{transport.per_message_s * 1e6:.2f} us a message ({CALIBRATION}), "
        f"{transport.per_byte_s * 1e9:.2f} ns a byte ({BYTES_CALIBRATION})",
        f"{'part':<15}{'nodes':>6}  {'harness s':>9}  {'real CPU s':>10}  {'real wall s':>11}  "
        f"{'messages h/r':>13}  {'bytes h/r':>17}  {'probes h/r':>11}  ratio; + transport",
    ]
    for row in rows:
        h, r = row.harness_counts, row.real_counts
        with_transport = (
            "; (calibrates)" if calibrates(row, transport.nodes) else f"; {_ratio(row, True)}"
        )
        lines.append(
            f"{row.part:<15}{row.nodes:>6}  {statistics.median(row.harness_s):>9.4f}  "
            f"{statistics.median(row.real_cpu_s):>10.4f}  "
            f"{statistics.median(row.real_wall_s):>11.3f}  "
            f"{_pair(h, r, 'sent_messages', 'received_messages'):>13}  "
            f"{_pair(h, r, 'sent_bytes', 'received_bytes'):>17}  "
            f"{_pair(h, r, 'probes'):>11}  {_ratio(row, False)}{with_transport}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ckptgate bench predict", description=__doc__)
    parser.add_argument("--nodes", default="64,128", help="MPI process counts (default: 64,128)")
    parser.add_argument("--ranks-per-node", type=int, default=8, help="default: 8")
    parser.add_argument("--repeats", type=int, default=5, help="default: 5")
    parser.add_argument(
        "--inner", type=int, default=5,
        help="each step's runs in a repeat, the median kept (default: 5)",
    )  # fmt: skip
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    counts = node_counts(parser, args.nodes)
    for name in ("ranks_per_node", "repeats", "inner"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: allowed: 1 or more")
    rows = compare(counts, args.ranks_per_node, args.repeats, args.inner, TIMEOUT_S)
    print(render(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([row.to_json() for row in rows], handle, indent=2)
    return 0
