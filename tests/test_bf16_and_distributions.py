"""bfloat16 as a task dtype (uint16 bit patterns on the host, ``__nv_bfloat16`` on the device) and named input
distributions beyond normal and uniform, validated with one clear error each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sandbox.judging.compare import compare
from sandbox.tasks.dtypes import from_float64, special_values, to_compute
from sandbox.tasks.inputs import generate, generate_all, input_specs
from sandbox.tasks.task import TaskSpec, load_task

ROOT = Path(__file__).resolve().parent.parent
BF16 = ROOT / "examples" / "tasks" / "add_rmsnorm_bf16"
pytestmark = pytest.mark.timeout(120)


def test_bfloat16_rounds_to_nearest_even_as_torch_does_and_reads_back_exactly():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(size=20000) * np.logspace(-40, 38, 20000), [0.0, -0.0, np.inf, -np.inf, 1.00390625]])
    bits = from_float64(np, x, "bfloat16")
    want = torch.from_numpy(x.astype(np.float32)).bfloat16().view(torch.int16).numpy().view(np.uint16)
    assert bits.dtype == np.uint16 and np.array_equal(bits, want)
    assert np.array_equal(to_compute(np, bits, "bfloat16"), torch.from_numpy(want.view(np.int16)).view(torch.bfloat16).float().numpy())
    nan = from_float64(np, np.array([np.nan]), "bfloat16")
    assert np.isnan(to_compute(np, nan, "bfloat16")).all()


def test_the_bf16_example_rejects_impostors_and_an_emulated_kernel_passes_it():
    task = load_task(BF16)
    ref = task.reference_module()
    tol = task.output_tolerance("y")
    for trial in range(3):
        sizes = task.spec.sizes.check[3]
        ins = generate_all(np, input_specs(task, sizes, trial), 5 + trial)
        assert all(a.dtype == np.uint16 for a in ins.values())
        vals = {k: to_compute(np, a, "bfloat16") for k, a in ins.items()}
        expected = ref.reference(np, **vals, **sizes, eps=1e-6)
        # the baseline's arithmetic: float32 sum rounded once, float32 mean square of the rounded h
        h = from_float64(np, (vals["x"] + vals["residual"]).astype(np.float64), "bfloat16")
        hv = to_compute(np, h, "bfloat16")
        inv = np.float32(1) / np.sqrt((hv * hv).sum(axis=1, keepdims=True, dtype=np.float32) / np.float32(sizes["cols"])
                                      + np.float32(1e-6))
        y = from_float64(np, (hv * inv * vals["weight"]).astype(np.float64), "bfloat16")
        for name, got in (("h", h), ("y", y)):
            assert compare(np, to_compute(np, got, "bfloat16"), expected[name], tol.atol, tol.rtol)["passed"], (trial, name)
        # float16 storage of y would pass too; a float32 sum of the unrounded inputs without h's rounding too:
        # what the task rejects is wrong values, e.g. y without the weight
        wrong = from_float64(np, (hv * inv).astype(np.float64), "bfloat16")
        assert not compare(np, to_compute(np, wrong, "bfloat16"), expected["y"], tol.atol, tol.rtol)["passed"]


def _spec(distributions, dtype="float32") -> dict:
    return dict(name="t", category="elementwise", description="a task used to test the distributions' validation",
                inputs=[dict(name="x", dtype=dtype, shape=["n"], distributions=distributions)],
                outputs=[dict(name="y", dtype="float32", shape=["n"])], sizes=dict(benchmark={"n": 8}, check=[{"n": 3}]),
                tolerance={"float32": dict(atol=1e-6, rtol=1e-6)}, roofline=dict(flops="n", bytes="8 * n"))


@pytest.mark.parametrize("entry, dtype, message", [
    ({"name": "c", "kind": "constant"}, "float32", "kind 'constant' needs a value"),
    ({"name": "c", "kind": "normal", "value": 1.0}, "float32", "value applies to kind 'constant' only"),
    ({"name": "s", "kind": "normal", "values": [1.0]}, "float32", "values apply to kind 'special' only"),
    ({"name": "w", "kind": "wide", "scale": 3.0}, "float32", "scale do not apply to kind 'wide'"),
    ({"name": "i", "kind": "int", "low": 4, "high": 2}, "float32", "high (2) must exceed low (4)"),
    ({"name": "h", "kind": "constant", "value": 0.5}, "int32", "integer dtype int32 needs distributions of integers"),
    ("kinks", "int32", "integer dtype int32 needs distributions of integers"),
    ({"name": "kinks", "kind": "normal"}, "float32", "'kinks' is a built-in distribution"),
])
def test_a_malformed_distribution_is_one_error_naming_it(entry, dtype, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TaskSpec.model_validate(_spec([entry], dtype))


def test_named_kinds_draw_what_they_promise_and_repeat_from_the_seed():
    spec = lambda kind, **kw: {**dict(dist=kind, kind=kind, shape=[4000], dtype="float32", scale=1.0, low=-1.0,  # noqa: E731
                                      high=1.0), **kw}
    wide = generate(np, spec("wide"), 3)
    assert 50 < wide.std() < 200
    kinks = generate(np, spec("kinks"), 3)
    assert (np.isin(kinks, [-6, -3, -1, -0.5, 0, 0.5, 1, 3, 6])).mean() > 0.25
    assert set(np.unique(generate(np, spec("constant", value=2.5), 3))) == {2.5}
    special = generate(np, spec("special"), 3)
    assert set(np.unique(special)) <= set(np.float32(special_values("float32"))) and np.signbit(special[special == 0]).any()
    ints = generate(np, spec("int", low=-3, high=3), 3)
    assert ints.dtype == np.float32 and set(np.unique(ints)) <= {-3, -2, -1, 0, 1, 2}
    assert np.array_equal(generate(np, spec("kinks"), 3), kinks)
    loaded = TaskSpec.model_validate(_spec(["normal", {"name": "sp", "kind": "special", "values": [0.0, float("inf")]}]))
    assert loaded.inputs[0].distributions[1].values == [0.0, float("inf")]


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_the_bf16_example_baseline_is_ok_on_a_device():
    from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate

    task = load_task(BF16)
    with GPUSandbox(SandboxConfig(timing_budget_s=0.05, max_rounds=12)) as sb:
        result = sb.evaluate(task, load_candidate(task.baseline_path))
    assert result.status is Status.ok, (result.error, result.detail)
    assert all(c.passed for c in result.checks)
