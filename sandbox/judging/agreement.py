"""The agreement test: does a candidate's output agree with the baseline's for the same inputs?

Used on every launch of a candidate in the timing stage and in screening. Both outputs are honest
when each is within the task's tolerance of the exact result r: |c - r| <= atol + rtol |r|, and the
same for b. Then, for every element,

    |c_i - b_i| <= t_i = 2 (atol + rtol max(|c_i|, |b_i|)) / (1 - rtol)

(|r| <= (|b| + atol) / (1 - rtol) bounds r by what is known). The test has two parts, computed in one
pass over both outputs (``agree`` in harness.cu; ``agree`` here is the same test in NumPy or CuPy):

- **every element**: NaN and infinities exactly where the baseline has them (same sign), and
  |c_i - b_i| <= t_i elsewhere. Integer outputs with an exact tolerance compare bits.
- **random-sign projections** S_k = sum_i w_ki (c_i - b_i) over the finite elements, with signs
  w_ki = +-1 drawn from a key chosen after the launch, bounded by LAMBDA * sqrt(sum_i t_i^2). For an
  honest pair (every |d_i| <= t_i), Hoeffding's inequality bounds the chance that one projection
  exceeds it by 2 exp(-LAMBDA^2 / 2) = 2.5e-14; an output that is wrong in aggregate (all zero,
  systematically biased by more than LAMBDA times its per-element bound spread over sqrt(n)
  elements) exceeds it whatever its size.

Comparing every element costs what the projections cost (one read of each output), so the test
never samples: one wrong element in a billion is found.

Both bounds assume the baseline is within the task's tolerance of the exact result. A task's CUDA baseline is:
the sandbox checks it like any candidate, at every check size and the benchmark size, before it is timed. PyTorch
eager, the baseline of a task imported without one, is not: its own error at the benchmark size is never
measured, and two correct float32 implementations of a K = 8192 GEMM summed in different orders, followed by
activations that squash the output's spread, differ by more than twice a tolerance set at the check sizes
(KernelBench level2/95 on its `wide` inputs). So for such a task ``agreement_tolerances`` grows each floating
output's atol to ``HONEST_SPREAD`` of the standard deviation of eager's output where that is larger (the ``spread``
rule of the reference comparison): the largest honest error an imported task admits (``CAP`` in
``sandbox.pytorch.numerics``, at most 5%), on each side. Zeros, a constant, a skipped step or noise at a tenth of the spread
still disagree; an error below it in the timed rounds only is left to the launches kept for the full comparison
with the reference, which keeps the task's own tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..tasks.dtypes import DTYPES

LAMBDA = 8.0
PROJECTIONS = 4
M1, M2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
U64 = (1 << 64) - 1
# an honest implementation's error as a share of its output's standard deviation, by dtype: the import's cap
# (bfloat16's held to 5%, the most a tolerance's ``spread`` may be)
HONEST_SPREAD = {"float64": 1e-6, "float32": 1e-2, "float16": 5e-2, "bfloat16": 5e-2}
UNSIGNED = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
# harness.cu's kernels for the test, by the names NVRTC lowers
DEVICE_NAMES = [f"agree<{d.ctype}>" for d in DTYPES.values()] + [f"mask_bits<{u}>" for u in UNSIGNED.values()]


def scaled_tolerance(atol: float, rtol: float) -> tuple[float, float]:
    """(a, r) with t_i = a + r * max(|c_i|, |b_i|): twice the task's tolerance, widened by 1/(1 - rtol)."""
    if rtol >= 1.0:
        return math.inf, math.inf
    return 2.0 * atol / (1.0 - rtol), 2.0 * rtol / (1.0 - rtol)


def agreement_tolerances(task) -> dict[str, list[float]]:
    """The ``[atol, rtol, spread]`` of each output of ``task`` (a ``sandbox.tasks.task.Task``) for the agreement with
    its primary baseline: the task's own where the baseline is its CUDA kernel (checked against the reference at
    every size); against PyTorch eager, ``spread`` raised to ``HONEST_SPREAD`` of the output's dtype (a floating
    output; an integer one keeps its tolerance)."""
    out = {}
    for o in task.spec.outputs:
        t = task.output_tolerance(o)
        honest = 0.0 if task.has_baseline else HONEST_SPREAD.get(o.dtype, 0.0)
        out[o.name] = [t.atol, t.rtol, max(t.spread, honest)]
    return out


def projection_bound(sum_t2: float, lam: float = LAMBDA) -> float:
    return lam * math.sqrt(sum_t2)


def false_alarm(lam: float = LAMBDA, projections: int = PROJECTIONS) -> float:
    """Upper bound on the chance that an honest pair fails some projection (Hoeffding, union bound)."""
    return min(1.0, projections * 2.0 * math.exp(-lam * lam / 2.0))


def exact(dtype: str, atol: float, rtol: float) -> bool:
    """Integer outputs with a zero tolerance are compared bit for bit."""
    return atol == 0 and rtol == 0 and np.dtype(dtype).kind in "iu"


