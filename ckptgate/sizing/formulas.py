"""The closed-form formulas behind SPEC.md's numbers: the job's MTBF, lost work and restart
loss, Young's and Daly's optimum intervals, first-order waste, the stall budget and the create
window.

Each takes and returns plain numbers (seconds, fractions), and its docstring gives the formula,
its units and its source; the definitions (sizing.spec_numbers) evaluate them with the
profile's numbers, and the property tests (tests/sizing/test_requirements.py) hold them to
their laws.
"""

from __future__ import annotations

import math


def mtbf_s(interruptions: int, window_s: float, observed_gpus: int, gpus: int) -> float:
    """Mean time between failures of the job, seconds: window_s / interruptions, scaled by
    observed_gpus / gpus (the failure rate grows linearly with GPU count).

    Source: SPEC.md; rate from The Llama 3 Herd of Models (Meta, 2024), 419 unexpected
    interruptions in 54 days at 16,384 GPUs."""
    return window_s / interruptions * observed_gpus / gpus


def lost_work_fraction(interval_s: float, mtbf_s: float) -> float:
    """Fraction of wall clock whose work is lost to failures and recomputed, first order:
    (T/2) / mtbf_s; a failure lands mid-interval on average. Dimensionless. The restart after
    each failure is restart_loss_fraction. Source: SPEC.md; Young (1974)."""
    return interval_s / 2 / mtbf_s


def restart_loss_fraction(restart_cost_s: float, mtbf_s: float) -> float:
    """Fraction of wall clock spent restarting, first order: restart_cost_s / mtbf_s, where a
    restart costs the relaunch (failures.restart_s: requeue, process start, communicator set-up)
    plus the checkpoint read (restart.read_s). Source: SPEC.md; Daly (2006), whose R is this
    restart time."""
    return restart_cost_s / mtbf_s


def young_interval_s(stall_s: float, mtbf_s: float) -> float:
    """Young's optimum checkpoint interval, seconds: sqrt(2 * stall_s * mtbf_s), where stall_s
    is the time a checkpoint blocks training and does not depend on the interval. Source:
    Young (1974), Communications of the ACM 17(9), "A first order approximation to the optimum
    checkpoint interval"."""
    return math.sqrt(2 * stall_s * mtbf_s)


def daly_interval_s(stall_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum, seconds of compute between checkpoints:
    sqrt(2 d M) * (1 + sqrt(d / (2 M)) / 3 + (d / (2 M)) / 9) - d for d < 2 M, else M, with
    d = stall_s and M = mtbf_s; it tends to Young's as d / M -> 0. Source: Daly (2006), Future
    Generation Computer Systems 22(3), "A higher order estimate of the optimum checkpoint
    interval for restart dumps", eq. (37)."""
    if stall_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = stall_s / (2 * mtbf_s)
    return math.sqrt(2 * stall_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - stall_s


def first_order_waste(interval_s: float, stall_s: float, restart_s: float, mtbf_s: float) -> float:
    """Fraction of wall clock wasted, first order: stall_s / T (saving) plus T/2 / mtbf_s
    (lost work) plus restart_s / mtbf_s (restart: relaunch and checkpoint read). For a stall
    that does not scale with T its minimum over T is young_interval_s. Source: Young (1974)."""
    return (
        stall_s / interval_s
        + lost_work_fraction(interval_s, mtbf_s)
        + restart_loss_fraction(restart_s, mtbf_s)
    )


def stall_budget_s(overhead_budget: float, interval_s: float) -> float:
    """Seconds a blocking save may take: overhead_budget * T. Source: SPEC.md."""
    return overhead_budget * interval_s


def create_window_s(mode: str, stall_s: float, interval_s: float, async_headroom: float) -> float:
    """Seconds in which a checkpoint's files must be created: the stall budget (sync), or
    interval_s / async_headroom (async). Source: SPEC.md."""
    return stall_s if mode == "sync" else interval_s / async_headroom
