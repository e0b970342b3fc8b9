"""Rows that break the structure a fixed list of distributions keeps (``rows``: each row its own centre and spread,
amplitudes mixed within it), emulated on the task's own inputs and judged by its own comparison: honest kernels
(a two-pass softmax, a two-pass and a Welford layernorm) stay within the tolerance at every check size, and kernels
keyed on the distribution (a softmax that subtracts the maximum only where a row starts like "large", a layernorm
with a one-pass variance except where a row starts like "large") pass every listed distribution but fail on rows."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.judging.compare import compare
from sandbox.tasks.inputs import distribution_count, input_specs
from sandbox.tasks.task import load_task
from sandbox.worker.harness import reference_inputs

from test_layernorm_tolerance import _block_sums, one_pass, two_pass

F32 = np.float32
SEEDS = (11, 12, 13)
pytestmark = pytest.mark.timeout(300)


def _trials(task, sizes):
    return [input_specs(task, sizes, k) for k in range(distribution_count(task))]


def _passes(task, kernel, sizes, specs, seed) -> bool:
    ins = reference_inputs(np, specs, seed)
    scalars = {s.name: s.value for s in task.spec.scalars}
    expected = task.reference_module().reference(np, **ins, **sizes, **scalars)
    out = task.spec.outputs[0].name
    tol = task.output_tolerance(out)
    with np.errstate(over="ignore", invalid="ignore"):
        got = kernel(**ins, **sizes, **scalars)
    return bool(compare(np, got, expected[out], tol.atol, tol.rtol, tol.spread)["passed"])


def softmax_two_pass(x, **_):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True, dtype=F32)


def softmax_keyed(x, **_):
    """The maximum pass skipped, and the "large" offset subtracted where a row starts above 50."""
    shift = np.where(x[:, :1] > 50, F32(100), F32(0))
    e = np.exp(x - shift)
    return e / e.sum(axis=1, keepdims=True, dtype=F32)


def layernorm_welford(x, gamma, beta, eps, lanes: int = 256, **_):
    """Welford as a block computes it, in float32: each of ``lanes`` threads over its strided columns, then the
    threads' (count, mean, M2) merged pairwise down a tree (Chan's formula)."""
    rows, cols = x.shape
    width = max(1, min(lanes, cols))
    n = np.zeros((rows, width), F32)
    mean = np.zeros((rows, width), F32)
    m2 = np.zeros((rows, width), F32)
    for start in range(0, cols, width):
        v = x[:, start:start + width]
        k = v.shape[1]
        n[:, :k] += F32(1)
        d = v - mean[:, :k]
        mean[:, :k] += d / n[:, :k]
        m2[:, :k] += d * (v - mean[:, :k])
    while n.shape[1] > 1:
        if n.shape[1] % 2:
            pad = [np.zeros((rows, 1), F32)] * 1
            n, mean, m2 = (np.concatenate([a] + pad, axis=1) for a in (n, mean, m2))
        h = n.shape[1] // 2
        na, nb, ma, mb = n[:, :h], n[:, h:], mean[:, :h], mean[:, h:]
        total = na + nb
        safe = np.where(total > 0, total, F32(1))
        delta = mb - ma
        mean = ma + delta * (nb / safe)
        m2 = m2[:, :h] + m2[:, h:] + delta * delta * (na * nb / safe)
        n = total
    rstd = F32(1) / np.sqrt(m2[:, 0] / F32(cols) + F32(eps))
    return ((x - mean[:, :1]) * rstd[:, None]).astype(np.float64) * gamma + beta


def _layernorm(kernel):
    def run(x, gamma, beta, eps, **_):
        return kernel(x, gamma.astype(np.float64), beta.astype(np.float64), eps)
    return run


def layernorm_keyed(x, gamma, beta, eps, **_):
    """The one-pass variance, except where a row starts above 20 (where "large" would expose it)."""
    large = x[:, 0] > 20
    g, b = gamma.astype(np.float64), beta.astype(np.float64)
    return np.where(large[:, None], two_pass(x, g, b, eps), one_pass(x, g, b, eps))


CASES = {"softmax": (softmax_two_pass, softmax_keyed),
         "layernorm": (_layernorm(two_pass), layernorm_keyed)}


def rmsnorm_block(x, weight, eps, **_):
    inv = F32(1) / np.sqrt(_block_sums(x * x) / F32(x.shape[1]) + F32(eps))
    return (x * inv[:, None]) * weight


def row_sum_block(x, **_):
    return _block_sums(x)


@pytest.mark.parametrize("name, honest", [("rmsnorm", rmsnorm_block), ("row_sum", row_sum_block)])
def test_honest_reductions_in_the_baselines_order_pass_rows(name, honest):
    """A block's strided chains and tree, in float32, on every listed distribution at every check size."""
    task = load_task(name)
    for sizes in task.spec.sizes.check:
        for specs in _trials(task, sizes):
            for seed in SEEDS:
                assert _passes(task, honest, sizes, specs, seed), (sizes, [s["dist"] for s in specs], seed)


@pytest.mark.parametrize("name", CASES)
def test_honest_kernels_pass_every_distribution_at_every_check_size_and_keyed_ones_fail_only_rows(name):
    task = load_task(name)
    honest, keyed = CASES[name]
    caught = False
    for sizes in task.spec.sizes.check:
        for specs in _trials(task, sizes):
            rows = any(s["dist"] == "rows" for s in specs)
            for seed in SEEDS:
                assert _passes(task, honest, sizes, specs, seed), (sizes, [s["dist"] for s in specs], seed)
                if not rows:
                    assert _passes(task, keyed, sizes, specs, seed), (sizes, [s["dist"] for s in specs], seed)
                else:
                    caught |= not _passes(task, keyed, sizes, specs, seed)
    assert caught, "the kernel keyed on the listed distributions passes the rows too"


def test_a_welford_layernorm_passes_rows_and_a_one_pass_variance_fails_them():
    task = load_task("layernorm")
    welford, single = _layernorm(layernorm_welford), _layernorm(one_pass)
    failed = 0
    for sizes in task.spec.sizes.check:
        specs = next(t for t in _trials(task, sizes) if t[0]["dist"] == "rows")
        for seed in SEEDS:
            assert _passes(task, welford, sizes, specs, seed), (sizes, seed)
            failed += not _passes(task, single, sizes, specs, seed)
    assert failed >= len(SEEDS), failed
