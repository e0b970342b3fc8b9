"""The reference comparison on the device (one pass, ``sandbox.judging.compare.DevicePass``) finds what the NumPy
expressions find: counts, maxima, first mismatch and the NaN note, for every output dtype, non-finite values,
values on the tolerance's edge, odd and empty shapes."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.judging.compare import compare

pytestmark = pytest.mark.gpu


def _cases(rng: np.random.Generator):
    for dtype in ("float32", "float64", "float16", "int32", "bool"):
        for shape in ((0,), (), (1,), (7, 13), (3, 1000003)):
            n = int(np.prod(shape))
            ref = rng.normal(0, 3, n)
            got = (ref + rng.normal(0, 1e-3, n)).astype(dtype) if dtype != "bool" else ref > 0
            ref = ref if dtype != "bool" else (ref > 0).astype(np.float64)
            if n > 20 and dtype.startswith("float"):
                got[rng.integers(0, n, 5)] = np.nan
                ref[rng.integers(0, n, 3)] = np.inf
                ref[rng.integers(0, n, 3)] = -np.inf
                got[rng.integers(0, n, 3)] = np.inf
                got[rng.integers(0, n, 4)] *= 1.5
                edge = rng.integers(0, n, 50)   # exactly on the bound: passes in NumPy, must pass here
                ref[edge] = 1.0
                got[edge] = np.asarray(1.0 + 1e-3 + 1e-3 * 1.0, dtype=dtype) if dtype == "float64" else got[edge]
            yield dtype, got.reshape(shape), ref.reshape(shape)


def test_the_device_pass_reports_what_numpy_reports():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(7)
    for dtype, got, ref in _cases(rng):
        for atol, rtol in ((1e-3, 1e-3), (0.0, 0.0), (1e-6, 0.0)):
            for ref_dtype in (np.float64, np.float32):
                r = ref.astype(ref_dtype)
                want = compare(np, got, r, atol, rtol)
                found = compare(cp, cp.asarray(got), cp.asarray(r), atol, rtol)
                assert found == want, (dtype, got.shape, ref_dtype, atol, rtol)


def test_a_wrong_output_of_2_to_the_28_elements_is_found_with_its_first_mismatch():
    cp = pytest.importorskip("cupy")
    ref = cp.arange(1 << 28, dtype=cp.float64) * 1e-6
    got = ref.astype(cp.float32)
    assert compare(cp, got, ref, 1e-5, 1e-5)["passed"]
    got[123456789] += 1.0
    got[(1 << 28) - 1] = cp.nan
    r = compare(cp, got, ref, 1e-5, 1e-5)
    assert not r["passed"] and r["mismatches"] == 2
    assert r["first_mismatch"]["index"] == [123456789]
    assert "1 NaN where the reference is a number" in r["note"]
