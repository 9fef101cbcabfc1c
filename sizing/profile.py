"""The cluster profile: frozen dataclasses, YAML loading, validation, overrides, dump.

One generic mechanism reads every section: each dataclass field says, through its type and
its metadata, what it accepts (kind, bounds, choices, the YAML key when it differs from the
field name). Unknown keys, wrong types and out-of-range values are reported from that one
place as a one-line ``ProfileError`` naming the file (or the ``--set``), the key path, the
value and what is allowed. Only the checks that tie several fields together (tp*pp*dp = gpus)
are written out by hand, in ``_cross_check``.

This is the only module in ``sizing`` that does I/O: it reads the profile file.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ckptgate.sizing.architecture import count_parameters
from ckptgate.sizing.units import (
    DAY_S,
    GB,
    MiB,
    UnitError,
    parse_bytes,
    parse_count,
    parse_number,
    parse_seconds,
)

SHIPPED_PROFILES: tuple[str, ...] = ("7b", "70b", "405b", "tmpfs")


class ProfileError(Exception):
    """A bad cluster profile or override; the message is one line meant for the user."""


def _m(
    kind: str | None = None,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """Field metadata read by the generic loader: kind, bounds, choices, YAML key."""
    return {"kind": kind, "gt": gt, "ge": ge, "lt": lt, "le": le, "choices": choices, "key": key}


_POSITIVE = _m(gt=0)


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer shape (Llama 3 layout; see sizing.architecture)."""

    hidden: int = field(metadata=_POSITIVE)
    ffn_hidden: int = field(metadata=_POSITIVE)
    layers: int = field(metadata=_POSITIVE)
    heads: int = field(metadata=_POSITIVE)
    kv_heads: int = field(metadata=_POSITIVE)
    vocab: int = field(metadata=_POSITIVE)


@dataclass(frozen=True)
class ModelSpec:
    """Ψ (or the shape to count it from) and K, the checkpoint bytes per parameter."""

    parameters: int | None = field(metadata=_POSITIVE)
    bytes_per_parameter: int = field(metadata=_POSITIVE)
    architecture: Architecture | None


@dataclass(frozen=True)
class Parallelism:
    """3D parallelism and who writes state that data-parallel replicas hold in common."""

    tp: int = field(metadata=_POSITIVE)
    pp: int = field(metadata=_POSITIVE)
    dp: int = field(metadata=_POSITIVE)
    zero_stage: int = field(default=1, metadata=_m(ge=0, le=3))
    replicas_write: str = field(default="spread", metadata=_m(choices=("one", "all", "spread")))


@dataclass(frozen=True)
class ClusterSpec:
    gpus: int = field(metadata=_POSITIVE)
    gpus_per_node: int = field(metadata=_POSITIVE)
    parallelism: Parallelism


@dataclass(frozen=True)
class FailureSpec:
    """Observed unexpected interruptions over a window at a GPU count (YAML: window_days)."""

    interruptions: int = field(metadata=_POSITIVE)
    window_s: float = field(metadata=_m("days", gt=0, key="window_days"))
    observed_gpus: int = field(metadata=_POSITIVE)
    restart_s: float = field(default=0.0, metadata=_m("seconds", ge=0))


@dataclass(frozen=True)
class CheckpointSpec:
    interval_s: float = field(metadata=_m("seconds", gt=0))
    overhead_budget: float = field(metadata=_m(gt=0, lt=1))
    mode: str = field(metadata=_m(choices=("sync", "async")))
    async_headroom: float = field(metadata=_m(ge=1))
    staging_buffers: int = field(metadata=_POSITIVE)
    files_per_rank: int = field(metadata=_POSITIVE)
    goodput_budget: float | None = field(default=None, metadata=_m(gt=0, lt=1))


@dataclass(frozen=True)
class RestartSpec:
    read_s: float = field(metadata=_m("seconds", gt=0))


@dataclass(frozen=True)
class RetentionSpec:
    count: int = field(metadata=_POSITIVE)
    protection_overhead: float = field(metadata=_m(ge=0))


