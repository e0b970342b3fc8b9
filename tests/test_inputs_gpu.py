"""Inputs drawn on the GPU: float32 draws of the normal, wide and uniform kinds go straight into the array they fill
(``keyed``'s device kernel). The bits are those a new array gets for the same seed (the reference worker draws new
arrays, the GPU worker fills its buffers), at odd sizes and across chunks, each kind keeps its distribution, and every
kind in every dtype has, on the device, the bits of the NumPy definition on the host."""

from __future__ import annotations

import pytest

from sandbox.tasks import inputs, keyed

SPEC = dict(name="x", dtype="float32", low=2.0, high=5.0, scale=3.0, offset=1.0)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["normal", "wide", "uniform"])
@pytest.mark.parametrize("n", [1, 2, 3, 1001, 2 * 1000 + 1])
def test_a_float32_draw_into_a_buffer_has_the_bits_of_a_new_array(kind, n, monkeypatch):
    cp = pytest.importorskip("cupy")
    monkeypatch.setattr(inputs, "CHUNK", 1000)   # the last size spans three chunks, the last of one element
    spec = dict(SPEC, shape=[n], dist=kind, kind=kind)
    new = inputs.generate(cp, spec, 5)
    into = cp.full(n, float("nan"), dtype=cp.float32)
    assert inputs.generate(cp, spec, 5, into) is into
    assert bool((new == into).all()) and bool(cp.isfinite(into).all())
    if n > 3:
        assert not bool((new == inputs.generate(cp, spec, 6)).all())
    if kind == "uniform":
        assert float(into.min()) >= 3.0 and float(into.max()) <= 6.0


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind, mean, std", [("normal", 1.0, 3.0), ("wide", 1.0, 100.0), ("uniform", 4.5, 3 / 12 ** 0.5)])
def test_a_float32_draw_has_its_distributions_moments(kind, mean, std):
    cp = pytest.importorskip("cupy")
    spec = dict(SPEC, shape=[1 << 22], dist=kind, kind=kind)
    x = inputs.generate(cp, spec, 11).astype(cp.float64)
    factor = inputs.drawn_parameters(spec, 11).get("factor", 1.0)   # a normal draw's offset and scale, rescaled
    mean, std = mean * factor, std * factor
    assert abs(float(x.mean()) - mean) < 0.01 * std and abs(float(x.std()) / std - 1) < 0.01


KINDS = ["normal", "wide", "uniform", "int", "kinks", "special", "rows", "ties", "near_one", "ones"]


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_device_draw_has_the_bits_of_the_numpy_definition(kind, dtype, monkeypatch):
    cp = pytest.importorskip("cupy")
    np = pytest.importorskip("numpy")
    if dtype == "int32" and kind not in ("int", "special", "ones"):
        pytest.skip("an integer input takes integer kinds only")
    monkeypatch.setattr(inputs, "CHUNK", 1000)   # three chunks, rows across none of them
    spec = dict(SPEC, shape=[7, 301], dist=kind, kind=kind, dtype=dtype, low=-3, high=5,
                offset=0.0 if dtype == "int32" else 1.0)   # an integer type's extremes stay in range
    seed = keyed.new_seed()
    host = inputs.generate(np, spec, seed)
    device = inputs.generate(cp, spec, seed)
    assert device.dtype == host.dtype and np.array_equal(host.view(np.uint8), device.get().view(np.uint8))


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n", [1, 5, 4096, 1_000_003])
def test_the_keyed_words_and_normals_are_the_same_on_host_and_device(n):
    cp = pytest.importorskip("cupy")
    np = pytest.importorskip("numpy")
    key = keyed.derive(keyed.new_seed(), "t")
    assert np.array_equal(keyed.words(np, key, n), keyed.words(cp, key, n).get())
    assert np.array_equal(keyed.normal32(np, key, n).view(np.uint32), keyed.normal32(cp, key, n).get().view(np.uint32))
    out = cp.empty(n, cp.float32)
    keyed.device_float32(cp, out, "normal", key, 0.5, 3.0)
    assert np.array_equal(keyed.normal(np, key, n, 3.0, 0.5).astype(np.float32).view(np.uint32),
                          out.get().view(np.uint32))
    keyed.device_float32(cp, out, "uniform", key, -1.0, 4.0)
    assert np.array_equal(keyed.uniform(np, key, n, -1.0, 3.0).astype(np.float32).view(np.uint32),
                          out.get().view(np.uint32))
