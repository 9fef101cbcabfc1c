"""The saved JSON report's schema: one typed tree, with a version, checked when a file is read.

``GateReport.json_data()`` writes the report with ``schema_version = SCHEMA_VERSION``;
``load_saved`` reads a file back into a ``SavedReport`` (``report/saved.py``), which the HTML,
CSV, compare and figure outputs read by attribute, never by string key. A file that is not a
ckptgate report, or one of another schema version (the reports written before the field
existed have none), is refused with one ``ReportSchemaError`` line naming the file, the key,
what was found and what is expected.

The schema names what the outputs read; a section may hold more (a burst's per-rank details,
the metadata rounds), which the reader keeps in ``SavedReport.data`` untouched. Adding a key is
compatible; renaming or retyping one that is read here is a new ``SCHEMA_VERSION``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ckptgate.report.items import Item
from ckptgate.report.verdict import Status

SCHEMA_VERSION = 1
"""The version ``json_data()`` writes and ``load_saved`` reads (1: the first with the field)."""

SCHEMA_KEY = "schema_version"

PHASES: tuple[str, ...] = ("open_s", "write_s", "read_s", "fsync_s", "close_s")
"""A rank record's phase times the outputs show, in the order a rank goes through them."""


class ReportSchemaError(ValueError):
    """A saved report that does not follow the schema; the message is one line for the user."""


@dataclass(frozen=True)
class SavedScale:
    """The verdict's scale: what the run played of the cluster (``report.verdict.RunScale``)."""

    words: str = ""
    nodes: int | None = None
    cluster_nodes: int | None = None
    ranks: int | None = None
    cluster_ranks: int | None = None
    full_cluster: bool = False
    trial_settings: tuple[str, ...] = ()
    memory_backed: bool = False
    caveats: tuple[str, ...] = ()


@dataclass(frozen=True)
class SavedVerdict:
    """The run's one verdict (``report.verdict.Verdict``)."""

    status: Status
    line: str
    failed: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()
    scale: SavedScale = field(default_factory=SavedScale)


@dataclass(frozen=True)
class LatencyStats:
    """One operation's latency summary (``engine.latency.LatencySummary``), in seconds."""

    count: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    max_s: float | None = None
    mean_s: float | None = None

    def marks_s(self) -> tuple[tuple[str, float | None], ...]:
        """``(("p50", s), ("p99", s), ("max", s))``: what the tables and figures show."""
        return (("p50", self.p50_s), ("p99", self.p99_s), ("max", self.max_s))


@dataclass(frozen=True)
class SlowestRank:
    rank: int | None = None
    global_rank: int | None = None
    node: int | None = None
    host: str | None = None
    total_s: float | None = None


@dataclass(frozen=True)
class RankRow:
    """One rank's record in a burst (``engine.records.RankRecord.to_json``); seconds from the
    burst's common start, phases summed over the rank's files."""

    rank: int
    global_rank: int
    bytes: int
    start_s: float
    end_s: float
    total_s: float
    node: int = 0
    host: str = ""
    open_s: float | None = None
    write_s: float | None = None
    read_s: float | None = None
    fsync_s: float | None = None
    close_s: float | None = None
    coordinator: bool = False

    def phase_s(self, phase: str) -> float | None:
        """The time of ``phase`` (one of ``PHASES``), None where this rank had none."""
        return typing.cast(float | None, getattr(self, phase))

    @property
    def bytes_per_s(self) -> float | None:
        """The rank's own bytes over its own time (None for a time of zero)."""
        return self.bytes / self.total_s if self.total_s else None


@dataclass(frozen=True)
class BurstSection:
    """A burst's summary and its per-rank records (``engine.records.BurstResult.to_json``)."""

    total_bytes: int = 0
    span_s: float = 0.0
    aggregate_bytes_per_s: float | None = None
    ranks: tuple[RankRow, ...] = ()
    slowest_rank: SlowestRank = field(default_factory=SlowestRank)
    start_skew_s: float | None = None
    node_bytes_per_s: dict[str, float] = field(default_factory=dict)
    """Keyed by the node's number as text (JSON object keys are strings)."""
    transfer_latency_s: dict[str, LatencyStats] = field(default_factory=dict)
    capped: bool | None = None
    """The write section: whether the shards were capped (a trial writes less)."""


@dataclass(frozen=True)
class SeriesRun:
    """One run's sampled progress on one node (``engine.sampler.Series.to_json``)."""

    phase: str
    nth: int
    node: int
    interval_s: float
    t_s: tuple[float, ...] = ()
    bytes_per_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class SeriesSection:
    sample_interval_s: float | None = None
    runs: tuple[SeriesRun, ...] = ()


