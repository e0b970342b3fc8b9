"""KernelBench's answer format (a ModelNew module) as a candidate: parsed on the host without running it, paired with
its problem, judged in the confined problem process on the CPU, and each of the format's ways to cheat named by its
own verdict (tests/modelnew/cpu holds one solution per verdict path)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from sandbox.pytorch.modelnew import ModelNewError, declared_kernels, parse_modelnew
from sandbox.pytorch.modelnew_pairs import PairingError, pair_folders, pair_lines, pairs_for

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "tests" / "modelnew" / "cpu"
pytestmark = pytest.mark.timeout(600)

HONEST = '''
import torch, torch.nn as nn
from torch.utils.cpp_extension import load_inline
cuda = r"""
__global__ void __launch_bounds__(256) swish_kernel(const float* x, float* y, int n) { }
template <int B> __global__ void tiled(float* y) { }
"""
ext = load_inline(name="swish", cpp_sources="", cuda_sources=cuda, functions=["swish"])
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.swish(x)
'''


def test_a_solution_is_parsed_without_running_it_and_names_the_kernels_it_declares():
    s = parse_modelnew(HONEST + "\nraise SystemExit('never run')\n", "honest.py")
    assert s.builders == ("load_inline",)
    assert s.kernels == ("swish_kernel", "tiled")
    assert len(s.key) == 16 and s.key != parse_modelnew(HONEST, "honest.py").key


def test_cupy_elementwise_kernels_count_as_the_solutions_own():
    src = 'k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x", "my_copy")\n'
    assert declared_kernels("", src) == ("my_copy",)


@pytest.mark.parametrize("text, says", [
    ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x\n", "no class ModelNew"),
    ("class ModelNew:\n    pass\n", "defines no forward"),
    ("class ModelNew(:\n", "cannot parse"),
])
def test_a_file_that_is_no_solution_is_one_error_naming_it(text, says):
    with pytest.raises(ModelNewError) as info:
        parse_modelnew(text, "bad.py")
    assert "bad.py" in str(info.value) and says in str(info.value)


def test_folders_pair_by_file_name_and_by_kernelbench_level_and_problem_id(tmp_path):
    probs, sols = tmp_path / "KernelBench", tmp_path / "runs"
    for rel in ("level1/19_ReLU.py", "level1/23_Softmax.py", "level2/19_Other.py", "level1/40_LayerNorm.py"):
        (probs / rel).parent.mkdir(parents=True, exist_ok=True)
        (probs / rel).write_text("")
    sols.mkdir()
    (sols / "level_1_problem_19_sample_0_kernel.py").write_text("")
    (sols / "level_2_problem_19_sample_0_kernel.py").write_text("")
    (sols / "23_Softmax.py").write_text("")
    pairs = {p.name: p for p in pair_folders(probs, sols)}
    assert pairs["level1_19_ReLU"].solution.name == "level_1_problem_19_sample_0_kernel.py"
    assert pairs["level2_19_Other"].solution.name == "level_2_problem_19_sample_0_kernel.py"
    assert pairs["level1_23_Softmax"].solution.name == "23_Softmax.py"
    assert pairs["level1_40_LayerNorm"].solution is None   # kept: every problem is in the denominator
    assert len(pairs) == 4


def test_a_jsonl_file_pairs_relative_to_itself_and_bad_lines_are_one_error(tmp_path):
    (tmp_path / "p.py").write_text("")
    (tmp_path / "s.py").write_text("")
    good = tmp_path / "pairs.jsonl"
    good.write_text(json.dumps({"problem": "p.py", "solution": "s.py"}) + "\n\n")
    [pair] = pair_lines(good)
    assert pair.problem == tmp_path / "p.py" and pair.solution == tmp_path / "s.py"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "p.py", "solution": "missing.py"}\n')
    with pytest.raises(PairingError, match="bad.jsonl:1: .*missing.py does not exist"):
        pair_lines(bad)
    with pytest.raises(PairingError, match="a single problem takes a single solution"):
        pairs_for(tmp_path / "p.py", tmp_path)


def test_a_saved_verdict_is_reused_only_for_the_same_problem_solution_and_options(tmp_path):
    from agent.cli.judge import pair_digest
    from sandbox.pytorch.modelnew_judge import JudgeOptions
    from sandbox.pytorch.modelnew_pairs import Pair

    problem, solution = tmp_path / "1_p.py", tmp_path / "1_s.py"
    problem.write_text("class Model: pass\n")
    solution.write_text((SOLUTIONS / "written.py").read_text())
    pair, options = Pair(problem, solution, "p"), JudgeOptions(device="cpu")
    first = pair_digest(pair, options)
    assert pair_digest(pair, options) == first
    solution.write_text((SOLUTIONS / "raises.py").read_text())    # the same file name, other code: judged again
    edited = pair_digest(pair, options)
    assert edited != first
    assert pair_digest(pair, JudgeOptions(device="cpu", rounds=options.rounds + 1)) != edited
    problem.write_text("class Model: pass  # edited\n")
    assert pair_digest(pair, options) != edited
    assert pair_digest(Pair(problem, None, "p"), options) != pair_digest(pair, options)


def test_fast_p_counts_every_problem_and_each_rule_counts_what_it_says():
    from agent.report.judge_table import Row, summarize

    rows = [Row("honest", "p", "s", "ok", speedup={"eager": [2.0, 1.6, 2.4]}, mean_speedup={"eager": 2.1},
                no_fallback=True, holds_up=True),
            Row("fallback", "p", "s", "ok", speedup={"eager": [1.3, 1.25, 1.35]}, mean_speedup={"eager": 1.3},
                flags=["no_custom_kernel: ..."], no_fallback=False, holds_up=False),
            Row("noisy", "p", "s", "ok", speedup={"eager": [1.3, 0.9, 1.7]}, mean_speedup={"eager": 1.3},
                no_fallback=True, holds_up=True),
            Row("wrong", "p", "s", "wrong"), Row("missing", "p", None, "no solution")]
    s = summarize(rows)
    fast = s.fast_p["eager"]
    assert fast["kernelbench"]["0.0"] == 3 / 5 and fast["kernelbench"]["1.2"] == 3 / 5
    assert fast["no_fallback"]["1.2"] == 2 / 5
    assert fast["ours"]["1.2"] == 1 / 5 and fast["ours"]["0.0"] == 2 / 5
    assert s.holds_up == 2 and s.problems == 5
    assert s.to_json()["fast_p"]["eager"]["ours"]["1.2"] == 1 / 5 and len(s.to_json()["rows"]) == 5


# ---- judged in the confined process, on the CPU ---------------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def task(kernelbench_task):
    from sandbox.tasks.task import load_task

    return load_task(kernelbench_task("1_swish_clamp"))


@pytest.fixture(scope="module")
def judged(task, tmp_path_factory):
    """Each solution's Result, judged once (a module's tests share them)."""
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew

    os.environ.setdefault("KERNELWRIGHT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    options = JudgeOptions(device="cpu", baselines=("eager",), benchmark={"rows": 257, "cols": 257}, heldout=False,
                           rounds=6, budget_s=1.0)
    done = {}

    def get(name: str):
        if name not in done:
            done[name] = judge_modelnew(task, load_modelnew(SOLUTIONS / f"{name}.py"), options)
        return done[name]
    with confined.Session():
        yield get


def _verdict(result, check):
    return next(v for v in result.verdicts if v.check == check)


def test_an_all_pytorch_solution_is_correct_and_flagged_for_no_custom_kernel(judged):
    r = judged("plain_torch")
    assert r.status.value == "ok", r.error
    assert _verdict(r, "no_custom_kernel").outcome == "flag"
    assert {"candidate", "eager"} <= set(r.timing.impls) and r.timing.primary == "eager"
    s = r.timing.speedup["eager"]
    assert s.low <= s.value <= s.high
    assert all(_verdict(r, c).outcome == "pass" for c in ("inputs_written", "state_across_calls", "precision", "sizes",
                                                          "tampering"))
    from sandbox.pytorch.modelnew_judge import holds_up, kernelbench_correct, no_fallback_correct
    assert kernelbench_correct(r) and not no_fallback_correct(r) and not holds_up(r)


def test_a_solution_that_writes_its_input_is_rejected_naming_the_input(judged):
    r = judged("written")
    assert r.status.value == "rejected"
    v = _verdict(r, "inputs_written")
    assert v.outcome == "fail" and "input 0 was written" in v.line and v.evidence["writes"][0]["bytes_changed"] > 0


@pytest.mark.parametrize("name, says", [("patch_reference", "torch.sigmoid replaced"),
                                         ("patch_clock", "time.perf_counter replaced"),
                                         ("aten_override", "registered for aten::sigmoid on CPU"),
                                         ("slow_eager", "torch.get_num_threads() set to 1"),
                                         ("patch_judge", "sandbox.pytorch.modelnew_checks.compare replaced"),
                                         ("code_swap", "object.__setattr__ of __code__ on "),
                                         ("shadow_method", "torch.Tensor.__sub__ replaced"),
                                         ("forge_timing", "it called gc.get_objects"),
                                         ("patch_problem", "Model.forward replaced"),
                                         ("patch_constant", "sandbox.tasks.inputs.WIDE_SCALE replaced"),
                                         ("function_mode", "torch function modes in force set to 1"),
                                         ("blind_watch", "sandbox.pytorch.modelnew_tamper.Watch.changes replaced"),
                                         ("restore_patch", "sandbox.pytorch.modelnew_checks.compare replaced"),
                                         ("finalizer_patch", "sandbox.pytorch.modelnew_checks.compare replaced"),
                                         ("frame_reference", "sys._getframe (a frame, from solution_"),
                                         ("frame_tolerance", "sys._getframe (a frame, from solution_"),
                                         ("frame_timing", "sys._getframe (a frame, from solution_"),
                                         ("frame_traceback", "object.__getattr__ (a frame, from solution_"),
                                         ("frame_library", "sys._getframe (a frame, from solution_"),
                                         ("forged_code", "compile of code named"),
                                         ("subclass_output", "not a plain torch.Tensor"),
                                         ("own_method", "carries attributes of its own (detach)")])
def test_a_solution_that_changes_the_pytorch_it_is_judged_by_is_rejected_naming_what(judged, name, says):
    # the reference, eager and the clock run in the solution's process: replacing any of them is caught wherever the
    # solution does it (its module, its first call), and nothing it measured or matched stands
    r = judged(name)
    assert r.status.value == "rejected", (r.status, r.error)
    v = _verdict(r, "tampering")
    assert v.outcome == "fail" and says in v.line and any(says in c for c in v.evidence["changes"]), v.line
    assert r.timing is None


@pytest.mark.parametrize("name", ["cache_pointer", "cache_shape", "cache_sample"])
def test_an_output_cached_across_calls_is_wrong_and_named_state_across_calls(judged, name):
    r = judged(name)
    assert r.status.value == "wrong"
    assert _verdict(r, "state_across_calls").outcome == "fail"
    assert "state kept across calls" in r.error


@pytest.mark.skipif(sys.version_info < (3, 12), reason="a thread's start is an audit event from Python 3.12 on")
def test_a_thread_the_solution_starts_is_refused_and_rejects_it(judged):
    # the thread would put a compare that answers "passed" in place for a moment after each call and then the
    # original back, between two of the judge's looks
    r = judged("thread_restore")
    assert r.status.value == "rejected", (r.status, r.error)
    v = _verdict(r, "tampering")
    assert v.outcome == "fail" and "_thread.start_new_thread (a thread, started while solution_" in v.line, v.line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_forward_compiled_by_torch_compile_stays_ok(judged):
    # dynamo reads frames, makes code objects under the solution's own file name and marks the tensors it returns
    # (``_dynamo_*``): all of it PyTorch's, none of it refused or counted as a change
    r = judged("compiled_forward")
    assert r.status.value == "ok", (r.status, r.error)
    assert _verdict(r, "tampering").outcome == "pass"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_timing_against_torch_compile_changes_nothing_the_watch_guards(task, tmp_path):
    # torch.compile's first run (the compile baseline, after the solution's first calls) installs nothing that the
    # watch's quick guard, run before every timed call, takes for the solution's change
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew

    options = JudgeOptions(device="cpu", baselines=("eager", "compile"), benchmark={"rows": 257, "cols": 257},
                           heldout=False, rounds=6, budget_s=1.0)
    with confined.Session():
        r = judge_modelnew(task, load_modelnew(SOLUTIONS / "plain_torch.py"), options)
    assert r.status.value == "ok", (r.status, r.error)
    assert _verdict(r, "tampering").outcome == "pass"
    assert "compile" in r.timing.speedup or "compile" in r.timing.unavailable


@pytest.mark.parametrize("name", ["library_frames", "custom_op"])
def test_code_that_reads_frames_only_inside_the_library_stays_ok(judged, name):
    # a namedtuple, a dataclass, typing, an enum, a logged warning and a formatted traceback all read frames inside
    # the standard library, and torch.library.custom_op reads its caller's for the op's source line, on their own
    # behalf: none is refused, and the solution is judged as any other
    r = judged(name)
    assert r.status.value == "ok", (r.status, r.error)
    assert _verdict(r, "tampering").outcome == "pass"


def test_half_precision_for_a_float32_task_is_wrong_and_the_verdict_says_half_precision(judged):
    r = judged("half")
    assert r.status.value == "wrong"
    assert "half precision" in _verdict(r, "precision").line


def test_a_solution_that_refuses_sizes_is_size_specific_and_says_where_it_holds(judged):
    r = judged("one_size")
    assert r.status.value == "ok"
    v = _verdict(r, "sizes")
    assert v.outcome == "flag" and v.evidence["holds_at"] == ["check[2]", "benchmark"]
    assert set(v.evidence["refused_at"]) == {"check[0]", "check[1]"} and "AssertionError" in v.line


def test_a_solution_that_raises_everywhere_is_crashed_with_its_error(judged):
    r = judged("raises")
    assert r.status.value == "crashed" and "RuntimeError" in r.error


def test_a_solution_runs_confined_without_keys_network_or_home_and_its_printing_is_kept_as_data(judged, monkeypatch):
    r = judged("hostile")
    assert r.status.value == "ok", r.error
    printed = r.detail
    assert "key:KeyError" in printed and "net:" in printed and "ssh:" in printed
    assert "\x1b" in printed   # kept verbatim as data; terminals show it escaped (SafeConsole)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_failed_build_caught_by_the_solution_is_a_silent_fallback(judged):
    r = judged("silent_fallback")
    assert r.status.value == "ok"
    v = _verdict(r, "silent_fallback")
    assert v.outcome == "flag" and "swish_broken" in v.line and "error" in v.line
    assert _verdict(r, "no_custom_kernel").outcome == "flag"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_kernel_registered_over_an_aten_operator_from_an_extensions_cpp_is_tampering(judged):
    # no Python object changes: the operator's dispatch table does
    r = judged("cpp_override")
    assert r.status.value == "rejected", (r.status, r.error)
    v = _verdict(r, "tampering")
    assert v.outcome == "fail" and "registered for aten::sigmoid on CPU (its dispatch table)" in v.line, v.line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_build_that_fails_is_a_compile_error_with_the_compilers_log(judged):
    r = judged("compile_error")
    assert r.status.value == "compile_error"
    assert "failed to build" in r.error and "error" in r.compile.log


def test_judge_cli_judges_a_pair_and_resumes(task, tmp_path, kw):
    out = tmp_path / "out"
    args = ["judge", str(task.folder), str(SOLUTIONS / "written.py"), "--device", "cpu", "--out", str(out)]
    first = kw(*args)
    assert first.returncode == 1, first.stderr
    assert "(resumed)" not in first.stdout and "[1/1] written: rejected" in first.stdout
    assert "(resumed)" in kw(*args, "--html", tmp_path / "t.html").stdout
    page = (tmp_path / "t.html").read_text()
    assert "<td>written</td><td>rejected</td>" in page and "input 0 was written" in page
    again = kw(*args, "--json")
    summary = json.loads(again.stdout)
    assert summary["problems"] == 1 and summary["rows"][0]["status"] == "rejected"
    assert summary["rows"][0]["flags"][0].startswith("inputs_written: ")
    bad = kw("judge", str(tmp_path / "nothing.jsonl"))
    assert bad.returncode == 2 and "cannot read" in bad.stderr


def test_tf32_arithmetic_for_a_float32_matmul_is_wrong_and_named_tf32(kernelbench_task):
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew
    from sandbox.tasks.task import load_task

    task = load_task(kernelbench_task("3_matmul"))
    options = JudgeOptions(device="cpu", baselines=("eager",), benchmark=dict(task.spec.sizes.check[-1]), heldout=False,
                           rounds=3, budget_s=1.0)
    with confined.Session():
        r = judge_modelnew(task, load_modelnew(SOLUTIONS / "tf32_matmul.py"), options)
    assert r.status.value == "wrong"
    assert "TF32 (inputs rounded to nearest)" in _verdict(r, "precision").line


def test_kernel_names_from_the_profiler_are_matched_to_the_solutions_own_kernels():
    from sandbox.pytorch.modelnew_timing import is_own

    own = ("swish_clamp_kernel", "matmul_tiled", "swish_clamp_raw")
    assert is_own("swish_clamp_kernel(float const*, float*, long, float, float)", own)
    assert is_own("void matmul_tiled<16>(float const*, float const*, float*, int, int, int)", own)
    assert is_own("swish_clamp_raw", own)
    assert not is_own("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
                      "sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}>(int, float*)", own)
    assert not is_own("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", own)


def test_work_left_on_another_stream_is_rejected_from_the_timing_evidence():
    """On a device, the wall time to a device-wide synchronisation against the timed events (a reply as the
    confined judgement sends it: here the host's reading of it)."""
    from sandbox.pytorch.modelnew_timing import escaped_gap

    timed = {"samples_ms": {"candidate": [0.01] * 9, "eager": [0.50] * 9},
             "wall_ms": {"candidate": [0.93] * 9, "eager": [0.53] * 9}}
    gap = escaped_gap(timed)
    assert gap is not None and gap["gap_ms"] > 0.9 and abs(gap["eager_gap_ms"] - 0.03) < 1e-9
    honest = {"samples_ms": {"candidate": [0.20] * 9, "eager": [0.50] * 9},
              "wall_ms": {"candidate": [0.235] * 9, "eager": [0.53] * 9}}
    assert escaped_gap(honest) is None


def test_a_reply_with_escaped_outputs_becomes_a_rejected_result_with_that_verdict(task):
    from sandbox.pytorch.modelnew import parse_modelnew
    from sandbox.pytorch.modelnew_judge import from_reply

    reply = {"status": "rejected", "device": "cuda", "builds": [], "swallowed": [], "checks": [], "calls": 3,
             "holds_at": ["check[0]"], "refused_at": {}, "inputs_written": [], "precision": "",
             "escaped": [{"label": "benchmark#0", "output": 0, "note": "the output changed after forward returned"}],
             "error": "benchmark#0: the output changed after forward returned",
             "failed_verdict": "outside_timed_region",
             "split_s": {"build": 1.0, "checks": 2.0}}
    r = from_reply(task, parse_modelnew("class ModelNew:\n    def forward(self, x): return x\n"), reply)
    assert r.status.value == "rejected" and r.cost.check_gpu_s == 2.0
    v = next(v for v in r.verdicts if v.check == "outside_timed_region")
    assert v.outcome == "fail" and v.evidence["outputs"][0]["label"] == "benchmark#0"
    assert "fail: benchmark#0: the output changed" in r.summary()


@pytest.fixture(scope="module")
def norm_judged(tmp_path_factory):
    """Solutions of a layer norm, whose weight 1 and bias 0 the task draws in some trials."""
    from sandbox.pytorch import confined
    from sandbox.pytorch.importer import import_problem
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew
    from sandbox.tasks.task import load_task

    os.environ.setdefault("KERNELWRIGHT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    problem = ROOT / "tests" / "fixtures" / "kernelbench" / "fair" / "40_layer_norm.py"
    task = load_task(import_problem(problem, tmp_path_factory.mktemp("norm")).folder)
    options = JudgeOptions(device="cpu", baselines=("eager",), heldout=False, rounds=6, budget_s=1.0)
    with confined.Session():
        yield lambda name: judge_modelnew(task, load_modelnew(SOLUTIONS / "norm" / f"{name}.py"), options)


@pytest.mark.parametrize("name", ["honest", "renamed"])
def test_a_solution_is_given_the_parameters_a_trial_draws_and_an_honest_one_is_right_with_them(norm_judged, name):
    r = norm_judged(name)
    assert r.status.value == "ok", r.error
    v = _verdict(r, "parameters")
    assert v.outcome == "pass" and "ln_weight" in v.line and "ln_bias" in v.line, v.line
    assert any("ln_weight: drawn" in c.distribution for c in r.checks)


def test_a_one_pass_variance_is_wrong_where_the_values_centre_far_from_zero_and_an_honest_sequential_sum_is_not(
        norm_judged):
    # the import gives a normalization an input variant centred far from zero against its spread (64 to 1), where
    # E[x^2] - E[x]^2 in float32 cancels; a wrong answer there is never put down to parameters drawn beside it
    r = norm_judged("one_pass")
    assert r.status.value == "wrong", (r.status, r.error)
    assert "x: offset" in r.error and "drawn" not in r.error.split("):")[0]
    honest = norm_judged("sequential")
    assert honest.status.value == "ok", honest.error
    assert any("x: offset" in c.distribution and c.passed for c in honest.checks)


def test_a_solution_that_ignores_its_parameters_is_flagged_where_a_trial_draws_them(norm_judged):
    # right with the module's own values, as KernelBench checks it; wrong once they are drawn: a flag with the evidence
    # (a solution that folds its parameters into other state when it is built is wrong there too, and not a cheat)
    r = norm_judged("hardcoded")
    assert r.status.value == "ok", r.error
    v = _verdict(r, "parameters")
    assert v.outcome == "flag" and "right only with the module's own parameter values" in v.line, v.line
    assert ": drawn" in v.line and v.evidence["wrong"]
    from sandbox.pytorch.modelnew_judge import holds_up, kernelbench_correct
    assert kernelbench_correct(r) and not holds_up(r)


@pytest.mark.parametrize("name", ["paramless", "ambiguous"])
def test_a_solution_without_parameters_beyond_doubt_is_flagged_naming_them_and_never_made_wrong(norm_judged, name):
    r = norm_judged(name)
    assert r.status.value == "ok", r.error
    v = _verdict(r, "parameters")
    assert v.outcome == "flag" and "ln_weight" in v.line and v.evidence["undrawn"] == ["ln_weight", "ln_bias"]
    from sandbox.pytorch.modelnew_judge import holds_up
    assert not holds_up(r)


def test_torch_compile_runs_as_a_baseline_in_the_confined_process_and_is_no_tampering(task, tmp_path):
    # torch.compile starts its compiler's steps through sys.executable (a virtual environment's bin/python), and
    # installs its own wrappers on first use: neither may make the baseline unavailable or look like tampering
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew

    options = JudgeOptions(device="cpu", baselines=("eager", "compile"), benchmark={"rows": 257, "cols": 257},
                           heldout=False, rounds=6, budget_s=1.0)
    with confined.Session():
        r = judge_modelnew(task, load_modelnew(SOLUTIONS / "plain_torch.py"), options)
    assert r.status.value == "ok", r.error
    assert "compile" in r.timing.impls, r.timing.unavailable
    assert _verdict(r, "tampering").outcome == "pass"