@dataclass(frozen=True)
class RunSpec:
    """How the suite drives I/O on each node (section ``run:``; every key optional)."""

    transfer_bytes: int = field(default=16 * MiB, metadata=_m("bytes", gt=0))
    shard_bytes_cap: int | None = field(default=None, metadata=_m("bytes", gt=0))
    rounds: int = field(default=3, metadata=_POSITIVE)
    direct_io: bool = False
    reshard_fraction: float = field(default=0.5, metadata=_m(gt=0, le=1))
    metadata_files: int | None = field(default=None, metadata=_POSITIVE)
    readers: int = field(default=2, metadata=_m(ge=0))
    reader_bytes: int = field(default=1 * GB, metadata=_m("bytes", gt=0))
    max_reader_slowdown: float | None = field(default=None, metadata=_m(ge=0, le=1))
    timeout_floor_s: float = field(default=60.0, metadata=_m("seconds", gt=0))


_DCP_ARCHITECTURE = Architecture(
    hidden=512, ffn_hidden=1408, layers=8, heads=8, kv_heads=8, vocab=32000
)


@dataclass(frozen=True)
class DcpSpec:
    """A small real model for PyTorch DCP runs (section ``dcp:``; every key optional)."""

    architecture: Architecture = _DCP_ARCHITECTURE
    world_size: int = field(default=2, metadata=_POSITIVE)
    thread_count: int = field(default=2, metadata=_POSITIVE)
    checkpointer: str = field(default="thread", metadata=_m(choices=("sync", "thread", "process")))


@dataclass(frozen=True)
class Profile:
    """A cluster profile. ``source`` says where it was read from and is not compared."""

    name: str
    description: str
    source: str = field(compare=False, metadata={"internal": True})
    model: ModelSpec
    cluster: ClusterSpec
    failures: FailureSpec
    checkpoint: CheckpointSpec
    restart: RestartSpec
    retention: RetentionSpec
    run: RunSpec = field(default_factory=RunSpec)
    dcp: DcpSpec = field(default_factory=DcpSpec)

    @property
    def parameters(self) -> int:
        """Ψ: model.parameters when given, else counted from model.architecture."""
        if self.model.parameters is not None:
            return self.model.parameters
        assert self.model.architecture is not None  # guaranteed by validation
        return count_parameters(self.model.architecture)

    @property
    def nodes(self) -> int:
        return self.cluster.gpus // self.cluster.gpus_per_node


# --- the generic reader ------------------------------------------------------------------------


