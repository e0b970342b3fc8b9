"""TunerProposer end to end on the CPU: real NVRTC compiles (compile-only and fake sandboxes)."""

from __future__ import annotations

import dataclasses

import pytest

from sandbox.candidates.cubin import code_hash
from agent.protocols import Entry, Proposer, ProposalRequest
from agent.tune.proposer import TunerProposer, objective, tune
from agent.tune.space import FAST_MATH, TuningSpace, flag_groups
from sandbox import CompileOnlySandbox
from sandbox import FakeSandbox
from sandbox.candidates.candidate import load_candidate, parse_candidate
from sandbox.candidates.compiler import compile_source
from sandbox.candidates.plan import identity
from sandbox.judging.result import Status
from sandbox.tasks.task import Task, load_task

pytestmark = pytest.mark.timeout(240)

GUARDED = """/*@kernelwright
[knobs]
BLOCK = [256, 96, 2048, 512]

[[launch]]
kernel = "vector_add"
grid = "ceil_div(n, BLOCK)"
block = "BLOCK"
args = ["a", "b", "c", "n"]
@*/
static_assert(BLOCK % 64 == 0, "BLOCK must be a multiple of 64");
extern "C" __global__ void __launch_bounds__(BLOCK > 1024 ? 1024 : BLOCK)
vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.fixture(scope="module")
def compile_only():
    with CompileOnlySandbox() as sb:
        yield sb


def _start(task: Task, candidate=None, result=None) -> Entry:
    cand = candidate or dataclasses.replace(load_candidate(task.baseline_path), label="baseline")
    return Entry(id="e0", candidate=cand, result=result, parent_ids=[], origin="baseline", iteration=0)


def _drive(tuner: TunerProposer, sandbox, task: Task, start: Entry) -> list[Entry]:
    """The loop's part: propose, evaluate, observe, until the tuner has nothing more."""
    entries = []
    while proposals := tuner.propose(ProposalRequest(task, [start], None, start, [], sandbox.device, len(entries))):
        for p in proposals:
            e = Entry(id=f"e{len(entries) + 1}", candidate=p.candidate, result=sandbox.evaluate(task, p.candidate),
                      parent_ids=p.parent_ids, origin=p.origin, iteration=len(entries), note=p.note)
            entries.append(e)
            tuner.observe(e)
    return entries


def test_tuner_is_a_proposer():
    assert isinstance(TunerProposer(), Proposer)
    assert TunerProposer().name == "tuner"


def test_code_hash_ignores_compiler_provenance_but_not_code():
    cand = load_candidate(load_task("vector_add").baseline_path)
    builds = {flags: compile_source(cand.with_flags(flags))[1]
              for flags in [(), ("--ptxas-options=-O3",), ("--maxrregcount=64",), ("--ptxas-options=-O1",)]}
    assert len({bytes(b) for b in builds.values()}) == 4
    same = {code_hash(builds[f]) for f in [(), ("--ptxas-options=-O3",), ("--maxrregcount=64",)]}
    assert len(same) == 1
    assert code_hash(builds[("--ptxas-options=-O1",)]) not in same


def test_space_round_trips_and_keeps_flags_outside_the_catalogue():
    task = load_task("softmax")
    cand = load_candidate(task.baseline_path).with_knobs({"BLOCK": 512}).with_flags(
        ["-std=c++20", "--ptxas-options=-dlcm=cg", "--fmad=false"])
    tspace = TuningSpace(cand, flag_groups(task))
    assert tspace.space.names[0] == "BLOCK"
    variant = tspace.candidate_at(tspace.start)
    assert variant.knob_values == {"BLOCK": 512}
    assert set(variant.flags) == set(cand.flags)
    assert tspace.describe(tspace.start) == "BLOCK=512 --ptxas-options=-dlcm=cg --fmad=false"
    for point in [tspace.start, (0, 2, 3, 1, 0, 1)]:
        assert tspace.point_of(tspace.candidate_at(point)) == point
        assert "-std=c++20" in tspace.candidate_at(point).flags


