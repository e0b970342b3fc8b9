"""The prompts in prompts/: every message kind renders strictly and carries what the model needs."""

from __future__ import annotations

import dataclasses

import jinja2
import pytest

from agent.proposers import prompts
from agent.protocols import Entry, ProposalRequest
from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Check, CompileInfo, Interval, KernelResources, Mismatch, Result, Status, Timing
from sandbox.tasks.task import load_task

pytestmark = pytest.mark.timeout(30)

DEVICE = {"gpu": "NVIDIA H200", "arch": "sm_90", "sms": 132, "l2_bytes": 60 * 2**20, "memory_bytes": 141 * 2**30,
          "shared_per_block_optin": 232448, "shared_per_sm": 233472}
CEILINGS = {"copy_bytes_per_s": 4.26e12, "read_bytes_per_s": 4.61e12, "fp32_flops": 5.1e13, "fp16_tensor_flops": 7.0e14}


def _result(task, status: Status, **kw) -> Result:
    return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate="x", candidate_key="k",
                  **kw)


def _timed(task, speed: float) -> dict:
    impl = dict(samples_ms=[1.0], median_ms=1.0 / speed, ci_ms=Interval(value=1.0 / speed, low=0.99 / speed, high=1.01 / speed),
                pct_of_roofline=40.0 * speed)
    timing = Timing(sizes={"rows": 32768, "cols": 8192}, rounds=30, l2_flush_bytes=1 << 30, rotating_sets=2,
                    impls={"candidate": impl, "baseline": dict(impl, median_ms=1.0, pct_of_roofline=40.0)},
                    speedup={"baseline": Interval(value=speed, low=speed - 0.02, high=speed + 0.02)},
                    roofline_ms=0.4, bound="memory")
    info = CompileInfo(ok=True, arch="sm_90", nvrtc_version="13.0", options=[],
                       kernels={"softmax_rows": KernelResources(name="softmax_rows", registers=40, spill_stores=8)})
    return dict(timing=timing, compile=info, env={"ceilings": CEILINGS})


@pytest.fixture(scope="module")
def task():
    return load_task("softmax")


@pytest.fixture(scope="module")
def base(task):
    cand = load_candidate(task.baseline_path)
    return Entry("c0000", cand, _result(task, Status.ok, **_timed(task, 1.0)), [], "baseline", 0, "the task's starting kernel")


def _child(base, task, eid, status, note="", diagnosis=None, **kw):
    cand = dataclasses.replace(base.candidate, source=base.candidate.source + f"\n// variant {eid}\n")
    return Entry(eid, cand, _result(task, status, **kw), [base.id], "llm", 1, note, diagnosis)


def _request(task, parent, best, base, failures=()):
    return ProposalRequest(task, [parent], best, base, list(failures), DEVICE, 2, {"sandbox": "gpu"})


def test_first_prompt_carries_task_format_gpu_and_the_baseline(task, base):
    msgs = prompts.messages(_request(task, base, base, base))
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert prompts.kind(_request(task, base, base, base)) == "first"
    assert "/*@kernelwright" in system and "ceil_div" in system and "cuda_fp16.h" in system
    assert "Fast math is not allowed for this task" in system and "`__expf`" in system
    for needle in ("## The task: softmax", "rows=32768,cols=8192", "rows=3,cols=5", "1e-09 + 1e-05 * |expected|", "5 * rows * cols",
                   "NVIDIA H200", "132 SMs", "4.26 TB/s (read+write), read-only streaming 4.61 TB/s", "softmax_rows", "40 registers", "spills 8/0"):
        assert needle in user, needle
    assert "Diagnosis: none (no profiler ran" in user


def test_iteration_prompt_shows_the_parents_diagnosis_best_and_recent_failures(task, base):
    good = _child(base, task, "c0003", Status.ok, note="one pass over the row", diagnosis="memory-bound, 62% of DRAM peak",
                  **_timed(task, 1.4))
    best = _child(base, task, "c0004", Status.ok, **_timed(task, 1.6))
    broken = _child(base, task, "c0005", Status.compile_error, error='identifier "m2" is undefined',
                    detail='candidate.cu(12): error: identifier "m2" is undefined')
    user = prompts.messages(_request(task, good, best, base, [broken]))[1]["content"]
    assert prompts.kind(_request(task, good, best, base, [broken])) == "iterate"
    assert "Diagnosis:\nmemory-bound, 62% of DRAM peak" in user
    assert "one pass over the row" in user
    assert "best measured candidate so far is c0004" in user and "1.600x" in user
    assert "Recent failures" in user and 'identifier "m2" is undefined' in user
    assert "interval [1.380, 1.420]" in user


