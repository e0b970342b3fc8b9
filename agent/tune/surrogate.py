"""A small Gaussian-process surrogate for the ``bayes`` search strategy (numpy only).

Points are encoded as each dimension's choice placed in [0, 1]: numeric choices by their rank in
sorted order (so neighbours in value are neighbours in the encoding), others in declared order. The
kernel is Matern 5/2 with one length scale per dimension, picked together with the noise level by
maximum marginal likelihood over a small grid (the caller may keep the scales between refits); the
targets are log times, standardized. Expected improvement ranks the points not yet tried.

Fits and predictions run BLAS on one thread: the matrices have a few dozen to a few hundred rows, where
OpenBLAS's threads only wait for each other (a 40-point search on a loaded 2-core machine: 5.3 s with
them, 0.8 s without). The libraries are found once per process: finding them takes about 2 ms, as long as
a fit.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from threadpoolctl import ThreadpoolController

LENGTH_SCALES = (0.15, 0.3, 0.6, 1.2, 2.4)
NOISES = (1e-4, 1e-2, 1e-1)


def positions(choices: tuple) -> np.ndarray:
    """Each choice's place in [0, 1]: its rank among numeric choices, its declared order otherwise."""
    n = len(choices)
    if n == 1:
        return np.zeros(1)
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)
    order = sorted(range(n), key=lambda i: choices[i]) if numeric else list(range(n))
    out = np.empty(n)
    out[order] = np.arange(n) / (n - 1)
    return out


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def _one_blas_thread():
    return _blas().limit(limits=1, user_api="blas")


def _matern52(a: np.ndarray, b: np.ndarray, scales: np.ndarray) -> np.ndarray:
    a, b = a / scales, b / scales
    r2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    r = np.sqrt(np.maximum(r2, 0.0)) * math.sqrt(5.0)
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


class GaussianProcess:
    """Fit on (x, y); ``predict`` gives the posterior mean and standard deviation."""

    def __init__(self, x: np.ndarray, y: np.ndarray, scales: np.ndarray | None = None):
        """``scales``: keep these length scales (only the noise is picked); None: pick them too."""
        with _one_blas_thread():
            self._fit(x, y, scales)

    def _fit(self, x: np.ndarray, y: np.ndarray, scales: np.ndarray | None) -> None:
        self.x = x
        self.mean, self.std = float(y.mean()), float(y.std()) or 1.0
        z = (y - self.mean) / self.std
        best = None
        for scales in ([scales] if scales is not None else self._scale_grid(x.shape[1])):
            # one eigendecomposition serves every noise level: (K + s I)^-1 = Q diag(1 / (w + s)) Q^T
            w, q = np.linalg.eigh(_matern52(x, x, scales))
            w = np.maximum(w, 0.0)
            qz = q.T @ z
            for noise in NOISES:
                loglik = -0.5 * float((qz * qz / (w + noise)).sum()) - 0.5 * float(np.log(w + noise).sum())
                if best is None or loglik > best[0]:
                    best = (loglik, scales, noise, w, q, qz)
        _, self.scales, self.noise, w, q, qz = best
        self._q_scaled = q / np.sqrt(w + self.noise)          # K_noisy^-1 = q_scaled q_scaled^T
        self.alpha = q @ (qz / (w + self.noise))

    @staticmethod
    def _scale_grid(d: int):
        # one shared length scale, then each dimension alone made longer or shorter than the rest
        for s in LENGTH_SCALES:
            yield np.full(d, s)
        for s in (0.3, 0.6):
            for dim in range(d):
                for other in (s / 4, s * 4):
                    scales = np.full(d, s)
                    scales[dim] = other
                    yield scales

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with _one_blas_thread():
            ks = _matern52(x, self.x, self.scales)
            mu = ks @ self.alpha
            v = ks @ self._q_scaled
        var = np.maximum(1.0 - (v * v).sum(1), 1e-12)
        return mu * self.std + self.mean, np.sqrt(var) * self.std


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf, otypes=[float])(z / math.sqrt(2.0)))


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = 0.01) -> np.ndarray:
    """Expected amount by which each point beats ``best`` (lower is better)."""
    gain = best - mu - xi
    z = gain / sigma
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return gain * _normal_cdf(z) + sigma * pdf
