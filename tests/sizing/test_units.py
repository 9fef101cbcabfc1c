"""Units: constants, parsing at the profile boundary, 3-significant-digit formatting."""

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptgate.sizing.units import (
    DAY_S,
    GB,
    HOUR_S,
    KB,
    MB,
    MINUTE_S,
    PB,
    TB,
    GiB,
    KiB,
    MiB,
    TiB,
    UnitError,
    format_bytes,
    format_count,
    format_fraction,
    format_rate,
    format_seconds,
    parse_bytes,
    parse_count,
    parse_number,
    parse_seconds,
)

# Rounding to 3 significant digits moves a value by at most half a unit in the third digit,
# i.e. by at most 0.5 % of it; parsing then rounds to the byte.
ROUND_TRIP_REL = 0.005


def test_decimal_and_binary_units_are_kept_apart():
    assert (KB, MB, GB, TB, PB) == (10**3, 10**6, 10**9, 10**12, 10**15)
    assert (KiB, MiB, GiB, TiB) == (2**10, 2**20, 2**30, 2**40)
    assert (MINUTE_S, HOUR_S, DAY_S) == (60.0, 3600.0, 86400.0)
    assert all(isinstance(u, int) for u in (KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (512, 512),
        (4.0e9, 4 * GB),
        ("405e9", 405 * GB),
        ("5.67 TB", 5_670_000_000_000),
        ("16 MiB", 16 * MiB),
        ("512 B", 512),
        ("64MB", 64 * MB),
        ("2 TiB", 2 * TiB),
        ("1_000", 1000),
        ("0.1 GB", 100_000_000),
    ],
    ids=str,
)
def test_parse_bytes_accepts(text, expected):
    value = parse_bytes(text, "test")
    assert value == expected
    assert isinstance(value, int)


@pytest.mark.parametrize("text", ["4k", "1.5 B", "lots", True, None, "5 TBps", [1], float("inf")])
def test_parse_bytes_rejects_with_where_value_and_allowed(text):
    with pytest.raises(UnitError) as info:
        parse_bytes(text, "prof.yaml: run.transfer_bytes")
    message = str(info.value)
    assert message.startswith("prof.yaml: run.transfer_bytes: ")
    assert repr(text) in message
    assert "allowed:" in message and "MiB" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (120, 120.0),
        ("120", 120.0),
        ("120 s", 120.0),
        ("10 min", 600.0),
        ("2 h", 7200.0),
        ("54 d", 54 * DAY_S),
        ("590 ms", 0.59),
        (0.5, 0.5),
    ],
    ids=str,
)
def test_parse_seconds_accepts(text, expected):
    assert math.isclose(parse_seconds(text, "test"), expected)


@pytest.mark.parametrize("text", ["10 minutes please", "5 GB", False, "soon"])
def test_parse_seconds_rejects(text):
    with pytest.raises(UnitError, match=r"checkpoint.interval_s: cannot read .* allowed: .*min"):
        parse_seconds(text, "checkpoint.interval_s")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("405e9", 405 * 10**9),
        (405_000_000_000, 405 * 10**9),
        (4.05e11, 405 * 10**9),
        ("405 G", 405 * 10**9),
        ("16e6", 16_000_000),
        ("7 k", 7000),
    ],
    ids=str,
)
def test_parse_count_accepts(text, expected):
    assert parse_count(text, "test") == expected


@pytest.mark.parametrize("text", ["405.5", "many", "405 GB", True, 1.5])
def test_parse_count_rejects(text):
    with pytest.raises(UnitError, match="whole number"):
        parse_count(text, "model.parameters")


def test_parse_number_reads_yaml_exponent_strings():
    assert parse_number("1e-2", "x") == 0.01
    with pytest.raises(UnitError):
        parse_number("1 %", "x")


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (5_670_000_000_000, "5.67 TB"),
        (512, "512 B"),
        (0, "0 B"),
        (999_600, "1.00 MB"),
        (56_700_000_000_000, "56.7 TB"),
        (810 * GB, "810 GB"),
        (1000, "1.00 kB"),
    ],
    ids=str,
)
def test_format_bytes_is_decimal_with_three_significant_digits(n, text):
    assert format_bytes(n) == text


def test_format_rate_and_halves_round_up():
    assert format_rate(48e9) == "48.0 GB/s"
    assert format_rate(945e9) == "945 GB/s"
    assert format_rate(47.25e9) == "47.3 GB/s"


@pytest.mark.parametrize(
    ("s", "text"),
    [
        (600, "600 s"),
        (6, "6.00 s"),
        (11135.08, "3.09 h"),
        (0.59, "590 ms"),
        (1000, "16.7 min"),
        (54 * DAY_S, "54.0 d"),
        (365.5, "366 s"),
        (0, "0 s"),
    ],
    ids=str,
)
def test_format_seconds_switch_points(s, text):
    assert format_seconds(s) == text


def test_format_count_and_fraction():
    assert format_count(16385) == "16,385"
    assert format_count(405 * 10**9) == "405 G"
    assert format_count(8_030_261_248) == "8.03 G"
    assert format_fraction(0.026941) == "2.69 %"


@given(st.integers(min_value=0, max_value=10**19))
@example(5_670_000_000_000)  # 405b checkpoint
@example(980_000_000_000)  # 70b checkpoint
@example(98_000_000_000)  # 7b checkpoint
@example(224_000_000)  # tmpfs checkpoint
@example(999_999)  # rounds up into the next prefix
def test_bytes_round_trip_through_strings(n):
    back = parse_bytes(format_bytes(n), "round trip")
    assert abs(back - n) <= ROUND_TRIP_REL * n + 1


@given(st.floats(min_value=1e-3, max_value=1e9))
@example(600.0)
@example(11135.08)
@example(54 * DAY_S)
def test_seconds_round_trip_through_strings(s):
    back = parse_seconds(format_seconds(s), "round trip")
    assert math.isclose(back, s, rel_tol=ROUND_TRIP_REL)


@given(st.integers(min_value=0, max_value=10**15))
@example(405 * 10**9)
def test_counts_round_trip_through_strings(n):
    back = parse_count(format_count(n).replace(",", ""), "round trip")
    assert abs(back - n) <= ROUND_TRIP_REL * n + 1