class _Context:
    """Where values came from: the file, or the ``--set`` that put them there."""

    def __init__(self, source: str, overrides: dict[str, str]):
        self.source = source
        self.overrides = overrides  # key path -> the --set text

    def where(self, *paths: str) -> str:
        hits = [
            text
            for key, text in self.overrides.items()
            for path in paths
            if key == path or key.startswith(path + ".") or path.startswith(key + ".")
        ]
        if hits:
            return ", ".join(f"--set {text}" for text in dict.fromkeys(hits))
        return self.source

    def error(self, path: str, value: Any, problem: str, allowed: str) -> ProfileError:
        return ProfileError(
            f"{self.where(path)}: {path} = {value!r}: {problem}; allowed: {allowed}"
        )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _yaml_key(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or f.name


def _loaded_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def _bounds_text(meta: dict[str, Any]) -> str:
    gt, ge, lt, le = meta.get("gt"), meta.get("ge"), meta.get("lt"), meta.get("le")
    low = f"({gt:g}" if gt is not None else f"[{ge:g}" if ge is not None else None
    high = f"{lt:g})" if lt is not None else f"{le:g}]" if le is not None else None
    if low and high:
        return f" in {low}, {high}"
    if gt is not None:
        return f" > {gt:g}"
    if ge is not None:
        return f" >= {ge:g}"
    if lt is not None:
        return f" < {lt:g}"
    if le is not None:
        return f" <= {le:g}"
    return ""


_KIND_TEXT = {
    "count": "a whole number",
    "number": "a number",
    "bytes": "a size in bytes (e.g. 16 MiB, 5.67 TB)",
    "seconds": "a duration (e.g. 600, '10 min', '2 h')",
    "days": "a number of days, or a duration with a unit (e.g. 54, '54 d')",
    "bool": "true or false",
    "str": "text",
}


def _allowed(kind: str, meta: dict[str, Any], optional: bool) -> str:
    if meta.get("choices"):
        text = "one of " + ", ".join(meta["choices"])
    else:
        text = _KIND_TEXT[kind] + _bounds_text(meta)
    return text + (", or null" if optional else "")


def _kind(f: dataclasses.Field, hint: Any) -> str:
    if f.metadata.get("kind"):
        return f.metadata["kind"]
    if hint is bool:
        return "bool"
    if hint is int:
        return "count"
    if hint is float:
        return "number"
    if hint is str:
        return "str"
    raise TypeError(f"no reader for field {f.name}: {hint!r}")  # a programming error


def _convert_scalar(kind: str, value: Any, where: str) -> Any:
    if kind == "count":
        return parse_count(value, where)
    if kind == "number":
        return parse_number(value, where)
    if kind == "bytes":
        return parse_bytes(value, where)
    if kind == "seconds":
        return parse_seconds(value, where)
    if kind == "days":
        if isinstance(value, str):
            try:
                return parse_number(value, where) * DAY_S
            except UnitError:
                return parse_seconds(value, where)
        return parse_number(value, where) * DAY_S
    raise AssertionError(kind)


def _read_field(ctx: _Context, f: dataclasses.Field, hint: Any, value: Any, path: str) -> Any:
    hint, optional = _unwrap_optional(hint)
    if value is None:
        if optional:
            return None
        kind = "section" if dataclasses.is_dataclass(hint) else _kind(f, hint)
        allowed = "a mapping" if kind == "section" else _allowed(kind, f.metadata, False)
        raise ctx.error(path, value, "must be given", allowed)
    if dataclasses.is_dataclass(hint):
        return _build(ctx, hint, value, path)
    kind = _kind(f, hint)
    meta = f.metadata
    allowed = _allowed(kind, meta, optional)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ctx.error(path, value, "wrong type", allowed)
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ctx.error(path, value, "wrong type", allowed)
        if meta.get("choices") and value not in meta["choices"]:
            raise ctx.error(path, value, "not a known choice", allowed)
        return value
    try:
        number = _convert_scalar(kind, value, f"{ctx.where(path)}: {path}")
    except UnitError as exc:
        raise ctx.error(path, value, "wrong type or unit", allowed) from exc
    if isinstance(number, float) and not math.isfinite(number):
        raise ctx.error(path, value, "not finite", allowed)
    checks = (
        ("gt", lambda bound: number > bound),
        ("ge", lambda bound: number >= bound),
        ("lt", lambda bound: number < bound),
        ("le", lambda bound: number <= bound),
    )
    for name, ok in checks:
        bound = meta.get(name)
        if bound is not None and not ok(bound):
            raise ctx.error(path, value, "out of range", allowed)
    return number


def _build(ctx: _Context, cls: type, raw: Any, path: str) -> Any:
    """Read one section into ``cls``, driven by its fields' types and metadata."""
    if not isinstance(raw, dict):
        raise ctx.error(path or "(top level)", raw, "wrong type", "a mapping of keys to values")
    fields = _loaded_fields(cls)
    known = {_yaml_key(f): f for f in fields}
    for key in raw:
        if key not in known:
            name = str(key)
            near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
            hint = f"; did you mean {_join(path, near[0])!r}?" if near else ""
            raise ProfileError(
                f"{ctx.where(_join(path, name))}: unknown key {_join(path, name)!r}{hint} "
                f"allowed keys{' in ' + path if path else ''}: {', '.join(known)}"
            )
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {
        f.name: "" for f in dataclasses.fields(cls) if f.metadata.get("internal")
    }
    for key, f in known.items():
        sub = _join(path, key)
        if key in raw:
            value = raw[key]
            if dataclasses.is_dataclass(f.default) and isinstance(value, dict):
                # A partial section fills in from the field's default (dcp.architecture).
                value = {**_dump(f.default), **value}
            kwargs[f.name] = _read_field(ctx, f, hints[f.name], value, sub)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        elif _unwrap_optional(hints[f.name])[1]:
            kwargs[f.name] = None
        else:
            raise ProfileError(
                f"{ctx.where(sub)}: missing key {sub!r}; "
                f"allowed: {_describe_field(f, hints[f.name])}"
            )
    return cls(**kwargs)


def _describe_field(f: dataclasses.Field, hint: Any) -> str:
    hint, optional = _unwrap_optional(hint)
    if dataclasses.is_dataclass(hint):
        keys = ", ".join(_yaml_key(g) for g in _loaded_fields(hint))
        return f"a mapping with keys {keys}"
    return _allowed(_kind(f, hint), f.metadata, optional)


def _cross_check(ctx: _Context, profile: Profile) -> None:
    """The checks that tie several fields together."""
    model, cluster = profile.model, profile.cluster
    par = cluster.parallelism
    if model.parameters is None and model.architecture is None:
        raise ProfileError(
            f"{ctx.where('model')}: model: neither parameters nor architecture given; "
            "allowed: model.parameters (e.g. 405e9), or model.architecture "
            "(hidden, ffn_hidden, layers, heads, kv_heads, vocab), or both"
        )
    for arch_path, arch in (
        ("model.architecture", model.architecture),
        ("dcp.architecture", profile.dcp.architecture),
    ):
        if arch is None:
            continue
        if arch.hidden % arch.heads:
            raise ctx.error(
                f"{arch_path}.hidden",
                arch.hidden,
                f"not a multiple of {arch_path}.heads ({arch.heads})",
                "hidden divisible by heads (head_dim = hidden / heads)",
            )
        if arch.heads % arch.kv_heads:
            raise ctx.error(
                f"{arch_path}.kv_heads",
                arch.kv_heads,
                f"does not divide {arch_path}.heads ({arch.heads})",
                "a divisor of heads (grouped-query attention)",
            )
    if cluster.gpus % cluster.gpus_per_node:
        raise ProfileError(
            f"{ctx.where('cluster.gpus', 'cluster.gpus_per_node')}: cluster.gpus = "
            f"{cluster.gpus} is not a multiple of cluster.gpus_per_node = "
            f"{cluster.gpus_per_node}; allowed: whole nodes only"
        )
    if par.tp * par.pp * par.dp != cluster.gpus:
        raise ProfileError(
            f"{ctx.where('cluster.parallelism', 'cluster.gpus')}: cluster.parallelism "
            f"tp*pp*dp = {par.tp}*{par.pp}*{par.dp} = {par.tp * par.pp * par.dp} "
            f"!= cluster.gpus = {cluster.gpus}; allowed: tp*pp*dp equal to gpus"
        )
    if model.architecture is not None and par.pp > model.architecture.layers:
        raise ctx.error(
            "cluster.parallelism.pp",
            par.pp,
            f"more pipeline stages than model.architecture.layers ({model.architecture.layers})",
            "pp <= layers",
        )


# --- loading, overrides, dumping ----------------------------------------------------------------


def _parse_override(text: str) -> tuple[list[str], Any]:
    key, sep, value_text = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError(
            f"--set {text}: not of the form key.path=value; allowed: e.g. "
            "--set checkpoint.interval_s='10 min' or --set cluster.gpus=1024"
        )
    parts = key.split(".")
    if any(not p.strip() for p in parts):
        raise ProfileError(
            f"--set {text}: empty part in key path {key!r}; allowed: dotted keys such as "
            "model.architecture.hidden"
        )
    try:
        value = yaml.safe_load(value_text) if value_text.strip() else None
    except yaml.YAMLError:
        value = value_text
    return [p.strip() for p in parts], value


def _apply_overrides(raw: dict[str, Any], overrides: typing.Iterable[str]) -> dict[str, str]:
    touched: dict[str, str] = {}
    for text in overrides:
        parts, value = _parse_override(text)
        node = raw
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                prefix = ".".join(parts[: depth + 1])
                raise ProfileError(
                    f"--set {text}: {prefix} is a value ({child!r}), not a section; "
                    f"allowed: set {prefix}=... itself"
                )
            node = child
        node[parts[-1]] = value
        touched[".".join(parts)] = text
    return touched


def _read_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(exc.problem or exc.context or "").split())
        raise ProfileError(
            f"{source}{position}: malformed YAML: {problem}; allowed: a YAML mapping "
            "(see sizing/profiles/405b.yaml)"
        ) from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{source}: malformed YAML: {' '.join(str(exc).split())}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProfileError(
            f"{source}: top level is {type(raw).__name__} {raw!r:.40}; allowed: a YAML mapping "
            "with keys model, cluster, failures, checkpoint, restart, retention"
        )
    return raw


