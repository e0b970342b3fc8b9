"""Element-wise comparison of a candidate's output with the reference (NumPy or CuPy).

With NumPy, and with CuPy for dtypes the device pass does not take, the test is written as array
expressions. With CuPy for float32/float64 outputs and references (other dtypes are converted to float64
first), ``DevicePass`` runs the same test in one read of both arrays: the element-wise expressions
would each read and write a float64 array the size of the output (a benchmark-size output of 2^28
elements took about a dozen such passes per comparison). Both give the same counts, maxima and first
mismatch: the tolerance is computed without a fused multiply-add, as NumPy computes it.
"""

from __future__ import annotations

import math

import numpy as np


def spread_atol(xp, expected, atol: float, spread: float) -> float:
    """The absolute tolerance where ``expected`` is compared: ``atol``, or ``spread`` times the standard deviation
    of expected's finite values where that is larger (``Tolerance.spread``)."""
    if not spread or expected.size < 2:
        return atol
    e = expected.reshape(-1)
    e = e[xp.isfinite(e)].astype(xp.float64)
    return max(atol, spread * float(e.std())) if e.size >= 2 else atol


def compare(xp, got, expected, atol: float, rtol: float, spread: float = 0.0) -> dict:
    """Compare ``got`` (the output dtype) with ``expected`` (any precision).

    Passing means: same shape; NaN exactly where the reference has NaN; infinities of the same sign
    exactly where the reference has them; elsewhere ``|got - expected| <= atol + rtol * |expected|``, atol
    grown to ``spread`` times expected's standard deviation where that is larger (``spread_atol``).
    Returns the error statistics, the first mismatch (C order) and the signed error's statistics (``bias``: in
    units of each element's tolerance, over the finite elements whose tolerance is not 0; None where there are none).
    """
    if tuple(got.shape) != tuple(expected.shape):
        return dict(passed=False, mismatches=int(math.prod(got.shape)), max_abs_error=None, max_rel_error=None,
                    first_mismatch=None, note=f"shape {tuple(got.shape)} != reference shape {tuple(expected.shape)}",
                    bias=None)
    atol = spread_atol(xp, expected, atol, spread)
    if xp is not np:
        return DevicePass.of(xp).compare(got, expected, atol, rtol)
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
    bound = atol + rtol * xp.abs(e)
    used = finite & (bound > 0)
    d = xp.where(used, (g - e) / xp.where(used, bound, 1.0), 0.0)
    m = xp.sign(e) * d
    sums = [float(v) for v in (d.sum(), (d * d).sum(), m.sum(), (m * m).sum(), xp.abs(d).sum())]
    return _result(mismatches, n, max_abs, max_rel, int((g_nan & ~e_nan).sum()), first, int(used.sum()), sums)


def _result(mismatches: int, n: int, max_abs: float, max_rel: float, nan_not_ref: int, first, used: int = 0,
            sums=None) -> dict:
    note = f"{nan_not_ref} NaN where the reference is a number (unwritten or poisoned elements?)" if nan_not_ref else ""
    return dict(passed=mismatches == 0, mismatches=mismatches, max_abs_error=max_abs, max_rel_error=max_rel,
                first_mismatch=first, note=note, bias=bias_stats(used, sums) if used else None)


def bias_stats(n: int, sums) -> dict:
    """The signed error's statistics from its sums over ``n`` elements (``sums``: of d, d^2, m, m^2, |d|, where d is
    the error in units of the element's tolerance and m is d signed toward the reference's magnitude): the means of d
    (``mean``) and m (``away``, negative toward zero), their standard errors, and the mean of |d|."""
    s1, s2, m1, m2, a1 = sums

    def se(total, squares):
        mean = total / n
        return math.sqrt(max(squares / n - mean * mean, 0.0) / max(n - 1, 1))

    return dict(n=n, mean=s1 / n, mean_se=se(s1, s2), away=m1 / n, away_se=se(m1, m2), mean_abs=a1 / n)


