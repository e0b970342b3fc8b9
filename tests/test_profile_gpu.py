"""Profiling on a real device with the real ncu: the diagnoses match what the kernels do.

Each test prints the profiling seconds (run with ``-s`` to see them) and the diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task, parse_candidate
from sandbox.judging.result import Profile

pytestmark = pytest.mark.gpu
CHEATS = Path(__file__).parent / "cheats"

STRIDED_ADD = """/*@kernelwright
[[launch]]
kernel = "vector_add_strided"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Neighbouring threads touch elements 32 apart (128 bytes): a permutation of the indices when n % 32 == 0.
extern "C" __global__ void vector_add_strided(const float* __restrict__ a, const float* __restrict__ b,
                                             float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int m = n / 32;
    int j = (n % 32 == 0) ? (i % m) * 32 + i / m : i;
    c[j] = a[j] + b[j];
}
"""

NAIVE_SGEMM = """/*@kernelwright
[[launch]]
kernel = "sgemm_naive"
grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"]
block = ["16", "16"]
args = ["A", "B", "C", "M", "N", "K"]
@*/
// One thread per element of C, every operand straight from global memory.
extern "C" __global__ void sgemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                      int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
    C[(long long)row * N + col] = acc;
}
"""

TWO_HALVES = """/*@kernelwright
[[launch]]
kernel = "add_even"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]

[[launch]]
kernel = "add_odd"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
extern "C" __global__ void add_even(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i % 2 == 0) c[i] = a[i] + b[i];
}
extern "C" __global__ void add_odd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i % 2 == 1) c[i] = a[i] + b[i];
}
"""


@pytest.fixture(scope="module")
def sandbox():
    config = SandboxConfig(check_timeout_s=60, time_timeout_s=180, timing_budget_s=0.05, max_rounds=20, vendor=False)
    with GPUSandbox(config) as sb:
        yield sb


def show(name: str, prof: Profile) -> None:
    print(f"\n--- {name}: {prof.status} in {prof.seconds:.2f} s ({prof.tool or ''})\n{prof.diagnosis}")


def ok(prof: Profile) -> Profile:
    assert prof.ok, f"{prof.status}: {prof.reason}\n{prof.detail}"
    return prof


@pytest.mark.timeout(900)
def test_naive_vector_add_is_memory_bound_with_its_cost_in_the_ledger(sandbox):
    task = load_task("vector_add")
    cand = load_candidate(task.baseline_path)
    result = sandbox.evaluate(task, cand)
    assert result.status is Status.ok, result.summary()
    prof = ok(sandbox.profile(task, cand, result=result))
    show("vector_add baseline", prof)
    assert prof.diagnosis_data["bound"] == "memory"
    assert result.cost.profile_gpu_s == prof.seconds > 0
    assert result.profile is prof
    assert "% of the task's roofline" in prof.diagnosis
    s = prof.kernels[0].summary
    assert s["ld_bytes_per_sector"] == pytest.approx(32.0)
    assert s["dram_bytes"] >= 0.9 * task.bytes(task.spec.sizes.benchmark)


@pytest.mark.timeout(900)
def test_uncoalesced_access_shows_poor_sector_use_as_the_first_issue(sandbox):
    task = load_task("vector_add")
    prof = ok(sandbox.profile(task, parse_candidate(STRIDED_ADD, label="strided")))
    show("vector_add strided", prof)
    s = prof.kernels[0].summary
    assert s["ld_bytes_per_sector"] <= 8.0
    assert prof.diagnosis_data["issues"][0]["topic"] == "coalescing"


@pytest.mark.timeout(900)
def test_naive_sgemm_is_not_called_memory_bound(sandbox):
    task = load_task("sgemm")
    prof = ok(sandbox.profile(task, parse_candidate(NAIVE_SGEMM, label="naive")))
    show("sgemm naive", prof)
    assert prof.diagnosis_data["bound"] != "memory"
    assert not prof.diagnosis.startswith("bound: memory-bound")


@pytest.mark.timeout(900)
def test_each_launch_of_a_plan_is_profiled_with_its_share_and_changes_against_the_parent(sandbox):
    task = load_task("vector_add")
    parent = ok(sandbox.profile(task, load_candidate(task.baseline_path)))
    prof = ok(sandbox.profile(task, parse_candidate(TWO_HALVES, label="halves"), parent_profile=parent))
    show("vector_add in two launches", prof)
    assert [k.kernel for k in prof.kernels] == ["add_even", "add_odd"]
    assert all(20.0 < k.share_pct < 80.0 for k in prof.kernels)
    assert "kernels vector_add -> add_even, add_odd" in prof.diagnosis_data["changes"]


@pytest.mark.timeout(600)
def test_a_plan_that_cannot_launch_is_a_failed_profile_not_an_exception(sandbox):
    task = load_task("vector_add")
    prof = sandbox.profile(task, load_candidate(CHEATS / "bad_launch.cu"))
    show("bad launch", prof)
    assert prof.status == "failed" and "launch_error" in prof.reason


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task_name", ["vector_add", "softmax", "sgemm"])
def test_suite_baselines_profile_with_a_diagnosis(sandbox, task_name, tmp_path):
    task = load_task(task_name)
    prof = ok(sandbox.profile(task, load_candidate(task.baseline_path), save_to=tmp_path))
    show(f"{task_name} baseline", prof)
    assert prof.diagnosis_data["bound"] in ("memory", "cache", "compute", "latency")
    assert prof.diagnosis_data["issues"], "a baseline has something to improve"
    assert (tmp_path / "ncu-raw.csv").stat().st_size > 0
