"""The task suite: every task loads, its baseline compiles and launches within CUDA limits at every size,
its reference is right (against an independent naive computation) and its outputs are not degenerate;
on a GPU, every baseline is ``ok`` and every reference agrees with its vendor implementation."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sandbox.candidates.candidate import load_candidate
from sandbox.candidates.compiler import compile_source
from sandbox.candidates.plan import resolve
from sandbox.tasks.dtypes import np_dtype
from sandbox.tasks.inputs import distribution_count, generate, input_specs
from sandbox.tasks.task import CATEGORIES, load_task, suite_names
from sandbox.worker.harness import reference_inputs

SUITE = suite_names()
STATIC_SHARED_LIMIT = 48 * 1024
ARRAY_BYTES_LIMIT = 2 * 2**30
NAIVE_WORK_LIMIT = 2e7  # flops + bytes of a check size small enough for the naive computations below


def _scalars(task) -> dict:
    return {s.name: s.value for s in task.spec.scalars}


def _inputs(task, sizes: dict, trial: int, seed: int) -> dict:
    return reference_inputs(np, input_specs(task, sizes, trial), seed)


def _reference(task, inputs: dict, sizes: dict) -> dict:
    return task.reference_module().reference(np, **inputs, **sizes, **_scalars(task))


def _largest_check(task) -> dict:
    return max(task.spec.sizes.check, key=lambda s: task.bytes(s))


# ---- the suite as a whole -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_the_suite_covers_every_kind_of_work():
    categories = Counter(load_task(name).spec.category for name in SUITE)
    assert len(SUITE) >= 14
    assert set(categories) == set(CATEGORIES), f"categories without a task: {set(CATEGORIES) - set(categories)}"
    multi_launch = [name for name in SUITE if load_task(name).spec.category in ("fusion", "attention")
                    and len(load_candidate(load_task(name).baseline_path).launches) >= 3]
    assert len(multi_launch) >= 2, "fusion tasks need a baseline of several launches"


@pytest.mark.timeout(120)
def test_kernelwright_tasks_lists_every_task_with_its_category():
    out = subprocess.run([sys.executable, "-m", "agent", "tasks", "--json"], capture_output=True, text=True,
                         timeout=100, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    listed = {row["name"]: row["category"] for row in json.loads(out.stdout)}
    assert listed == {name: load_task(name).spec.category for name in SUITE}


# ---- each task: its declaration ---------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SUITE)
def test_task_has_a_tiny_and_an_all_odd_check_size(name):
    task = load_task(name)
    checks = task.spec.sizes.check
    assert any(all(v == 1 for v in s.values()) for s in checks), "no check size with every symbol 1"
    assert any(all(v % 2 for v in s.values()) and max(s.values()) >= 3 for s in checks), \
        "no check size with every symbol odd (not a multiple of any block size)"
    assert task.spec.sizes.heldout, "no held-out generalization sizes"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SUITE)
def test_task_names_its_vendor_and_fusion_tasks_invite_fusing(name):
    task = load_task(name)
    has_vendor = callable(getattr(task.reference_module(), "vendor", None))
    assert has_vendor == (task.spec.vendor is not None)
    if task.spec.category in ("fusion", "attention"):
        assert "allowed and expected" in task.spec.description


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SUITE)
def test_every_array_fits_2_gib_and_int32_indexing_at_every_size(name):
    task = load_task(name)
    for label, sizes in task.spec.all_sizes():
        for tensor in task.spec.inputs + task.spec.outputs:
            count = task.numel(tensor, sizes)
            assert count < 2**31, f"{tensor.name} at {label}"
            assert count * np_dtype(tensor.dtype).itemsize <= ARRAY_BYTES_LIMIT, f"{tensor.name} at {label}"


# ---- each task: its baseline ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compile_only():
    from sandbox import CompileOnlySandbox

    with CompileOnlySandbox() as sb:
        yield sb


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", SUITE)
def test_baseline_passes_the_sandbox_policy_and_compiles_without_spills(compile_only, name):
    from sandbox import Status

    task = load_task(name)
    result = compile_only.compile(task, load_candidate(task.baseline_path))
    assert result.status is Status.compiled, result.summary() + "\n" + result.detail
    for k in result.compile.kernels.values():
        assert (k.spill_stores, k.spill_loads) == (0, 0), f"{k.name} spills"
        assert k.static_shared <= STATIC_SHARED_LIMIT


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", SUITE)
def test_every_knob_combination_compiles_without_spills_and_launches_within_cuda_limits_at_every_size(name):
    task = load_task(name)
    base = load_candidate(task.baseline_path)
    for values in itertools.product(*base.knobs.values()):
        cand = base.with_knobs(dict(zip(base.knobs, values)))
        info, _ = compile_source(cand)
        assert info.ok, f"{cand.defines()}: {info.log}"
        assert not any(k.spill_stores or k.spill_loads for k in info.kernels.values()), f"{cand.defines()} spills"
        static = {k.name: k.static_shared for k in info.kernels.values()}
        for label, sizes in task.spec.all_sizes():
            plan = resolve(task, cand, info, sizes)  # raises PlanError on grid, block or argument limits
            for launch in plan["launches"]:
                total = static[launch["kernel"]] + launch["shared"]
                assert total <= STATIC_SHARED_LIMIT, f"{cand.defines()} {launch['kernel']} at {label}: {total} B shared"


# ---- each task: its reference -----------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", SUITE)
def test_reference_runs_with_numpy_at_every_check_size_and_returns_the_declared_shapes(name):
    task = load_task(name)
    for sizes in task.spec.sizes.check:
        for trial in range(distribution_count(task)):
            out = _reference(task, _inputs(task, sizes, trial, seed=1234 + trial), sizes)
            assert set(out) == {t.name for t in task.spec.outputs}
            for t in task.spec.outputs:
                got = np.asarray(out[t.name])
                assert got.shape == task.shape(t, sizes), f"{t.name} at {sizes}"
                assert np.isfinite(got.astype(np.float64)).all(), f"{t.name} at {sizes}"


def _gelu(v: float) -> float:
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))


def _rows(a: np.ndarray) -> list[list[float]]:
    return a.astype(np.float64).tolist()


def _naive_softmax(x):
    out = []
    for row in _rows(x):
        m = max(row)
        e = [math.exp(v - m) for v in row]
        total = math.fsum(e)
        out.append([v / total for v in e])
    return np.array(out)


def _naive_layernorm(x, gamma, beta, eps):
    out = []
    for row in _rows(x):
        mean = math.fsum(row) / len(row)
        var = math.fsum((v - mean) ** 2 for v in row) / len(row)
        out.append([(v - mean) / math.sqrt(var + eps) * g + b for v, g, b in zip(row, gamma.tolist(), beta.tolist())])
    return np.array(out)


def _naive_rmsnorm(x, weight, eps):
    out = []
    for row in _rows(x):
        inv = 1.0 / math.sqrt(math.fsum(v * v for v in row) / len(row) + eps)
        out.append([v * inv * w for v, w in zip(row, weight.tolist())])
    return np.array(out)


def _second_difference(n: int) -> np.ndarray:
    """Tridiagonal (1, -2, 1): the 1-D Laplacian with zero outside [0, n)."""
    return -2.0 * np.eye(n) + np.eye(n, k=1) + np.eye(n, k=-1)


def _naive_attention(q, k, v):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.einsum("bid,bjd->bij", q, k) / math.sqrt(q.shape[2])
    e = np.exp(s - s.max(axis=2, keepdims=True))
    return np.einsum("bij,bjd->bid", e, v) / e.sum(axis=2)[:, :, None]


def _naive_histogram(x, bins: int = 256) -> np.ndarray:
    counts = Counter(x.tolist())
    return np.array([counts[b] for b in range(bins)])


def _wrap_int32(values) -> np.ndarray:
    return np.array([(v + 2**31) % 2**32 - 2**31 for v in values], dtype=np.int64)


# Independent computations in float64 (or exact integers): loops with math.fsum, einsum, or another
# formulation of the same operator (the Laplacian as two tridiagonal products).
NAIVE = {
    "vector_add": lambda a, b, n: {"c": np.array([p + q for p, q in zip(a.tolist(), b.tolist())])},
    "gelu": lambda x, n: {"y": np.array([_gelu(v) for v in x.tolist()])},
    "bias_gelu_residual": lambda x, bias, residual, rows, cols: {"out": np.array(
        [[_gelu(v + b) + r for v, b, r in zip(xr, bias.tolist(), rr)] for xr, rr in zip(_rows(x), _rows(residual))])},
    "softmax": lambda x, rows, cols: {"y": _naive_softmax(x)},
    "row_sum": lambda x, rows, cols: {"y": np.array([math.fsum(r) for r in _rows(x)])},
    "prefix_sum": lambda x, n: {"y": _wrap_int32(itertools.accumulate(x.tolist()))},
    "layernorm": lambda x, gamma, beta, rows, cols, eps: {"y": _naive_layernorm(x, gamma, beta, eps)},
    "rmsnorm": lambda x, weight, rows, cols, eps: {"y": _naive_rmsnorm(x, weight, eps)},
    "transpose": lambda x, rows, cols: {"y": np.array([[x[r, c] for r in range(rows)] for c in range(cols)])},
    "sgemm": lambda A, B, M, N, K: {"C": np.einsum("mk,kn->mn", A.astype(np.float64), B.astype(np.float64))},
    "hgemm": lambda A, B, M, N, K: {"C": np.einsum("mk,kn->mn", A.astype(np.float64), B.astype(np.float64))},
    "gemv": lambda A, x, M, K: {"y": np.array([math.fsum(a * b for a, b in zip(row, x.tolist())) for row in _rows(A)])},
    "laplacian": lambda u, H, W: {"out": _second_difference(H) @ u.astype(np.float64) + u.astype(np.float64) @ _second_difference(W)},
    "histogram": lambda x, n: {"hist": _naive_histogram(x)},
    "attention": lambda q, k, v, BH, S, D: {"o": _naive_attention(q, k, v)},
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", SUITE)
def test_reference_agrees_with_an_independent_naive_computation(name):
    task = load_task(name)
    assert name in NAIVE, f"write a naive computation for {name}"
    small = [s for s in task.spec.sizes.check if task.flops(s) + task.bytes(s) <= NAIVE_WORK_LIMIT]
    assert len(small) >= 3
    for sizes in small:
        for trial in range(distribution_count(task)):
            inputs = _inputs(task, sizes, trial, seed=77 + trial)
            ref = _reference(task, inputs, sizes)
            naive = NAIVE[name](**inputs, **sizes, **_scalars(task))
            for t in task.spec.outputs:
                expected = np.asarray(naive[t.name], dtype=np.float64).reshape(task.shape(t, sizes))
                scale = max(1.0, float(np.abs(expected).max()))
                np.testing.assert_allclose(np.asarray(ref[t.name], dtype=np.float64), expected, rtol=1e-10,
                                           atol=1e-10 * scale, err_msg=f"{t.name} at {sizes}, trial {trial}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", SUITE)
def test_outputs_are_not_constant_and_change_with_every_input(name):
    """A constant output, or one that ignores an input, must fail the task's own tolerance."""
    task = load_task(name)
    sizes = _largest_check(task)
    for trial in range(distribution_count(task)):
        specs = input_specs(task, sizes, trial)
        inputs = reference_inputs(np, specs, 5)
        out = _reference(task, inputs, sizes)
        for t in task.spec.outputs:
            got = np.asarray(out[t.name], dtype=np.float64)
            tol = task.tolerance(t.dtype)
            constant = np.median(got)
            fails = np.abs(got - constant) > tol.atol + tol.rtol * np.abs(got)
            assert fails.mean() > 0.5, f"{t.name}: the constant {constant} passes on {1 - fails.mean():.0%} of elements"
        for i, spec in enumerate(specs):
            other = _reference(task, {**inputs, spec["name"]: generate(np, spec, 1000 + i)}, sizes)
            moved = []
            for t in task.spec.outputs:
                a, b = (np.asarray(o[t.name], dtype=np.float64) for o in (out, other))
                tol = task.tolerance(t.dtype)
                moved.append((np.abs(a - b) > tol.atol + tol.rtol * np.abs(a)).mean())
            assert max(moved) > 0.1, f"new values of input {spec['name']!r} barely change the outputs"


