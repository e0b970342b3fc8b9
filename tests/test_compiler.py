"""Real NVRTC compiles with no GPU: resources per kernel, compile errors as values, caching, cubin identity."""

import json
from pathlib import Path

import pytest

from sandbox import CompileOnlySandbox
from sandbox.candidates.candidate import parse_candidate
from sandbox.candidates.compiler import compile_source, include_dirs, nvrtc_version, parse_ptxas
from sandbox.judging.result import Status
from sandbox.tasks.task import load_task

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))


def baseline(name):
    return parse_candidate((ROOT / "kernels" / name / "baseline.cu").read_text())


def test_resource_report_per_kernel_for_each_first_task():
    for name, kernel in (("vector_add", "vector_add"), ("softmax", "softmax_rows"), ("sgemm", "sgemm_tiled")):
        info, cubin = compile_source(baseline(name))
        assert info.ok, info.log
        assert cubin and info.cubin_sha256
        res = info.kernels[kernel]
        assert 8 <= res.registers <= 255
        assert res.spill_stores == 0 and res.stack_frame == 0
    info, _ = compile_source(baseline("sgemm"))
    assert info.kernels["sgemm_tiled"].static_shared == 16 * 16 * 4 + 16 * 17 * 4


def test_spills_and_local_memory_are_reported():
    src = """/*@kernelwright
[[launch]]
kernel = "k"
grid = "1"
block = "32"
args = ["a", "b", "c", "n"]
@*/
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    float local[256];
    for (int i = 0; i < 256; ++i) local[i] = a[(i * 7 + threadIdx.x) % n];
    float s = 0.f;
    for (int i = 0; i < n; ++i) s += local[(i * 13) & 255];
    c[threadIdx.x] = s;
}
"""
    info, _ = compile_source(parse_candidate(src).with_flags(["--maxrregcount=16"]))
    assert info.ok
    assert info.kernels["k"].stack_frame >= 1024


def test_compile_error_is_a_value_with_the_log():
    bad = parse_candidate((ROOT / "kernels" / "vector_add" / "baseline.cu").read_text().replace("a[i] + b[i]", "a[i] +"))
    info, cubin = compile_source(bad)
    assert not info.ok and cubin is None
    assert "error" in info.log and "candidate.cu(" in info.log


def test_cache_hits_carry_the_same_cubin():
    first, cubin1 = compile_source(baseline("softmax"))
    second, cubin2 = compile_source(baseline("softmax"))
    assert not first.cached and second.cached
    assert cubin1 == cubin2 and first.cubin_sha256 == second.cubin_sha256


def test_a_cache_entry_another_version_wrote_is_compiled_again_and_overwritten(tmp_path):
    first, _ = compile_source(baseline("softmax"))
    [entry] = (tmp_path / "cache" / "cubins").rglob("*.json")
    record = json.loads(entry.read_text())
    entry.write_text(json.dumps({**record, "field_of_a_newer_version": 1}))
    again, cubin = compile_source(baseline("softmax"))
    assert not again.cached and cubin and again.cubin_sha256 == first.cubin_sha256
    assert "field_of_a_newer_version" not in entry.read_text()
    entry.write_text(entry.read_text()[:40])  # torn
    assert not compile_source(baseline("softmax"))[0].cached


def test_knob_and_flag_changes_change_the_cache_key_and_maybe_the_cubin():
    base = baseline("sgemm")
    a, _ = compile_source(base)
    b, _ = compile_source(base.with_knobs({"TILE": 32}))
    assert a.cubin_sha256 != b.cubin_sha256, "TILE is used in the code: different binaries"
    v = baseline("vector_add")
    c, _ = compile_source(v)
    d, _ = compile_source(v.with_knobs({"BLOCK": 512}))
    assert c.cubin_sha256 == d.cubin_sha256, "BLOCK only changes the launch: the same binary"


def test_templates_are_reached_through_name_expressions():
    src = """/*@kernelwright
[knobs]
B = [128, 256]
[[launch]]
kernel = "add<B>"
grid = "ceil_div(n, B)"
block = "B"
args = ["a", "b", "c", "n"]
@*/
template <int BS> __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * BS + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
    info, _ = compile_source(parse_candidate(src))
    assert info.ok, info.log
    assert info.lowered_names["add<B>"].startswith("_Z3addILi128E")
    assert "add<B>" in info.kernels


def test_headers_for_half_precision_and_tensor_cores_are_found():
    assert include_dirs()
    src = """/*@kernelwright
[[launch]]
kernel = "k"
grid = "1"
block = "32"
args = ["a", "b", "c", "n"]
@*/
#include <cuda_fp16.h>
#include <mma.h>
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    __half h = __float2half(a[0]);
    c[0] = __half2float(h) + b[0];
}
"""
    info, _ = compile_source(parse_candidate(src))
    assert info.ok, info.log


def test_ptxas_parser_reads_cmem_barriers_and_smem():
    log = """ptxas info    : 24 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0], 8 bytes cmem[2]
"""
    kernels, gmem = parse_ptxas(log)
    k = kernels["k"]
    assert (gmem, k.registers, k.barriers, k.static_shared, k.constant) == (24, 40, 1, 2048, 408)
    assert (k.stack_frame, k.spill_stores, k.spill_loads) == (16, 8, 4)


def test_compile_only_sandbox_returns_compiled_or_rejected():
    task = load_task("vector_add")
    with CompileOnlySandbox() as sb:
        ok = sb.compile(task, baseline("vector_add"))
        assert ok.status is Status.compiled and ok.compile.nvrtc_version == nvrtc_version()
        rejected = sb.compile(task, parse_candidate('#include "/etc/passwd"\n' + (ROOT / "kernels/vector_add/baseline.cu").read_text()))
        assert rejected.status is Status.rejected and "/etc/passwd" in rejected.error
        assert rejected.compile is None, "a rejected candidate is never handed to the compiler"


def test_a_compile_with_an_empty_log_leaves_the_processs_shared_bytes_alone():
    """NVRTC writes its log into the buffer it is given; a one-byte log (just the terminator) once landed in
    CPython's shared b" ", which then read b"\\0" everywhere in the process (torch failed to import after it)."""
    import subprocess
    import sys

    code = ("from sandbox.candidates import compiler; "
            "compiler.nvrtc_compile('extern \"C\" __global__ void k() {}', ['--gpu-architecture=sm_90'], 'sm_90', []); "
            "print(repr(bytes([32])), repr(bytes([32]).decode()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "b' ' ' '", out.stdout


@pytest.mark.timeout(30)
def test_a_lone_surrogate_is_escaped_by_the_parser_and_still_hashes_in_the_cache_key():
    from sandbox.candidates.compiler import cache_key

    plan = '/*@kernelwright\n[[launch]]\nkernel = "k"\ngrid = "1"\nblock = "32"\nargs = []\n@*/\n'
    cand = parse_candidate(plan + '// \ud83d\nextern "C" __global__ void k() {}\n')
    assert "// \\ud83d\n" in cand.render() and cand.render().encode()
    raw = cache_key("int x; // \udc00", [], "sm_90", ["k"])
    assert len(raw) == 64 and raw != cache_key("int x; // \\udc00", [], "sm_90", ["k"])
