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
one-client point weighs as much as the largest (``model="amdahl"`` holds κ at 0);
``bootstrap_usl`` resamples the repeats at each client count, moves each by one of the fit's
relative residuals (what the model misses), and refits, for percentile intervals on λ, σ, κ
(Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13).

A projection is a prediction, not a parameter estimate: ``prediction_band`` is where one new
measurement at n lies, each resample's curve times one drawn measurement deviation, as the
envelope of the USL's and, unless the points reject it, Amdahl's (κ = 0): few points cannot
tell a peak from a plateau, and beyond them the two part. Fitted on 1, 2, 4, 8 clients with
3 % noise, the band at 16 held the truth in 58 of 59 seeded trials where the parameter
interval alone held it in 45 of 60 (``tests/projection/test_usl.py``). ``assess`` says
whether the data can support a projection beyond the clients measured, and if not, why: fewer
than four client counts (three parameters fit three exactly, whatever the curve), a poor fit,
or a curve still linear (no sign yet of where it bends, so its ceiling is unknown).

scipy is the optional extra ``projection``; ``available()`` says whether it is installed. This
module imports numpy only at the top and scipy inside ``fit_usl``: the arithmetic (``usl``,
``saturation_clients``) needs neither.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

INSTALL_HINT = "the scaling projection needs scipy: pip install 'ckptgate[projection]'"

MIN_CLIENT_COUNTS = 4
"""Fewest distinct client counts a fit may project from: three parameters fit three points
exactly, whatever the curve's true shape, so a fourth is the first that can disagree with the
model (one degree of freedom for its lack of fit to show in the residuals and the band)."""

MIN_R_SQUARED = 0.9
"""Below this coefficient of determination the curve does not describe the points: no
projection (the points scatter more than they scale), unless it misses none of them by much
(``CLOSE_FIT_RMS``)."""

CLOSE_FIT_RMS = 0.05
"""A fit whose root-mean-square relative residual is at most this describes the points even
with a low R²: R² is the share of the points' variance the curve explains, and a storage
saturated from the first client (a plateau) leaves almost no variance to explain, so any
curve through it, the right one included, scores low."""

LINEAR_EFFICIENCY = 0.8
"""A curve whose fitted efficiency X(k) / (k λ) at the largest measured count k is still at
least this is still linear: σ and κ cannot be told from the noise, so its ceiling is unknown
and it projects nothing beyond k."""

CONFIDENCE = 0.95
"""The bootstrap intervals' coverage (two-sided percentile interval)."""

MODELS = ("usl", "amdahl")
"""The curves a projection weighs: the USL, and its κ = 0 special case, Amdahl's law
(Gunther 2007, eq. 4.18: X(n) = λn / (1 + σ(n-1)), a ceiling λ/σ and no retrograde). Few
points rarely tell the two apart, yet beyond them they part ways (a peak and a fall, or a
plateau): the prediction band is the envelope of both where both fit (model-selection
uncertainty, Burnham and Anderson, *Model Selection and Multimodel Inference*, 2002, ch. 4)."""

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
    model: str = "usl"
    """Which of ``MODELS``: ``amdahl`` held κ at 0."""

    @property
    def free_parameters(self) -> int:
        return 3 if self.model == "usl" else 2

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
    noise: tuple[float, ...] = ()
    """One relative deviation of a new measurement per sample (``noise_pool``), for the
    prediction interval; empty: the parameter interval alone."""

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
        """The fitted curve at ``clients`` with its parameter interval (where the mean lies)."""
        return self._interval(
            self.fit.params.throughput(clients), [p.throughput(clients) for p in self.samples]
        )

    def prediction(self, clients: float) -> Interval:
        """Where one new measurement at ``clients`` lies: each resample's curve there times
        one drawn deviation of a single measurement (the bootstrap prediction interval,
        Davison and Hinkley, *Bootstrap Methods and their Application*, 1997, sec. 6.3.3)."""
        noise = self.noise or (0.0,) * len(self.samples)
        pairs = zip(self.samples, noise, strict=True)
        values = [p.throughput(clients) * (1.0 + e) for p, e in pairs]
        return self._interval(self.fit.params.throughput(clients), values)

    def saturation_clients(self) -> Interval:
        return self._interval(
            self.fit.params.saturation_clients, [p.saturation_clients for p in self.samples]
        )


