"""Timing statistics: medians with intervals, paired speedups whose interval decides 'faster'."""

import numpy as np

from sandbox.stats import median_ci, relative_spread, speedup_ci


def test_median_interval_contains_the_median_and_narrows_with_samples():
    rng = np.random.default_rng(3)
    few = list(1.0 + 0.05 * rng.standard_normal(10))
    many = list(1.0 + 0.05 * rng.standard_normal(400))
    m, lo, hi = median_ci(few)
    assert lo <= m <= hi
    m2, lo2, hi2 = median_ci(many)
    assert (hi2 - lo2) < (hi - lo)
    assert lo2 < 1.0 < hi2


def test_speedup_interval_clears_one_only_for_a_real_difference():
    rng = np.random.default_rng(4)
    drift = np.linspace(1.0, 1.3, 30)  # shared drift cancels in paired rounds
    base = list(drift * (2.0 + 0.02 * rng.standard_normal(30)))
    faster = list(drift * (1.6 + 0.02 * rng.standard_normal(30)))
    same = list(drift * (2.0 + 0.02 * rng.standard_normal(30)))
    v, lo, hi = speedup_ci(base, faster)
    assert lo > 1.0 and abs(v - 1.25) < 0.05
    v, lo, hi = speedup_ci(base, same)
    assert lo < 1.0 < hi


def test_intervals_are_deterministic():
    x = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01, 0.99, 1.0]
    assert median_ci(x) == median_ci(x)
    assert relative_spread(x) < 0.06
