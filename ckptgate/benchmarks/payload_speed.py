"""The payload's generator against a memory copy, one core: how much of a write's time is ours.

    ckptgate bench payload [--transfer-mib 16] [--transfers 32] [--keystream c|numpy]
                           [--repeats 9] [--warmup 1]

Every byte a rank writes is generated first (``BlockStamper.fill``: the counter-based
keystream of ``ckptgate.engine.keystream``), so the generator's speed against the target's
sets how much the load generator leaves for the storage (the ``load generator vs target`` item
asks for twice the target's rate). The peer is a memory copy of the same bytes from one buffer
into another (``numpy.copyto``, memcpy underneath), what any client does at least once per
byte it writes. Interleaved, the order alternated, ``--repeats`` pairs, on this process's one
core; the figure on both sides is bytes over seconds. No target is touched.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptgate.benchmarks.command import add_pair_options, show
from ckptgate.benchmarks.pairs import Comparison, Pair, timed_pairs
from ckptgate.engine import keystream
from ckptgate.engine.datagen import MAGIC, BlockStamper, StampKey

MiB = 2**20
KEYSTREAMS = ("c", "numpy")


@dataclass(frozen=True)
class Settings:
    warmup: int = 1
    repeats: int = 9
    settle_s: float = 0.0


def compare_payload(
    transfer_bytes: int, transfers: int, settings: Settings, use: str = "c"
) -> Comparison:
    """``transfers`` fills of one rank's stream against as many copies of the same size."""
    if use == "c" and keystream.native() is None:
        raise RuntimeError("the C keystream is not built in this install (no C compiler)")
    stamper = BlockStamper(StampKey(53, 0), transfer_bytes)
    source = np.frombuffer(stamper.fill(0, transfer_bytes), dtype=np.uint8).copy()
    destination = np.empty_like(source)
    comparison = Comparison(
        "generate",
        "bytes/s",
        {"transfer_bytes": transfer_bytes, "transfers": transfers, "keystream": use},
        memory_backed=True,
        peer="memcpy",
    )
    words = np.empty(stamper.step_bytes // 8, dtype=np.uint64)
    fill = keystream.fill_blocks if use == "c" else keystream.fill_blocks_numpy
    seed = keystream.seed_of(53, 0)

    def suite(tag: str) -> dict[str, Any]:
        # what BlockStamper.fill does per transfer, with the keystream chosen
        started = time.perf_counter()
        for index in range(transfers):
            fill(words, seed, index * len(words), MAGIC, 53, 0)
        seconds = time.perf_counter() - started
        return {"bytes_per_s": transfers * transfer_bytes / seconds, "seconds": seconds}

    def peer(tag: str) -> dict[str, Any]:
        started = time.perf_counter()
        for _ in range(transfers):
            np.copyto(destination, source)
        seconds = time.perf_counter() - started
        return {"bytes_per_s": transfers * transfer_bytes / seconds, "seconds": seconds}

    for ours, theirs, first in timed_pairs(settings, "payload", suite, peer, lambda: None):
        comparison.pairs.append(
            Pair(ours["bytes_per_s"], theirs["bytes_per_s"], ours, theirs, first)
        )
    return comparison


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ckptgate bench payload", description=__doc__)
    parser.add_argument("--transfer-mib", type=int, default=16, help="default: %(default)s")
    parser.add_argument("--transfers", type=int, default=32, help="default: %(default)s")
    parser.add_argument("--keystream", choices=KEYSTREAMS, default="c", help="default: c")
    add_pair_options(parser, Settings())
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    for name in ("transfer_mib", "transfers", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: allowed: 1 or more")
    settings = Settings(args.warmup, args.repeats, args.settle_s)
    try:
        comparison = compare_payload(
            args.transfer_mib * MiB, args.transfers, settings, args.keystream
        )
    except RuntimeError as error:
        print(f"ckptgate bench payload: {error}", file=sys.stderr)
        return 2
    show(comparison, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