@dataclass(frozen=True)
class PredictionBand:
    """The projection's band: the envelope of the prediction intervals of every model the
    data cannot reject (``MODELS``), around the USL's estimate. This is what a projected
    verdict compares with a requirement."""

    usl: Bootstrap
    others: tuple[Bootstrap, ...] = ()
    """The other models kept (Amdahl's where ``keeps_amdahl``), each with its bootstrap."""

    @property
    def models(self) -> tuple[str, ...]:
        return (self.usl.fit.model, *(b.fit.model for b in self.others))

    def throughput(self, clients: float) -> Interval:
        estimate = self.usl.fit.params.throughput(clients)
        intervals = [b.prediction(clients) for b in (self.usl, *self.others)]
        lower = min(estimate, *(i.lower for i in intervals))
        upper = max(estimate, *(i.upper for i in intervals))
        return Interval(estimate, lower, upper)


@dataclass(frozen=True)
class Assessment:
    """Whether a fit may project beyond the counts measured; ``reason`` says why not."""

    projects: bool
    reason: str = ""
    kind: str = ""
    """Why not, as a word: ``too-few``, ``poor-fit`` or ``linear`` ("" when it projects)."""
    fit: UslFit | None = None
    bootstrap: Bootstrap | None = None
    """The USL's bootstrap: its parameters' intervals."""
    band: PredictionBand | None = None
    """The prediction band a projection uses (set where ``projects``)."""


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


def fit_usl(
    points: Mapping[int, Sequence[float]],
    start: UslParams | None = None,
    model: str = "usl",
) -> UslFit:
    """Fit λ, σ, κ to the mean of each client count's repeats (``points``: count -> values);
    ``model="amdahl"`` holds κ at 0 and fits λ and σ (``MODELS``).

    Bounded least squares (λ > 0, 0 <= σ <= 1, κ >= 0) on relative residuals, the throughput
    scaled by the smallest count's per-client mean so that the solver sees numbers near 1.
    ``start`` (a bootstrap's: the full fit) replaces the ``STARTS``. Needs at least two counts
    (``assess`` asks for ``MIN_CLIENT_COUNTS`` before projecting).
    """
    from scipy.optimize import least_squares

    if model not in MODELS:
        raise ValueError(f"model {model!r}: allowed: {', '.join(MODELS)}")
    free = 3 if model == "usl" else 2
    if len(points) < 2:
        raise ValueError(f"a fit needs at least two client counts, got {len(points)}")
    if any(n < 1 for n in points) or any(v <= 0 for vs in points.values() for v in vs):
        raise ValueError("client counts must be >= 1 and throughputs positive")
    clients, means = _means(points)
    scale = means[0] / clients[0]

    observed = means / scale

    def full(theta: np.ndarray) -> np.ndarray:
        return theta if free == 3 else np.append(theta, 0.0)

    def residuals(theta: np.ndarray) -> np.ndarray:
        lam, sigma, kappa = full(theta)
        return np.asarray((usl(clients, lam, sigma, kappa) - observed) / observed)

    def jacobian(theta: np.ndarray) -> np.ndarray:
        # d/dλ = n / D, d/dσ = -λ n (n - 1) / D², d/dκ = -λ n² (n - 1) / D², over the observed
        lam, sigma, kappa = full(theta)
        n = clients
        denominator = 1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)
        slope = -lam * n * (n - 1.0) / denominator**2
        columns = [n / denominator, slope, slope * n]
        return np.stack(columns[:free], axis=1) / observed[:, None]

    starts = [(1.0, s, k) for s, k in STARTS]
    if start is not None:
        starts = [(start.lam / scale, start.sigma, start.kappa)]
    low, high = [1e-12, 0.0, 0.0][:free], [np.inf, 1.0, np.inf][:free]
    best = None
    for start_theta in dict.fromkeys(starts):
        result = least_squares(
            residuals,
            jac=jacobian,
            x0=np.clip(np.array(start_theta[:free]), low, high),
            bounds=(low, high),
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
    lam, sigma, kappa = (float(v) for v in full(best.x))
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
        model=model,
    )


