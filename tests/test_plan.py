"""Launch plans resolve to plain numbers at each size; impossible launches are refused before the GPU sees them."""

from pathlib import Path

import pytest

from sandbox.candidates.candidate import parse_candidate
from sandbox.candidates.compiler import compile_source
from sandbox.candidates.plan import PlanError, resolve
from sandbox.tasks.task import load_task

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


def _compiled(text: str, task_name: str = "vector_add", arch: str = "sm_90"):
    from sandbox import CompileOnlySandbox, SandboxConfig

    with CompileOnlySandbox(SandboxConfig(arch=arch)) as sb:
        return sb.compile(load_task(task_name), parse_candidate(text))


def test_the_plan_s_arguments_are_checked_against_the_kernel_as_compiled():
    four = _plan('"ceil_div(n, 256)"', '"256"', '["a", "b", "c"]')
    result = _compiled(four)
    assert result.status.value == "launch_error"
    assert "launch[0] (k): the plan passes 3 arguments, the kernel takes 4 parameters" in result.error
    narrow = _compiled(_plan('"ceil_div(n, 256)"', '"256"'))   # n passed as int32 to a long long parameter
    assert narrow.status.value == "launch_error"
    assert "argument 3 'n' is passed as int32 (4 bytes), but parameter 3 of the kernel takes 8 bytes; write 'n:i64'" in narrow.error
    assert _compiled(_plan('"ceil_div(n, 256)"', '"256"', '["a", "b", "c", "n:i64"]')).status.value == "compiled"
    pointer = _compiled(_plan('"ceil_div(n, 256)"', '"256"', '["a", "n", "c", "n:i64"]'))
    assert "argument 1 'n' is passed as int32 (4 bytes), but parameter 1 of the kernel takes 8 bytes" in pointer.error


def test_dynamic_shared_memory_beyond_the_target_s_limit_is_a_launch_error_before_any_launch():
    from sandbox.candidates.plan import shared_limit

    assert shared_limit({}, "sm_90") == shared_limit({}, "sm_90a") == 227 * 1024
    assert shared_limit({"shared_per_block_optin": 101376}, "sm_90") == 101376 and shared_limit({}, "sm_1") is None
    huge = _compiled(_plan('"1"', '"32"', '["a", "b", "c", "n:i64"]', shared="1000000000"))
    assert huge.status.value == "launch_error"
    assert ("launch[0] (k): 1000000000 bytes of dynamic shared memory at {'n': 1} exceed the 232448 bytes (227 KiB) "
            "one block may use on sm_90") in huge.error
    assert _compiled(_plan('"1"', '"32"', '["a", "b", "c", "n:i64"]', shared="232448")).status.value == "compiled"
    assert "(99 KiB) one block may use on sm_89" in _compiled(
        _plan('"1"', '"32"', '["a", "b", "c", "n:i64"]', shared="232448"), arch="sm_89").error


def test_static_shared_memory_counts_toward_the_limit():
    text = (_plan('"1"', '"32"', '["a", "b", "c", "n:i64"]', shared="200000")
            .replace("long long n) {}", "long long n) { __shared__ float s[12288]; s[threadIdx.x] = a[0]; "
                                        "__syncthreads(); c[0] = s[n % 32]; }"))
    result = _compiled(text)
    assert result.status.value == "launch_error" and "plus 49152 static exceed the 232448 bytes" in result.error


def test_kernel_parameters_are_read_from_the_cubin():
    from sandbox.candidates.cubin import kernel_params

    text = (_plan('"1"', '"1"', '["a"]') + 'struct S { int a; double b; };\n'
            'extern "C" __global__ void many(char c, short h, S s, double d, const float* p) {}\n'
            'extern "C" __global__ void none() {}\n'
            'template <int B> __global__ void t(float* x, int n) { x[0] = B + n; }\n'
            'template __global__ void t<4>(float*, int);\n')
    info, cubin = compile_source(parse_candidate(text), use_cache=False)
    assert info.ok, info.log
    params = kernel_params(cubin)
    assert params["many"] == [1, 2, 16, 8, 8] and params["none"] == [] and params["k"] == [8, 8, 8, 8]
    assert params["_Z1tILi4EEvPfi"] == [8, 4]