# ---- GPU ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_sandbox():
    from sandbox import GPUSandbox, SandboxConfig

    # Correctness is the point here; timing runs just long enough to check timed outputs too.
    config = SandboxConfig(check_timeout_s=600, time_timeout_s=600, timing_budget_s=0.05, max_rounds=15,
                           full_checks=1)
    with GPUSandbox(config) as sb:
        yield sb


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", SUITE)
def test_baseline_is_ok_at_every_check_size_and_the_benchmark_size(gpu_sandbox, name):
    from sandbox import Status

    task = load_task(name)
    result = gpu_sandbox.evaluate(task, load_candidate(task.baseline_path))
    assert result.status is Status.ok, result.summary() + "\n" + result.detail
    checked = {c.label.split()[0].split("#")[0] for c in result.checks}
    assert "benchmark" in checked
    assert {f"check[{i}]" for i in range(len(task.spec.sizes.check))} <= checked
    assert all(c.passed for c in result.checks)


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", SUITE)
def test_baseline_is_correct_at_every_heldout_size(gpu_sandbox, name):
    """Winners are re-timed at held-out sizes against the baseline, whose outputs must be right there too."""
    from sandbox import Status

    task = load_task(name)
    baseline = load_candidate(task.baseline_path)
    for sizes in task.spec.sizes.heldout:
        result = gpu_sandbox.evaluate(task, baseline, sizes=sizes, timing=False)
        assert result.status is Status.ok, f"{sizes}: {result.summary()}\n{result.detail}"