def noise_pool(points: Mapping[int, Sequence[float]], fit: UslFit) -> np.ndarray:
    """How far one measurement falls from its count's mean, relatively: every repeat's
    deviation from its count's mean, scaled by sqrt(r / (r - 1)) for the mean's own share of
    it; where no count has two repeats, the fit's relative residuals, scaled by
    sqrt(m / (m - p)) for the p fitted parameters (Davison and Hinkley 1997, eq. 6.9)."""
    deviations = repeat_deviations(points[n] for n in sorted(points))
    if deviations:
        return np.asarray(deviations)
    return lack_of_fit(fit)


def repeat_deviations(groups: Iterable[Sequence[float]]) -> list[float]:
    """Every repeat's relative deviation from its group's mean, scaled by sqrt(r / (r - 1))
    for the mean's own share of it (Davison and Hinkley 1997, eq. 6.9); groups of one repeat
    have none."""
    deviations: list[float] = []
    for group in groups:
        values = np.asarray(group, dtype=float)
        if values.size >= 2:
            factor = math.sqrt(values.size / (values.size - 1))
            deviations.extend(float(d) for d in (values / values.mean() - 1.0) * factor)
    return deviations


def lack_of_fit(fit: UslFit) -> np.ndarray:
    """The fit's relative residuals, centred and scaled by sqrt(m / (m - p)) (m counts, p
    parameters): what the model misses at each count, as a residual bootstrap draws it."""
    residuals = np.asarray(fit.residuals, dtype=float)
    spare = len(residuals) - fit.free_parameters
    if spare <= 0:
        return np.zeros_like(residuals)
    return (residuals - residuals.mean()) * math.sqrt(len(residuals) / spare)


