"""Latency percentiles: p50, p99 and max agree with a sorted-list reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptgate.engine.latency import (
    HISTOGRAM_BUCKETS_PER_OCTAVE,
    LatencyHistogram,
    merge,
    merge_histograms,
    percentile,
    summarize,
)

latencies = st.lists(
    st.floats(min_value=0.0, max_value=10.0, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=300,
)


def reference_percentile(values: list[float], q: float) -> float:
    """Hyndman & Fan definition 7, written out on a sorted list."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


@example(values=[1e-6], q=0.99)  # one operation: every percentile is that operation
@example(values=[1.0, 2.0], q=0.5)  # halfway between the two
@example(values=[0.0] * 99 + [5.0], q=0.99)  # one straggler among a hundred
@given(values=latencies, q=st.floats(min_value=0.0, max_value=1.0))
def test_percentile_matches_the_sorted_reference(values: list[float], q: float) -> None:
    assert math.isclose(percentile(values, q), reference_percentile(values, q), abs_tol=1e-12)


@given(values=latencies)
def test_summary_is_p50_p99_max_of_the_sorted_values(values: list[float]) -> None:
    summary = summarize(values)
    assert summary.count == len(values)
    assert math.isclose(summary.p50_s, reference_percentile(values, 0.5), abs_tol=1e-12)
    assert math.isclose(summary.p99_s, reference_percentile(values, 0.99), abs_tol=1e-12)
    assert summary.max_s == max(values)
    assert min(values) <= summary.p50_s <= summary.p99_s <= summary.max_s


@given(parts=st.lists(latencies, min_size=1, max_size=8))
def test_merging_ranks_pools_their_latencies(parts: list[list[float]]) -> None:
    pooled = [v for part in parts for v in part]
    merged = merge(np.asarray(part) for part in parts)
    assert merged == summarize(pooled)


def test_no_operations_summarize_to_zero() -> None:
    assert summarize([]).count == 0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_a_quantile_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        percentile([1.0], 1.5)


latencies_ns = st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=300)
BUCKET_HALF_WIDTH = 2 ** (1 / (2 * HISTOGRAM_BUCKETS_PER_OCTAVE)) - 1
"""A bucket's middle is within this fraction of any value in the bucket."""


def nearest_rank_ns(values: list[int], q: float) -> int:
    """The sorted value at rank ceil(q * n), the rank the histogram's quantile looks for."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@example(values=[1_000], q=0.5)  # one transfer: every percentile is that transfer (clipped)
@example(values=[0, 0, 0], q=0.99)  # a clock too coarse to see the transfers
@example(values=[10**6] * 99 + [10**9], q=0.99)  # one straggler among a hundred
@given(values=latencies_ns, q=st.floats(min_value=0.0, max_value=1.0))
def test_histogram_quantile_is_within_half_a_bucket_of_the_nearest_rank(
    values: list[int], q: float
) -> None:
    histogram = LatencyHistogram()
    histogram.add_ns(values)
    expected_s = max(nearest_rank_ns(values, q), 1) / 1e9
    got_s = histogram.quantile_s(q)
    assert got_s <= max(values) / 1e9 or max(values) == 0
    if max(values) > 0:
        assert math.isclose(got_s, expected_s, rel_tol=BUCKET_HALF_WIDTH + 1e-9)


@given(values=latencies_ns)
def test_histogram_summary_has_exact_count_max_mean_and_ordered_percentiles(
    values: list[int],
) -> None:
    histogram = LatencyHistogram()
    histogram.add_ns(values)
    summary = histogram.summary()
    assert summary.count == len(values)
    assert summary.max_s == max(values) / 1e9
    assert math.isclose(summary.mean_s, sum(values) / len(values) / 1e9, rel_tol=1e-12)
    assert summary.p50_s <= summary.p99_s <= summary.max_s


@given(parts=st.lists(latencies_ns, min_size=1, max_size=8))
def test_merged_histograms_equal_the_histogram_of_the_pooled_latencies(
    parts: list[list[int]],
) -> None:
    pooled = LatencyHistogram()
    pooled.add_ns([v for part in parts for v in part])
    each = []
    for part in parts:
        histogram = LatencyHistogram()
        histogram.add_ns(part)
        each.append(histogram)
    merged = merge_histograms(each)
    assert merged.summary() == pooled.summary()
    assert (merged.counts == pooled.counts).all()


def test_an_empty_histogram_summarizes_to_zero() -> None:
    assert LatencyHistogram().summary().count == 0
    assert LatencyHistogram().quantile_s(0.99) == 0.0
