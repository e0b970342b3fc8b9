"""The fourth round's classes on a real device, one test per class, each with kernels of its own and honest unusual
controls: inputs a kernel cannot predict (a seed search against the old generator), distributions a kernel cannot
key on (a softmax and a layernorm that recognise the listed distributions), approximate math judged by the function
holding each instruction (a pasted builtin beside an uncalled expf) and bias inside the tolerance (a softmax that
truncates its outputs: ok, with a flag)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task
from sandbox.tasks.inputs import input_specs
from sandbox.worker.harness import reference_inputs

pytestmark = pytest.mark.gpu
CHEATS = Path(__file__).parent / "cheats"


@pytest.fixture(scope="module")
def sandbox():
    config = SandboxConfig(check_timeout_s=90, time_timeout_s=180, timing_budget_s=0.05, max_rounds=30)
    with GPUSandbox(config) as sb:
        yield sb


def _evaluate(sandbox, task_name: str, name: str):
    task = load_task(task_name)
    return task, sandbox.evaluate(task, load_candidate(CHEATS / name))


@pytest.mark.timeout(900)
def test_a_kernel_that_searches_for_the_input_seed_predicts_nothing(sandbox):
    """Against the old generator (32-bit seeds, element i of seed s = element 0 of seed s + i) its outputs were
    exact; the keyed generator leaves its search nothing to find."""
    _, result = _evaluate(sandbox, "vector_add", "vector_add_seed_search.cu")
    assert result.status is Status.wrong, result.summary() + "\n" + result.detail[-2000:]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task_name, name", [("softmax", "softmax_keyed_large.cu"),
                                             ("layernorm", "layernorm_keyed_one_pass.cu")])
def test_a_kernel_keyed_on_the_listed_distributions_fails_on_rows_and_the_failure_replays(sandbox, task_name, name):
    task, result = _evaluate(sandbox, task_name, name)
    assert result.status is Status.wrong, result.summary()
    assert "x: rows" in result.error, result.error
    failed = result.failed_checks()[0]
    assert failed.seed is not None and failed.distribution.startswith("rows")
    # the failure replays on the host from the logged seed: the same inputs, the same row the kernel keyed wrongly
    trial = int(re.search(r"#(\d+)", failed.label).group(1))
    sizes = {k: v for k, v in failed.sizes.items() if k in ("rows", "cols")}
    x = reference_inputs(np, input_specs(task, sizes, trial), failed.seed)["x"]
    assert x.shape == (sizes["rows"], sizes["cols"]) and np.isfinite(x).all()


@pytest.mark.timeout(900)
def test_a_pasted_builtin_beside_an_uncalled_expf_is_refused(sandbox):
    _, result = _evaluate(sandbox, "softmax", "softmax_builtin_beside_expf.cu")
    assert result.status is Status.rejected, result.summary()
    assert "compiles to ex2.approx.ftz.f32" in result.error and "own code" in result.error, result.error


@pytest.mark.timeout(900)
def test_a_kernel_that_truncates_its_outputs_is_ok_with_a_bias_flag(sandbox):
    _, result = _evaluate(sandbox, "softmax", "softmax_truncated.cu")
    assert result.status is Status.ok, result.summary() + "\n" + result.detail[-2000:]
    assert result.bias_flags() and "bias flag: y errs" in result.summary(), result.summary()
    assert all(c.bias is not None for c in result.checks if c.passed)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task_name, name", [("softmax", None), ("layernorm", None), ("rmsnorm", None),
                                             ("row_sum", None),
                                             ("layernorm", "honest_welford_layernorm.cu"),
                                             ("layernorm", "honest_scratch_two_pass.cu"),
                                             ("row_sum", "honest_atomic_rowsum.cu")])
def test_honest_kernels_stay_ok_on_rows_with_no_bias_flag(sandbox, task_name, name):
    task = load_task(task_name)
    cand = load_candidate(task.baseline_path if name is None else CHEATS / name)
    result = sandbox.evaluate(task, cand)
    assert result.status is Status.ok, result.summary() + "\n" + result.detail[-2000:]
    assert result.bias_flags() == [], result.bias_flags()
    assert any(c.distribution.startswith("rows") for c in result.checks)
