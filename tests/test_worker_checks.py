"""The GPU worker's host-side helpers that NumPy can run: the byte comparison of a candidate's two runs, and a guarded
buffer's layout and bands (the bands' kernel by its NumPy definition, ``harness.band_bytes``)."""

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


def _numpy_harness(seed: int = 1):
    import random
    from types import SimpleNamespace

    from sandbox.worker.harness import band_bytes

    # what Guarded reads of a Harness, on the host: NumPy for CuPy, the bands' kernel by its definition
    rng = random.Random(seed)

    def random_bands(band, copy):
        band[...] = copy[...] = band_bytes(np, band.size, rng.getrandbits(64))

    return SimpleNamespace(cp=np, _rng=rng, random_bands=random_bands)


def _intact(g) -> tuple[bool, ...]:
    """Each guard band's bytes against its copy, as ``bands_differ`` compares them on the device (below, above)."""
    return tuple(np.array_equal(g.raw[at: at + n], copy) for at, n, copy in g.band_spans())


@pytest.mark.parametrize("dtype, shape", [("float32", (1000, 37)), ("float16", ()), ("int8", (5,))])
def test_a_guarded_buffer_sits_between_intact_random_guard_bands(dtype, shape):
    from sandbox.worker.harness import GUARD_MIN, Guarded

    g = Guarded(_numpy_harness(), dtype, shape)
    assert g.view.shape == shape and g.view.dtype == np.dtype(dtype) and g.lo % 256 == 0 and g.lo >= GUARD_MIN
    assert all(_intact(g))
    assert len(set(g.guard_lo.tolist())) > 100                          # random bytes, not a constant
    assert not np.array_equal(g.guard_lo[:GUARD_MIN], Guarded(g.h, dtype, shape).guard_lo[:GUARD_MIN])  # a seed each
    g.raw[g.lo - 1] ^= 0xFF                                              # a write just below the buffer
    assert _intact(g) == (False, True)
    (below, n_below, _), (above, n_above, _) = g.band_spans()        # the bands cover all but the buffer
    assert (below, n_below, above) == (0, g.lo, g.lo + g.nbytes) and n_below + g.nbytes + n_above == g.raw.size
    g.raw[g.lo + g.nbytes] ^= 0xFF                                       # the first byte past its end (int8 x 5:
    assert _intact(g) == (False, False)                                  # not on a word boundary)


def test_a_guarded_buffer_takes_no_temporary_as_large_as_itself():
    # random bytes were drawn as int32 and cast: five times the buffer at once, which ran a 2 GB output out of
    # GPU memory; now only the guard bands are drawn
    import tracemalloc

    from sandbox.worker.harness import Guarded

    nbytes = 64 << 20
    tracemalloc.start()
    try:
        g = Guarded(_numpy_harness(), "float32", (nbytes // 4,))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert g.view.nbytes == nbytes and peak < 1.2 * nbytes, f"peak {peak / nbytes:.2f}x the buffer"
