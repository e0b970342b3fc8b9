"""FakeSandbox: real compiles, deterministic simulated runs that always say they are simulated."""

from __future__ import annotations

import dataclasses

import pytest

from sandbox import Sandbox
from sandbox.candidates.candidate import load_candidate
from sandbox.host.fake import FakeSandbox, annotations
from sandbox.judging.result import Status
from sandbox.tasks.task import load_task

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def fake():
    with FakeSandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def task():
    return load_task("vector_add")


def _with(cand, text):
    return dataclasses.replace(cand, source=cand.source + f"\n{text}\n")


def test_it_implements_the_sandbox_protocol_and_is_marked_simulated(fake, task):
    assert isinstance(fake, Sandbox) and fake.kind == "fake" and fake.device["simulated"] is True
    result = fake.evaluate(task, load_candidate(task.baseline_path))
    assert result.status is Status.ok and result.env.simulated is True
    assert result.env.ceilings.method.startswith("simulated")
    assert all(c.note == "simulated" for c in result.checks)
    assert result.timing.speedup["baseline"].value == pytest.approx(1.0, abs=0.02)


def test_the_same_build_gets_the_same_simulated_time(fake, task):
    cand = load_candidate(task.baseline_path).with_knobs({"BLOCK": 512})
    first, second = fake.evaluate(task, cand), fake.evaluate(task, cand)
    assert first.timing.impls["candidate"].samples_ms == second.timing.impls["candidate"].samples_ms
    other = fake.evaluate(task, cand.with_knobs({"BLOCK": 128}))
    assert other.timing.impls["candidate"].median_ms != first.timing.impls["candidate"].median_ms


def test_annotations_script_speedups_and_failures(fake, task):
    base = load_candidate(task.baseline_path)
    fast = fake.evaluate(task, _with(base, "// fake: speedup=1.3"))
    assert fast.status is Status.ok and fast.timing.speedup["baseline"].low > 1.2
    wrong = fake.evaluate(task, _with(base, "// fake: wrong"))
    assert wrong.status is Status.wrong and "simulated" in wrong.error and wrong.failed_checks()
    assert fake.evaluate(task, _with(base, "// fake: crashed")).status is Status.crashed
    beyond = fake.evaluate(task, _with(base, "// fake: speedup=20"))   # below the time to write c
    assert beyond.status is Status.rejected and "faster than the hardware allows" in beyond.error
    assert "below the time to write the outputs" in beyond.error
    assert annotations("x // fake: wrong, speedup=1.5\n") == {"wrong": "", "speedup": "1.5"}


def test_compile_errors_and_unlaunchable_plans_are_real(fake, task):
    base = load_candidate(task.baseline_path)
    broken = dataclasses.replace(base, source=base.source.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + q;"))
    result = fake.evaluate(task, broken)
    assert result.status is Status.compile_error and '"q" is undefined' in result.error
    too_big = base.with_knobs({"BLOCK": 2048})
    assert fake.evaluate(task, too_big).status is Status.launch_error


def test_simulated_screening_ranks_builds_as_the_simulated_evaluation_does_and_says_it_is_simulated(fake):
    task = load_task("softmax")
    base = load_candidate(task.baseline_path)
    cands = [base.with_knobs({"BLOCK": b}) for b in base.knobs["BLOCK"]]
    screened = fake.screen(task, cands)
    full = [fake.evaluate(task, c) for c in cands]
    assert all(s.ok and 6 <= s.rounds <= 15 and s.gpu_s > 0 for s in screened)
    by_screen = sorted(range(len(cands)), key=lambda i: screened[i].relative)
    by_full = sorted(range(len(cands)), key=lambda i: 1 / full[i].speedup("baseline").value)
    assert by_screen[0] == by_full[0]
    for s, r in zip(screened, full):
        assert s.relative == pytest.approx(1 / r.speedup("baseline").value, rel=0.03)
        lo, hi = s.relative_ci
        assert lo <= s.relative <= hi
    # a bar far below every candidate, by many times the noise, stops each of them after three rounds
    assert all(s.stopped == "slower" and s.rounds == 3 for s in fake.screen(task, cands, best=0.1))


def test_simulated_screening_fails_as_annotated_and_passes_a_kernel_wrong_only_at_a_check_size(fake, task):
    base = load_candidate(task.baseline_path)
    found = fake.screen(task, [_with(base, "// fake: wrong"), _with(base, "// fake: crashed"),
                               _with(base, "// fake: check_wrong")])
    assert [s.status for s in found] == ["wrong", "crashed", "ok"]
    full = fake.evaluate(task, _with(base, "// fake: check_wrong"))
    assert full.status is Status.wrong and full.error.startswith("check[0]")
    with pytest.raises(ValueError, match="rounds must be at least 5"):
        fake.screen(task, [base], rounds=3)


def test_a_time_below_the_naive_roofline_is_a_flag_and_a_stronger_check(fake, task):
    base = load_candidate(task.baseline_path)
    flagged = fake.evaluate(task, _with(base, "// fake: speedup=4"))   # half the naive floor, above the written one
    flag = flagged.timing.below_roofline
    assert flagged.status is Status.ok and flag is not None
    assert flag.median_ms < flag.floor_ms / flag.factor and flag.bytes == 12 * task.spec.sizes.benchmark["n"]
    assert {"heldout[0]", "heldout[2]", "check[0]", "benchmark"} <= set(flag.rechecked)
    assert "below the naive roofline" in flagged.summary()
    failing = fake.evaluate(task, _with(base, "// fake: speedup=4 heldout_wrong"))
    assert failing.status is Status.wrong and "the stronger check it triggered failed" in failing.error
    plain = fake.evaluate(task, _with(base, "// fake: speedup=1.3"))
    assert plain.status is Status.ok and plain.timing.below_roofline is None
