"""Bias inside the tolerance: every check carries its output's signed error against the float64 reference, and an
output whose error has one sign in every check is flagged in the verdict line (not rejected). Honest kernels that
round to nearest (float32 sums in another order, float32 results of float64 arithmetic) are not flagged; kernels that
truncate (toward zero in float32, or bfloat16 by dropping bits) or round one way are."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.judging.bias import bias_flags
from sandbox.judging.compare import compare
from sandbox.judging.result import Bias, Check, Result, Status
from sandbox.tasks.dtypes import from_float64, to_compute

RTOL, ATOL = 1e-5, 1e-3   # a reduction's tolerance: its sums cancel


def _checks(kernel, trials: int = 6, rows: int = 64, cols: int = 1000, dtype="float32", rtol=RTOL, atol=ATOL):
    """Checks of ``kernel`` (float64 inputs -> outputs of ``dtype``) against float64 row sums on ``trials`` draws."""
    out = []
    for t in range(trials):
        x = np.random.default_rng(100 + t).normal(0.0, 1.0, (rows, cols))   # sums of both signs
        expected = x.sum(axis=1)
        got = kernel(x)
        stats = compare(np, to_compute(np, got, dtype), expected, atol, rtol)
        assert stats["passed"], stats
        out.append(Check(sizes={"rows": rows}, label=f"check[{t}]", output="y", distribution="normal", passed=True,
                         seed=t, bias=Bias.of(stats["bias"])))
    return out


def sequential_f32(x):
    """float32 sums in column order (another order than the reference's)."""
    acc = np.zeros(x.shape[0], np.float32)
    for c in range(x.shape[1]):
        acc += x[:, c].astype(np.float32)
    return acc


def pairwise_f32(x):
    return x.astype(np.float32).sum(axis=1, dtype=np.float32)


def rounded_f64(x):
    return x.sum(axis=1).astype(np.float32)


def toward_zero_f32(x):
    """float64 sums truncated to float32: round toward zero."""
    s = x.sum(axis=1)
    f = s.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(s)
    return np.where(over, np.nextafter(f, np.float32(0)), f)


def upward_f32(x):
    s = x.sum(axis=1)
    f = s.astype(np.float32)
    return np.where(f.astype(np.float64) < s, np.nextafter(f, np.float32(np.inf)), f)


def bf16_truncated(x):
    bits = x.sum(axis=1).astype(np.float32).view(np.uint32)
    return (bits >> np.uint32(16)).astype(np.uint16)


def bf16_rounded(x):
    return from_float64(np, x.sum(axis=1), "bfloat16")


@pytest.mark.parametrize("kernel", [sequential_f32, pairwise_f32, rounded_f64], ids=lambda k: k.__name__)
def test_honest_round_to_nearest_kernels_are_not_flagged(kernel):
    checks = _checks(kernel)
    assert all(c.bias is not None and c.bias.n == 64 for c in checks)
    assert bias_flags(checks) == []


def test_a_kernel_that_truncates_toward_zero_is_flagged_though_it_passes():
    checks = _checks(toward_zero_f32)
    assert all(c.bias.away_high < 0 for c in checks)
    flags = bias_flags(checks)
    assert len(flags) == 1 and flags[0].startswith("y errs toward zero in all 6 checks")


def test_a_kernel_that_rounds_up_is_flagged_above():
    flags = bias_flags(_checks(upward_f32))
    assert len(flags) == 1 and flags[0].startswith("y errs above in all 6 checks")


def test_bfloat16_truncation_is_flagged_and_bfloat16_rounding_is_not():
    bf16 = dict(dtype="bfloat16", rtol=2.0**-7, atol=1e-3)
    assert bias_flags(_checks(bf16_rounded, **bf16)) == []
    flags = bias_flags(_checks(bf16_truncated, **bf16))
    assert len(flags) == 1 and "toward zero" in flags[0]


def test_one_sided_checks_with_signs_that_change_are_not_flagged():
    """A single row's float32 softmax errs with one sign (its sum rounded one way), the next draw's the other."""
    def check(sign: float, t: int) -> Check:
        b = Bias(n=1000, mean=sign * 0.02, low=sign * 0.02 - 1e-4, high=sign * 0.02 + 1e-4, away=sign * 0.02,
                 away_low=sign * 0.02 - 1e-4, away_high=sign * 0.02 + 1e-4, mean_abs=0.02)
        return Check(sizes={}, label=f"check[{t}]", output="y", distribution="normal", passed=True, bias=b)

    assert bias_flags([check(s, t) for t, s in enumerate((1, -1, 1, 1))]) == []
    assert len(bias_flags([check(1, t) for t in range(4)])) == 1
    assert bias_flags([check(1, t) for t in range(2)]) == []   # too few checks to say


def test_the_flag_is_named_in_the_verdict_line_and_the_status_stays_ok():
    r = Result(status=Status.ok, task="t", task_fingerprint="f", candidate="c", candidate_key="k",
               checks=_checks(toward_zero_f32))
    assert r.ok and "bias flag: y errs toward zero" in r.summary()
    again = Result.from_json(r.to_json())
    assert again.checks[0].bias == r.checks[0].bias and again.checks[0].seed == 0
    assert "bias flag" not in Result(status=Status.ok, task="t", task_fingerprint="f", candidate="c",
                                     candidate_key="k", checks=_checks(pairwise_f32)).summary()


def test_an_exact_output_has_no_bias_and_nothing_compared_has_none():
    x = np.arange(10.0)
    assert compare(np, x, x, 0.0, 0.0)["bias"] is None   # a zero tolerance: no unit to measure in
    stats = compare(np, x, x, 1e-6, 0.0)["bias"]
    assert stats["mean"] == 0 and stats["mean_abs"] == 0