def vendor_agreement(name: str) -> list[dict]:
    """Run in a child process on a GPU: reference and vendor on the same CuPy inputs at every check size
    and the benchmark size, every trial distribution, compared with the task's tolerance."""
    import cupy

    from sandbox.judging.compare import compare

    task = load_task(name)
    module = task.reference_module()
    rows = []
    for label, sizes in [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)] + [("benchmark", task.spec.sizes.benchmark)]:
        for trial in range(distribution_count(task)):
            inputs = reference_inputs(cupy, input_specs(task, sizes, trial), 4321 + trial)
            ref = module.reference(cupy, **inputs, **sizes, **_scalars(task))
            got = module.vendor(cupy, **inputs, **sizes, **_scalars(task))
            for t in task.spec.outputs:
                tol = task.tolerance(t.dtype)
                produced = cupy.asarray(got[t.name])
                stats = compare(cupy, produced, cupy.asarray(ref[t.name]), tol.atol, tol.rtol)
                rows.append(dict(label=label, trial=trial, output=t.name, dtype=produced.dtype.name, **stats))
            del inputs, ref, got
            cupy.get_default_memory_pool().free_all_blocks()
    return rows


@pytest.mark.gpu
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", [n for n in SUITE if load_task(n).spec.vendor])
def test_reference_agrees_with_the_vendor_implementation_on_the_gpu(name):
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_suite; "
            "print(json.dumps(test_suite.vendor_agreement(sys.argv[2])))")
    here = Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-c", code, str(here), name], capture_output=True, text=True,
                         timeout=850, cwd=here.parent)
    assert out.returncode == 0, out.stderr[-4000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    declared = {t.name: t.dtype for t in load_task(name).spec.outputs}
    assert all(r["dtype"] == declared[r["output"]] for r in rows), "the vendor must produce the task's output dtypes"
    bad = [r for r in rows if not r["passed"]]
    assert not bad, "\n".join(f"{r['label']} trial {r['trial']} {r['output']}: {r['mismatches']} mismatches, "
                              f"max abs {r['max_abs_error']}, first {r['first_mismatch']}" for r in bad)
