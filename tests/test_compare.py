"""Output comparison: tolerance, NaN/Inf parity, first mismatch (NumPy path; the GPU uses the same code with CuPy)."""

import numpy as np

from sandbox.compare import compare


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
