"""The honest kernels of the fairness GPU tests (tests/fixtures/kernelbench/fair/{sweep,issue}/answers/), their
arithmetic emulated in NumPy (the same formulas, orders where they matter, float32 where the kernel computes in
float32) and run through each imported task's own comparison at every check size and input distribution; each
compiles with NVRTC and its plan launches at every size (check-task). tests/test_fairness_gpu.py runs them on a
GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from sandbox.host.check_task import check_task  # noqa: E402
from sandbox.judging.compare import compare  # noqa: E402
from sandbox.pytorch import confined  # noqa: E402
from sandbox.pytorch.importer import import_problem  # noqa: E402
from sandbox.tasks.inputs import distribution_count, generate_all, input_specs  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402

FAIR = Path(__file__).resolve().parent / "fixtures" / "kernelbench" / "fair"
PROBLEMS = sorted(FAIR.glob("sweep/*.py")) + sorted(FAIR.glob("issue/*.py"))
pytestmark = pytest.mark.timeout(600)
f32 = np.float32


def _linear(x, w, b):
    return (x.astype(f32) @ w.astype(f32).T + b).astype(f32)


def _softmax(x, s):
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m).astype(f32)
    return (e / e.sum(axis=1, keepdims=True, dtype=f32)).astype(f32)


def _layernorm(x, s):
    rows = x.reshape(x.shape[0], -1).astype(np.float64)
    mean = rows.mean(axis=1, keepdims=True)
    var = ((rows - mean) ** 2).mean(axis=1, keepdims=True)
    inv, mu = (1.0 / np.sqrt(var + 1e-5)).astype(f32), mean.astype(f32)
    return ((x.reshape(rows.shape) - mu) * inv).reshape(x.shape) * s["ln_weight"] + s["ln_bias"]


def _hinge(i, s):
    p, t = i["predictions"], i["targets"]
    v = np.maximum(f32(1) - p * t, f32(0))
    return np.float32(v.astype(np.float64).sum() / v.size)


def _conv(i, s):
    x, w = i["x"], i["conv_weight"]
    n, c, h, wd = x.shape
    out = np.zeros((n, w.shape[0], h - 2, wd - 2), f32) + i["conv_bias"][None, :, None, None]
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("nchw,oc->nohw", x[:, :, dy:dy + h - 2, dx:dx + wd - 2], w[:, :, dy, dx]).astype(f32)
    return np.maximum(out, 0) + i["bias"][None, :, 0, 0][..., None, None]


def _gemm_sigmoid_lse(i, s):
    h = 1 / (1 + np.exp(-_linear(i["x"], i["linear1_weight"], i["linear1_bias"])))
    z = _linear(h, i["linear2_weight"], i["linear2_bias"])
    m = z.max(axis=1)
    return (m + np.log(np.exp(z - m[:, None]).sum(axis=1, dtype=f32))).astype(f32)


def _mlp(i, s):
    h = np.maximum(_linear(i["x"], i["network_0_weight"], i["network_0_bias"]), 0)
    h = np.maximum(_linear(h, i["network_2_weight"], i["network_2_bias"]), 0)
    return _linear(h, i["network_4_weight"], i["network_4_bias"])


def _gelu_tanh(x):
    inner = f32(0.7978845608028654) * (x + f32(0.044715) * x * x * x)
    return f32(0.5) * x * (f32(1) + np.tanh(inner))


def _column_sums_first(i, s):
    wsum = i["linear_weight"].astype(np.float64).sum(axis=0)
    y = i["x"].astype(np.float64) @ wsum + i["linear_bias"].astype(np.float64).sum()
    return y.astype(f32)[:, None]


def _chain(i, s):
    from math import erf

    x, w = i["x"], i["matmul_weight"]
    v = np.zeros((x.shape[0], w.shape[0]), f32)
    for k in range(0, x.shape[1], 512):   # chunks of 512 terms summed on their own, then added in order
        v = (v + x[:, k:k + 512] @ w[:, k:k + 512].T).astype(f32)
    v = v + i["matmul_bias"] + i["add_value"]
    v = v / (1 + np.exp(-v))
    v = np.tanh(v)
    v = 0.5 * v * (1 + np.vectorize(erf)(v / np.sqrt(2)).astype(f32))
    return np.clip(v, -1, 1).astype(f32)


def _transition(i, s):
    x = i["x"]
    n, c, h, w = x.shape
    xd = x.astype(np.float64)
    mean = xd.mean(axis=(0, 2, 3))
    var = (xd ** 2).mean(axis=(0, 2, 3)) - mean ** 2
    scale = i["transition_0_weight"] / np.sqrt(np.maximum(var, 0) + 1e-5)
    shift = (i["transition_0_bias"] - mean * scale).astype(f32)
    y = np.maximum(x * scale.astype(f32)[None, :, None, None] + shift[None, :, None, None], 0).astype(f32)
    hp, wp = h // 2, w // 2
    y = y[:, :, :2 * hp, :2 * wp].reshape(n, c, hp, 2, wp, 2)
    pooled = (f32(0.25) * y.sum(axis=(3, 5))).astype(f32)
    return np.einsum("nchw,oc->nohw", pooled, i["transition_2_weight"][:, :, 0, 0]).astype(f32)


ANSWERS = {
    "l1_19_relu": lambda i, s: np.maximum(i["x"], 0),
    "l1_23_softmax": lambda i, s: _softmax(i["x"], s),
    "l1_40_layernorm": lambda i, s: _layernorm(i["x"], i),
    "l1_100_hinge_loss": _hinge,
    "l1_1_square_matmul": lambda i, s: (i["A"] @ i["B"]).astype(f32),
    "l2_12_gemm_multiply_leakyrelu": lambda i, s: (lambda v: np.where(v > 0, v, v * f32(0.1)))(
        _linear(i["x"], i["gemm_weight"], i["gemm_bias"]) * f32(2)),
    "l2_1_conv2d_relu_biasadd": _conv,
    "l2_45_gemm_sigmoid_gemm_logsumexp": _gemm_sigmoid_lse,
    "l3_1_mlp": _mlp,
    "l3_new_gelu": lambda i, s: _gelu_tanh(i["x"]),
    "l2_18_matmul_sum_max_avgpool_logsumexp": _column_sums_first,
    "l2_95_matmul_add_swish_tanh_gelu_hardtanh": _chain,
    "l3_13_densenet121_transition_layer": _transition,
}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("fair_answers")
    with confined.Session():
        yield {p.stem: load_task(import_problem(p, out).folder) for p in PROBLEMS}


def test_the_sweep_covers_ten_problems_of_all_three_levels():
    stems = [p.stem for p in FAIR.glob("sweep/*.py")]
    assert len(stems) >= 10 and {s[:2] for s in stems} == {"l1", "l2", "l3"} and set(ANSWERS) == {p.stem for p in PROBLEMS}


@pytest.mark.parametrize("stem", sorted(ANSWERS))
def test_each_answers_arithmetic_passes_its_task_at_every_check_size_and_distribution(tasks, stem):
    task = tasks[stem]
    ref = task.reference_module()
    out = task.spec.outputs[0]
    tol = task.output_tolerance(out)
    for sizes in task.spec.sizes.check:
        for k in range(distribution_count(task)):
            ins = generate_all(np, input_specs(task, sizes, k), 500 + k)
            expected = ref.reference(np, **ins, **task.env(sizes))[out.name]
            with np.errstate(all="ignore"):
                got = np.asarray(ANSWERS[stem](ins, sizes), dtype=np.float64).reshape(expected.shape)
            found = compare(np, got, expected, tol.atol, tol.rtol, tol.spread)
            assert found["passed"], (sizes, k, found["first_mismatch"])


@pytest.mark.parametrize("stem", sorted(ANSWERS))
def test_each_answer_compiles_and_its_plan_launches_at_every_size(tasks, stem):
    folder = FAIR / ("issue" if stem in ("l2_18_matmul_sum_max_avgpool_logsumexp",
                                         "l2_95_matmul_add_swish_tanh_gelu_hardtanh",
                                         "l3_13_densenet121_transition_layer") else "sweep")
    with confined.Session():
        report = check_task(tasks[stem].folder, candidates=[folder / "answers" / f"{stem}.cu"], trials=1)
    finding = next(f for f in report.findings if f.check.startswith("candidate"))
    assert finding.status == "ok", finding.detail
