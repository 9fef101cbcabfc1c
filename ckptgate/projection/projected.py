"""The projected verdict: what a sweep on k of the profile's N nodes says about N, in words of
its own that are never ``qualified``.

SPEC.md, "What a verdict means": for each requirement that grows with the cluster (the
aggregate persist bandwidth, the create rate, the restart read), the requirement at N against
the fitted curve's projection at N (``ckptgate.projection.usl``):

- ``met``: the sweep's worst repeat at k nodes already meets the requirement at N: an
  aggregate requirement met at k nodes is met outright;
- ``projected-pass``: the lower bound of the projection's prediction band at N
  (``usl.prediction_band``: one new measurement, the USL and Amdahl's law where the points
  cannot reject it), less the worst repeat's shortfall below its point's mean
  (``worst_shortfall``: every checkpoint must fit, not the average), meets it;
- ``projected-fail``: its upper bound at N falls short;
- ``undetermined``: too few node counts (fewer than four), a poor fit, a curve still linear
  at k (its ceiling above the largest point and unknown), or a band that straddles the
  requirement; the reason says which.

The per-node stall (the slowest rank of a save at full scale) and the metadata storm at the
full rank count need every node: a projection never speaks for them (``NEEDS_EVERY_NODE``).
The run's own verdict (``ckptgate.report.verdict``) is untouched: a projection is its own line,
and never changes the exit status.

Pure: no I/O; scipy only through ``usl``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ckptgate.projection import ceiling as ceilings
from ckptgate.projection import usl
from ckptgate.sizing import Requirement, format_count
from ckptgate.sizing.requirements import format_value

Word = Literal["met", "projected-pass", "projected-fail", "undetermined"]


@dataclass(frozen=True)
class Metric:
    """One swept measurement and the requirement at the full cluster it answers."""

    id: str
    title: str
    unit: str


METRICS = (
    Metric("write", "persist bandwidth (write burst)", "B/s"),
    Metric("read", "restart read", "B/s"),
    Metric("create", "create rate (create storm)", "1/s"),
)
BY_METRIC = {m.id: m for m in METRICS}

NEEDS_EVERY_NODE = (
    "the per-node stall (the slowest rank of a full-scale save) and the metadata storm at the "
    "full rank count need every node: no projection speaks for them"
)


@dataclass(frozen=True)
class ItemProjection:
    """One requirement at N against the sweep."""

    metric: str
    title: str
    unit: str
    requirement: str
    """The requirement's name in the sizing (``async_persist_planned_bytes_per_s``, ...)."""
    required: float
    formula: str
    word: Word
    reason: str
    measured_nodes: int
    """k: the largest node count the sweep measured."""
    measured_worst: float
    """The worst repeat at k nodes."""
    cluster_nodes: int
    estimate: float | None = None
    lower: float | None = None
    """The interval's lower bound at N less the worst repeat's shortfall: what a pass needs."""
    upper: float | None = None
    fit: dict[str, Any] | None = None
    ceiling: dict[str, Any] | None = None
    """What the sweep shows of the storage's ceiling and what limited the trial
    (``ceiling.Ceiling.to_json``)."""
    curve: tuple[dict[str, float | None], ...] = ()
    """The fitted curve from one node to the full count (``CURVE_POINTS`` nodes, geometric),
    with its band where the fit projects: what the HTML report draws."""

    def sentence(self) -> str:
        return f"{self.title}: {self.word}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "title": self.title,
            "unit": self.unit,
            "requirement": self.requirement,
            "required": self.required,
            "formula": self.formula,
            "word": self.word,
            "reason": self.reason,
            "measured_nodes": self.measured_nodes,
            "measured_worst": self.measured_worst,
            "cluster_nodes": self.cluster_nodes,
            "estimate": self.estimate,
            "lower": self.lower,
            "upper": self.upper,
            "fit": self.fit,
            "ceiling": self.ceiling,
            "curve": list(self.curve),
        }


@dataclass(frozen=True)
class Projection:
    """Every projected item and the projection's one word and line."""

    word: Word
    line: str
    items: tuple[ItemProjection, ...]
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "line": self.line,
            "items": [i.to_json() for i in self.items],
            "notes": list(self.notes),
        }


CURVE_POINTS = 40


