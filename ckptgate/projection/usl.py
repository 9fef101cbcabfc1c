"""The Universal Scalability Law fitted to a scaling sweep: pure arithmetic, no I/O.

Gunther's Universal Scalability Law (N. J. Gunther, *Guerrilla Capacity Planning*, Springer
2007, ch. 4; "A General Theory of Computational Scalability Based on Rational Functions",
arXiv:0808.1431) models the aggregate throughput of ``n`` clients as

    X(n) = λ n / (1 + σ (n - 1) + κ n (n - 1))

with λ the throughput of one client (here bytes/s or creates/s), σ the contention (the share
that serializes, Amdahl's) and κ the coherency cost (crosstalk that grows with every pair of
clients). The throughput peaks at n* = sqrt((1 - σ) / κ) (Gunther 2007, eq. 4.33) and falls
beyond it; with κ = 0 it approaches the ceiling λ / σ and never falls.

``fit_usl`` fits the three parameters by bounded nonlinear least squares
(``scipy.optimize.least_squares``, trust-region reflective) on relative residuals, so that the
one-client point weighs as much as the largest; ``bootstrap_usl`` resamples the repeats at each
client count (or, where a count has a single repeat, the fit's relative residuals) and refits,
for percentile intervals on λ, σ, κ and on the projected throughput at any n (Efron and
Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13). ``assess`` says whether the data
can support a projection beyond the clients measured, and if not, why: too few client counts,
a poor fit, or a curve still linear (no sign yet of where it bends, so its ceiling is unknown).

scipy is the optional extra ``projection``; ``available()`` says whether it is installed. This
module imports numpy only at the top and scipy inside ``fit_usl``: the arithmetic (``usl``,
``saturation_clients``) needs neither.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

INSTALL_HINT = "the scaling projection needs scipy: pip install 'ckptgate[projection]'"

MIN_CLIENT_COUNTS = 3
"""Fewest distinct client counts a fit may project from: three parameters need three points."""

MIN_R_SQUARED = 0.9
"""Below this coefficient of determination the curve does not describe the points: no
projection (the points scatter more than they scale)."""

LINEAR_EFFICIENCY = 0.8
"""A curve whose fitted efficiency X(k) / (k λ) at the largest measured count k is still at
least this is still linear: σ and κ cannot be told from the noise, so its ceiling is unknown
and it projects nothing beyond k."""

CONFIDENCE = 0.95
"""The bootstrap intervals' coverage (two-sided percentile interval)."""

BOOTSTRAP_RESAMPLES = 300
"""Resamples per bootstrap; the percentile interval's ends move by well under a percent past a
few hundred for smooth fits (Efron and Tibshirani 1993, ch. 19)."""


def available() -> bool:
    """Whether scipy is installed (the ``projection`` extra)."""
    return importlib.util.find_spec("scipy") is not None


def usl(n: float | np.ndarray, lam: float, sigma: float, kappa: float) -> float | np.ndarray:
    """X(n) = λ n / (1 + σ (n - 1) + κ n (n - 1)) (Gunther 2007, eq. 4.31), in λ's unit."""
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def saturation_clients(sigma: float, kappa: float) -> float:
    """n* = sqrt((1 - σ) / κ), where X(n) peaks (Gunther 2007, eq. 4.33); inf with κ = 0."""
    if kappa <= 0.0:
        return math.inf
    return math.sqrt(max(1.0 - sigma, 0.0) / kappa)


@dataclass(frozen=True)
class UslParams:
    """λ (throughput of one client, in the points' unit), σ and κ (dimensionless)."""

    lam: float
    sigma: float
    kappa: float

    def throughput(self, clients: float) -> float:
        return float(usl(clients, self.lam, self.sigma, self.kappa))

    @property
    def saturation_clients(self) -> float:
        return saturation_clients(self.sigma, self.kappa)

    @property
    def ceiling(self) -> float:
        """The most the curve ever delivers: X(n*), or λ / σ with κ = 0 (inf if σ is 0 too)."""
        n_star = self.saturation_clients
        if math.isfinite(n_star):
            return self.throughput(max(n_star, 1.0))
        return self.lam / self.sigma if self.sigma > 0 else math.inf


