"""How a read burst's bytes are verified: in the timed read loop, or after it from the pages
it left (``verifies_after``), by untimed rank tasks that read each range again
(``verify_after_read``); ``Verification`` says which, how many bytes, the slowest rank's seconds
and the residency at the check. The module docstring of ckptgate.workloads.readback says why.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ckptgate.engine.pool import RankContext, RankPool
from ckptgate.engine.records import (
    BurstResult,
    PhaseMarks,
    RankDetail,
    RankResult,
    detail_as,
    run_ranks,
)
from ckptgate.engine.sampler import Expected
from ckptgate.storage.backend import BackendSpec
from ckptgate.storage.operations import Backend
from ckptgate.workloads.fileplan import ShardFile
from ckptgate.workloads.options import RunOptions
from ckptgate.workloads.range_reader import RangeReader, ReadFilesDetail, bytes_weighted


@dataclass(frozen=True)
class VerifyDetail(RankDetail):
    """An untimed verification rank: the residency of what it checked, and its seconds."""

    path: str
    resident_fraction: float | None
    verify_s: float


class VerifyRange(NamedTuple):
    """Bytes ``[offset, offset + length)`` of one written file, verified after a timed read."""

    shard: ShardFile
    offset: int
    length: int


def whole_files(files: Sequence[ShardFile]) -> list[VerifyRange]:
    """Every byte of ``files``, as ranges to verify."""
    return [VerifyRange(f, 0, f.bytes) for f in files]


def verify_ranges_task(
    ctx: RankContext, *, options: RunOptions, ranges: list[VerifyRange]
) -> RankResult:
    """Rank task (untimed): read ``ranges`` again and verify every byte; reports their
    page-cache residency just before (the share of the bytes the verification checks as the
    timed read left them)."""
    backend = options.spec.open()
    readers = [RangeReader(backend, r.shard, direct=False, ctx=ctx) for r in ranges]
    resident = bytes_weighted(
        [
            (r.length, backend.resident_fraction(r.shard.path) if backend.has_page_cache else None)
            for r in ranges
        ]
    )
    # No ``expect`` here: precomputed hashes only pay off inside a timed read; untimed, they
    # would hash every expected transfer once more, where shifting the stamps costs less.
    phases = PhaseMarks.start(ctx)
    verified = 0
    for reader, r in zip(readers, ranges, strict=True):
        reader.base_bytes = verified
        reader.open()
        try:
            verified += reader.read_verify(r.offset, r.length)
        finally:
            reader.close()
    phases.mark("verify")
    detail = VerifyDetail(
        ranges[0].shard.path, resident, sum(reader.verify_s for reader in readers)
    )
    return phases.result(ranges[0].shard.global_rank, verified, detail=detail)


@dataclass(frozen=True)
class Verification:
    """How a readback's bytes were verified: in the timed read, or after it from the cache."""

    when: str
    """``in the read`` or ``after the read``."""
    bytes: int
    seconds: float
    """The slowest rank's verification time (inside the read phase when ``in the read``)."""
    resident_fraction: float | None
    """``after the read``: the byte-weighted residency when verified (1.0: every byte checked
    is a byte the timed read delivered); None for ``in the read``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "when": self.when,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "resident_fraction": self.resident_fraction,
        }


def merge_verifications(parts: Sequence[Verification | None]) -> Verification | None:
    """Every node's verification of one read burst as one (bytes summed, the slowest node's
    seconds, residency weighted by bytes); None where no node verified."""
    known = [v for v in parts if v is not None]
    if not known:
        return None
    whens = sorted({v.when for v in known})
    return Verification(
        " / ".join(whens),
        sum(v.bytes for v in known),
        max(v.seconds for v in known),
        bytes_weighted([(v.bytes, v.resident_fraction) for v in known]),
    )


def verify_after_read(
    pool: RankPool,
    spec: BackendSpec,
    ranges_read: Sequence[list[VerifyRange]],
    labels: Sequence[str],
    timeout_s: float,
    *,
    phase: str = "readback",
) -> Verification:
    """Verify every byte of ``ranges_read`` (what each local rank read; ``labels`` name
    them) once the timed ``phase`` is over. Ranks that read nothing verify nothing."""
    busy = [i for i, ranges in enumerate(ranges_read) if ranges]
    kwargs = [{"ranges": ranges_read[i]} for i in busy]
    expect = Expected(
        f"{phase} verification (untimed)",
        rank_bytes=tuple(sum(r.length for r in ranges_read[i]) for i in busy),
        rank_files=tuple(len(ranges_read[i]) for i in busy),
    )
    results = run_ranks(
        pool,
        verify_ranges_task,
        kwargs,
        timeout_s,
        [labels[i] for i in busy],
        options=RunOptions(spec),
        expect=expect,
    )
    details = [detail_as(r, VerifyDetail) for r in results]
    fraction = bytes_weighted(
        [(r.bytes, d.resident_fraction) for r, d in zip(results, details, strict=True)]
    )
    seconds = max(d.verify_s for d in details)
    return Verification("after the read", sum(r.bytes for r in results), seconds, fraction)


def verify_burst(
    pool: RankPool,
    spec: BackendSpec,
    burst: BurstResult,
    after: bool,
    ranges_read: Sequence[list[VerifyRange]],
    labels: Sequence[str],
    timeout_s: float,
    *,
    phase: str,
) -> Verification:
    """How a read burst's bytes were verified: ``after`` it (``verify_after_read``, for a read
    ``verifies_after`` says so), else already in its loop, whose time the ranks report."""
    if after:
        return verify_after_read(pool, spec, ranges_read, labels, timeout_s, phase=phase)
    verify_s = max(detail_as(r, ReadFilesDetail).verify_s for r in burst.ranks)
    return Verification("in the read", burst.total_bytes, verify_s, None)


def verifies_after(backend: Backend[Any], direct: bool) -> bool:
    """Whether a read of ``backend`` is verified after the timed read, from the pages it
    left (a buffered read through this node's page cache), rather than in it (see the
    module docstring)."""
    return backend.has_page_cache and not direct
