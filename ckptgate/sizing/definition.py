"""How a requirement is defined and evaluated: the ``Requirement`` value object, one
``Definition`` per requirement in the ``DEFINITIONS`` registry (``define``), and the ``Basis``
they are evaluated on, the profile at one checkpoint interval.

A definition's value function computes its number from the basis (``b["name"]`` reads another
definition's value, computed on first use), its formula function writes the formula with the
profile's numbers filled in; sizing.spec_numbers registers every one of SPEC.md's numbers, and
sizing.requirements evaluates them (``derive``, ``sweep``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckptgate.sizing.distribution import ShardDistribution
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.units import (
    format_bytes,
    format_count,
    format_fraction,
    format_rate,
    format_seconds,
    sig3,
)


@dataclass(frozen=True)
class Requirement:
    """One derived number: what it is, its value and unit, how it was computed, from where."""

    name: str
    title: str
    value: int | float
    unit: str  # "B", "B/s", "s", "1/s", "fraction", "files", "parameters"
    formula: str  # in words, with the profile's numbers filled in
    source: str
    measured_by: str | None = None  # the checks that measure it (-m NAME), or None: derived only

    def display(self) -> str:
        """The value with its unit, 3 significant digits, decimal units."""
        return format_value(self.value, self.unit)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def format_value(value: float, unit: str) -> str:
    if unit == "B":
        return format_bytes(value)
    if unit == "B/s":
        return format_rate(value)
    if unit == "s":
        return format_seconds(value)
    if unit == "1/s":
        return f"{sig3(value)} /s"
    if unit == "fraction":
        return format_fraction(value)
    if unit == "files":
        return f"{format_count(value)} files"
    if unit == "parameters":
        return format_count(value)
    return f"{sig3(value)} {unit}"


class Basis:
    """The profile at one checkpoint interval: every definition's value, computed on first use.

    ``chosen`` is the basis at the profile's own interval (itself, for derive); the sweep's
    bases at other intervals refer to it for numbers that must not move with the interval."""

    def __init__(
        self,
        profile: Profile,
        dist: ShardDistribution,
        interval_s: float,
        chosen: Basis | None = None,
    ):
        self.profile = profile
        self.dist = dist
        self.interval_s = interval_s
        self.chosen: Basis = self if chosen is None else chosen
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            self._values[name] = DEFINITIONS[name].value(self)
        return self._values[name]

    def requirement(self, name: str) -> Requirement:
        d = DEFINITIONS[name]
        return Requirement(
            d.name, d.title, self[name], d.unit, d.formula(self), d.source, d.measured_by
        )


@dataclass(frozen=True)
class Definition:
    """One requirement, defined once: what it is, how its value and its formula with numbers
    are computed, where the formula comes from, which acceptance module measures it."""

    name: str
    title: str
    unit: str
    value: Callable[[Basis], Any]
    formula: Callable[[Basis], str]
    source: str
    measured_by: str | None = None
    in_table: bool = True  # False: a sweep column only


DEFINITIONS: dict[str, Definition] = {}


def define(
    title: str,
    unit: str,
    formula: Callable[[Basis], str],
    source: str,
    measured_by: str | None = None,
    in_table: bool = True,
    name: str | None = None,
) -> Callable[[Callable[[Basis], Any]], Callable[[Basis], Any]]:
    """Register the decorated value function as the definition of the requirement ``name``
    (default: the function's name; given where a formula function above has that name). The
    table lists definitions in the order they are registered."""

    def register(value: Callable[[Basis], Any]) -> Callable[[Basis], Any]:
        key = name or value.__name__
        DEFINITIONS[key] = Definition(
            key, title, unit, value, formula, source, measured_by, in_table
        )
        return value

    return register
