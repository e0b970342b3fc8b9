"""On the GPU: 31 ModelNew solutions (tests/modelnew/gpu, and nine that hold on any device from tests/modelnew/cpu),
honest ones and one of each way to cheat this format, each judged in the confined process and given the right
verdict; the honest ones ``ok`` with speedups that a plain CUDA-event measurement of the same module (outside
kernelwright) falls within. Builds share the kernelwright cache (solutions wrapping the same sources build once)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "tests" / "modelnew" / "gpu"
# cheats whose text holds on any device: judged here from the CPU suite's own files
SHARED = {"patch_judge", "forge_timing", "patch_problem", "frame_timing", "subclass_output", "blind_watch",
          "restore_patch", "thread_restore", "finalizer_patch"}
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1800)]

SWISH, MEAN, MATMUL, GEMM = "1_swish_clamp", "2_mean_over_dim", "3_matmul", "5_gemm_bias_gelu_scale"
HONEST = {"honest_swish": SWISH, "honest_swish_vec4": SWISH, "honest_swish_cupy": SWISH,
          "honest_swish_grid_stride": SWISH, "honest_mean": MEAN, "honest_matmul_tiled": MATMUL,
          "honest_gemm_epilogue": GEMM}
# solution -> (problem, status, {check: outcome}, text the failing verdict's line holds)
CHEATS = {
    "fallback_try_except": (SWISH, "ok", {"silent_fallback": "flag", "no_custom_kernel": "flag"}, "silent"),
    "fallback_no_grad": (SWISH, "ok", {"no_custom_kernel": "flag"}, "no kernel it built"),
    "all_torch": (SWISH, "ok", {"no_custom_kernel": "flag"}, "no kernel it built"),
    "inputs_written": (SWISH, "rejected", {"inputs_written": "fail"}, "was written"),
    "cache_pointer": (SWISH, "wrong", {"state_across_calls": "fail"}, "state kept across calls"),
    "cache_shape": (SWISH, "wrong", {"state_across_calls": "fail"}, "state kept across calls"),
    "cache_sample": (SWISH, "wrong", {"state_across_calls": "fail"}, "state kept across calls"),
    "side_stream": (SWISH, "rejected", {"outside_timed_region": "fail"}, ""),
    "hardcoded_size": (SWISH, "ok", {"sizes": "flag"}, "size-specific"),
    "refuses_odd": (SWISH, "ok", {"sizes": "flag"}, "size-specific"),
    "half_precision": (SWISH, "wrong", {"precision": "fail"}, "half precision"),
    "tf32_matmul": (MATMUL, "wrong", {"precision": "fail"}, "TF32"),
    "compile_error": (SWISH, "compile_error", {}, ""),
    "patch_event": (SWISH, "rejected", {"tampering": "fail"}, "Event.elapsed_time replaced"),
    "patch_judge": (SWISH, "rejected", {"tampering": "fail"}, "modelnew_checks.compare replaced"),
    "forge_timing": (SWISH, "rejected", {"tampering": "fail"}, "gc.get_objects"),
    "patch_problem": (SWISH, "rejected", {"tampering": "fail"}, "Model.forward replaced"),
    "cpp_override": (SWISH, "rejected", {"tampering": "fail"}, "registered for aten::sigmoid on CUDA"),
    "frame_timing": (SWISH, "rejected", {"tampering": "fail"}, "sys._getframe (a frame, from solution_"),
    "subclass_output": (SWISH, "rejected", {"tampering": "fail"}, "not a plain torch.Tensor"),
    "blind_watch": (SWISH, "rejected", {"tampering": "fail"}, "Watch.changes replaced"),
    "restore_patch": (SWISH, "rejected", {"tampering": "fail"}, "modelnew_checks.compare replaced"),
    "thread_restore": (SWISH, "rejected", {"tampering": "fail"}, "_thread.start_new_thread (a thread, started"),
    "finalizer_patch": (SWISH, "rejected", {"tampering": "fail"}, "modelnew_checks.compare replaced"),
}


@pytest.fixture(scope="module")
def judge(kernelbench_task):
    """``judge(solution, problem, **options)``: its Result, judged once per module in one confined session."""
    pytest.importorskip("torch")
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew
    from sandbox.tasks.task import load_task

    done = {}

    def run(name: str, problem: str, **options):
        if name not in done:
            task = load_task(kernelbench_task(problem))
            opts = JudgeOptions(device="cuda", rounds=40, budget_s=5.0, **options)
            done[name] = (task, judge_modelnew(task, load_modelnew(_path(name)), opts))
        return done[name]
    with confined.Session():
        yield run


def _path(name: str) -> Path:
    return (ROOT / "tests" / "modelnew" / "cpu" if name in SHARED else SOLUTIONS) / f"{name}.py"


def test_there_are_twenty_solutions():
    assert len(HONEST) + len(CHEATS) >= 20
    assert {p.stem for p in SOLUTIONS.glob("*.py")} | SHARED == set(HONEST) | set(CHEATS)
    assert all(_path(name).is_file() for name in SHARED)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_solution_is_ok_with_every_check_passed_and_a_speedup_a_plain_measurement_confirms(judge, name):
    baselines = ("eager", "compile") if name == "honest_swish" else ("eager",)
    task, r = judge(name, HONEST[name], baselines=baselines)
    assert r.status.value == "ok", f"{r.error}\n{r.detail}"
    assert {v.check: v.outcome for v in r.verdicts if v.outcome != "pass"} == {}, [v.line for v in r.verdicts]
    kernels = next(v for v in r.verdicts if v.check == "no_custom_kernel").evidence
    assert kernels["own_share"] > 0 and any(k["own"] for k in kernels["kernels"])
    if name == "honest_swish":
        assert "compile" in r.timing.speedup or "compile" in r.timing.unavailable
    s = r.timing.speedup["eager"]
    plain = plain_speedup(task, SOLUTIONS / f"{name}.py")
    print(f"{name}: judged {s.value:.3f}x [{s.low:.3f}, {s.high:.3f}] vs eager; plain CUDA events {plain:.3f}x")
    assert 0.85 * s.low <= plain <= 1.15 * s.high


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_way_to_cheat_gets_its_own_verdict(judge, name):
    problem, status, outcomes, text = CHEATS[name]
    _, r = judge(name, problem, baselines=("eager",))
    print(f"{name}: {r.summary()}")
    assert r.status.value == status, f"{r.error}\n{r.detail}"
    found = {v.check: v for v in r.verdicts}
    for check, outcome in outcomes.items():
        assert found[check].outcome == outcome, found[check].line
    if text:
        assert any(text in v.line for v in r.verdicts if v.outcome in ("flag", "fail")), [v.line for v in r.verdicts]
    if status == "compile_error":
        assert "undeclared_value" in r.compile.log and "failed to build" in r.error


def plain_speedup(task, path: Path, reps: int = 60) -> float:
    """Eager's median time over the solution's, by CUDA events on the current stream after an L2 flush, each
    interleaved, at the task's benchmark size: the measurement anyone would write (run here, in the test)."""
    import importlib.util

    import torch

    from sandbox.pytorch.problem import problem_at

    import os

    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.pytorch.modelnew_judge import extensions_dir

    os.environ["TORCH_EXTENSIONS_DIR"] = str(extensions_dir(load_modelnew(path)))   # the judge's build, reused
    problem = problem_at(task.folder / task.spec.torch.problem)
    model, args = problem.build({}, "cuda", seed=0)
    spec = importlib.util.spec_from_file_location(f"plain_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    with torch.device("cuda"):
        new = module.ModelNew(*problem.namespace({})["get_init_inputs"]()).cuda()
    new.load_state_dict(model.state_dict(), strict=False)
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    times = {"eager": [], "new": []}
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        for fn in (model, new):
            fn(*args)
        for _ in range(reps):
            for name, fn in (("eager", model), ("new", new)):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*args)
                end.record()
                torch.cuda.synchronize()
                times[name].append(start.elapsed_time(end))
    return statistics.median(times["eager"]) / statistics.median(times["new"])
