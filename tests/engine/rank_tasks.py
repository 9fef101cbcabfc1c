"""Rank tasks for the engine's own tests (module level, so spawned ranks can import them)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from ckptgate.engine.pool import FILES_DONE, RankContext
from ckptgate.engine.records import PhaseMarks, RankDetail, RankResult


def report_start(ctx: RankContext, *, delay_s: float = 0.0) -> dict[str, Any]:
    """Prepare for ``delay_s`` (ranks stagger), then report when the common start let us go."""
    time.sleep(delay_s)
    started = ctx.start()
    return {"local_rank": ctx.local_rank, "pid": os.getpid(), "start_mono": started}


def fail_on(ctx: RankContext, *, bad_rank: int, when: str) -> dict[str, Any]:
    """Raise on ``bad_rank`` before or after the common start."""
    if ctx.local_rank == bad_rank and when == "before":
        raise OSError(28, "No space left on device")
    ctx.start()
    if ctx.local_rank == bad_rank and when == "after":
        raise OSError(28, "No space left on device")
    return {"local_rank": ctx.local_rank}


def hang_on(ctx: RankContext, *, bad_rank: int) -> dict[str, Any]:
    ctx.start()
    if ctx.local_rank == bad_rank:
        time.sleep(3600)
    return {"local_rank": ctx.local_rank}


def die_on(ctx: RankContext, *, bad_rank: int) -> dict[str, Any]:
    ctx.start()
    if ctx.local_rank == bad_rank:
        os._exit(3)
    return {"local_rank": ctx.local_rank}


@dataclass(frozen=True)
class PhaseOptions:
    """The run's options for ``typed_phases``: the phases every rank marks."""

    phases: tuple[str, ...]


@dataclass(frozen=True)
class MarkerDetail(RankDetail):
    """``typed_phases``'s detail: the rank's own marker."""

    marker: int


def typed_phases(ctx: RankContext, *, options: PhaseOptions, marker: int) -> RankResult:
    """Mark the run's phases in order from the common start and return a typed result."""
    marks = PhaseMarks.start(ctx)
    for phase in options.phases:
        marks.mark(phase)
    return marks.result(100 + ctx.local_rank, marker, detail=MarkerDetail(marker))


def stall_after_progress(ctx: RankContext, *, bad_rank: int) -> dict[str, Any]:
    """Report 1 MiB written and enter fsync; ``bad_rank`` then never reports again."""
    ctx.start()
    ctx.progress(bytes=2**20, phase="write", path=f"/x/{'ab'[ctx.local_rank]}")
    ctx.progress(phase="fsync")
    if ctx.local_rank == bad_rank:
        time.sleep(3600)
    return {"local_rank": ctx.local_rank}


def count_files_then_hang(ctx: RankContext, *, files: int, bad_rank: int) -> dict[str, Any]:
    """Count ``files`` done through the one-store files count, as a storm's loop does;
    ``bad_rank`` then never moves again."""
    done = ctx.files_done()
    ctx.start()
    ctx.progress(phase="stat", path=f"/x/{'ab'[ctx.local_rank]}")
    for n in range(1, files + 1):
        done[FILES_DONE] = n
    if ctx.local_rank == bad_rank:
        time.sleep(3600)
    return {"local_rank": ctx.local_rank}


def fail_then_others_wait(ctx: RankContext, *, bad_rank: int) -> dict[str, Any]:
    """``bad_rank`` raises after the start; every other rank waits for it forever, as a rank
    in a collective waits for a peer that will never arrive."""
    ctx.start()
    if ctx.local_rank == bad_rank:
        raise OSError(5, "Input/output error")
    threading.Event().wait()
    return {"local_rank": ctx.local_rank}


def _exit_quietly() -> None:
    """A grandchild process's work: nothing."""


def start_a_child(ctx: RankContext) -> dict[str, Any]:
    """Start a process of this rank's own and wait for it (a daemonic rank may not)."""
    ctx.start()
    child = multiprocessing.get_context("spawn").Process(target=_exit_quietly)
    child.start()
    child.join(60)
    return {"child_exitcode": child.exitcode}