def _curve(
    assessment: usl.Assessment, cluster_nodes: int, ceiling: ceilings.Ceiling | None = None
) -> tuple[dict[str, float | None], ...]:
    """The fit at ``CURVE_POINTS`` node counts from 1 to ``cluster_nodes`` (geometric), with
    the bootstrap band; a refused fit is drawn over the measured counts alone, without a band
    (beyond them it says nothing). A saturated storage's (``ceiling``) band is its measured
    level, from the plateau's first node count on, and flat beyond the largest (assumed)."""
    fit = assessment.fit
    level = ceiling.level if ceiling is not None else None
    if level is not None and ceiling is not None:
        first, k = min(ceiling.flat_nodes), ceiling.top_nodes
        out = []
        for step in range(CURVE_POINTS):
            n = max(cluster_nodes, k) ** (step / (CURVE_POINTS - 1))
            estimate = fit.params.throughput(n) if fit is not None and n <= k else level.estimate
            inside = n >= first
            out.append({"nodes": n, "estimate": estimate,
                        "lower": level.lower if inside else None,
                        "upper": level.upper if inside else None})  # fmt: skip
        return tuple(out)
    if fit is None:
        return ()
    top = max(cluster_nodes, fit.largest_clients) if assessment.projects else fit.largest_clients
    out = []
    for step in range(CURVE_POINTS):
        n = top ** (step / (CURVE_POINTS - 1))
        if assessment.band is not None:
            band = assessment.band.throughput(n)
            out.append({"nodes": n, "estimate": band.estimate, "lower": band.lower,
                        "upper": band.upper})  # fmt: skip
        else:
            out.append({"nodes": n, "estimate": fit.params.throughput(n), "lower": None,
                        "upper": None})  # fmt: skip
    return tuple(out)


def _fit_json(assessment: usl.Assessment) -> dict[str, Any] | None:
    fit = assessment.fit
    if fit is None:
        return None
    out: dict[str, Any] = {
        "model": "USL: X(n) = λn / (1 + σ(n-1) + κn(n-1)) (Gunther 2007)",
        "lambda": fit.params.lam,
        "sigma": fit.params.sigma,
        "kappa": fit.params.kappa,
        "saturation_nodes": fit.params.saturation_clients,
        "r_squared": fit.r_squared,
        "residuals": list(fit.residuals),
        "nodes": list(fit.clients),
        "means": list(fit.means),
    }
    boot = assessment.bootstrap
    if boot is not None:
        out["confidence"] = usl.CONFIDENCE
        out["bootstrap"] = boot.method
        out["intervals"] = {
            "lambda": boot.lam().to_json(),
            "sigma": boot.sigma().to_json(),
            "kappa": boot.kappa().to_json(),
            "saturation_nodes": boot.saturation_clients().to_json(),
        }
    if assessment.band is not None:
        out["band"] = (
            "prediction interval of one measurement, the envelope of the models kept: "
            + ", ".join(assessment.band.models)
        )
        out["band_models"] = list(assessment.band.models)
    return out


def project_item(
    metric: Metric,
    points: Mapping[int, Sequence[float]],
    requirement: Requirement,
    cluster_nodes: int,
    seed: int = 0,
    grid: ceilings.Grid | None = None,
    ranks_per_node: int = 1,
    node_limit: ceilings.NodeLimit | None = None,
    resamples: int = usl.BOOTSTRAP_RESAMPLES,
) -> ItemProjection:
    """The requirement at ``cluster_nodes`` against ``points`` (node count -> repeats at the
    run's ``ranks_per_node``) and, where the sweep measured more stream counts, ``grid``
    (node count -> ranks per node -> repeats, ``points`` among them): where the grid shows
    the storage saturated (``ceiling.ceiling``) its measured level bounds the projection,
    else the USL's band does; the words say what limited the trial either way."""
    required = float(requirement.value)
    k = max(points)
    worst = min(points[k])
    fmt = lambda v: format_value(v, metric.unit)  # noqa: E731
    base: dict[str, Any] = {
        "metric": metric.id,
        "title": metric.title,
        "unit": metric.unit,
        "requirement": requirement.name,
        "required": required,
        "formula": requirement.formula,
        "measured_nodes": k,
        "measured_worst": worst,
        "cluster_nodes": cluster_nodes,
    }
    nodes = format_count(cluster_nodes)
    need = f"required {fmt(required)} at {nodes} nodes ({requirement.formula})"
    if worst >= required:
        return ItemProjection(
            **base,
            word="met",
            reason=f"met outright at {k} nodes: measured {fmt(worst)} (worst repeat) >= {need}",
        )
    measured = grid if grid is not None else {n: {ranks_per_node: v} for n, v in points.items()}
    ceiling = ceilings.ceiling(measured, node_limit, seed=seed, resamples=resamples, fmt=fmt)
    assert ceiling is not None  # points has k
    limited = f"; what limited the trial: {ceiling.limiter_words}"
    base["ceiling"] = ceiling.to_json()
    if not usl.available():
        return ItemProjection(**base, word="undetermined", reason=usl.INSTALL_HINT)
    assessment = usl.assess(points, seed=seed, resamples=resamples)
    fit_json = _fit_json(assessment)
    shortfall = worst_shortfall(points)
    if ceiling.saturated:
        assert ceiling.level is not None
        level = ceiling.level
        shown = (
            f"the storage is saturated ({ceiling.limiter_words}): projected "
            f"{fmt(level.estimate)} at {nodes} nodes, {usl.CONFIDENCE * 100:.0f} % prediction "
            f"interval {fmt(level.lower)} to {fmt(level.upper)}, its measured level at "
            f"{ceiling.top_streams:,} streams (the plateau less the decline the points can "
            f"show, up to {ceiling.decline:.1%} across it); it {ceiling.assumption}"
        )
        word, reason = _decide(shown, level.lower, level.upper, shortfall, need, required, fmt)
        return ItemProjection(
            **base,
            word=word,
            reason=reason,
            estimate=level.estimate,
            lower=level.lower * (1.0 - shortfall),
            upper=level.upper,
            fit=fit_json,
            curve=_curve(assessment, cluster_nodes, ceiling),
        )
    if not assessment.projects:
        reason = f"{assessment.reason}; {need}"
        if assessment.kind == "linear" and assessment.fit is not None:
            efficiency = assessment.fit.efficiency_at_largest
            reason = (
                f"still linear at {k} nodes (fitted efficiency {efficiency:.2f} >= "
                f"{usl.LINEAR_EFFICIENCY}): the ceiling is above {fmt(worst)} and unknown; {need}"
            )
        return ItemProjection(
            **base,
            word="undetermined",
            reason=reason + limited,
            fit=fit_json,
            curve=_curve(assessment, cluster_nodes),
        )
    assert assessment.band is not None
    band = assessment.band.throughput(cluster_nodes)
    models = " and ".join("Amdahl" if m == "amdahl" else "USL" for m in assessment.band.models)
    shown = (
        f"projected {fmt(band.estimate)} at {format_count(cluster_nodes)} nodes, "
        f"{usl.CONFIDENCE * 100:.0f} % prediction interval {fmt(band.lower)} to "
        f"{fmt(band.upper)} ({models})"
    )
    word, reason = _decide(shown, band.lower, band.upper, shortfall, need, required, fmt)
    return ItemProjection(
        **base,
        word=word,
        reason=reason + limited,
        estimate=band.estimate,
        lower=band.lower * (1.0 - shortfall),
        upper=band.upper,
        fit=fit_json,
        curve=_curve(assessment, cluster_nodes),
    )


