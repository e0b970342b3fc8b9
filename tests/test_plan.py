"""Launch plans resolve to plain numbers at each size; impossible launches are refused before the GPU sees them."""

from pathlib import Path

import pytest

from sandbox.candidate import parse_candidate
from sandbox.compiler import compile_source
from sandbox.plan import PlanError, resolve
from sandbox.task import load_task

ROOT = Path(__file__).resolve().parent.parent


def _resolve(task_name: str, text: str, sizes: dict):
    task = load_task(task_name)
    cand = parse_candidate(text)
    info, _ = compile_source(cand)
    assert info.ok, info.log
    return resolve(task, cand, info, sizes)


def test_baseline_plans_resolve_at_every_size():
    for name in ("vector_add", "softmax", "sgemm"):
        task = load_task(name)
        text = (task.folder / "baseline.cu").read_text()
        for _, sizes in task.spec.all_sizes():
            plan = _resolve(name, text, sizes)
            launch = plan["launches"][0]
            assert all(g >= 1 for g in launch["grid"]) and len(launch["block"]) == 3


def test_arguments_are_typed_and_arrays_are_references():
    text = (ROOT / "kernels/sgemm/baseline.cu").read_text()
    plan = _resolve("sgemm", text, {"M": 3, "N": 5, "K": 7})
    launch = plan["launches"][0]
    assert launch["grid"] == [1, 1, 1] and launch["block"] == [16, 16, 1]
    assert launch["args"] == [["array", "A"], ["array", "B"], ["array", "C"], ["int32", 3], ["int32", 5], ["int32", 7]]


def _plan(grid: str, block: str, args: str = '["a", "b", "c", "n"]', shared: str = "0") -> str:
    return (f'/*@kernelwright\n[[launch]]\nkernel = "k"\ngrid = {grid}\nblock = {block}\nshared = "{shared}"\nargs = {args}\n@*/\n'
            'extern "C" __global__ void k(const float* a, const float* b, float* c, long long n) {}\n')


@pytest.mark.parametrize("grid, block, args, message", [
    ('"n"', '"2048"', '["a","b","c","n"]', "threads"),
    ('["1", "100000"]', '"32"', '["a","b","c","n"]', "grid dimension 1"),
    ('"n - n"', '"32"', '["a","b","c","n"]', "grid dimension 0 = 0"),
    ('"1"', '"32"', '["a","b","c","n * n * n"]', "does not fit int32"),
])
def test_impossible_launches_are_plan_errors(grid, block, args, message):
    with pytest.raises(PlanError, match=message):
        _resolve("vector_add", _plan(grid, block, args), {"n": 5000})


def test_64_bit_arguments_on_request():
    plan = _resolve("vector_add", _plan('"1"', '"32"', '["a","b","c","n * n * n:i64"]'), {"n": 5000})
    assert plan["launches"][0]["args"][3] == ["int64", 5000**3]