@dataclass(frozen=True)
class SweepRow:
    """The full cluster's sizing at one checkpoint interval (``ckptgate.sizing.sweep``)."""

    interval_s: float
    label: str = ""
    """Which interval this is, where it is a marked one (the chosen one, Young's, Daly's)."""
    lost_work_fraction: float | None = None
    goodput_loss_fraction: float | None = None
    stall_budget_s: float | None = None
    sync_write_bytes_per_s: float | None = None
    async_persist_min_bytes_per_s: float | None = None
    async_persist_planned_bytes_per_s: float | None = None
    create_rate_per_s: float | None = None


@dataclass(frozen=True)
class SweepSection:
    """The sizing over checkpoint intervals (``report.saved.sweep_section``), with the
    profile mapping that produced it."""

    rows: tuple[SweepRow, ...] = ()
    profile: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScalingPlan:
    """What a scaling sweep measured (``campaigns.sweep.SweepPlan``)."""

    node_counts: tuple[int, ...]
    ranks_per_node: tuple[int, ...]
    repeats: int
    run_ranks: int


@dataclass(frozen=True)
class ScalingPoint:
    """One repeat of one sweep point (``campaigns.sweep.SweepPoint``)."""

    nodes: int
    ranks_per_node: int
    repeat: int
    write_bytes: int
    write_bytes_per_s: float
    read_bytes: int
    read_bytes_per_s: float
    created_files: int
    create_per_s: float
    verified_bytes: int


@dataclass(frozen=True)
class ScalingSummaryRow:
    """One point's mean over its repeats, its bootstrap interval, its worst and best."""

    nodes: int
    ranks_per_node: int
    metric: str
    repeats: int
    estimate: float
    lower: float
    upper: float
    worst: float
    best: float


@dataclass(frozen=True)
class CurvePoint:
    """The fitted curve at one node count, with its band where the fit projects."""

    nodes: float
    estimate: float
    lower: float | None = None
    upper: float | None = None


@dataclass(frozen=True)
class ProjectedItem:
    """One requirement at the full count against the sweep (``projection.projected``)."""

    metric: str
    title: str
    unit: str
    requirement: str
    required: float
    formula: str
    word: Literal["met", "projected-pass", "projected-fail", "undetermined"]
    reason: str
    measured_nodes: int
    measured_worst: float
    cluster_nodes: int
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    fit: dict[str, Any] | None = None
    """λ, σ, κ, R², the intervals and the band's models, as ``projected._fit_json`` wrote."""
    curve: tuple[CurvePoint, ...] = ()


