"""Statistics for timing: medians with 95% intervals, and paired speedup intervals.

Intervals are percentile bootstraps with a fixed generator seed, so the same samples always give
the same interval. A speedup resamples whole rounds (baseline and candidate timed in the same round
stay paired), so drift shared by both cancels.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 4000


def median_ci(samples: list[float], level: float = 0.95) -> tuple[float, float, float]:
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples")
    rng = np.random.default_rng(0)
    idx = rng.integers(0, x.size, size=(RESAMPLES, x.size))
    boots = np.median(x[idx], axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.median(x)), float(lo), float(hi)


def speedup_ci(reference: list[float], candidate: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """median(reference) / median(candidate) with a paired-round bootstrap interval."""
    a = np.asarray(reference, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.size != b.size or a.size == 0:
        raise ValueError("speedup needs the same, non-zero number of paired samples")
    rng = np.random.default_rng(1)
    idx = rng.integers(0, a.size, size=(RESAMPLES, a.size))
    boots = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.median(a) / np.median(b)), float(lo), float(hi)


def relative_spread(samples: list[float]) -> float:
    """Half the 95% interval of the median, relative to the median (a noise figure)."""
    med, lo, hi = median_ci(samples)
    return (hi - lo) / 2 / med if med else float("inf")
