"""Units in one place: constants, parsing at the profile boundary, 3-significant-digit formatting.

Bytes are ints and seconds are floats. Decimal prefixes (kB, MB, GB, TB, PB) are the ones
storage vendors quote and the ones reports use; binary prefixes (KiB, MiB, GiB, TiB) are kept
apart and are accepted on input because tools such as IOR and fio speak them.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal

# Decimal byte units (SI prefixes; storage vendors' convention).
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
PB = 10**15
EB = 10**18

# Binary byte units (IEC prefixes).
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

# Time units, in seconds.
MILLISECOND_S = 1e-3
MINUTE_S = 60.0
HOUR_S = 3600.0
DAY_S = 86400.0


class UnitError(ValueError):
    """A value that cannot be read as the quantity asked for; the message is one line."""


_BYTE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "pb": PB,
    "eb": EB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "pib": 2**50,
}
_BYTES_ALLOWED = (
    "an integer number of bytes, or a number with a unit B, kB, MB, GB, TB, PB "
    "(decimal) or KiB, MiB, GiB, TiB (binary), e.g. '5.67 TB' or '16 MiB'"
)

_SECOND_UNITS: dict[str, float] = {
    "ms": MILLISECOND_S,
    "s": 1.0,
    "sec": 1.0,
    "min": MINUTE_S,
    "h": HOUR_S,
    "d": DAY_S,
}
_SECONDS_ALLOWED = "a number of seconds, or a number with a unit ms, s, min, h, d, e.g. '10 min'"

_COUNT_SUFFIXES: dict[str, int] = {
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "p": 10**15,
}
_COUNT_ALLOWED = (
    "a whole number, e.g. 405000000000, '405e9' or '405 G' (suffixes k, M, G, T, P are decimal)"
)

_NUMBER = r"[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z]*)\s*$")


def _split(value: str) -> tuple[float, str] | None:
    match = _QUANTITY.match(value)
    if match is None:
        return None
    return float(match.group(1).replace("_", "")), match.group(2).lower()


def _fail(where: str, value: object, what: str, allowed: str) -> UnitError:
    return UnitError(f"{where}: cannot read {value!r} as {what}; allowed: {allowed}")


def _exact_int(number: float, where: str, value: object, what: str, allowed: str) -> int:
    if not math.isfinite(number):
        raise _fail(where, value, what, allowed)
    if number != int(number):
        rounded = round(number)
        # A decimal number times a unit (0.1 GB) can land a hair off an integer in binary float.
        if abs(number - rounded) > 1e-6 * max(1.0, abs(number)):
            raise _fail(where, value, what, f"a whole number; {allowed}")
        return int(rounded)
    return int(number)


def parse_bytes(value: object, where: str) -> int:
    """Read a size in bytes: an int, an integral float, '405e9', or '5.67 TB' / '16 MiB'.

    Returns an int. Raises UnitError naming ``where``, the value and what is allowed.
    """
    return _parse_whole(value, where, "bytes", _BYTES_ALLOWED, _BYTE_UNITS)


def _parse_whole(value: object, where: str, what: str, allowed: str, scales: dict[str, int]) -> int:
    """A whole quantity: an int, an integral float, or a string with an optional unit from
    ``scales`` (a bare number is taken as is); the product must be a whole number."""
    if isinstance(value, bool):
        raise _fail(where, value, what, allowed)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _exact_int(value, where, value, what, allowed)
    if isinstance(value, str):
        parts = _split(value)
        if parts is not None:
            number, unit = parts
            scale = scales.get(unit) if unit else 1
            if scale is not None:
                return _exact_int(number * scale, where, value, what, allowed)
    raise _fail(where, value, what, allowed)


def parse_seconds(value: object, where: str) -> float:
    """Read a duration in seconds: a number, '120', '120 s', '10 min', '2 h', '54 d'."""
    if isinstance(value, bool):
        raise _fail(where, value, "seconds", _SECONDS_ALLOWED)
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise _fail(where, value, "seconds", _SECONDS_ALLOWED)
        return float(value)
    if isinstance(value, str):
        parts = _split(value)
        if parts is not None:
            number, unit = parts
            scale = _SECOND_UNITS.get(unit or "s")
            if scale is not None and math.isfinite(number):
                return number * scale
    raise _fail(where, value, "seconds", _SECONDS_ALLOWED)


def parse_count(value: object, where: str) -> int:
    """Read a whole count (parameters, GPUs): 405000000000, '405e9', 4.05e11, '405 G'."""
    return _parse_whole(value, where, "a count", _COUNT_ALLOWED, _COUNT_SUFFIXES)


def parse_number(value: object, where: str) -> float:
    """Read a plain number (a fraction, a multiplier): 0.01, '2.5', '1e-2'."""
    if isinstance(value, bool):
        raise _fail(where, value, "a number", "a number such as 0.01 or 2.5")
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        parts = _split(value)
        if parts is not None and not parts[1] and math.isfinite(parts[0]):
            return parts[0]
    raise _fail(where, value, "a number", "a number such as 0.01 or 2.5")


def round3(x: float) -> float:
    """x rounded to 3 significant digits, halves away from zero (47.25 -> 47.3), working on
    the shortest decimal form of x so that binary representation does not decide ties."""
    if x == 0 or not math.isfinite(x):
        return x
    d = Decimal(repr(float(x)))
    exponent = d.adjusted() - 2
    return float(d.quantize(Decimal(f"1e{exponent}"), rounding=ROUND_HALF_UP))


def sig3(x: float) -> str:
    """x to three significant digits, without an exponent for 1 <= |x| < 1000."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    rounded = round3(x)
    magnitude = abs(rounded)
    if magnitude >= 100:
        return f"{rounded:.0f}"
    if magnitude >= 10:
        return f"{rounded:.1f}"
    if magnitude >= 1:
        return f"{rounded:.2f}"
    decimals = 2 - math.floor(math.log10(magnitude))
    return f"{rounded:.{decimals}f}"


