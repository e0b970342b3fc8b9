"""Approximate math judged by the compiled code: where a task forbids fast math, every approximate instruction in
the PTX must come from a function that emits it at its documented accuracy (or, for the 16-bit headers, where the
tolerance admits a rounding to that type); inline PTX and compiler builtins that spell it otherwise are refused
with the kernel, the instruction and the line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.candidates.approx_ptx import identifier, scan, trace
from sandbox.candidates.candidate import load_candidate, parse_candidate, static_problems
from sandbox.candidates.compiler import compile_source
from sandbox.candidates.fast_math import BFLOAT16, HALF, HELPERS, LIBRARY, allowed_emitters, compiled_problems
from sandbox.tasks.task import load_task

ROOT = Path(__file__).resolve().parent.parent
CHEATS = ROOT / "tests" / "cheats"
HALF_TASK = ROOT / "tests" / "fixtures" / "tasks" / "half_sigmoid"

# (file, task, line, instruction, words of the reason): each passes the source rule, which reads spelling
COMPILED_CHEATS = [
    ("gelu_tanh_split_asm.cu", "gelu", 19, "tanh.approx.f32", "own code, no library function's (the source writes asm)"),
    ("rmsnorm_commented_rsqrt.cu", "rmsnorm", 29, "rsqrt.approx.ftz.f32", "own code"),
    ("softmax_pasted_builtin.cu", "softmax", 33, "ex2.approx.ftz.f32", "the source writes __nvvm_ex2_appr"),
    ("softmax_builtin_beside_expf.cu", "softmax", 34, "ex2.approx.ftz.f32", "own code"),
]


def _compiled(candidate):
    info, _ = compile_source(candidate, use_cache=False)
    assert info.ok, info.log
    return info


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, task_name, line, instruction, why", COMPILED_CHEATS, ids=[c[0] for c in COMPILED_CHEATS])
def test_approximate_math_the_source_rule_misses_is_refused_by_its_compiled_code(name, task_name, line, instruction, why):
    task, cand = load_task(task_name), load_candidate(CHEATS / name)
    assert not task.spec.allow_fast_math and static_problems(cand, task) == []
    problems = compiled_problems(_compiled(cand), cand.source, task)
    assert problems and problems[0].startswith(f"line {line}: "), problems
    assert instruction in problems[0] and why in problems[0] and cand.launches[0].kernel in problems[0]


@pytest.mark.timeout(120)
def test_compile_rejects_approximate_code_naming_kernel_instruction_and_line():
    out = subprocess.run([sys.executable, "-m", "agent", "compile", "gelu", str(CHEATS / "gelu_tanh_split_asm.cu"),
                          "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    record = json.loads(out.stdout)
    assert out.returncode == 1 and record["status"] == "rejected", out.stdout + out.stderr
    assert record["error"].startswith("line 19: gelu_tanh compiles to tanh.approx.f32"), record["error"]


@pytest.mark.timeout(120)
def test_half_functions_pass_where_the_tolerance_admits_a_float16_rounding_and_only_there():
    cand = load_candidate(CHEATS / "honest_half_sigmoid.cu")
    info = _compiled(cand)
    assert {a.instruction for a in info.approx} == {"ex2.approx.ftz.f32", "rcp.approx.ftz.f32"}
    half_task = load_task(HALF_TASK)
    assert not half_task.spec.allow_fast_math
    assert compiled_problems(info, cand.source, half_task) == []
    tight = compiled_problems(info, cand.source, load_task("softmax"))   # rtol 1e-5: below float16's rounding
    assert len(tight) == 4 and all("line 21" in p or "line 25" in p for p in tight), tight
    assert compiled_problems(info, cand.source, load_task("hgemm")) == []  # allows fast math


@pytest.mark.timeout(120)
def test_an_emitter_on_the_line_must_emit_that_very_instruction():
    # exp2f emits ex2.approx.f32, never the flush-to-zero form
    src = load_task("gelu").baseline_path.read_text().replace(
        "y[i] = 0.5f * v * (1.0f + tanhf(u));", "y[i] = 0.5f * v * (1.0f + exp2f(u) * 0.0f + __nvvm_ex2_approx_ftz_f(u));")
    cand = parse_candidate(src)
    problems = compiled_problems(_compiled(cand), cand.source, load_task("gelu"))
    assert any("ex2.approx.ftz.f32" in p and "line 17" in p for p in problems), problems


@pytest.mark.timeout(120)
def test_a_library_call_over_several_lines_keeps_its_accuracy_credit_on_each():
    src = load_task("gelu").baseline_path.read_text().replace(
        "y[i] = 0.5f * v * (1.0f + tanhf(u));", "y[i] = 0.5f * v * (1.0f + tanhf(\n            u +\n            0.0f));")
    cand = parse_candidate(src)
    assert compiled_problems(_compiled(cand), cand.source, load_task("gelu")) == []


@pytest.mark.timeout(120)
def test_a_library_call_behind_a_macro_and_an_inlined_helper_keeps_its_accuracy_credit():
    src = load_task("gelu").baseline_path.read_text().replace(
        "extern \"C\"", "#define TANH_OF(x) tanhf(x)\n__device__ float squash(float u) {\n    return TANH_OF(u);\n}\n"
                      "extern \"C\"", 1).replace("tanhf(u));", "squash(u));")
    cand = parse_candidate(src)
    info = _compiled(cand)
    assert {a.line for a in info.approx} == {14}, info.approx    # the helper's own line, through the macro
    assert compiled_problems(info, cand.source, load_task("gelu")) == []


def test_ptx_the_assembler_reads_through_comments_and_line_breaks_is_seen():
    ptx = ('.visible .entry k(\n)\n{\n\t.loc\t1 7 3\n\t// begin inline asm\n\tex2/* x */\n.approx\n .ftz.f32 %f1, %f2;\n'
           '\t// end inline asm\n\t.loc\t1 3 3, function_name $L__info_string0, inlined_at 1 9 3\n'
           '\trcp.rn.f32 %f3, %f1;\n\tdiv.full.f32 %f4, %f3, %f1;\n\t.loc\t2 1 1\n\tsin.approx.f32 %f5, %f4;\n}\n'
           '\t.file\t1 "/tmp/x/candidate.cu"\n\t.file\t2 "/usr/include/other.h"\n')
    found = [(a.function, a.instruction, a.line) for a in scan(ptx)]
    assert found == [("k", "ex2.approx.ftz.f32", 7), ("k", "div.full.f32", 3), ("k", "sin.approx.f32", None)]


PRELUDE = ("    float x = a[0], y = a[1], z = a[2], w = a[3]; double d = a[4];\n"
           "    __half h = __float2half(x); __half2 h2 = __floats2half2_rn(x, y);\n"
           "    __nv_bfloat16 b = __float2bfloat16(x); __nv_bfloat162 b2 = __floats2bfloat162_rn(x, y);\n"
           "    float acc = 0.0f;")
TWO = {"powf", "pow", "fmodf", "fmod", "remainderf", "remainder", "rhypotf", "hypot", "rhypot", "__hdiv", "__h2div"}
SPECIAL = {"rnorm3df": "rnorm3df(x, y, z)", "rnorm4df": "rnorm4df(x, y, z, w)", "rnormf": "rnormf(3, a)"}


def _call(name: str, arg: str) -> str:
    call = SPECIAL.get(name) or (f"{arg} / {arg}" if name == "/" else
                                 f"{name}({arg}, {arg})" if name in TWO else f"{name}({arg})")
    return f"__low2float({call})" if arg in ("h2", "b2") else call


def _calls() -> list[tuple[dict, str, str]]:
    """(table, function, call) for every function of every table, with float and double arguments for the
    library and scalar or pair arguments for the 16-bit headers."""
    out = []
    for name in LIBRARY:
        out.append((LIBRARY, name, _call(name, "x")))
        if not (name in SPECIAL or (name.endswith("f") and name != "erf")):   # a C++ name: its double overload too
            out.append((LIBRARY, name, _call(name, "d")))
    for table, one, two in ((HALF, "h", "h2"), (BFLOAT16, "b", "b2")):
        for name in table:
            pair = name.startswith(("h2", "__h2"))
            out.append((table, name, _call(name, two if pair else one)))
    return out


@pytest.mark.timeout(180)
def test_every_function_in_the_tables_emits_only_what_they_list_for_it():
    """The tables are what NVRTC emits; a newer NVRTC that emits another approximate instruction for one of these
    functions fails here instead of rejecting honest kernels."""
    calls = _calls()
    head = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nextern \"C\" __global__ void k(float* o, const float* a) {"
    lines = [head, PRELUDE] + [f"    acc += (float)({call});" for _, _, call in calls] + ["    o[0] = acc;", "}"]
    src = "\n".join(lines) + '\n/*@kernelwright\n[[launch]]\nkernel = "k"\ngrid = "1"\nblock = "1"\nargs = []\n@*/\n'
    first = src.splitlines().index(lines[2]) + 1
    info = _compiled(parse_candidate(src))
    assert info.approx, "the kernel compiles to approximate instructions"
    emitters = {name for _, name, _ in calls}
    for use in info.approx_traced:   # every instruction traced to a function of the tables that lists it
        assert use.source in emitters or set(HELPERS.get(use.source, ())) & emitters, use
        assert any(use.instruction in table.get(use.source, ()) for table in (LIBRARY, HALF, BFLOAT16)) or (
            use.instruction in allowed_emitters(load_task(HALF_TASK))[use.source]), use
    assert {a.instruction for a in info.approx} <= {a.instruction for a in info.approx_traced}
    for use in info.approx:
        if use.line is None:     # a header's helper the compiler kept as a function: judged by the whole source
            assert any(use.instruction in table[name] for table, name, _ in calls), use
            continue
        assert first <= use.line < first + len(calls), use
        table, name, call = calls[use.line - first]
        assert use.instruction in table[name], (name, call, use.instruction)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", sorted(ROOT.glob("kernels/*/baseline.cu")), ids=lambda p: p.parent.name)
def test_every_suite_baseline_passes_its_compiled_code_rule(path):
    cand = load_candidate(path)
    info, _ = compile_source(cand)
    assert info.ok and compiled_problems(info, cand.source, load_task(path.parent.name)) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("change", [
    ("out[c] = expf(row[c] - m) * inv;",
     '{ float e; asm("ex2.appro" "x.ftz.f32 %0, %1;" : "=f"(e) : "f"((row[c] - m) * 1.44269504f)); out[c] = e * inv; }'),
    ("extern \"C\" __global__", "extern \"C\" __device__ float __nv_fast_expf(float);\nextern \"C\" __global__"),
], ids=["split literal", "declared libdevice"])
def test_the_two_routes_that_passed_the_spelling_rule_before_are_refused(change):
    old, new = change
    source = load_task("softmax").baseline_path.read_text().replace(old, new, 1)
    if "__nv_fast_expf(float)" in source:
        source = source.replace("out[c] = expf(row[c] - m) * inv;", "out[c] = __nv_fast_expf(row[c] - m) * inv;")
    cand, task = parse_candidate(source), load_task("softmax")
    problems = static_problems(cand, task) + compiled_problems(_compiled(cand), cand.source, task)
    assert any("approx" in p or "fast-math" in p for p in problems), problems
    if "asm" in new:   # this one the source rule cannot read: the compiled code is what refuses it
        assert static_problems(cand, task) == [] and "the source writes asm" in problems[0]


def _softmax_with(expression: str) -> str:
    return load_task("softmax").baseline_path.read_text().replace("out[c] = expf(row[c] - m) * inv;",
                                                                 f"out[c] = ({expression}) * inv;", 1)


@pytest.mark.timeout(120)
def test_a_pasted_builtin_beside_an_uncalled_expf_is_refused_and_honest_exp_passes():
    """Judged by the function holding each instruction, not by the names on its line."""
    pasted = parse_candidate("#define JOIN(a, b) a##b\n" + _softmax_with(
        "(cols < 0 ? expf(0.0f) : 0.0f) + JOIN(__nvvm_ex2_appr, ox_ftz_f)((row[c] - m) * 1.44269504f)"))
    softmax = load_task("softmax")
    assert static_problems(pasted, softmax) == []
    problems = compiled_problems(_compiled(pasted), pasted.source, softmax)
    assert problems and "ex2.approx.ftz.f32" in problems[0] and "own code" in problems[0], problems
    honest = parse_candidate(_softmax_with("expf(row[c] - m)"))
    assert compiled_problems(_compiled(honest), honest.source, softmax) == []
    fast = parse_candidate(_softmax_with("__expf(row[c] - m)"))
    allowing = load_task("hgemm")
    assert allowing.spec.allow_fast_math and compiled_problems(_compiled(fast), fast.source, allowing) == []
    assert static_problems(fast, softmax)   # the same intrinsic where fast math is not allowed: refused by name


@pytest.mark.timeout(120)
def test_code_that_asks_whether_it_is_the_traced_compile_cannot_tell():
    """The traced compile undefines the macro -G defines: a kernel honest only there is seen as it is."""
    cand = parse_candidate("#define JOIN(a, b) a##b\n#ifdef __CUDACC_DEBUG__\n#define EX(v) expf(v)\n#else\n"
                           "#define EX(v) JOIN(__nvvm_ex2_appr, ox_ftz_f)((v) * 1.44269504f)\n#endif\n"
                           + _softmax_with("EX(row[c] - m)"))
    info = _compiled(cand)
    assert any(a.source is None for a in info.approx_traced)
    assert compiled_problems(info, cand.source, load_task("softmax"))


def test_a_traced_instruction_belongs_to_the_function_holding_it():
    ptx = ('.func (.param .b32 r) expf(\n)\n{\n\tex2.approx.ftz.f32 %f1, %f2;\n}\n'
           '.func (.param .b32 r) _Z4hexp6__half(\n)\n{\n\tex2.approx.ftz.f32 %f1, %f2;\n}\n'
           '.visible .entry _Z1kPf(\n)\n{\n\t.loc\t1 7 3\n\tex2.approx.ftz.f32 %f1, %f2;\n}\n'
           '\t.file\t1 "/tmp/x/candidate.cu"\n')
    found = [(a.function, a.source, a.line) for a in trace(ptx)]
    assert found == [("expf", "expf", None), ("_Z4hexp6__half", "hexp", None), ("_Z1kPf", None, 7)]
    assert [identifier(n) for n in ("_ZdvRK6__halfS1_", "_Z3expf", "_ZN4cuda3std3expEf", "rsqrtf")] == [
        "/", "exp", "exp", "rsqrtf"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("attr", ["", "__attribute__((nodebug))"])
def test_a_function_of_the_candidates_named_like_a_library_one_is_its_own(attr):
    """An overload the candidate writes, named expf, holds its builtin in a function that carries the candidate's
    lines (nodebug does not hide them from the traced compile): its own code, refused."""
    src = "#define JOIN(a, b) a##b\n" + _softmax_with("expf((double)(row[c] - m))").replace(
        'extern "C" __global__', f"__device__ {attr} float expf(double v) {{ return JOIN(__nvvm_ex2_appr, ox_ftz_f)"
        "((float)v * 1.44269504f); }\nextern \"C\" __global__", 1)
    cand = parse_candidate(src)
    info = _compiled(cand)
    own = [a for a in info.approx_traced if a.source is None]
    assert own and own[0].function == "_Z4expfd"
    assert any("_Z4expfd compiles to ex2.approx.ftz.f32" in p for p in compiled_problems(info, cand.source,
                                                                                          load_task("softmax")))
