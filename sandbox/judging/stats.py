"""Statistics for timing: medians with 95% intervals, and paired speedup intervals.

Intervals are percentile bootstraps with a fixed generator seed, so the same samples always give
the same interval. A speedup resamples whole rounds (baseline and candidate timed in the same round
stay paired), so drift shared by both cancels.

Given each round's placement (``clusters``: which set of buffers the round's inputs and outputs were in),
the bootstrap is two-level: it draws placements with replacement, then rounds from the drawn placements.
Where a buffer sits in device memory moves a memory-bound kernel's time by a few tenths of a percent, the
same in every round of that placement, so rounds of one placement are not independent samples: an interval
that resampled rounds alone would be as narrow as if the placement could not change, and a repeat of the
measurement (other buffers, another process) would often fall outside it.
"""

from __future__ import annotations

import math

import numpy as np

RESAMPLES = 4000


def resample(n: int, rng: np.random.Generator, clusters: list[int] | None = None) -> np.ndarray:
    """RESAMPLES rows of ``n`` indices into the samples: drawn uniformly, or, given each sample's cluster,
    two-level (each row draws as many clusters as there are, with replacement, then each of its ``n``
    indices one of the row's clusters and a sample of that cluster)."""
    if clusters is None or len(set(clusters)) < 2:
        return rng.integers(0, n, size=(RESAMPLES, n))
    labels = np.asarray(clusters)
    if labels.size != n:
        raise ValueError(f"{labels.size} cluster labels for {n} samples")
    order = np.argsort(labels, kind="stable")
    _, starts, sizes = np.unique(labels[order], return_index=True, return_counts=True)
    k = sizes.size
    drawn = rng.integers(0, k, size=(RESAMPLES, k))
    pick = np.take_along_axis(drawn, rng.integers(0, k, size=(RESAMPLES, n)), axis=1)
    within = (rng.random((RESAMPLES, n)) * sizes[pick]).astype(np.int64)
    return order[starts[pick] + within]


def median_ci(samples: list[float], level: float = 0.95,
              clusters: list[int] | None = None) -> tuple[float, float, float]:
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples")
    rng = np.random.default_rng(0)
    idx = resample(x.size, rng, clusters)
    boots = np.median(x[idx], axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.median(x)), float(lo), float(hi)


def speedup_ci(reference: list[float], candidate: list[float], level: float = 0.95,
               clusters: list[int] | None = None) -> tuple[float, float, float]:
    """median(reference) / median(candidate) with a paired-round bootstrap interval (two-level given the
    rounds' placements)."""
    a = np.asarray(reference, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.size != b.size or a.size == 0:
        raise ValueError("speedup needs the same, non-zero number of paired samples")
    rng = np.random.default_rng(1)
    idx = resample(a.size, rng, clusters)
    boots = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.median(a) / np.median(b)), float(lo), float(hi)


def ratio_ci(a: list[float], b: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """median(a) / median(b) of two unpaired groups, with a bootstrap interval resampling each group apart."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        raise ValueError("a ratio of medians needs samples in both groups")
    rng = np.random.default_rng(2)
    boots = (np.median(x[rng.integers(0, x.size, size=(RESAMPLES, x.size))], axis=1)
             / np.median(y[rng.integers(0, y.size, size=(RESAMPLES, y.size))], axis=1))
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.median(x) / np.median(y)), float(lo), float(hi)


def relative_spread(samples: list[float]) -> float:
    """Half the 95% interval of the median, relative to the median (a noise figure)."""
    med, lo, hi = median_ci(samples)
    return (hi - lo) / 2 / med if med else float("inf")


def median_bounds(samples: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median: the order statistics x(j) and x(n+1-j), with j the
    largest rank whose binomial tail P(Bin(n, 1/2) < j) stays within (1 - level) / 2 (so it covers at least
    ``level``). Cheap enough to recompute after every timing round; None when n is too small for any such j
    (five samples or fewer at 95%)."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = x.size
    tail, j, cumulative = (1 - level) / 2, 0, 0.0
    while j < n // 2:
        cumulative += math.comb(n, j) / 2.0**n
        if cumulative > tail:
            break
        j += 1
    return (float(x[j - 1]), float(x[n - j])) if j else None


def median_halfwidth(samples: list[float], level: float = 0.95) -> float:
    """Half the width of ``median_bounds``, relative to the median; inf when there is no such interval."""
    bounds = median_bounds(samples, level)
    med = float(np.median(samples)) if len(samples) else 0.0
    if bounds is None or med <= 0:
        return math.inf
    return (bounds[1] - bounds[0]) / 2 / med


def settled(samples: list[float], target: float) -> bool:
    """True when the median's interval is within +-target of it (target 0: never)."""
    return target > 0 and median_halfwidth(samples) <= target


def relative_time(candidate: list[float], baseline: list[float]) -> float:
    """A screened candidate's time over the baseline's: the ratio of the medians (``Screened.relative``), the
    one figure both the host and the worker rank screened candidates by and set the early-stop bar from.
    Computed as the inverse of ``speedup_ci``'s value, so that it lies within the inverse of that interval to
    the last bit."""
    return 1.0 / float(np.median(baseline) / np.median(candidate))


EARLY_ROUNDS = 3      # a candidate far slower than the bar may stop after this many timed rounds
SLOWER_Z = 4.0        # ... when each of them is above the bar by this many times the measured noise
NOISE_FLOOR = 0.005   # the least noise assumed, however quiet the baseline was against itself


def pair_noise(ratios: list[float]) -> float:
    """The spread of a paired ratio measured on a GPU: a robust standard deviation (1.4826 x the median absolute
    deviation) of the logarithms of ``ratios``, each an implementation's time over another's in one round (the
    baseline against itself, when screening is set up). Never below ``NOISE_FLOOR``."""
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    if logs.size < 2:
        return math.inf
    mad = float(np.median(np.abs(logs - np.median(logs))))
    return max(NOISE_FLOOR, 1.4826 * mad)


def screening_stop(ratios: list[float], min_rounds: int, target: float, stop_above: float | None,
                   noise: float | None = None) -> str:
    """Whether screening may stop timing a candidate after these rounds (``ratios``: its time over the
    baseline's, paired by round): ``slower`` when the median ratio's interval lies above ``stop_above``,
    ``settled`` when it is within +-``target`` of the median, else "" (go on). Never before ``min_rounds``,
    except for ``slower`` where the spread of a paired ratio is known (``noise``, from ``pair_noise``): after
    ``EARLY_ROUNDS`` rounds that are each above ``stop_above`` by ``SLOWER_Z`` times that spread. A candidate
    whose true ratio is at the bar shows that with a chance far below one in a billion under normal noise, and
    below one in eight thousand even if one round in twenty were a far-out outlier."""
    n = len(ratios)
    if (noise is not None and stop_above is not None and EARLY_ROUNDS <= n < min_rounds
            and min(ratios) > stop_above * math.exp(SLOWER_Z * max(noise, NOISE_FLOOR))):
        return "slower"
    if n < min_rounds:
        return ""
    bounds = median_bounds(ratios)
    if stop_above is not None and bounds is not None and bounds[0] > stop_above:
        return "slower"
    return "settled" if settled(ratios, target) else ""
