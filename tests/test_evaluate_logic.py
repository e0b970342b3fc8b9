"""Orchestrator rules that need no GPU: the roofline floor, first compile error line, trials per size."""

from sandbox.host.builder import _first_error
from sandbox.host.ceilings import roofline_ms
from sandbox.host.ceilings import roofline_ms
from sandbox.judging.environment import Ceilings
from sandbox.tasks.task import Tolerance, load_task


def test_roofline_floor_uses_the_binding_ceiling():
    ceilings = Ceilings(copy_bytes_per_s=4e12, fp32_flops=50e12, fp16_tensor_flops=800e12)
    va = load_task("vector_add")
    ms, bound = roofline_ms(va, {"n": 1 << 28}, ceilings)
    assert bound == "memory" and abs(ms - 12 * (1 << 28) / 4e12 * 1e3) < 1e-9
    sg = load_task("sgemm")
    ms, bound = roofline_ms(sg, {"M": 4096, "N": 4096, "K": 4096}, ceilings)
    assert bound == "compute" and abs(ms - 2 * 4096**3 / 50e12 * 1e3) < 1e-9
    assert roofline_ms(va, {"n": 4}, Ceilings()) == (None, None)


def test_memory_floor_uses_the_higher_of_the_copy_and_the_read_only_rate():
    va = load_task("vector_add")
    copy_only = dict(copy_bytes_per_s=4e12, fp32_flops=50e12)
    ms_copy, _ = roofline_ms(va, {"n": 1 << 28}, Ceilings(**copy_only))
    ms_read, bound = roofline_ms(va, {"n": 1 << 28}, Ceilings(**copy_only, read_bytes_per_s=5e12))
    assert bound == "memory" and ms_read == ms_copy * 4 / 5
    assert roofline_ms(va, {"n": 1 << 28}, Ceilings(**copy_only, read_bytes_per_s=3e12))[0] == ms_copy


def test_first_error_line_of_a_compiler_log():
    log = "candidate.cu(3): warning: unused\ncandidate.cu(9): error: expected a ';'\n1 error detected"
    assert _first_error(log) == "candidate.cu(9): error: expected a ';'"


def test_every_check_size_comes_first_then_the_timed_size_under_its_label():
    from sandbox.host.compile_only import labelled_sizes as _labelled_sizes

    sm = load_task("softmax")
    labels = _labelled_sizes(sm, sm.spec.sizes.benchmark)
    assert [s for _, s in labels[:-1]] == sm.spec.sizes.check
    assert labels[0][0] == "check[0]" and labels[-1] == ("benchmark", sm.spec.sizes.benchmark)
    assert _labelled_sizes(sm, {"rows": 5, "cols": 9})[-1] == ("size", {"rows": 5, "cols": 9})


def test_a_candidate_that_is_the_baseline_takes_over_the_baselines_correctness_stage(tmp_path):
    """The baseline is checked once per sandbox; evaluating the same machine code with the same plans (the
    suite's baseline test, an optimize run's first entry) does not check it again, and is charged its cost once;
    any other build (another knob value) runs its own correctness stage."""
    import dataclasses

    from sandbox import SandboxConfig, Status, load_candidate
    from sandbox.host.compile_only import CompileOnlySandbox
    from sandbox.host.gpu import GPUSandbox
    from sandbox.host.pool import WorkerProcess
    from sandbox.judging.result import Check, Cost

    task = load_task("vector_add")
    sb = object.__new__(GPUSandbox)  # the orchestrator alone: no GPU worker, the correctness stage stubbed
    CompileOnlySandbox.__init__(sb, SandboxConfig())
    sb._baselines, sb._baseline_checks, sb.data_dir = {}, {}, tmp_path
    sb._gpu = WorkerProcess("gpu", root=tmp_path)   # never started: the baseline's code is only trusted by it
    ran = []

    def correctness(task_, cubin, labelled, plans, cost: Cost):
        ran.append([label for label, _ in labelled])
        cost.check_gpu_s += 0.5
        cost.reference_s += 0.25
        return Status.ok, [Check(sizes=s, label=label, output="c", distribution="uniform", passed=True,
                                 max_abs_error=0.0, mismatches=0) for label, s in labelled], "", ""

    sb._correctness = correctness
    try:
        base = load_candidate(task.baseline_path)
        first = sb.evaluate(task, dataclasses.replace(base, label="c0000"), timing=False)
        again = sb.evaluate(task, base, timing=False)
        other = sb.evaluate(task, base.with_knobs({"BLOCK": base.knobs["BLOCK"][1]}), timing=False)
    finally:
        CompileOnlySandbox.close(sb)
    assert len(ran) == 2                                  # the baseline's own stage, then the other knob value
    assert first.status is Status.ok and again.status is Status.ok and other.status is Status.ok
    assert [c.label for c in first.checks] == ran[0] and all("as the task's baseline" in c.note for c in first.checks)
    assert (first.cost.check_gpu_s, first.cost.reference_s) == (0.5, 0.25)   # charged once, to the first
    assert (again.cost.check_gpu_s, again.cost.reference_s) == (0.0, 0.0)
    assert other.cost.check_gpu_s == 0.5 and not any("baseline" in c.note for c in other.checks)