def bootstrap_usl(
    points: Mapping[int, Sequence[float]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    model: str = "usl",
) -> Bootstrap:
    """Refit ``model`` on ``resamples`` resamples. Each count's repeats are drawn with
    replacement where every count has two or more (else the fitted curve stands in for
    them), and each count's draw is moved by one of the fit's relative residuals
    (``lack_of_fit``): the repeats carry the measurement noise, the residuals what the model
    misses between the counts. Each sample also draws one new measurement's deviation
    (``noise_pool``) for ``Bootstrap.prediction``. Seeded: the same points give the same
    intervals."""
    fit = fit_usl(points, model=model)
    rng = np.random.default_rng(seed)
    counts = sorted(points)
    by_repeats = all(len(points[n]) >= 2 for n in counts)
    misses = lack_of_fit(fit)
    pool = noise_pool(points, fit)
    samples: list[UslParams] = []
    for _ in range(resamples):
        moved = rng.choice(misses, size=len(counts), replace=True)
        drawn: dict[int, list[float]] = {}
        for n, e in zip(counts, moved, strict=True):
            if by_repeats:
                values = rng.choice(np.asarray(points[n], dtype=float), size=len(points[n]))
            else:
                values = np.asarray([fit.params.throughput(n)])
            drawn[n] = [max(float(v) * (1.0 + e), 1e-300) for v in values]
        samples.append(fit_usl(drawn, start=fit.params, model=model).params)
    noise = tuple(float(e) for e in rng.choice(pool, size=resamples, replace=True))
    method = "repeats" if by_repeats else "residuals"
    return Bootstrap(fit, tuple(samples), method, noise)


AMDAHL_P_VALUE = 0.05
"""Amdahl's law is kept in the band unless the extra-sum-of-squares F test rejects κ = 0 at
this level (Bates and Watts, *Nonlinear Regression Analysis*, 1988, sec. 3.5.1)."""

F_TEST_SPARE = 2
"""Fewest spare degrees of freedom (counts less the USL's three parameters) the F test needs
before it may drop Amdahl's law. With one, the USL's residual sum of squares is a single
chi-square(1) draw, often near zero by chance, and the test rejects a plateau on noise: on
the host bed, a storage capped at 6 MB/s (flat from one client) fitted on 1, 2, 4, 8
clients lost Amdahl's plateau so, and the USL's band alone, 3.2 to 4.9 MB/s at 12 clients,
lay below the 5.4 MB/s measured there."""


def keeps_amdahl(full: UslFit, amdahl: UslFit) -> bool:
    """Whether the points cannot reject Amdahl's law (κ = 0) against the full USL: the
    F statistic of the extra parameter, (S_A - S_U) / (S_U / (m - 3)) on F(1, m - 3), over the
    relative residuals the fits minimise; with fewer than ``F_TEST_SPARE`` spare degrees of
    freedom Amdahl's law is kept untested (few points cannot tell the models apart). Its R²
    is no test: near a plateau the points barely vary, and R² of any curve through them is
    small. Keeping a model only widens the band (a pass needs every kept model's lower bound,
    a fail every upper one), so a kept model never makes a pass or a fail easier."""
    from scipy.stats import f as f_distribution

    spare = len(full.clients) - full.free_parameters
    s_usl = float(np.sum(np.square(full.residuals)))
    s_amdahl = float(np.sum(np.square(amdahl.residuals)))
    if spare < F_TEST_SPARE or s_amdahl <= s_usl * (1.0 + 1e-9):
        return True  # too few counts to test it, or the USL found κ = 0 itself
    if s_usl <= 1e-300:
        return False  # the USL is exact and Amdahl is not
    statistic = (s_amdahl - s_usl) / (s_usl / spare)
    return float(f_distribution.sf(statistic, 1, spare)) >= AMDAHL_P_VALUE


def prediction_band(
    points: Mapping[int, Sequence[float]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> PredictionBand:
    """The USL's bootstrap, and Amdahl's where the points cannot reject it
    (``keeps_amdahl``), as one ``PredictionBand``."""
    full = bootstrap_usl(points, resamples, seed)
    amdahl = fit_usl(points, model="amdahl")
    if not keeps_amdahl(full.fit, amdahl):
        return PredictionBand(full)
    return PredictionBand(full, (bootstrap_usl(points, resamples, seed + 1, model="amdahl"),))


def assess(
    points: Mapping[int, Sequence[float]],
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Assessment:
    """Whether ``points`` (client count -> repeated throughputs) support a projection beyond
    the largest count, with the fit and its prediction band when they do; the reason when
    not."""
    counts = sorted(points)
    if len(counts) < MIN_CLIENT_COUNTS:
        return Assessment(
            False,
            f"too few points: {len(counts)} client count(s) measured "
            f"({', '.join(map(str, counts)) or 'none'}), a projection needs at least "
            f"{MIN_CLIENT_COUNTS} (three parameters fit three counts exactly, whatever the "
            "curve)",
            kind="too-few",
        )
    fit = fit_usl(points)
    rms = math.sqrt(float(np.mean(np.square(fit.residuals))))
    if fit.r_squared < MIN_R_SQUARED and rms > CLOSE_FIT_RMS:
        return Assessment(
            False,
            f"a poor fit: R² {fit.r_squared:.3f} < {MIN_R_SQUARED} and the curve misses the "
            f"points by {rms:.1%} RMS > {CLOSE_FIT_RMS:.0%} (the points scatter more than they "
            "scale)",
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
    band = prediction_band(points, resamples, seed)
    return Assessment(True, fit=fit, bootstrap=band.usl, band=band)
