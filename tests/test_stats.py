"""Timing statistics: medians with intervals, paired speedups whose interval decides 'faster'."""

import numpy as np
import pytest

from sandbox.judging import stats
from sandbox.judging.stats import median_ci, relative_spread, speedup_ci


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


def test_median_halfwidth_uses_the_exact_binomial_order_statistics():
    from sandbox.judging.stats import median_halfwidth

    # n = 10: P(Bin(10, 1/2) <= 1) = 11/1024 <= 2.5% < P(<= 2), so the interval is [x(2), x(9)]
    assert median_halfwidth(list(range(1, 11))) == (9 - 2) / 2 / 5.5
    assert median_halfwidth([1.0, 2.0, 3.0, 4.0, 5.0]) == float("inf")  # no 95% interval from 5 samples
    assert median_halfwidth([2.0] * 12) == 0.0


def test_timing_settles_only_when_both_medians_are_known_to_the_target():
    import dataclasses

    from sandbox.judging.stats import settled
    from sandbox.wire import RoundLimits
    from sandbox.worker.rounds import enough as _enough

    rng = np.random.default_rng(5)
    tight = list(1.0 + 0.0005 * rng.standard_normal(10))
    noisy = list(1.0 + 0.05 * rng.standard_normal(10))
    assert settled(tight, 0.005) and not settled(noisy, 0.005) and not settled(tight, 0.0)
    req = RoundLimits(budget_ms=1e9, min_rounds=3, max_rounds=100, target_ci=0.005, wall_cap_s=60.0)
    exact = dataclasses.replace(req, target_ci=0.0)
    assert _enough(req, {"candidate": tight, "baseline": tight, "vendor": noisy}, 60, 1.0)  # the vendor does not decide
    assert not _enough(req, {"candidate": tight, "baseline": noisy}, 60, 1.0)
    assert not _enough(exact, {"candidate": tight, "baseline": tight}, 60, 1.0)
    assert _enough(dataclasses.replace(exact, budget_ms=5.0), {"candidate": tight, "baseline": tight}, 60, 1.0)
    assert _enough(exact, {"candidate": tight, "baseline": tight}, 10, 1.0)  # the round cap
    assert _enough(exact, {"candidate": tight, "baseline": tight}, 60, 61.0)


def test_a_screened_candidates_relative_time_is_the_ratio_of_the_medians_the_speedup_is_the_inverse_of():
    cand, base = [1.0, 3.0, 2.0], [1.0, 1.0, 4.0]          # paired ratios 1, 3, 0.5: their median would say 1.0
    assert stats.relative_time(cand, base) == pytest.approx(2.0)
    assert stats.relative_time(cand, base) == pytest.approx(1 / stats.speedup_ci(base, cand)[0])


def _placed(offsets, per_cluster, noise, seed):
    """Baseline and candidate times of rounds in several placements: the baseline's time moves with its
    placement (``offsets``), the same in every round of it, as a buffer's position in memory moves it."""
    rng = np.random.default_rng(seed)
    clusters = [c for c in range(len(offsets)) for _ in range(per_cluster)]
    base = [2.0 * (1 + offsets[c]) * (1 + noise * rng.standard_normal()) for c in clusters]
    cand = [0.8 * (1 + noise * rng.standard_normal()) for _ in clusters]
    return base, cand, clusters


def test_an_interval_over_placements_covers_the_speedup_each_placement_alone_would_give():
    offsets = [0.0, 0.006, -0.004]
    base, cand, clusters = _placed(offsets, 6, 0.0003, 7)
    _, lo, hi = speedup_ci(base, cand, clusters=clusters)
    alone = [speedup_ci(base[i * 6:(i + 1) * 6], cand[i * 6:(i + 1) * 6])[0] for i in range(3)]
    assert lo <= min(alone) * 1.001 and max(alone) * 0.999 <= hi
    _, lo_rounds, hi_rounds = speedup_ci(base, cand)  # rounds of one placement are not independent samples
    assert hi - lo >= hi_rounds - lo_rounds
    _, mlo, mhi = median_ci(base, clusters=clusters)
    assert mlo <= 2.0 * (1 + min(offsets)) * 1.001 and 2.0 * (1 + max(offsets)) * 0.999 <= mhi


def test_placements_that_do_not_differ_leave_the_interval_as_narrow_as_the_rounds_make_it():
    base, cand, clusters = _placed([0.0, 0.0, 0.0], 8, 0.002, 8)
    _, lo, hi = speedup_ci(base, cand, clusters=clusters)
    _, lo_rounds, hi_rounds = speedup_ci(base, cand)
    assert lo < 2.5 < hi and (hi - lo) < 2.0 * (hi_rounds - lo_rounds)
    assert speedup_ci(base, cand, clusters=[0] * len(base)) == (speedup_ci(base, cand)[0], lo_rounds, hi_rounds)
    with pytest.raises(ValueError, match="cluster labels"):
        speedup_ci(base, cand, clusters=[0, 1])
