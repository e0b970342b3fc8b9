"""Output comparison: tolerance, NaN/Inf parity, first mismatch (NumPy path; the GPU uses the same code with CuPy)."""

import numpy as np
import pytest

from sandbox.judging.compare import compare


def test_within_tolerance_passes_and_reports_errors():
    ref = np.linspace(-1, 1, 101)
    got = (ref + 1e-7).astype(np.float32)
    r = compare(np, got, ref, atol=1e-6, rtol=0)
    assert r["passed"] and r["mismatches"] == 0
    assert 0 < r["max_abs_error"] < 2e-7


def test_first_mismatch_is_reported_in_c_order():
    ref = np.zeros((3, 4))
    got = ref.astype(np.float32).copy()
    got[1, 2] = 0.5
    got[2, 0] = 0.25
    r = compare(np, got, ref, atol=1e-3, rtol=0)
    assert not r["passed"] and r["mismatches"] == 2
    assert r["first_mismatch"] == {"index": [1, 2], "got": 0.5, "expected": 0.0}


def test_nan_only_where_the_reference_has_nan():
    ref = np.array([1.0, np.nan, np.inf, -np.inf])
    assert compare(np, ref.astype(np.float32), ref, 0, 0)["passed"]
    got = ref.copy()
    got[0] = np.nan
    r = compare(np, got, ref, 1e9, 1e9)
    assert not r["passed"] and "NaN where the reference is a number" in r["note"]
    got = ref.copy()
    got[1] = 0.0
    assert not compare(np, got, ref, 1e9, 1e9)["passed"]
    got = ref.copy()
    got[2] = -np.inf
    assert not compare(np, got, ref, 1e9, 1e9)["passed"]


def test_shape_mismatch_fails_with_a_note():
    r = compare(np, np.zeros(4), np.zeros((2, 2)), 1, 1)
    assert not r["passed"] and "shape" in r["note"]


def test_integers_compare_exactly():
    ref = np.arange(10)
    got = ref.astype(np.int32)
    assert compare(np, got, ref, 0, 0)["passed"]
    got[3] += 1
    assert compare(np, got, ref, 0, 0)["mismatches"] == 1


def _long_sums(k: int, seed: int = 3):
    """A float32 matrix product summed in order over ``k`` terms (as a plain CUDA kernel does) and its float64
    value, on inputs of the magnitudes of the 'kinks' variant (up to 6)."""
    rng = np.random.default_rng(seed)
    a = rng.choice([-6.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0], size=(48, k)) + 0.25 * rng.standard_normal((48, k))
    b = rng.choice([-6.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0], size=(k, 48)) + 0.25 * rng.standard_normal((k, 48))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got = np.cumsum(a32[:, :, None] * b32[None, :, :], axis=1, dtype=np.float32)[:, -1, :]
    return got, a32.astype(np.float64) @ b32.astype(np.float64)


def test_atol_grows_with_the_spread_of_the_output_where_it_is_compared():
    from sandbox.judging.compare import spread_atol

    got, expected = _long_sums(4096)
    atol, rtol = 0.00038, 1e-4          # what a short check size of unit-sized inputs measures
    assert not compare(np, got, expected, atol, rtol)["passed"]        # honest float32, judged wrong without it
    assert compare(np, got, expected, atol, rtol, spread=2e-4)["passed"]
    grown = spread_atol(np, expected, atol, 2e-4)
    assert grown == pytest.approx(2e-4 * expected.std())
    assert spread_atol(np, np.full(10, 5.0), atol, 2e-4) == atol       # no spread: atol as written
    # a wrong answer is still wrong: a constant, zeros, and noise at a hundredth of the spread
    assert not compare(np, np.zeros_like(got), expected, atol, rtol, spread=2e-4)["passed"]
    assert not compare(np, np.full_like(got, expected.mean()), expected, atol, rtol, spread=2e-4)["passed"]
    noisy = expected + 0.01 * expected.std() * np.sign(np.random.default_rng(1).standard_normal(expected.shape))
    assert not compare(np, noisy.astype(np.float32), expected, atol, rtol, spread=2e-4)["passed"]