def _decide(
    shown: str,
    lower: float,
    upper: float,
    shortfall: float,
    need: str,
    required: float,
    fmt: Callable[[float], str],
) -> tuple[Word, str]:
    """The word for a band (``lower`` to ``upper`` at the full count) against ``required``:
    a pass needs the lower bound less the worst repeat's shortfall, a fail the upper bound
    short; else undetermined."""
    worst_lower = lower * (1.0 - shortfall)
    if worst_lower >= required:
        return "projected-pass", (
            f"{shown}: its lower bound less the worst repeat's shortfall ({shortfall:.1%}), "
            f"{fmt(worst_lower)}, meets {need}"
        )
    if lower >= required:
        return "undetermined", (
            f"{shown}: the lower bound meets {need} on average, but not less the worst "
            f"repeat's shortfall ({shortfall:.1%}): {fmt(worst_lower)}"
        )
    if upper < required:
        return "projected-fail", f"{shown}: even its upper bound falls short of {need}"
    return "undetermined", f"{shown}: the interval straddles {need}"


def worst_shortfall(points: Mapping[int, Sequence[float]]) -> float:
    """How far the worst repeat of any point fell below its point's mean, as a fraction: a
    pass must hold for every checkpoint, not the average one (as the write rounds' gate takes
    the slowest round), so the projection's lower bound is lowered by it."""
    return max((1.0 - min(v) / (sum(v) / len(v)) for v in points.values() if v), default=0.0)


def overall(items: Sequence[ItemProjection]) -> Word:
    """projected-fail if any item is; undetermined if any is; else projected-pass (every item
    met outright or projected to pass). Never ``qualified``."""
    words = {i.word for i in items}
    if not items:
        return "undetermined"
    if "projected-fail" in words:
        return "projected-fail"
    if "undetermined" in words:
        return "undetermined"
    return "projected-pass"


def project(
    series: Mapping[str, Mapping[int, Sequence[float]]],
    requirements: Mapping[str, Requirement],
    cluster_nodes: int,
    sweep_words: str,
    grids: Mapping[str, ceilings.Grid] | None = None,
    ranks_per_node: int = 1,
    node_limits: Mapping[str, ceilings.NodeLimit] | None = None,
) -> Projection:
    """The projection of every swept metric (``series``: metric -> node count -> repeats at
    the run's ``ranks_per_node``) that has a requirement (``requirements``: metric -> the
    requirement at the full cluster); ``sweep_words`` says what was swept (``1, 2, 4 of
    2,048 nodes, 8 ranks per node``); ``grids`` (metric -> node count -> ranks per node ->
    repeats) where the sweep measured more stream counts, ``node_limits`` a node's own
    measured limit per metric (``project_item``)."""
    items = tuple(
        project_item(
            BY_METRIC[m],
            points,
            requirements[m],
            cluster_nodes,
            grid=(grids or {}).get(m),
            ranks_per_node=ranks_per_node,
            node_limit=(node_limits or {}).get(m),
        )
        for m, points in series.items()
        if points and m in requirements
    )
    word = overall(items)
    parts = "; ".join(i.sentence() for i in items) or "nothing was swept"
    line = (
        f"PROJECTION {word} (not a qualification; the run's verdict stands) for "
        f"{format_count(cluster_nodes)} nodes from a sweep of {sweep_words}: {parts}; "
        f"{NEEDS_EVERY_NODE}"
    )
    return Projection(word, line, items, notes=(NEEDS_EVERY_NODE,))
