"""Element-wise comparison of a candidate's output with the reference (NumPy or CuPy)."""

from __future__ import annotations

import math

import numpy as np


def compare(xp, got, expected, atol: float, rtol: float) -> dict:
    """Compare ``got`` (the output dtype) with ``expected`` (any precision).

    Passing means: same shape; NaN exactly where the reference has NaN; infinities of the same sign
    exactly where the reference has them; elsewhere ``|got - expected| <= atol + rtol * |expected|``.
    Returns the error statistics and the first mismatch (C order).
    """
    if tuple(got.shape) != tuple(expected.shape):
        return dict(passed=False, mismatches=int(math.prod(got.shape)), max_abs_error=None, max_rel_error=None,
                    first_mismatch=None, note=f"shape {tuple(got.shape)} != reference shape {tuple(expected.shape)}")
    with np.errstate(invalid="ignore", over="ignore"):
        return _compare(xp, got, expected, atol, rtol)


def _compare(xp, got, expected, atol: float, rtol: float) -> dict:
    g = got.astype(xp.float64).ravel()
    e = expected.astype(xp.float64).ravel()
    g_nan, e_nan = xp.isnan(g), xp.isnan(e)
    g_inf, e_inf = xp.isinf(g), xp.isinf(e)
    finite = ~(g_nan | e_nan | g_inf | e_inf)
    diff = xp.where(finite, xp.abs(g - e), 0.0)
    bad = (g_nan != e_nan) | (g_inf != e_inf) | (g_inf & e_inf & (xp.sign(g) != xp.sign(e)))
    bad |= finite & (diff > atol + rtol * xp.abs(e))
    mismatches = int(bad.sum())
    n = int(g.size)
    max_abs = float(diff.max()) if n else 0.0
    denom = xp.abs(e)
    rel = xp.where(finite & (denom > 0), diff / xp.where(denom > 0, denom, 1.0), 0.0)
    max_rel = float(rel.max()) if n else 0.0
    first = None
    if mismatches:
        flat = int(xp.argmax(bad))
        index = [int(i) for i in _unravel(flat, tuple(got.shape))]
        first = dict(index=index, got=_num(g[flat]), expected=_num(e[flat]))
    note = ""
    if int((g_nan & ~e_nan).sum()):
        note = f"{int((g_nan & ~e_nan).sum())} NaN where the reference is a number (unwritten or poisoned elements?)"
    return dict(passed=mismatches == 0, mismatches=mismatches, max_abs_error=max_abs, max_rel_error=max_rel,
                first_mismatch=first, note=note)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(flat % dim)
        flat //= dim
    return list(reversed(out))


def _num(x) -> float | str:
    v = float(x)
    return v if math.isfinite(v) else str(v)