# ---- the keyed streams (the same functions as harness.cu) ----------------------------------------

def mix64_int(x: int) -> int:
    x &= U64
    x ^= x >> 33
    x = (x * M1) & U64
    x ^= x >> 33
    x = (x * M2) & U64
    return x ^ (x >> 33)


def mix64(xp, x):
    """Element-wise mix64 of a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> xp.uint64(33))
        x = x * xp.uint64(M1)
        x = x ^ (x >> xp.uint64(33))
        x = x * xp.uint64(M2)
        return x ^ (x >> xp.uint64(33))


def per_word(itemsize: int) -> int:
    """Elements that share one 64-bit word of a keyed stream."""
    return max(1, 8 // itemsize)


def sign_bits(xp, n: int, itemsize: int, key: int, projections: int = PROJECTIONS):
    """bool[projections, n]: True where w_ki = -1. Element i takes bits [j*P, (j+1)*P) of
    mix64(word ^ key), j its place in its 8-byte word."""
    e = per_word(itemsize)
    i = xp.arange(n, dtype=xp.uint64)
    h = mix64(xp, (i // xp.uint64(e)) ^ xp.uint64(key))
    shift = (i % xp.uint64(e)) * xp.uint64(projections)
    return xp.stack([((h >> (shift + xp.uint64(k))) & xp.uint64(1)).astype(bool) for k in range(projections)])


def mask_value(bits: int, index: int, itemsize: int, k1: int, k2: int) -> int:
    """The mask harness.cu XORs into element ``index`` of a stored baseline output (host side, one element)."""
    e = per_word(itemsize)
    word = mix64_int((index // e) ^ k1) ^ k2
    width = 8 * itemsize
    return (bits ^ (word >> (width * (index % e)))) & ((1 << width) - 1)


# ---- the test in NumPy or CuPy (the reference for the device kernel, and the benchmark's) --------

@dataclass(frozen=True)
class Agreement:
    """What one pass over a candidate output and the baseline's found (as the device kernel reports it)."""

    n: int
    violations: int
    first: int | None
    sum_t2: float
    sums: tuple[float, ...]
    repeated: bool = False   # the output was, bit for bit, one already compared on the same inputs: no pass over it

    def projection_failures(self, lam: float = LAMBDA) -> list[int]:
        bound = projection_bound(self.sum_t2, lam)
        return [k for k, s in enumerate(self.sums) if not abs(s) <= bound]

    def verdict(self, lam: float = LAMBDA) -> str:
        """Why the output disagrees with the baseline's ("" when it agrees)."""
        if self.violations:
            return (f"{self.violations} of {self.n} elements differ from the baseline's by more than twice the "
                    f"task's tolerance (or in NaN/inf), first at index {self.first}")
        bad = self.projection_failures(lam)
        if bad:
            k = bad[0]
            return (f"a random-sign projection of the difference is {self.sums[k]:.4g}, beyond {lam:g} x "
                    f"sqrt(sum of squared element bounds) = {projection_bound(self.sum_t2, lam):.4g}: a systematic "
                    f"error (an honest output exceeds it with probability < {false_alarm(lam):.0e})")
        return ""


def agree(xp, c, b, atol: float, rtol: float, key: int, projections: int = PROJECTIONS) -> Agreement:
    """The agreement test of ``c`` (candidate) with ``b`` (baseline), both of the output's dtype."""
    c, b = c.reshape(-1), b.reshape(-1)
    n = int(c.size)
    cd, bd = c.astype(xp.float64), b.astype(xp.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if exact(c.dtype.name, atol, rtol):
            d, t, bad = cd - bd, xp.zeros(n), c != b
        else:
            a2, r2 = scaled_tolerance(atol, rtol)
            finite = xp.isfinite(cd) & xp.isfinite(bd)
            same_special = (xp.isnan(cd) & xp.isnan(bd)) | (xp.isinf(cd) & (cd == bd))
            d = xp.where(finite, cd - bd, 0.0)
            t = xp.where(finite, a2 + r2 * xp.maximum(xp.abs(cd), xp.abs(bd)), 0.0)
            bad = xp.where(finite, ~(xp.abs(d) <= t), ~same_special)
        neg = sign_bits(xp, n, c.dtype.itemsize, key, projections)
        sums = [float(xp.where(neg[k], -d, d).sum()) for k in range(projections)]
        return _result(xp, n, bad, float((t * t).sum()), sums)


def _result(xp, n: int, bad, sum_t2: float, sums: list[float]) -> Agreement:
    count = int(bad.sum())
    first = int(xp.argmax(bad)) if count else None
    return Agreement(n=n, violations=count, first=first, sum_t2=sum_t2, sums=tuple(sums))


__all__ = ["Agreement", "DEVICE_NAMES", "HONEST_SPREAD", "agreement_tolerances", "LAMBDA", "UNSIGNED", "PROJECTIONS", "agree", "exact", "false_alarm", "mask_value", "mix64",
           "mix64_int", "per_word", "projection_bound", "scaled_tolerance", "sign_bits"]
