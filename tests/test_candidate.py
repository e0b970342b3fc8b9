"""Candidate files: the plan parses, malformed plans get precise errors, policy violations are found before compiling."""

from pathlib import Path

import pytest

from sandbox.candidates.candidate import (CandidateError, check_flag, load_candidate, parse_candidate, split_arg,
                               static_problems, validate_for_task)
from sandbox.tasks.task import load_task

ROOT = Path(__file__).resolve().parent.parent
BASELINE = (ROOT / "kernels" / "vector_add" / "baseline.cu").read_text()
KERNEL = 'extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {}\n'


def plan(body: str) -> str:
    return f"/*@kernelwright\n{body}\n@*/\n{KERNEL}"


def test_baseline_parses_with_knob_defaults_first():
    c = parse_candidate(BASELINE)
    assert c.knobs == {"BLOCK": (256, 128, 512, 1024)}
    assert c.knob_values == {"BLOCK": 256}
    assert c.launches[0].grid == ("ceil_div(n, BLOCK)",)
    assert c.launches[0].args == ("a", "b", "c", "n")


def test_render_round_trips_chosen_knobs_and_flags():
    c = parse_candidate(BASELINE).with_knobs({"BLOCK": 512}).with_flags(["--extra-device-vectorization"])
    again = parse_candidate(c.render())
    assert again.knob_values == {"BLOCK": 512}
    assert again.flags == ("--extra-device-vectorization",)
    assert again.launches == c.launches
    assert again.key != parse_candidate(BASELINE).key


@pytest.mark.parametrize("text, message", [
    (KERNEL, "no launch plan"),
    ("/*@kernelwright\n[[launch]]\n" + KERNEL, "never closed"),
    (plan("[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'"), "missing keys ['args']"),
    (plan("[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []\nstream = 1"), "unknown keys ['stream']"),
    (plan("[[launch]]\nkernel = 'k'\ngrid = 'n.real'\nblock = '1'\nargs = []"), "Attribute is not allowed"),
    (plan("[[launch]]\nkernel = 'k'\ngrid = ['1','1','1','1']\nblock = '1'\nargs = []"), "1 to 3 expressions"),
    (plan("[knobs]\nB = []\n[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []"), "non-empty list of integers"),
    (plan("[knobs]\nB = [1.5]\n[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []"), "non-empty list of integers"),
    (plan("flags = ['-G']\n[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []"), "flag '-G' is not allowed"),
    (plan("[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []\n[oops"), "invalid TOML"),
    (plan("shell = 'rm -rf /'\n[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []"), "unknown keys ['shell']"),
    (plan("[[scratch]]\nname = 's'\ndtype = 'float128'\nsize = 'n'\n[[launch]]\nkernel = 'k'\ngrid = '1'\nblock = '1'\nargs = []"), "scratch[0].dtype"),
])
def test_malformed_candidates_get_precise_errors(text, message):
    with pytest.raises(CandidateError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_candidate(text)


def test_flags_allow_list():
    for ok in ("--use_fast_math", "--maxrregcount=64", "--ptxas-options=-O2", "--fmad=false", "-std=c++20",
               "--ptxas-options=-dlcm=cg"):
        check_flag(ok)
    for bad in ("--maxrregcount=8", "-rdc=true", "--ptxas-options=-O3 -v", "-I/etc", "--device-debug", "-Dx=1"):
        with pytest.raises(CandidateError):
            check_flag(bad)


def test_validation_against_the_task_names_unknown_arguments():
    task = load_task("vector_add")
    validate_for_task(parse_candidate(BASELINE), task)
    with pytest.raises(CandidateError, match="unknown names \\['x'\\]"):
        validate_for_task(parse_candidate(plan("[[launch]]\nkernel='k'\ngrid='1'\nblock='1'\nargs=['a','b','c','x']")), task)
    with pytest.raises(CandidateError, match="output 'c' is passed to no launch"):
        validate_for_task(parse_candidate(plan("[[launch]]\nkernel='k'\ngrid='1'\nblock='1'\nargs=['a','b','n']")), task)
    with pytest.raises(CandidateError, match="clash"):
        validate_for_task(parse_candidate(plan("[knobs]\nn=[1]\n[[launch]]\nkernel='k'\ngrid='1'\nblock='1'\nargs=['a','b','c']")), task)
    with pytest.raises(CandidateError, match="use_fast_math is not allowed"):
        validate_for_task(parse_candidate(BASELINE).with_flags(["--use_fast_math"]), task)


def test_typed_integer_arguments():
    assert split_arg("n*2:i64") == ("n*2", "int64")
    assert split_arg("n") == ("n", None)
    with pytest.raises(CandidateError, match="unknown type suffix"):
        split_arg("n:f32")


@pytest.mark.parametrize("line, allowed", [
    ("#include <cuda_fp16.h>", True),
    ("#include <mma.h>  // wmma", True),
    ('#include "/etc/passwd"', False),
    ("#include </etc/shadow>", False),
    ('#define H "/etc/passwd"\n#include H', False),
    ("#inc\\\nlude </etc/passwd>", False),
    ("%:include </etc/passwd>", False),
    ("#if __has_include(</etc/passwd>)\n#endif", False),
])
def test_only_allow_listed_headers_may_be_included(line, allowed):
    problems = static_problems(parse_candidate(line + "\n" + BASELINE))
    assert (problems == []) is allowed, problems


def test_load_candidate_names_the_file(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text(KERNEL)
    with pytest.raises(CandidateError, match=str(bad)):
        load_candidate(bad)
    with pytest.raises(CandidateError, match="no such file"):
        load_candidate(tmp_path / "missing.cu")