@dataclass(frozen=True)
class SavedProjection:
    """The projection: its word (never a verdict's), its line, every item."""

    word: Literal["met", "projected-pass", "projected-fail", "undetermined"]
    line: str
    items: tuple[ProjectedItem, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RanksFit:
    """The USL over one node count's ranks per node (``projection.ranks``), described only."""

    sigma: float
    kappa: float
    r_squared: float
    saturation_ranks_per_node: float | None = None
    """None where the curve has no peak (κ = 0)."""


@dataclass(frozen=True)
class RanksCurveRow:
    """One metric against ranks per node at one node count (``projection.ranks.RanksCurve``)."""

    metric: str
    nodes: int
    ranks_per_node: tuple[int, ...]
    means: tuple[float, ...]
    efficiency: tuple[float, ...]
    best_ranks_per_node: int
    fit: RanksFit | None = None
    note: str = ""


@dataclass(frozen=True)
class RanksSection:
    meaning: str = ""
    curves: tuple[RanksCurveRow, ...] = ()


@dataclass(frozen=True)
class ScalingSection:
    """The scaling sweep and its projection (``campaigns.sweep.SweepResult.section``)."""

    plan: ScalingPlan
    words: str = ""
    cluster_nodes: int = 0
    points: tuple[ScalingPoint, ...] = ()
    summary: tuple[ScalingSummaryRow, ...] = ()
    verified_bytes: int = 0
    projection: SavedProjection | None = None
    no_projection: str = ""
    ranks: RanksSection = field(default_factory=RanksSection)


@dataclass(frozen=True)
class SavedProfileAsRun:
    """The cluster profile as the run used it (``ckptgate.sizing.as_run.ProfileAsRun``)."""

    label: str
    size_words: str
    name: str = ""
    modified: bool = False


@dataclass(frozen=True)
class SavedReport:
    """A saved JSON gate report, as the outputs read it (``GateReport.json_data``)."""

    schema_version: Literal[1]
    verdict: SavedVerdict
    items: tuple[Item, ...]
    ckptgate_version: str | None = None
    profile: str | None = None
    profile_source: str | None = None
    profile_as_run: SavedProfileAsRun | None = None
    target: str | None = None
    fs_type: str | None = None
    memory_backed: bool | None = None
    free_bytes: int | None = None
    hostname: str | None = None
    started_at: str | None = None
    nodes: int | None = None
    ranks: int | None = None
    profile_notes: tuple[str, ...] = ()
    """What the run said about a choice the profile left to a default (the header's lines)."""
    sizing: dict[str, Any] = field(default_factory=dict)
    """The sizing's numbers by name, and ``requirements`` (each with its ``unit``)."""
    write: BurstSection | None = None
    read: BurstSection | None = None
    reshard: BurstSection | None = None
    bandwidth_series: SeriesSection | None = None
    sweep: SweepSection | None = None
    scaling: ScalingSection | None = None
    data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The whole file as read: every key, those the schema names and those it does not."""


T = TypeVar("T")


def load_saved(data: Any, source: str) -> SavedReport:
    """``data`` (a parsed JSON file, named ``source`` in errors) as a ``SavedReport``."""
    if not isinstance(data, dict):
        raise ReportSchemaError(
            f"{source}: not a ckptgate JSON report: found a JSON {_json_kind(data)}, "
            f"expected an object with '{SCHEMA_KEY}': {SCHEMA_VERSION}"
        )
    if SCHEMA_KEY not in data:
        what = (
            "an old ckptgate report (written before the schema had a version)"
            if "items" in data and "verdict" in data
            else "not a ckptgate JSON report"
        )
        raise ReportSchemaError(
            f"{source}: {what}: key '{SCHEMA_KEY}' is missing, expected {SCHEMA_VERSION}; "
            "render it with the ckptgate version that wrote it"
        )
    found = data[SCHEMA_KEY]
    if found != SCHEMA_VERSION or isinstance(found, bool):
        raise ReportSchemaError(
            f"{source}: key '{SCHEMA_KEY}': found {found!r}, expected {SCHEMA_VERSION} "
            "(this ckptgate reads that schema only); render it with the ckptgate that wrote it"
        )
    report = _build(SavedReport, data, "", source)
    return dataclasses.replace(report, data=data)


def read_section(cls: type[T], raw: Any, key: str, source: str) -> T:
    """A check's own section (``ckptgate.report.sections.ReportPart``) under ``key`` as the
    dataclass ``cls``, read by the same rules as every other section: errors name
    ``source`` and the key."""
    return _build(cls, raw, key, source)


def transfer_latency(raw: Any, path: str) -> dict[str, LatencyStats]:
    """A burst's ``transfer_latency_s`` (a mapping of operation to summary, plain JSON) alone,
    as ``BurstSection.transfer_latency_s``: errors name ``path``."""
    section = _build(BurstSection, {"transfer_latency_s": raw}, path.rsplit(".", 1)[0], "")
    return section.transfer_latency_s


def sweep_row(raw: Any, source: str) -> SweepRow:
    """One row of ``ckptgate.sizing.sweep`` (a mapping) as a ``SweepRow``."""
    return _build(SweepRow, raw, "sweep.rows", source)


def scaling_section(raw: Any, source: str) -> ScalingSection:
    """A sweep's ``scaling`` section (``campaigns.sweep.SweepResult.section``, a mapping) as
    a ``ScalingSection``, for a figure drawn outside a saved report."""
    return _build(ScalingSection, raw, "scaling", source)


def _json_kind(value: Any) -> str:
    names = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


Where = str | tuple[Any, str | int]
"""Where a value is in the file: the root's name, or (where its parent is, its key or index);
made into text (``_where``) only for an error, so that reading a report of 16,384 ranks builds
no path string for any of its values."""

Reader = typing.Callable[[Any, Where, str], Any]
"""Reads one JSON value of one type hint: (the value, where it is, the file's name)."""


def _where(where: Where) -> str:
    """``where`` as the error message names it: ``write.ranks[3].bytes``."""
    keys: list[str | int] = []
    while isinstance(where, tuple):
        where, key = where
        keys.append(key)
    text = where
    for key in reversed(keys):
        text = f"{text}[{key}]" if isinstance(key, int) else f"{text}.{key}" if text else key
    return text


def _build(cls: type[T], raw: Any, path: str, source: str) -> T:
    """``raw`` (a JSON object) as the dataclass ``cls``: each field the schema names is
    checked against its type; keys it does not name are left to ``SavedReport.data``."""
    return typing.cast(T, _reader(typing.cast(Any, cls))(raw, path, source))


@functools.cache
def _reader(hint: Any) -> Reader:
    """The reader of ``hint``'s values, made once per hint (the type checks decided here, not
    once for every value of a report)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        (inner,) = [a for a in args if a is not type(None)]
        if type(None) not in args:
            return _reader(inner)
        return _scalar(inner, optional=True) if inner in _SCALARS else _optional(_reader(inner))
    if origin is Literal:
        return _literal(args)
    if origin is tuple:
        return _array(args[0])
    if origin is dict:
        return _object(args[1])
    if dataclasses.is_dataclass(hint):
        return _dataclass(typing.cast(type, hint))
    if hint is Any:
        return lambda raw, where, source: raw
    if hint in _SCALARS:
        return _scalar(hint)
    raise TypeError(f"report schema: no reader for {hint!r}")  # the schema's own bug


def _optional(inner: Reader) -> Reader:
    def read(raw: Any, where: Where, source: str) -> Any:
        return None if raw is None else inner(raw, where, source)

    return read


def _literal(allowed: tuple[Any, ...]) -> Reader:
    def read(raw: Any, where: Where, source: str) -> Any:
        if raw not in allowed or isinstance(raw, bool):
            raise _wrong(source, _where(where), raw, " or ".join(repr(a) for a in allowed))
        return raw

    return read


def _array(item: Any) -> Reader:
    def read(raw: Any, where: Where, source: str) -> Any:
        if not isinstance(raw, list):
            raise _wrong(source, _where(where), raw, "an array")
        return tuple([each(v, (where, n), source) for n, v in enumerate(raw)])

    each = _reader(item)
    return read


def _object(value: Any) -> Reader:
    def read(raw: Any, where: Where, source: str) -> Any:
        if not isinstance(raw, dict):
            raise _wrong(source, _where(where), raw, "an object")
        return {k: each(v, (where, k), source) for k, v in raw.items()}

    each = _reader(value)
    return read


def _dataclass(cls: type) -> Reader:
    fields = [f for f in dataclasses.fields(cls) if not (f.name == "data" and cls is SavedReport)]
    required = {
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    readers: list[tuple[str, Reader]] = []
    """Each field's reader, made at the first value read (a field's type may be a dataclass
    defined after this one)."""

    def read(raw: Any, where: Where, source: str) -> Any:
        if not isinstance(raw, dict):
            raise _wrong(source, _where(where), raw, "an object")
        if not readers:
            hints = _hints(cls)
            readers.extend((f.name, _reader(hints[f.name])) for f in fields)
        values = {}
        for name, reader in readers:
            if name in raw:
                values[name] = reader(raw[name], (where, name), source)
            elif name in required:
                raise ReportSchemaError(f"{source}: key '{_where((where, name))}' is missing; "
                                        "expected it")  # fmt: skip
        return cls(**values)

    return read


def _scalar(hint: type, optional: bool = False) -> Reader:
    """A number's, a string's or a flag's reader (``optional``: null too): the most values of
    a report, so each reader is its type's own, with ``type() is`` tests (a JSON number is a
    Python int or float, never a subclass; ``bool`` is an int, refused where a number is)."""
    expected, allowed = _SCALARS[hint]
    if hint is float:

        def read_float(raw: Any, where: Where, source: str) -> Any:
            kind = type(raw)
            if kind is float:
                return raw
            if kind is int:
                return float(raw)
            if raw is None and optional:
                return None
            raise _wrong(source, _where(where), raw, expected)

        return read_float

    def read(raw: Any, where: Where, source: str) -> Any:
        if type(raw) in allowed or (raw is None and optional):
            return raw
        raise _wrong(source, _where(where), raw, expected)

    return read


_SCALARS: dict[type, tuple[str, tuple[type, ...]]] = {
    bool: ("true or false", (bool,)),
    int: ("an integer", (int,)),
    float: ("a number", (int, float)),
    str: ("a string", (str,)),
}


def _wrong(source: str, path: str, raw: Any, expected: str) -> ReportSchemaError:
    shown = repr(raw) if len(repr(raw)) <= 60 else f"a JSON {_json_kind(raw)}"
    return ReportSchemaError(f"{source}: key '{path}': found {shown}, expected {expected}")
