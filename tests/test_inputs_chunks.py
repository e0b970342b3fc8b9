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
    monkeypatch.setattr(inputs, "_draw", lambda xp, spec, seed, shape: sizes.append(shape) or real(xp, spec, seed, shape))
    spec = dict(name="x", dtype="float32", shape=[2500], dist="normal", kind="normal", scale=1.0, offset=0.0)
    inputs.generate(np, spec, 3)
    assert sizes == [(1000,), (1000,), (500,)]
    sizes.clear()
    inputs.generate(np, {**spec, "shape": [999]}, 3)
    assert sizes == [(999,)]
