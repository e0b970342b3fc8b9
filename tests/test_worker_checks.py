"""The GPU worker's host-side helpers that NumPy can run: the byte comparison of a candidate's two runs."""

import numpy as np
import pytest

from sandbox.worker.checks import same_bytes


@pytest.mark.parametrize("shape", [(), (1,), (3, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_two_runs_compare_as_bytes_whatever_their_shape(shape, dtype):
    a = np.asarray(np.arange(1, int(np.prod(shape)) + 1, dtype=dtype).reshape(shape))  # a scalar output: 0-d
    assert a.shape == shape and same_bytes(np, a, a.copy())
    b = a.copy()
    b.reshape(-1)[-1] += 1
    assert not same_bytes(np, a, b)


def test_nan_payloads_and_signed_zeros_are_told_apart():
    a = np.array([np.nan, 0.0], dtype=np.float32)
    assert same_bytes(np, a, a.copy())                                  # NaN == NaN byte for byte
    assert not same_bytes(np, a, np.array([np.nan, -0.0], dtype=np.float32))
    quiet = np.array(0x7FC00001, dtype=np.uint32).view(np.float32)     # another NaN payload
    assert not same_bytes(np, np.array(np.nan, dtype=np.float32), quiet)
