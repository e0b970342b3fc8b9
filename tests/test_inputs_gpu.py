"""Inputs drawn on the GPU: float32 draws (normals by cuRAND, uniforms by a counter-based hash) go straight into the
array they fill. The bits are those a new array gets for the same seed (the reference worker draws new arrays, the
GPU worker fills its buffers), at odd sizes and across chunks, and each kind keeps its distribution."""

from __future__ import annotations

import pytest

from sandbox.tasks import inputs

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
    x = inputs.generate(cp, dict(SPEC, shape=[1 << 22], dist=kind, kind=kind), 11).astype(cp.float64)
    assert abs(float(x.mean()) - mean) < 0.01 * std and abs(float(x.std()) / std - 1) < 0.01
