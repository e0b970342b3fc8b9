"""KernelBench's own shapes on a real GPU: an RMSNorm at KernelBench level 1's shape (7.5 GB of float32 inputs,
as much output; the timing stage's buffers, PyTorch eager and torch.compile together need more than half of an
H200's memory) is checked and timed with its interval, and a size four times larger, which no stage can hold,
is ``too_large`` with the bytes needed and available, never an allocation failure out of the GPU worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "fixtures" / "kernelbench"
SHAPE = {"batch_size": 112, "features": 64, "dim1": 512, "dim2": 512}


@pytest.fixture(scope="module")
def rmsnorm(tmp_path_factory):
    pytest.importorskip("torch")
    from sandbox.pytorch.importer import import_problem

    return load_task(import_problem(KB / "7_rms_norm_large.py", tmp_path_factory.mktemp("tasks")).folder)


@pytest.fixture(scope="module")
def sandbox():
    with GPUSandbox(SandboxConfig(timing_budget_s=0.1)) as sb:
        yield sb


@pytest.mark.gpu
@pytest.mark.timeout(1800)
def test_an_rmsnorm_at_kernelbenchs_shape_is_timed_with_its_interval_not_out_of_memory(rmsnorm, sandbox):
    assert rmsnorm.spec.sizes.benchmark == SHAPE
    result = sandbox.evaluate(rmsnorm, load_candidate(KB / "answers" / "7_rms_norm_large.cu"))
    print(result.summary())
    assert result.status is Status.ok, result.error
    t = result.timing
    assert t.sizes == SHAPE and t.rotating_sets >= 1 and t.primary == "eager"
    s = t.speedup["eager"]
    assert 0 < s.low <= s.value <= s.high
    print({"rotating_sets": t.rotating_sets, "unavailable": t.unavailable,
           "speedup": {k: (v.value, v.low, v.high) for k, v in t.speedup.items()}})


@pytest.mark.gpu
@pytest.mark.timeout(1800)
def test_a_size_no_stage_can_hold_is_too_large_naming_the_bytes(rmsnorm, sandbox):
    result = sandbox.evaluate(rmsnorm, load_candidate(KB / "answers" / "7_rms_norm_large.cu"),
                              sizes={**SHAPE, "batch_size": 4 * SHAPE["batch_size"]})
    print(result.status, result.error)
    assert result.status is Status.too_large, result.error
    assert "does not fit in device memory at this size" in result.error and "GiB free" in result.error