def test_fast_math_is_searched_only_where_the_task_allows_it():
    task = load_task("softmax")
    assert FAST_MATH not in flag_groups(task)
    permissive = Task(task.spec.model_copy(update={"allow_fast_math": True}), task.folder)
    assert FAST_MATH in flag_groups(permissive)
    assert flag_groups(task, flags=False) == ()


def test_tuner_never_proposes_the_same_build_twice(compile_only):
    task = load_task("vector_add")
    tuner = TunerProposer(max_evaluations=6, sandbox=compile_only)
    start = _start(task, result=compile_only.compile(task, load_candidate(task.baseline_path)))
    entries = _drive(tuner, compile_only, task, start)
    assert 1 <= len(entries) <= 6
    keys = [identity(task, e.candidate, e.result.compile) for e in entries]
    start_key = identity(task, start.candidate, start.result.compile)
    assert None not in keys and len(set(keys)) == len(keys) and start_key not in keys
    summary = tuner.summaries()[0]
    assert summary["duplicates"] > 0 and summary["finished"]
    assert all(e.origin == "tuner" and e.parent_ids == ["e0"] and e.note.startswith("tuner (default)") for e in entries)
    assert tuner.propose(ProposalRequest(task, [start], None, start, [], {}, 99)) == []


def test_compile_and_plan_failures_are_kept_as_values_and_never_proposed(compile_only):
    task = load_task("vector_add")
    cand = parse_candidate(GUARDED, label="guarded")
    tuner = TunerProposer(strategy="exhaustive", flags=False, sandbox=compile_only)
    start = _start(task, cand, compile_only.compile(task, cand))
    entries = _drive(tuner, compile_only, task, start)
    assert [e.candidate.knob_values["BLOCK"] for e in entries] == [512]
    summary = tuner.summaries()[0]
    assert summary["failed_before_running"] == 2
    assert summary["compile_statuses"] == {"compiled": 2, "compile_error": 1, "launch_error": 1}
    assert len(tuner.compile_results) == 4


def test_tuning_with_the_fake_sandbox_returns_a_better_or_equal_configuration():
    task = load_task("softmax")
    with FakeSandbox() as sb:
        outcome = tune(sb, task, proposer=TunerProposer(max_evaluations=10, seed=1))
    assert outcome.start.origin == "baseline" and outcome.start.result.ok
    assert 2 <= len(outcome.entries) <= 11
    assert objective(outcome.best.result) <= objective(outcome.start.result)
    assert len({e.candidate.key for e in outcome.entries}) == len(outcome.entries)
    s = outcome.best.result.speedup("baseline")
    assert outcome.significant == (outcome.best is not outcome.start and s.low > 1.0)
    assert outcome.verdict().startswith("improved" if outcome.significant else "no significant gain")


def test_unobserved_proposals_count_as_failures_and_the_search_moves_on(compile_only):
    task = load_task("sgemm")
    tuner = TunerProposer(strategy="random", max_evaluations=3, flags=False, sandbox=compile_only)
    start = _start(task, result=compile_only.compile(task, load_candidate(task.baseline_path)))
    request = ProposalRequest(task, [start], None, start, [], {}, 1)
    first = tuner.propose(request)
    second = tuner.propose(request)
    assert first and second and first[0].candidate.key != second[0].candidate.key
    assert tuner.summaries()[0]["evaluations"] == 1


def test_no_parent_means_nothing_to_propose():
    task = load_task("vector_add")
    assert TunerProposer().propose(ProposalRequest(task, [], None, None, [], {}, 0)) == []


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown search strategy"):
        TunerProposer(strategy="genetic")
    with pytest.raises(ValueError, match="max_evaluations"):
        TunerProposer(max_evaluations=0)


def test_objective_is_infinite_for_anything_not_correct_and_timed(compile_only):
    task = load_task("vector_add")
    result = compile_only.compile(task, load_candidate(task.baseline_path))
    assert result.status is Status.compiled
    assert objective(result) == float("inf")
