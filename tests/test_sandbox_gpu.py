"""The real sandbox on a real device: baselines pass, every cheat gets its status, crashes are contained."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

pytestmark = pytest.mark.gpu
CHEATS = Path(__file__).parent / "cheats"


@pytest.fixture(scope="module")
def sandbox():
    config = SandboxConfig(check_timeout_s=45, time_timeout_s=180, timing_budget_s=0.05, max_rounds=30)
    with GPUSandbox(config) as sb:
        yield sb


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task_name", ["vector_add", "softmax", "sgemm"])
def test_baseline_is_ok_with_an_interval_around_one(sandbox, task_name):
    task = load_task(task_name)
    result = sandbox.evaluate(task, load_candidate(task.baseline_path))
    assert result.status is Status.ok, result.summary() + "\n" + result.detail
    s = result.timing.speedup["baseline"]
    assert s.low <= s.value <= s.high
    assert 0.85 < s.value < 1.15, "the baseline timed against itself should be about 1x"
    assert result.timing.rounds >= 10
    assert all(c.passed for c in result.checks)
    labels = {c.label.split()[0].split("#")[0] for c in result.checks}
    assert "benchmark" in labels and any(lbl.startswith("check[") for lbl in labels)
    timed_launches = {c.label for c in result.checks if c.label.startswith("timing launch")}
    kinds = {"warm-up" if "(warm-up)" in lbl else "timed" if "(timed round" in lbl else "untimed" for lbl in timed_launches}
    assert len(timed_launches) == 3 and kinds == {"warm-up", "timed", "untimed"}, \
        "one launch of each kind in the timing stage is compared in full too"
    assert result.timing.candidate_launches >= 64 and result.timing.rounds <= result.timing.round_cap
    # a deterministic kernel repeats its output on one input set (the warm-up's, the untimed launches'); a timed
    # launch's output is compared in full every time
    timing = result.timing
    assert 0 < timing.repeated_launches <= timing.candidate_launches - timing.rounds - 1
    assert 0 < result.timing.impls["baseline"].pct_of_roofline < 150


@pytest.mark.timeout(600)
def test_a_baseline_and_vendor_timed_just_before_get_the_minimum_warm_up_and_the_speedup_holds(sandbox):
    from sandbox.worker.timing import WARM_UP_MIN

    task = load_task("vector_add")
    cand = load_candidate(task.baseline_path)
    first, second = sandbox.evaluate(task, cand), sandbox.evaluate(task, cand)
    for result in (first, second):
        assert result.status is Status.ok, result.summary() + "\n" + result.detail
        assert 0.85 < result.timing.speedup["baseline"].value < 1.15
    warm = second.timing.warm_up_launches
    assert warm["baseline"] == warm["vendor"] == WARM_UP_MIN, warm   # timed by the worker moments before
    # the candidate's warm-up is whole: 20 ms of a sub-2 ms kernel is more than the minimum
    assert warm["candidate"] > WARM_UP_MIN and first.timing.warm_up_launches["candidate"] > WARM_UP_MIN


CHEAT_STATUS = {
    "stale_output.cu": (Status.wrong, "NaN"),
    "partial_write.cu": (Status.wrong, "mismatch"),
    "out_of_bounds.cu": (Status.rejected, "guard band above output 'c'"),
    "input_mutation.cu": (Status.rejected, "input 'a' was modified"),
    "benchmark_shortcut.cu": (Status.wrong, "benchmark"),
    "warmup_counter.cu": (Status.wrong, "timing stage"),
    "cache_across_calls.cu": (Status.wrong, "wrong"),
    "race.cu": (Status.wrong, "wrong"),
    "hang.cu": (Status.timeout, "limit"),
    "illegal_address.cu": (Status.crashed, "illegal"),
    "trap.cu": (Status.crashed, ""),
    "nan_output.cu": (Status.wrong, "NaN"),
    "constant_output.cu": (Status.wrong, "mismatch"),
    "bad_launch.cu": (Status.launch_error, ""),
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(CHEAT_STATUS))
def test_cheating_kernel_gets_its_status(sandbox, name):
    task = load_task("vector_add")
    expected, text = CHEAT_STATUS[name]
    result = sandbox.evaluate(task, load_candidate(CHEATS / name))
    assert result.status is expected, result.summary() + "\n" + result.detail[-2000:]
    assert text.lower() in (result.error + result.detail).lower()


# Each class of hole closed for the evaluator, with its own kernel: (file, task, sizes or None for the
# benchmark size, status, text of the error).
CLASS_CHEATS = {
    # no launch unobserved: honest in correctness, then wrong in some launches of the timing stage
    "launch_counter_noisy.cu": ("vector_add", None, Status.wrong, "timing stage"),
    "hgemm_zero_late.cu": ("hgemm", None, Status.wrong, "timing stage"),
    "sgemm_half_late.cu": ("sgemm", None, Status.wrong, "timing stage"),
    # a flushed L2 gives the timed launches away (inputs fit the L2 at this size)
    "flush_detector.cu": ("vector_add", {"n": 1 << 20}, Status.wrong, "output 'c' is wrong"),
    # inputs that stress the math
    "softmax_no_max.cu": ("softmax", None, Status.wrong, "x: large"),
    "layernorm_one_pass.cu": ("layernorm", None, Status.wrong, "x: "),   # large or rows, whichever comes first
    "softmax_fast_exp.cu": ("softmax", None, Status.rejected, "__expf is a fast-math intrinsic"),
    # a one-element row whose |x| is below ~0.3 exposes it too (test_inputs_rotation.py shows "small" does at scale)
    "rmsnorm_eps_outside.cu": ("rmsnorm", None, Status.wrong, "is wrong"),
    # approximate math the source rule does not spell out: judged by the compiled code
    "gelu_tanh_split_asm.cu": ("gelu", None, Status.rejected, "compiles to tanh.approx.f32"),
    "rmsnorm_commented_rsqrt.cu": ("rmsnorm", None, Status.rejected, "compiles to rsqrt.approx.ftz.f32"),
    "softmax_pasted_builtin.cu": ("softmax", None, Status.rejected, "compiles to ex2.approx.ftz.f32"),
    # a write into another rotating set's input, never into the launch's own buffers
    "vector_add_other_set_input.cu": ("vector_add", None, Status.rejected, "of rotating set 0 was overwritten"),
    # one ulp (under twice the tolerance) in the timed rounds only: the timed round drawn for the reference catches it
    "vector_add_ulp_in_rounds.cu": ("vector_add", None, Status.wrong, "(timed round"),
}
HONEST = {"honest_overread.cu": "vector_add",
          "honest_atomic_rowsum.cu": "row_sum", "honest_persistent.cu": "softmax",
          "honest_scratch_two_pass.cu": "layernorm",
          # cuda_fp16.h's approximate steps, in a task that forbids fast math but admits a float16 rounding
          "honest_half_sigmoid.cu": str(Path(__file__).parent / "fixtures" / "tasks" / "half_sigmoid")}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(CLASS_CHEATS))
def test_each_class_of_cheat_gets_its_status(sandbox, name):
    task_name, sizes, expected, text = CLASS_CHEATS[name]
    result = sandbox.evaluate(load_task(task_name), load_candidate(CHEATS / name), sizes=sizes)
    assert result.status is expected, result.summary() + "\n" + result.detail[-2000:]
    assert text.lower() in result.error.lower(), result.error


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_kernels_are_ok(sandbox, name):
    result = sandbox.evaluate(load_task(HONEST[name]), load_candidate(CHEATS / name))
    assert result.status is Status.ok, result.summary() + "\n" + result.error + "\n" + result.detail[-2000:]
    assert result.timing.candidate_launches >= 64


SCREEN_STATUS = {n: s for n, (s, _) in CHEAT_STATUS.items()
                 if n not in ("warmup_counter.cu", "partial_write.cu", "hang.cu")}


# Screening runs each candidate at most 13 times here, too few for a counter that turns at 40 launches, and at the
# benchmark size alone, where partial_write's skipped tail is empty (n is a multiple of 256): the full evaluation
# that confirms a screened winner catches both. A hang is screened alone below.
@pytest.mark.timeout(600)
def test_screen_gives_each_cheat_its_status_and_times_honest_kernels(sandbox):
    task = load_task("vector_add")
    names = sorted(SCREEN_STATUS)
    cands = [load_candidate(task.baseline_path), load_candidate(CHEATS / "honest_vectorized.cu")]
    cands += [load_candidate(CHEATS / n) for n in names]
    found = sandbox.screen(task, cands, rounds=10, batch=8)
    base, honest = found[:2]
    assert base.ok, base.error
    assert base.relative_ci[0] <= base.relative <= base.relative_ci[1]
    assert 0.9 < base.relative < 1.1, "the baseline screened against itself should be about 1x"
    assert honest.ok and 0.5 < honest.relative < 1.2, honest
    assert 6 <= len(honest.samples) == honest.rounds <= 10 and honest.gpu_s > 0   # fewer once its ratio is settled
    got = {n: s.status for n, s in zip(names, found[2:])}
    assert got == {n: s.value for n, s in SCREEN_STATUS.items()}, [(n, s.error) for n, s in zip(names, found[2:])]


@pytest.mark.timeout(300)
def test_screen_times_out_a_hanging_kernel_and_goes_on(sandbox):
    task = load_task("vector_add")
    cands = [load_candidate(CHEATS / "hang.cu"), load_candidate(task.baseline_path)]
    found = sandbox.screen(task, cands, rounds=5, batch=2, timeout_s=5)
    assert found[0].status == "timeout", found[0]
    assert found[1].ok, found[1].error


@pytest.mark.timeout(600)
def test_next_candidate_after_a_crash_evaluates_normally(sandbox):
    task = load_task("vector_add")
    crashed = sandbox.evaluate(task, load_candidate(CHEATS / "illegal_address.cu"))
    assert crashed.status is Status.crashed
    honest = sandbox.evaluate(task, load_candidate(CHEATS / "honest_vectorized.cu"))
    assert honest.status is Status.ok, honest.summary()
    assert honest.timing.speedup["baseline"].value > 0.8


@pytest.mark.timeout(300)
def test_result_carries_the_environment_fingerprint(sandbox):
    task = load_task("vector_add")
    result = sandbox.evaluate(task, load_candidate(task.baseline_path), sizes={"n": 1 << 20})
    assert result.status is Status.ok, result.summary()
    env = result.env
    for key in ("gpu", "sms", "arch", "driver", "cuda_runtime", "nvrtc", "cupy", "clocks_start", "clocks_end", "ceilings"):
        assert getattr(env, key), key
    assert (env.clocks_start.sm_clock_mhz or 0) > 0
    timed = env.clocks_timed.sm_clock_mhz   # read after every timed launch: what the rounds ran at
    assert timed.samples == result.timing.rounds * len(result.timing.impls)
    assert env.sm_clock_mhz == timed.median and timed.min <= timed.median <= timed.max
    assert result.timing.sizes == {"n": 1 << 20}


@pytest.mark.timeout(300)
def test_measured_ceilings_are_physically_plausible(sandbox):
    c = sandbox.ceilings
    assert 0.5e12 < c.copy_bytes_per_s < 10e12
    assert 0.5e12 < c.read_bytes_per_s < 10e12
    assert 5e12 < c.fp32_flops < 100e12
    assert c.fp16_tensor_flops > 2 * c.fp32_flops