@dataclass(frozen=True)
class UslFit:
    """A least-squares fit of the USL to the mean throughput at each client count."""

    params: UslParams
    clients: tuple[int, ...]
    """The distinct client counts, ascending."""
    means: tuple[float, ...]
    """The mean measured throughput at each count."""
    r_squared: float
    """1 - SS_res / SS_tot on the means (absolute throughput)."""
    residuals: tuple[float, ...]
    """Relative residuals (measured - fitted) / measured at each count."""

    @property
    def largest_clients(self) -> int:
        return self.clients[-1]

    @property
    def efficiency_at_largest(self) -> float:
        """X(k) / (k λ): 1 for a straight line, lower as the curve bends."""
        k = self.largest_clients
        return self.params.throughput(k) / (k * self.params.lam)


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval (``CONFIDENCE``) around a point estimate."""

    estimate: float
    lower: float
    upper: float

    def to_json(self) -> dict[str, float]:
        return {"estimate": self.estimate, "lower": self.lower, "upper": self.upper}


@dataclass(frozen=True)
class Bootstrap:
    """The refitted parameters of every resample, and intervals drawn from them."""

    fit: UslFit
    samples: tuple[UslParams, ...]
    method: str
    """``repeats`` (resampled at each count) or ``residuals`` (a count had one repeat)."""

    def _interval(self, estimate: float, values: Sequence[float]) -> Interval:
        tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
        low, high = np.percentile(np.asarray(values, dtype=float), [tail, 100.0 - tail])
        return Interval(estimate, float(low), float(high))

    def lam(self) -> Interval:
        return self._interval(self.fit.params.lam, [p.lam for p in self.samples])

    def sigma(self) -> Interval:
        return self._interval(self.fit.params.sigma, [p.sigma for p in self.samples])

    def kappa(self) -> Interval:
        return self._interval(self.fit.params.kappa, [p.kappa for p in self.samples])

    def throughput(self, clients: float) -> Interval:
        """The projected throughput at ``clients``, with its interval."""
        return self._interval(
            self.fit.params.throughput(clients), [p.throughput(clients) for p in self.samples]
        )

    def saturation_clients(self) -> Interval:
        return self._interval(
            self.fit.params.saturation_clients, [p.saturation_clients for p in self.samples]
        )


@dataclass(frozen=True)
class Assessment:
    """Whether a fit may project beyond the counts measured; ``reason`` says why not."""

    projects: bool
    reason: str = ""
    kind: str = ""
    """Why not, as a word: ``too-few``, ``poor-fit`` or ``linear`` ("" when it projects)."""
    fit: UslFit | None = None
    bootstrap: Bootstrap | None = None


def mean_interval(values: Sequence[float], resamples: int = 1000, seed: int = 0) -> Interval:
    """The mean of one point's repeats with its percentile bootstrap interval (``CONFIDENCE``);
    a single repeat has no spread (its interval is the value itself)."""
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        value = float(data.mean()) if data.size else math.nan
        return Interval(value, value, value)
    rng = np.random.default_rng(seed)
    means = rng.choice(data, size=(resamples, data.size), replace=True).mean(axis=1)
    tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return Interval(float(data.mean()), float(low), float(high))


def _means(points: Mapping[int, Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    clients = np.array(sorted(points), dtype=float)
    means = np.array([float(np.mean(points[int(n)])) for n in clients], dtype=float)
    return clients, means


STARTS = ((0.01, 1e-4), (0.3, 1e-3), (0.05, 0.05))
"""(σ, κ) starting points: a nearly linear curve, an early ceiling, an early peak; the fit
keeps the best (least squares on a rational function has local minima)."""


def fit_usl(points: Mapping[int, Sequence[float]], start: UslParams | None = None) -> UslFit:
    """Fit λ, σ, κ to the mean of each client count's repeats (``points``: count -> values).

    Bounded least squares (λ > 0, 0 <= σ <= 1, κ >= 0) on relative residuals, the throughput
    scaled by the smallest count's per-client mean so that the solver sees numbers near 1.
    ``start`` (a bootstrap's: the full fit) replaces the ``STARTS``. Needs at least two counts
    (``assess`` asks for ``MIN_CLIENT_COUNTS`` before projecting).
    """
    from scipy.optimize import least_squares

    if len(points) < 2:
        raise ValueError(f"a fit needs at least two client counts, got {len(points)}")
    if any(n < 1 for n in points) or any(v <= 0 for vs in points.values() for v in vs):
        raise ValueError("client counts must be >= 1 and throughputs positive")
    clients, means = _means(points)
    scale = means[0] / clients[0]

    observed = means / scale

    def residuals(theta: np.ndarray) -> np.ndarray:
        return (usl(clients, theta[0], theta[1], theta[2]) - observed) / observed

    def jacobian(theta: np.ndarray) -> np.ndarray:
        # d/dλ = n / D, d/dσ = -λ n (n - 1) / D², d/dκ = -λ n² (n - 1) / D², over the observed
        lam, sigma, kappa = theta
        n = clients
        denominator = 1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)
        slope = -lam * n * (n - 1.0) / denominator**2
        columns = [n / denominator, slope, slope * n]
        return np.stack(columns, axis=1) / observed[:, None]

    starts = [(1.0, s, k) for s, k in STARTS]
    if start is not None:
        starts = [(start.lam / scale, start.sigma, start.kappa)]
    best = None
    for lam0, sigma0, kappa0 in starts:
        result = least_squares(
            residuals,
            jac=jacobian,
            x0=np.clip(np.array([lam0, sigma0, kappa0]), [1e-12, 0.0, 0.0], [np.inf, 1.0, np.inf]),
            bounds=([1e-12, 0.0, 0.0], [np.inf, 1.0, np.inf]),
            method="trf",
            x_scale="jac",
            xtol=1e-10,
            ftol=1e-10,
            gtol=1e-10,
            max_nfev=200,
        )
        if best is None or result.cost < best.cost:
            best = result
    assert best is not None
    lam, sigma, kappa = (float(v) for v in best.x)
    params = UslParams(float(lam * scale), sigma, kappa)
    fitted = np.asarray(usl(clients, params.lam, sigma, kappa))
    ss_res = float(np.sum((means - fitted) ** 2))
    ss_tot = float(np.sum((means - means.mean()) ** 2))
    r_squared = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return UslFit(
        params=params,
        clients=tuple(int(n) for n in clients),
        means=tuple(float(m) for m in means),
        r_squared=r_squared,
        residuals=tuple(float(r) for r in (means - fitted) / means),
    )


def bootstrap_usl(
    points: Mapping[int, Sequence[float]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> Bootstrap:
    """Refit on ``resamples`` resamples: each count's repeats drawn with replacement where
    every count has two or more, else the fit's relative residuals drawn across the counts
    and applied to the fitted curve (the residual bootstrap). Seeded: the same points give
    the same intervals."""
    fit = fit_usl(points)
    rng = np.random.default_rng(seed)
    counts = sorted(points)
    by_repeats = all(len(points[n]) >= 2 for n in counts)
    samples: list[UslParams] = []
    relative = np.asarray(fit.residuals)
    for _ in range(resamples):
        if by_repeats:
            drawn = {
                n: list(rng.choice(np.asarray(points[n], dtype=float), size=len(points[n])))
                for n in counts
            }
        else:
            noise = rng.choice(relative, size=len(counts), replace=True)
            drawn = {
                n: [max(fit.params.throughput(n) / (1.0 - e), 1e-300)]
                for n, e in zip(counts, noise, strict=True)
            }
        samples.append(fit_usl(drawn, start=fit.params).params)
    return Bootstrap(fit, tuple(samples), "repeats" if by_repeats else "residuals")


def assess(points: Mapping[int, Sequence[float]], seed: int = 0) -> Assessment:
    """Whether ``points`` (client count -> repeated throughputs) support a projection beyond
    the largest count, with the fit and its bootstrap when they do; the reason when not."""
    counts = sorted(points)
    if len(counts) < MIN_CLIENT_COUNTS:
        return Assessment(
            False,
            f"too few points: {len(counts)} client count(s) measured "
            f"({', '.join(map(str, counts)) or 'none'}), a fit needs at least "
            f"{MIN_CLIENT_COUNTS}",
            kind="too-few",
        )
    fit = fit_usl(points)
    if fit.r_squared < MIN_R_SQUARED:
        return Assessment(
            False,
            f"a poor fit: R² {fit.r_squared:.3f} < {MIN_R_SQUARED} (the points scatter more "
            "than they scale)",
            kind="poor-fit",
            fit=fit,
        )
    if fit.efficiency_at_largest >= LINEAR_EFFICIENCY:
        return Assessment(
            False,
            f"still linear at {fit.largest_clients} clients (fitted efficiency "
            f"{fit.efficiency_at_largest:.2f} >= {LINEAR_EFFICIENCY}): the ceiling is above "
            "the largest measured point and unknown",
            kind="linear",
            fit=fit,
        )
    return Assessment(True, fit=fit, bootstrap=bootstrap_usl(points, seed=seed))