def test_repair_prompts_carry_the_compiler_log_or_the_mismatch(task, base):
    broken = _child(base, task, "c0001", Status.compile_error, error="expected a ;",
                    detail="candidate.cu(9): error: expected a \";\"\n1 error detected")
    req = _request(task, broken, base, base)
    assert prompts.kind(req) == "repair_compile"
    text = prompts.messages(req)[1]["content"]
    assert 'error: expected a ";"' in text and "does not compile" in text

    check = Check(sizes={"rows": 3, "cols": 5}, label="check[1]#0 run1", output="y", distribution="normal", passed=False,
                  max_abs_error=0.5, mismatches=4, first_mismatch=Mismatch(index=[0, 4], got=0.1, expected=0.6))
    wrong = _child(base, task, "c0002", Status.wrong, error="check[1]: output 'y' is wrong", checks=[check])
    req = _request(task, wrong, base, base)
    assert prompts.kind(req) == "repair_wrong"
    text = prompts.messages(req)[1]["content"]
    assert "first at index [0, 4]: got 0.1, expected 0.6" in text and "tails" in text


def test_compile_only_runs_say_nothing_is_timed(task, base):
    compiled = dataclasses.replace(base, result=_result(task, Status.compiled))
    req = ProposalRequest(task, [compiled], None, compiled, [], {"gpu": None, "arch": "sm_90"}, 1,
                          {"sandbox": "compile-only"})
    text = prompts.messages(req)[1]["content"]
    assert "compile-only run" in text and "never run, checked or timed" in text


def test_the_format_error_message_names_the_problem_and_what_to_send():
    text = prompts.format_error("the answer has no ```cuda code block.", "no_code")
    assert text.startswith("Your answer could not be used: the answer has no ```cuda code block.")
    assert "exactly one ```cuda block" in text
    assert "cut off" in prompts.format_error("cut off at 100 tokens", "truncated")


def test_an_undefined_template_variable_is_an_error():
    with pytest.raises(jinja2.UndefinedError):
        prompts.render("first")


def test_the_candidate_format_is_described_in_one_partial_only():
    folder = prompts.prompts_dir()
    holders = [p.name for p in folder.glob("*.j2") if "opens with `/*@kernelwright`" in p.read_text()]
    assert holders == ["_format.j2"]


def test_a_task_s_derived_sizes_constraints_scalar_output_and_own_tolerance_reach_the_model():
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples" / "tasks"
    for name, needles in (("maxpool2d", ["Derived sizes (usable in the plan's expressions like the symbols): "
                                         "OH = (H - 3) // 2 + 1; OW = (W - 3) // 2 + 1.", "Every size meets: H >= 3; W >= 3.",
                                         "shape [N, C, OH, OW]"]),
                          ("cross_entropy", ["`loss`: float32 (`float`), a scalar (one element)",
                                             "`loss` |got - expected| <= 1e-05 + 5e-05 * |expected|"])):
        t = load_task(examples / name)
        cand = load_candidate(t.baseline_path)
        entry = Entry("c0000", cand, _result(t, Status.ok), [], "baseline", 0, "the task's starting kernel")
        user = prompts.messages(_request(t, entry, entry, entry))[1]["content"]
        for needle in needles:
            assert needle in user, needle


def test_a_compiler_log_s_overload_notes_are_condensed_in_the_repair_prompt(task, base):
    notes = "\n".join(f'Note #3326-D: function "max({t}, {t})" does not match because argument #1 does not match parameter'
                      for t in ("int", "long", "float", "double", "unsigned int", "long long", "short", "char"))
    log = (f'candidate.cu(10): error: no instance of overloaded function "max" matches the argument list\n'
           f"            argument types are: (Q, double)\n{notes}\n\n1 error detected in the compilation.")
    broken = _child(base, task, "c0001", Status.compile_error, error="no instance of overloaded function", detail=log)
    text = prompts.messages(_request(task, broken, base, base))[1]["content"]
    assert 'function "max(float, float)"' in text and 'function "max(double, double)"' not in text
    assert "... [5 more notes like these]" in text and "1 error detected" in text
