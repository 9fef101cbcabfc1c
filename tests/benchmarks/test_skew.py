"""The start-skew benchmark (benchmarks/skew.py): both release methods, interleaved."""

from __future__ import annotations

from ckptgate.benchmarks import skew


def test_both_release_methods_are_measured_the_same_number_of_times() -> None:
    figures = skew.measure(ranks=2, repeats=3, warmup=1)
    assert set(figures["releases"]) == {"futex", "pipe"}
    for row in figures["releases"].values():
        assert 0 <= row["median_s"] <= row["p90_s"] <= row["max_s"]
        assert 0 <= row["under_1ms"] <= 1
    assert "futex" in skew.render(figures) and "under 1 ms" in skew.render(figures)
