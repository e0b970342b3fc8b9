"""The builder's pool of compile workers: compiles ahead of use, shared compiles, knobs the source never reads."""

from __future__ import annotations

import dataclasses

import pytest

from sandbox import CompileOnlySandbox, SandboxConfig, Status, load_candidate, load_task, parse_candidate
from sandbox.host.builder import compile_request, unread_knobs

pytestmark = pytest.mark.timeout(300)

TEMPLATED = """/*@kernelwright
[knobs]
BLOCK = [128, 256]
UNUSED = [1, 2, 3]

[[launch]]
kernel = "add<BLOCK>"
grid = "ceil_div(n, BLOCK * UNUSED)"
block = "BLOCK"
args = ["a", "b", "c", "n"]
@*/
template <int B>
__global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def test_a_knob_is_unread_only_where_neither_the_source_nor_a_kernel_name_names_it():
    cand = parse_candidate(TEMPLATED)
    assert unread_knobs(cand) == {"UNUSED"}          # BLOCK is read through the template-id add<BLOCK>
    assert unread_knobs(load_candidate(load_task("vector_add").baseline_path)) == {"BLOCK"}
    assert unread_knobs(load_candidate(load_task("softmax").baseline_path)) == set()
    pasted = dataclasses.replace(cand, source=cand.source + "\n#define CAT(a, b) a##b\n")
    assert unread_knobs(pasted) == set()              # ## may build any name: every knob counts as read
    in_comment = dataclasses.replace(cand, source=cand.source + "\n// UNUSED is only named here\n")
    assert unread_knobs(in_comment) == set()          # conservative: a name anywhere counts


def test_configurations_that_differ_in_an_unread_knob_share_one_compile_but_not_their_plans():
    task = load_task("vector_add")
    base = load_candidate(task.baseline_path)
    a, b = base.with_knobs({"BLOCK": 128}), base.with_knobs({"BLOCK": 512})
    assert compile_request(a, "sm_90") == compile_request(b, "sm_90")
    with CompileOnlySandbox() as sb:
        first, second = sb.compile(task, a), sb.compile(task, b)
        assert first.status is second.status is Status.compiled
        assert first.compile.code_hash == second.compile.code_hash and second.compile.cached
        assert first.knobs == {"BLOCK": 128} and second.knobs == {"BLOCK": 512}
        from sandbox.candidates.plan import identity

        assert identity(task, a, first.compile) != identity(task, b, second.compile)  # the launch geometry differs


def test_prefetched_compiles_run_side_by_side_and_are_paid_for_once():
    task = load_task("softmax")
    base = load_candidate(task.baseline_path)
    flags = [(), ("--ptxas-options=-O1",), ("--fmad=false",), ("--ptxas-options=-O2",)]
    cands = [base.with_flags(f) for f in flags]
    with CompileOnlySandbox(SandboxConfig(compile_workers=2)) as sb:
        assert not sb.builder.ready(cands[0])              # never asked for: a build would have to compile it
        assert sb.prefetch(task, cands) == 4
        assert sb.prefetch(task, cands) == 0              # under way or done: nothing new starts
        results = [sb.compile(task, c) for c in cands]
        assert all(sb.builder.ready(c) for c in cands)    # built: a build now returns at once
        again = sb.compile_many(task, cands)
        assert sb.builder.workers == 2
    assert all(r.status is Status.compiled for r in results + again)
    assert all(r.compile.cached for r in again)
    assert all(r.cost.compile_s < 0.5 for r in again)     # the compiles were paid for by the first builds


def test_a_candidate_that_breaks_a_rule_starts_no_compile_and_is_rejected_when_built():
    task = load_task("vector_add")
    base = load_candidate(task.baseline_path)
    bad = dataclasses.replace(base, source='#include "/etc/passwd"\n' + base.source)
    with CompileOnlySandbox() as sb:
        assert sb.prefetch(task, [bad]) == 0
        result = sb.compile(task, bad)
    assert result.status is Status.rejected and "include" in result.error


def test_warming_starts_every_compile_worker_ahead_and_compiles_then_start_none():
    task = load_task("softmax")
    base = load_candidate(task.baseline_path)
    with CompileOnlySandbox(SandboxConfig(compile_workers=2)) as sb:
        sb.warm()
        assert sb.builder.workers == 2 and sb.builder.warm() == 0     # all started; a second warm starts none
        up = [sb.builder._idle.get(timeout=120) for _ in range(2)]    # each is idle once it answered
        assert len(set(up)) == 2 and all(w.alive and w.requests == 1 for w in up)
        for worker in up:
            sb.builder._idle.put(worker)
        results = sb.compile_many(task, [base.with_flags(f) for f in [(), ("--fmad=false",), ("--ptxas-options=-O1",)]])
        assert sb.builder.workers == 2 and all(w.started == 1 for w in sb.builder._workers)
    assert all(r.status is Status.compiled for r in results)


def test_a_worker_warmed_up_elsewhere_is_adopted_and_compiles_first():
    from sandbox.host.pool import WorkerProcess
    from sandbox.wire import Confinement

    task = load_task("vector_add")
    early = WorkerProcess("compile")
    early.warm_up(Confinement(), timeout=120)                         # as a GPU sandbox does before its device opens
    with CompileOnlySandbox(SandboxConfig(compile_workers=2)) as sb:
        sb.builder.adopt(early)
        result = sb.compile(task, load_candidate(task.baseline_path).with_flags(("--fmad=false",)))
        assert result.status is Status.compiled
        assert sb.builder.workers == 1 and early.started == 1 and early.requests == 2