_DEVICE_SOURCE = r"""
template <typename G, typename E>
__global__ void compare_pass(const G* got, const E* ref, long long n, double atol, double rtol,
                             unsigned long long* out, double* sums) {
    // out: mismatches, first mismatch, NaN where the reference is a number, max |got - ref| and max relative
    // error (the bits of non-negative doubles, which order as the doubles do), elements of the bias sums;
    // sums: of d, d^2, m, m^2, |d| (``bias_stats``)
    unsigned long long bad_count = 0, nan_count = 0, first = ~0ull, used = 0;
    double max_abs = 0.0, max_rel = 0.0, s[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double g = (double)got[i], e = (double)ref[i];
        bool gn = isnan(g), en = isnan(e), gi = isinf(g), ei = isinf(e);
        bool finite = !(gn || en || gi || ei);
        double diff = finite ? fabs(g - e) : 0.0;
        double bound = __dadd_rn(atol, __dmul_rn(rtol, fabs(e)));  // no fused multiply-add: NumPy's rounding
        bool bad = (gn != en) || (gi != ei) || (gi && ei && ((g > 0) != (e > 0))) || (finite && diff > bound);
        double denom = fabs(e);
        double rel = (finite && denom > 0) ? diff / denom : 0.0;
        if (bad) {
            if (bad_count == 0) first = (unsigned long long)i;  // a thread's indices only grow
            bad_count++;
        }
        if (gn && !en) nan_count++;
        if (finite && bound > 0) {
            double d = (g - e) / bound, m = e > 0 ? d : e < 0 ? -d : 0.0;
            s[0] += d; s[1] += d * d; s[2] += m; s[3] += m * m; s[4] += fabs(d);
            used++;
        }
        max_abs = fmax(max_abs, diff);
        max_rel = fmax(max_rel, rel);
    }
    for (int off = 16; off > 0; off >>= 1) {
        bad_count += __shfl_down_sync(0xffffffffu, bad_count, off);
        nan_count += __shfl_down_sync(0xffffffffu, nan_count, off);
        unsigned long long f = __shfl_down_sync(0xffffffffu, first, off);
        first = f < first ? f : first;
        max_abs = fmax(max_abs, __shfl_down_sync(0xffffffffu, max_abs, off));
        max_rel = fmax(max_rel, __shfl_down_sync(0xffffffffu, max_rel, off));
        used += __shfl_down_sync(0xffffffffu, used, off);
        for (int k = 0; k < 5; ++k) s[k] += __shfl_down_sync(0xffffffffu, s[k], off);
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad_count) { atomicAdd(&out[0], bad_count); atomicMin(&out[1], first); }
        if (nan_count) atomicAdd(&out[2], nan_count);
        atomicMax(&out[3], (unsigned long long)__double_as_longlong(max_abs));
        atomicMax(&out[4], (unsigned long long)__double_as_longlong(max_rel));
        if (used) {
            atomicAdd(&out[5], used);
            for (int k = 0; k < 5; ++k) atomicAdd(&sums[k], s[k]);
        }
    }
}
"""
_CTYPE = {"float32": "float", "float64": "double"}


class DevicePass:
    """The comparison as one CUDA kernel (CuPy), compiled once per process for the four float32/float64
    pairs; ``compare`` returns what ``compare`` returns for NumPy arrays."""

    _instances: dict = {}
    THREADS, MAX_BLOCKS = 256, 4096

    def __init__(self, cp):
        self.cp = cp
        names = [f"compare_pass<{g},{e}>" for g in _CTYPE.values() for e in _CTYPE.values()]
        self.module = cp.RawModule(code=_DEVICE_SOURCE, options=("--std=c++14",), name_expressions=names)
        self.kernels = {(g, e): self.module.get_function(f"compare_pass<{_CTYPE[g]},{_CTYPE[e]}>")
                        for g in _CTYPE for e in _CTYPE}

    @classmethod
    def of(cls, cp) -> "DevicePass":
        found = cls._instances.get(id(cp))
        if found is None:
            found = cls._instances[id(cp)] = cls(cp)
        return found

    def compare(self, got, expected, atol: float, rtol: float) -> dict:
        cp = self.cp
        g = self._operand(got)
        e = self._operand(expected)
        n = int(g.size)
        if n == 0:
            return _result(0, 0, 0.0, 0.0, 0, None)
        out = cp.array([0, (1 << 64) - 1, 0, 0, 0, 0], dtype=cp.uint64)
        sums = cp.zeros(5, dtype=cp.float64)
        blocks = min(self.MAX_BLOCKS, -(-n // self.THREADS))
        self.kernels[(g.dtype.name, e.dtype.name)]((blocks,), (self.THREADS,),
                                                    (g, e, np.int64(n), np.float64(atol), np.float64(rtol), out, sums))
        mismatches, first, nan_not_ref, abs_bits, rel_bits, used = (int(v) for v in out.get())
        max_abs, max_rel = (float(np.array([b], dtype=np.uint64).view(np.float64)[0]) for b in (abs_bits, rel_bits))
        where = None
        if mismatches:
            index = [int(i) for i in _unravel(first, tuple(got.shape))]
            where = dict(index=index, got=_num(g[first]), expected=_num(e[first]))
        return _result(mismatches, n, max_abs, max_rel, nan_not_ref, where, used, [float(v) for v in sums.get()])

    def _operand(self, array):
        cp = self.cp
        flat = cp.ascontiguousarray(array).reshape(-1)
        return flat if flat.dtype.name in _CTYPE else flat.astype(cp.float64)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(flat % dim)
        flat //= dim
    return list(reversed(out))


def _num(x) -> float | str:
    v = float(x)
    return v if math.isfinite(v) else str(v)