_DECIMAL_PREFIXES = ("", "k", "M", "G", "T", "P", "E")


def _scaled(x: float) -> tuple[str, str]:
    """x scaled by powers of 1000 to [1, 1000) after rounding to 3 significant digits."""
    if x == 0 or not math.isfinite(x):
        return sig3(x), ""
    rounded = round3(x)
    index = 0
    while abs(rounded) >= 1000 and index < len(_DECIMAL_PREFIXES) - 1:
        rounded /= 1000
        index += 1
    return sig3(rounded), _DECIMAL_PREFIXES[index]


def plural(n: float, noun: str) -> str:
    """'1 node', '2,048 nodes': a count with its noun."""
    return f"{format_count(n)} {noun}{'' if n == 1 else 's'}"


def format_bytes(n: float) -> str:
    """Bytes in decimal units, 3 significant digits: 5670000000000 -> '5.67 TB', 512 -> '512 B'."""
    if abs(n) < 1000 and float(n).is_integer():
        return f"{int(n)} B"
    number, prefix = _scaled(n)
    return f"{number} {prefix}B"


def format_rate(bytes_per_s: float) -> str:
    """Bytes per second in decimal units: 48e9 -> '48.0 GB/s'."""
    number, prefix = _scaled(bytes_per_s)
    return f"{number} {prefix}B/s"


def format_seconds(s: float) -> str:
    """A duration to 3 significant digits: '590 ms', '6.00 s', '16.7 min', '3.09 h', '54.0 d'.

    Switch points: seconds from 1 s up to 1000 s, minutes up to 100 min, hours up to 48 h.
    """
    magnitude = abs(s)
    if magnitude == 0:
        return "0 s"
    if magnitude < 1:
        return f"{sig3(s / MILLISECOND_S)} ms"
    if round3(magnitude) < 1000:
        return f"{sig3(s)} s"
    if round3(magnitude / MINUTE_S) < 100:
        return f"{sig3(s / MINUTE_S)} min"
    if round3(magnitude / HOUR_S) < 48:
        return f"{sig3(s / HOUR_S)} h"
    return f"{sig3(s / DAY_S)} d"


def format_count(n: float) -> str:
    """A count: exact with thousands separators below a million, else '405 G' / '8.03 G'."""
    if abs(n) < 10**6 and float(n).is_integer():
        return f"{int(n):,}"
    number, prefix = _scaled(n)
    return f"{number} {prefix}".rstrip()


def format_fraction(x: float) -> str:
    """A fraction as a percentage, 3 significant digits: 0.02694 -> '2.69 %'."""
    return f"{sig3(x * 100)} %"
