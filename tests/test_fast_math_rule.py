"""Where a task's tolerance does not admit fast math, its pieces are refused before compiling: the fast-math
intrinsics and approximate PTX however spelled, and the flags that make up fast math."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.candidates.candidate import CandidateError, parse_candidate, static_problems, validate_for_task
from sandbox.candidates.fast_math import approximate_math
from sandbox.tasks.task import load_task

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = (ROOT / "kernels" / "softmax" / "baseline.cu").read_text()

SPELLINGS = [
    ("literal", SOFTMAX.replace("expf(row[c] - m) * inv", "__expf(row[c] - m) * inv"), "line 40: __expf is a fast-math"),
    ("pasted", "#define CAT(a, b) a##b\n" + SOFTMAX.replace("expf(row[c] - m) * inv", "CAT(__ex, pf)(row[c] - m) * inv"),
     "the identifier '__ex' in a text that pastes tokens"),
    ("asm string", SOFTMAX.replace("out[c] = expf(row[c] - m) * inv;",
                                   'float e; asm("ex2.approx.f32 %0, %1;" : "=f"(e) : "f"(row[c] - m)); out[c] = e * inv;'),
     "an approximate PTX instruction"),
    ("stringized asm", "#define S(x) #x\n" + SOFTMAX.replace(
        "out[c] = expf(row[c] - m) * inv;", 'float e; asm(S(ex2.approx.f32 %0, %1;) : "=f"(e) : "f"(row[c] - m)); out[c] = e * inv;'),
     "an approximate PTX instruction"),
    ("div.full", SOFTMAX.replace("out[c] = expf(row[c] - m) * inv;",
                                 'float q; asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(expf(row[c] - m)), "f"(sum)); out[c] = q;'),
     "an approximate PTX instruction"),
]


@pytest.mark.parametrize("name, source, reason", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_every_spelling_of_approximate_math_is_refused_where_fast_math_is_not_allowed(name, source, reason):
    assert source != SOFTMAX
    softmax, row_sum = load_task("softmax"), load_task("row_sum")
    assert not softmax.spec.allow_fast_math and row_sum.spec.allow_fast_math
    candidate = parse_candidate(source)
    problems = static_problems(candidate, softmax)
    assert any(reason in p for p in problems), problems
    assert static_problems(candidate) == [] and static_problems(candidate, row_sum) == []


def test_honest_math_and_lookalike_names_pass():
    assert approximate_math(SOFTMAX) == []
    lookalikes = SOFTMAX.replace("float sum", "float approx_sum = 0.0f; float sum").replace(
        "// One block", '// __expf and ex2.approx in a comment\n// One block')
    assert approximate_math(lookalikes) == []


@pytest.mark.parametrize("flag", ["--use_fast_math", "--ftz=true", "--prec-div=false", "--prec-sqrt=false"])
def test_the_flags_that_make_up_fast_math_are_refused_where_it_is_not_allowed(flag):
    candidate = parse_candidate(SOFTMAX).with_flags([flag])
    with pytest.raises(CandidateError, match=f"{flag} is not allowed for task 'softmax'"):
        validate_for_task(candidate, load_task("softmax"))
    validate_for_task(parse_candidate(SOFTMAX).with_flags(["--ftz=false", "--prec-div=true"]), load_task("softmax"))


@pytest.mark.timeout(120)
def test_compile_says_why_a_fast_exp_is_rejected(tmp_path):
    path = tmp_path / "fast_exp.cu"
    path.write_text(SPELLINGS[0][1])
    out = subprocess.run([sys.executable, "-m", "agent", "compile", "softmax", str(path), "--json"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    record = json.loads(out.stdout)
    assert out.returncode == 1 and record["status"] == "rejected", out.stdout + out.stderr
    assert "__expf is a fast-math intrinsic" in record["error"] and record["compile"] is None


@pytest.mark.parametrize("path", sorted(ROOT.glob("kernels/*/baseline.cu")), ids=lambda p: p.parent.name)
def test_every_suite_baseline_passes_its_own_task_rule(path):
    assert static_problems(parse_candidate(path.read_text()), load_task(path.parent.name)) == []


def test_a_text_that_cannot_be_read_gives_its_reason_once():
    problems = static_problems(parse_candidate(SOFTMAX.replace("// One block", "// \0 One block")), load_task("softmax"))
    assert len(problems) == 1 and "NUL" in problems[0], problems