def _locate(name_or_path: str | Path) -> tuple[str, str, str]:
    """(text, source for messages, default name) of a shipped name or a path."""
    text_name = str(name_or_path)
    if text_name in SHIPPED_PROFILES:
        resource = importlib.resources.files("ckptgate.sizing") / "profiles" / f"{text_name}.yaml"
        return resource.read_text(encoding="utf-8"), f"sizing/profiles/{text_name}.yaml", text_name
    path = Path(name_or_path)
    try:
        return path.read_text(encoding="utf-8"), str(path), path.stem
    except FileNotFoundError:
        raise ProfileError(
            f"--profile {text_name}: not a shipped cluster profile and no such file; "
            f"allowed: {', '.join(SHIPPED_PROFILES)}, or a path to a YAML file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"--profile {text_name}: cannot read the file: {exc}") from None


def profile_from_dict(
    raw: dict[str, Any],
    source: str = "<dict>",
    overrides: typing.Iterable[str] = (),
    default_name: str = "profile",
) -> Profile:
    """Validate a raw mapping (as YAML gives it), with overrides applied on top."""
    raw = _deep_copy(raw)
    touched = _apply_overrides(raw, overrides)
    raw.setdefault("name", default_name)
    raw.setdefault("description", "")
    ctx = _Context(source, touched)
    profile = _build(ctx, Profile, raw, "")
    profile = dataclasses.replace(profile, source=source)
    _cross_check(ctx, profile)
    return profile


def load_profile(name_or_path: str | Path, overrides: typing.Iterable[str] = ()) -> Profile:
    """Load a shipped cluster profile by name (7b, 70b, 405b, tmpfs) or a YAML file by path,
    then apply ``key.path=value`` overrides. Raises ProfileError with one line on bad input."""
    text, source, default_name = _locate(name_or_path)
    raw = _read_yaml(text, source)
    return profile_from_dict(raw, source, overrides, default_name)


def _deep_copy(raw: Any) -> Any:
    if isinstance(raw, dict):
        return {k: _deep_copy(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_deep_copy(v) for v in raw]
    return raw


def _dump_value(f: dataclasses.Field, value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return _dump(value)
    if f.metadata.get("kind") == "days":
        days = value / DAY_S
        return days if days * DAY_S == value else f"{value!r} s"
    return value


def _dump(obj: Any) -> dict[str, Any]:
    return {
        _yaml_key(f): _dump_value(f, getattr(obj, f.name))
        for f in _loaded_fields(type(obj))
        if getattr(obj, f.name) is not None
    }


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The profile as the YAML schema's plain mapping; loading it gives an equal Profile."""
    return _dump(profile)


def dump_profile(profile: Profile) -> str:
    """The profile as YAML text."""
    return yaml.safe_dump(profile_to_dict(profile), sort_keys=False)
