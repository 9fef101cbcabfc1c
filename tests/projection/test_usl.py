"""The USL fit on synthetic curves whose λ, σ, κ are known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ckptgate.projection.usl import (
    LINEAR_EFFICIENCY,
    assess,
    bootstrap_usl,
    fit_usl,
    mean_interval,
    prediction_band,
    saturation_clients,
    usl,
)

pytest.importorskip("scipy")

COUNTS = (1, 2, 4, 8, 16, 32, 64)


def curve(lam: float, sigma: float, kappa: float, counts=COUNTS, wobble: float = 0.0):
    """Three repeats per count, a deterministic ±wobble around the true curve."""
    return {
        n: [float(usl(n, lam, sigma, kappa)) * (1 + f * wobble) for f in (-1.0, 0.0, 1.0)]
        for n in counts
    }


def test_saturation_point_is_where_the_curve_peaks():
    sigma, kappa = 0.05, 0.002
    n_star = saturation_clients(sigma, kappa)
    assert math.isclose(n_star, math.sqrt(0.95 / 0.002))
    peak = usl(n_star, 1.0, sigma, kappa)
    assert peak > usl(n_star * 0.9, 1.0, sigma, kappa)
    assert peak > usl(n_star * 1.1, 1.0, sigma, kappa)
    assert saturation_clients(0.1, 0.0) == math.inf


@settings(max_examples=25, deadline=None)
@given(
    lam=st.floats(1e6, 1e10),
    sigma=st.floats(0.02, 0.3),
    kappa=st.floats(1e-4, 5e-3),
)
@example(lam=2e9, sigma=0.05, kappa=1e-3)  # a parallel filesystem's knee near 30 clients
def test_fit_recovers_lambda_sigma_kappa_of_a_bent_curve(lam, sigma, kappa):
    fit = fit_usl(curve(lam, sigma, kappa))
    assert math.isclose(fit.params.lam, lam, rel_tol=1e-3)
    assert math.isclose(fit.params.sigma, sigma, rel_tol=1e-2, abs_tol=1e-4)
    assert math.isclose(fit.params.kappa, kappa, rel_tol=1e-2, abs_tol=1e-6)
    assert fit.r_squared > 0.9999


@settings(max_examples=5, deadline=None)
@given(sigma=st.floats(0.05, 0.2), kappa=st.floats(5e-4, 3e-3))
def test_interval_from_the_small_counts_brackets_the_large_count(sigma, kappa):
    # Fit on 1..16 clients with 2 % repeat noise; the truth at 32 lies inside the band.
    points = curve(1e9, sigma, kappa, counts=(1, 2, 4, 8, 16), wobble=0.02)
    boot = bootstrap_usl(points, resamples=200)
    band = boot.throughput(32)
    truth = usl(32, 1e9, sigma, kappa)
    assert band.lower <= truth <= band.upper
    assert band.lower < band.estimate < band.upper


@settings(max_examples=20, deadline=None)
@given(
    lam=st.floats(1e6, 1e10),
    counts=st.sampled_from([(1, 2, 4, 8), (1, 2, 4, 8, 16), (2, 4, 8, 16), (1, 2, 4, 6)]),
    wobble=st.floats(0.0, 0.02),
)
def test_a_curve_still_linear_is_refused_beyond_its_range(lam, counts, wobble):
    points = curve(lam, 0.0, 0.0, counts=counts, wobble=wobble)
    verdict = assess(points)
    assert not verdict.projects
    assert verdict.reason.startswith(f"still linear at {counts[-1]} clients")
    assert verdict.fit is not None and verdict.fit.efficiency_at_largest >= LINEAR_EFFICIENCY


@pytest.mark.parametrize("counts", [(), (1,), (1, 2), (1, 2, 4)], ids=lambda c: f"counts={len(c)}")
def test_fewer_than_four_counts_are_too_few(counts):
    verdict = assess(curve(1e9, 0.1, 1e-3, counts=counts))
    assert not verdict.projects
    assert verdict.reason.startswith("too few points")


def test_points_that_scatter_are_a_poor_fit():
    points = {1: [5.0e9], 2: [1.0e9], 4: [6.0e9], 8: [1.2e9], 16: [5.5e9]}
    verdict = assess(points)
    assert not verdict.projects
    assert verdict.reason.startswith("a poor fit")


def test_a_saturated_curve_projects_with_a_bounded_band():
    verdict = assess(curve(1e9, 0.1, 2e-3, wobble=0.01))
    assert verdict.projects, verdict.reason
    assert verdict.bootstrap is not None
    assert verdict.bootstrap.method == "repeats"
    band = verdict.bootstrap.throughput(256)
    assert 0 < band.lower <= band.estimate <= band.upper < math.inf


def test_single_repeats_bootstrap_the_residuals():
    points = {n: [float(usl(n, 1e9, 0.1, 2e-3)) * (1 + 0.01 * (-1) ** n)] for n in COUNTS}
    boot = bootstrap_usl(points, resamples=50)
    assert boot.method == "residuals"
    sigma = boot.sigma()
    assert sigma.lower < sigma.estimate < sigma.upper
    assert math.isclose(sigma.estimate, 0.1, rel_tol=0.05)


def test_a_points_mean_interval_holds_its_mean_and_a_single_repeat_has_no_spread():
    interval = mean_interval([9.0, 10.0, 11.0, 10.5])
    assert 9.0 <= interval.lower < interval.estimate == 10.125 < interval.upper <= 11.0
    assert mean_interval([7.0]).to_json() == {"estimate": 7.0, "lower": 7.0, "upper": 7.0}


def noisy_curve(rng, lam, sigma, kappa, counts, noise=0.03, repeats=3):
    """``repeats`` measurements per count: the true curve times 1 + N(0, noise)."""
    return {
        n: [float(usl(n, lam, sigma, kappa)) * (1 + rng.normal(0.0, noise)) for _ in range(repeats)]
        for n in counts
    }


@pytest.mark.slow  # 30 seeded trials, each bootstrapped: 7 s of the fast tier's 6 minutes
def test_the_band_beyond_the_data_covers_the_truth_in_nine_trials_of_ten():
    # Fit on 1, 2, 4, 8 clients with 3 % noise per repeat; the truth at 16 (twice the data)
    # must lie in the band in at least 90 % of the trials that project. The parameter
    # interval alone (the bootstrap over the repeats, main before issue 24's item 1) held it
    # in 45 of 60 such trials; the prediction band over the USL and Amdahl in 58 of 59.
    rng = np.random.default_rng(24)
    covered = projected = 0
    for trial in range(30):
        sigma = rng.uniform(0.03, 0.3)
        kappa = 0.0 if trial % 2 else rng.uniform(1e-4, 3e-3)
        points = noisy_curve(rng, 1e9, sigma, kappa, (1, 2, 4, 8))
        verdict = assess(points, seed=trial, resamples=100)
        if not verdict.projects:
            continue
        assert verdict.band is not None
        band = verdict.band.throughput(16)
        projected += 1
        covered += int(band.lower <= float(usl(16, 1e9, sigma, kappa)) <= band.upper)
    assert projected >= 25
    assert covered >= 0.9 * projected, f"{covered} of {projected}"


def test_amdahl_stays_in_the_band_until_the_points_reject_it():
    rng = np.random.default_rng(3)
    few = noisy_curve(rng, 1e9, 0.1, 2e-3, (1, 2, 4, 8))
    assert prediction_band(few, resamples=20).models == ("usl", "amdahl")
    # 1 to 64 clients past the peak (n* = 21): κ = 0 cannot bend down, the F test drops it
    many = noisy_curve(rng, 1e9, 0.1, 2e-3, COUNTS, noise=0.01)
    assert prediction_band(many, resamples=20).models == ("usl",)


def test_four_counts_keep_the_plateau_a_capped_storage_shows():
    # The host bed's capped storage: one client at 80 % of the cap, 2 to 8 at it, the 8
    # client point 4 % low on a busy machine. One spare degree of freedom cannot reject
    # Amdahl's plateau; without it the USL alone bends down through the dip and its band
    # at 12 clients lies below the plateau 12 clients then measure.
    plateau = 5.6e6
    shape = {1: 0.8, 2: 1.0, 4: 1.0, 8: 0.96}
    points = {n: [plateau * f * (1 + e) for e in (-0.01, 0.0, 0.01)] for n, f in shape.items()}
    verdict = assess(points, resamples=100)
    assert verdict.projects, verdict.reason
    assert verdict.band is not None and verdict.band.models == ("usl", "amdahl")
    band = verdict.band.throughput(12)
    assert band.lower < 0.96 * plateau < plateau <= band.upper
