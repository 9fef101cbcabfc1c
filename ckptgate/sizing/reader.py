"""A generic typed reader: plain mappings (as YAML gives them) to frozen dataclasses and back.

Each dataclass field says, through its type and its metadata (``meta``), what it accepts: kind,
bounds, choices, and the YAML key when it differs from the field name. Unknown keys, wrong types
and out-of-range values are reported from this one place as a one-line ``ProfileError`` naming
the file (or the ``--set``), the key path, the value and what is allowed. ``dump`` is the
inverse: a dataclass back to the mapping ``build`` reads.

Nothing here knows the profile's schema (sizing.schema) or reads files (sizing.profile).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ckptgate.sizing.units import (
    DAY_S,
    UnitError,
    parse_bytes,
    parse_count,
    parse_number,
    parse_seconds,
)


class ProfileError(Exception):
    """A bad cluster profile or override; the message is one line meant for the user."""


def meta(
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


class Context:
    """Where values came from: the file, or the ``--set`` that put them there."""

    def __init__(self, source: str, overrides: dict[str, str]):
        self.source = source
        self.overrides = overrides  # key path -> the --set text

    def where(self, *paths: str) -> str:
        hits = [
            text
            for key, text in self.overrides.items()
            for path in paths
            if key == path or key.startswith(path + ".") or path.startswith((key + ".", key + "["))
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


def _is_section(hint: Any) -> bool:
    """Whether a field's type is a nested section (a dataclass *class*, not an instance)."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _yaml_key(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("key") or f.name


def _loaded_fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def _bounds_text(meta: Mapping[str, Any]) -> str:
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


def _allowed(kind: str, meta: Mapping[str, Any], optional: bool) -> str:
    if meta.get("choices"):
        text = "one of " + ", ".join(meta["choices"])
    else:
        text = _KIND_TEXT[kind] + _bounds_text(meta)
    return text + (", or null" if optional else "")


def _kind(f: dataclasses.Field[Any], hint: Any) -> str:
    if f.metadata.get("kind"):
        return str(f.metadata["kind"])
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


def _read_field(ctx: Context, f: dataclasses.Field[Any], hint: Any, value: Any, path: str) -> Any:
    hint, optional = _unwrap_optional(hint)
    if value is None:
        if optional:
            return None
        kind = "section" if _is_section(hint) else _kind(f, hint)
        allowed = "a mapping" if kind == "section" else _allowed(kind, f.metadata, False)
        raise ctx.error(path, value, "must be given", allowed)
    if _is_section(hint):
        return build(ctx, hint, value, path)
    if typing.get_origin(hint) is tuple:
        return _read_tuple(ctx, f, hint, value, path, optional)
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
    return _read_number(ctx, kind, meta, value, path, allowed)


def _read_tuple(
    ctx: Context, f: dataclasses.Field[Any], hint: Any, value: Any, path: str, optional: bool
) -> tuple[Any, ...]:
    """A YAML list read into a tuple, each item by the item type's kind and the field's bounds
    (only ``tuple[X, ...]`` of scalars)."""
    item = typing.get_args(hint)[0]
    kind = f.metadata.get("kind") or _kind(f, item)
    allowed = "a list of " + _allowed(kind, f.metadata, False) + (", or null" if optional else "")
    if not isinstance(value, list | tuple):
        raise ctx.error(path, value, "wrong type", allowed)
    return tuple(
        _read_number(ctx, kind, f.metadata, v, f"{path}[{i}]", allowed) for i, v in enumerate(value)
    )


def _read_number(
    ctx: Context, kind: str, meta: Mapping[str, Any], value: Any, path: str, allowed: str
) -> Any:
    try:
        number = _convert_scalar(kind, value, f"{ctx.where(path)}: {path}")
    except UnitError as exc:
        raise ctx.error(path, value, "wrong type or unit", allowed) from exc
    if isinstance(number, float) and not math.isfinite(number):
        raise ctx.error(path, value, "not finite", allowed)
    checks: tuple[tuple[str, Callable[[Any], bool]], ...] = (
        ("gt", lambda bound: bool(number > bound)),
        ("ge", lambda bound: bool(number >= bound)),
        ("lt", lambda bound: bool(number < bound)),
        ("le", lambda bound: bool(number <= bound)),
    )
    for name, ok in checks:
        bound = meta.get(name)
        if bound is not None and not ok(bound):
            raise ctx.error(path, value, "out of range", allowed)
    return number


def build(ctx: Context, cls: type, raw: Any, path: str) -> Any:
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
    kwargs: dict[str, Any] = {  # filled in by the caller (Profile.source); a default stands
        f.name: ""
        for f in dataclasses.fields(cls)
        if f.metadata.get("internal")
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    }
    for key, f in known.items():
        sub = _join(path, key)
        if key in raw:
            value = raw[key]
            if dataclasses.is_dataclass(f.default) and isinstance(value, dict):
                # A partial section fills in from the field's default (dcp.architecture).
                value = {**dump(f.default), **value}
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


def key_paths(raw: Mapping[Any, Any], path: str = "") -> frozenset[str]:
    """Every key a plain mapping gives, as dotted paths, sections and the keys inside them
    (``cluster``, ``cluster.layout``, ``cluster.layout.writer``); lists are values, not
    descended into. What the user wrote, as against what a field's default fills in."""
    paths: set[str] = set()
    for key, value in raw.items():
        sub = _join(path, str(key))
        paths.add(sub)
        if isinstance(value, Mapping):
            paths |= key_paths(value, sub)
    return frozenset(paths)


def _describe_field(f: dataclasses.Field[Any], hint: Any) -> str:
    hint, optional = _unwrap_optional(hint)
    if _is_section(hint):
        keys = ", ".join(_yaml_key(g) for g in _loaded_fields(hint))
        return f"a mapping with keys {keys}"
    if typing.get_origin(hint) is tuple:
        return "a list of " + _allowed(_kind(f, typing.get_args(hint)[0]), f.metadata, optional)
    return _allowed(_kind(f, hint), f.metadata, optional)


def _dump_value(f: dataclasses.Field[Any], value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return dump(value)
    if isinstance(value, tuple):
        return list(value)
    if f.metadata.get("kind") == "days":
        days = value / DAY_S
        return days if days * DAY_S == value else f"{value!r} s"
    return value


def dump(obj: Any) -> dict[str, Any]:
    """A dataclass as the plain mapping ``build`` reads back to an equal object."""
    return {
        _yaml_key(f): _dump_value(f, getattr(obj, f.name))
        for f in _loaded_fields(type(obj))
        if getattr(obj, f.name) is not None
    }
