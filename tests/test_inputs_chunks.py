"""Large inputs are drawn a chunk at a time: the same bits for the same seed, every element drawn, the
distribution's values, and no draw's temporaries larger than a chunk's."""

import numpy as np
import pytest

from sandbox.tasks import inputs


@pytest.mark.parametrize("kind", ["normal", "wide", "kinks", "uniform", "int", "special"])
def test_a_chunked_draw_is_deterministic_complete_and_of_its_distribution(kind, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 1000)
    spec = dict(name="x", dtype="float32" if kind != "int" else "int32", shape=[7, 501], dist=kind, kind=kind,
                low=-3, high=5, scale=1.0, offset=0.0)
    a, b = inputs.generate(np, spec, 11), inputs.generate(np, spec, 11)
    assert a.shape == (7, 501) and a.dtype == spec["dtype"] and np.array_equal(a, b)
    assert not np.array_equal(a, inputs.generate(np, spec, 12))
    flat = a.reshape(-1)
    chunks = [flat[i:i + 1000] for i in range(0, flat.size, 1000)]
    assert all(not np.array_equal(chunks[0][:300], c[:300]) for c in chunks[1:-1])   # each chunk its own draw
    if kind == "int":
        assert flat.min() >= -3 and flat.max() < 5
    if kind == "kinks":
        assert np.abs(flat).max() < 12 and (flat == 0.0).any()


def test_each_draw_holds_at_most_a_chunk(monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 1000)
    sizes = []
    real = inputs._draw
    monkeypatch.setattr(inputs, "_draw", lambda xp, spec, params, seed, c, n, start: sizes.append((n,))
                        or real(xp, spec, params, seed, c, n, start))
    spec = dict(name="x", dtype="float32", shape=[2500], dist="normal", kind="normal", scale=1.0, offset=0.0)
    inputs.generate(np, spec, 3)
    assert sizes == [(1000,), (1000,), (500,)]
    sizes.clear()
    inputs.generate(np, {**spec, "shape": [999]}, 3)
    assert sizes == [(999,)]


@pytest.mark.parametrize("kind", ["normal", "uniform", "special", "int"])
def test_an_input_drawn_into_a_given_array_has_the_bits_of_a_new_one(kind, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 1000)
    dtype = "int32" if kind == "int" else "float32"
    spec = dict(name="x", dtype=dtype, shape=[3, 1001], dist=kind, kind=kind, low=-3, high=5, scale=2.0, offset=0.5)
    into = np.full((3, 1001), 7, dtype=dtype)
    assert inputs.generate(np, spec, 9, into) is into
    assert np.array_equal(into, inputs.generate(np, spec, 9))
    drawn = inputs.generate_all(np, [spec], 4, into={"x": into})
    assert drawn["x"] is into and np.array_equal(into, inputs.generate_all(np, [spec], 4)["x"])


def test_an_input_is_never_drawn_into_an_array_of_another_shape_dtype_or_layout():
    spec = dict(name="x", dtype="float32", shape=[4, 6], dist="normal", kind="normal", scale=1.0, offset=0.0)
    for wrong in (np.zeros((6, 4), np.float32), np.zeros((4, 6), np.float64)):
        with pytest.raises(ValueError, match="cannot draw it into"):
            inputs.generate(np, spec, 1, wrong)
    strided = np.zeros((4, 12), np.float32)[:, ::2]
    with pytest.raises(ValueError, match="not contiguous"):
        inputs.generate(np, spec, 1, strided)
    assert not strided.any()
