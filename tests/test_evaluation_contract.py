"""One evaluation contract for one GPU and many: every sandbox offers ``submit_compile``, ``submit_evaluate``, ``wait``
and ``slots``, and what comes back is a typed outcome (``sandbox.jobs``), never a dict read by its keys.

The local sandboxes are tested here (one slot: jobs run in order when waited on), and the loop's pipeline over a
sandbox of two slots whose GPUs finish out of order; the Ray sandbox keeps the same contract in
tests/test_cluster_ray.py. The last tests read the Ray boundary's code (``ast``, nothing imported): no outcome or
actor reply is told apart by a key.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import pytest

from sandbox import CompileOnlySandbox, FakeSandbox, Sandbox
from sandbox.candidates.candidate import CandidateError, load_candidate
from sandbox.jobs import Evaluated, Failed, Invalid, Job, Lost, evaluate_job
from sandbox.judging.result import Result, Status
from sandbox.tasks.task import TaskError, load_task

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def task():
    return load_task("vector_add")


def _baseline(task, label="c0000"):
    return dataclasses.replace(load_candidate(task.baseline_path), label=label)


@pytest.mark.parametrize("kind", [CompileOnlySandbox, FakeSandbox])
def test_a_local_sandbox_has_one_slot_and_runs_its_jobs_when_waited_on(kind, task):
    with kind() as sandbox:
        assert isinstance(sandbox, Sandbox) and sandbox.slots == 1
        compiled = sandbox.submit_compile(task, _baseline(task), tag="first")
        evaluated = sandbox.submit_evaluate(task, _baseline(task), tag="second")
        assert not compiled.done and not evaluated.done      # nothing runs before the caller waits
        done = sandbox.wait(0.5)
        assert [job.tag for job in done] == ["first", "second"] and [job.op for job in done] == ["compile", "evaluate"]
        assert all(isinstance(job.outcome, Evaluated) for job in done)
        assert compiled.outcome.result.status is Status.compiled
        want = Status.ok if kind is FakeSandbox else Status.compiled
        assert evaluated.outcome.result.status is want
        assert sandbox.wait(0.5) == []                         # each job is handed back once


class Scripted(Sandbox):
    """A sandbox whose compile and evaluate raise what the test says: it has every other member from the protocol."""

    kind, device = "scripted", {}

    def __init__(self, compile_raises=(), evaluate_raises=()):
        self.compile_raises, self.evaluate_raises = list(compile_raises), list(evaluate_raises)
        self.evaluations = 0

    def _result(self, task, candidate, status):
        return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=candidate.label,
                      candidate_key=candidate.key)

    def compile(self, task, candidate):
        if self.compile_raises:
            raise self.compile_raises.pop(0)
        return self._result(task, candidate, Status.compiled)

    def evaluate(self, task, candidate, sizes=None, timing=True):
        self.evaluations += 1
        if self.evaluate_raises:
            raise self.evaluate_raises.pop(0)
        return self._result(task, candidate, Status.ok)


def test_a_local_slot_starts_a_compile_when_it_is_submitted_and_runs_evaluations_first(task):
    calls = []

    class Recording(Scripted):
        def prefetch(self, task, candidates):
            calls.append(("prefetch", candidates[0].label))

        def compile(self, task, candidate):
            calls.append(("compile", candidate.label))
            return super().compile(task, candidate)

        def evaluate(self, task, candidate, sizes=None, timing=True):
            calls.append(("evaluate", candidate.label))
            return super().evaluate(task, candidate, sizes, timing)

    sandbox = Recording()
    jobs = [sandbox.submit_compile(task, _baseline(task, "c1")), sandbox.submit_evaluate(task, _baseline(task, "c0")),
            sandbox.submit_compile(task, _baseline(task, "c2"))]
    assert calls == [("prefetch", "c1"), ("prefetch", "c2")]    # both compiles under way before anything is waited on
    assert sandbox.wait() == jobs                                # handed back in submission order
    # the evaluation first: the compiles submitted with it finish beside it instead of holding it up
    assert calls[2:] == [("evaluate", "c0"), ("compile", "c1"), ("compile", "c2")]


def _outcome(sandbox, task, op="evaluate"):
    submit = sandbox.submit_evaluate if op == "evaluate" else sandbox.submit_compile
    job = submit(task, _baseline(task))
    assert sandbox.wait() == [job]
    return job.outcome


def test_outcomes_are_typed_a_broken_worker_is_tried_once_more_and_a_second_break_fails(task):
    assert isinstance(_outcome(Scripted(compile_raises=[CandidateError("no plan")]), task, "compile"), Invalid)
    once = Scripted(evaluate_raises=[RuntimeError("worker died\ndetails")])
    assert isinstance(_outcome(once, task), Evaluated) and once.evaluations == 2
    twice = Scripted(evaluate_raises=[RuntimeError("worker died\ndetails")] * 2)
    assert _outcome(twice, task) == Failed("worker died") and twice.evaluations == 2
    broken = Scripted(evaluate_raises=[TaskError("reference.py is broken")])
    assert _outcome(broken, task) == Failed("reference.py is broken") and broken.evaluations == 1


def test_abilities_a_sandbox_lacks_have_an_answer_on_the_protocol(task):
    sandbox = Scripted()
    assert sandbox.slots == 1 and not sandbox.can_screen
    assert sandbox.describe() is None and sandbox.usage() == {} and sandbox.prefetch(task, []) is None
    with pytest.raises(NotImplementedError, match="a scripted sandbox cannot screen"):
        sandbox.screen(task, [_baseline(task)])
    with CompileOnlySandbox() as compile_only, FakeSandbox() as fake:
        assert not compile_only.can_screen and fake.can_screen


# ---- the loop's pipeline over a sandbox of several slots ---------------------------------------------------------


class OutOfOrder(FakeSandbox):
    """Two slots whose evaluations finish last submitted first (as GPUs of a cluster may), one candidate lost twice
    with its GPU: the pipeline must hand every candidate back in proposal order all the same."""

    slots = 2

    def __init__(self, lose: str):
        super().__init__()
        self.lose, self.held, self.most = lose, [], 0

    def submit_evaluate(self, task, candidate, tag=None, sizes=None, timing=True):
        job = Job("evaluate", tag)
        self.held.append((job, task, candidate))
        self.most = max(self.most, len(self.held))
        return job

    def wait(self, timeout=0.5):
        done = super().wait(timeout)   # the compiles, run in this thread
        for job, task, candidate in reversed(self.held):
            job.outcome = (Lost(("gpu-1: node died", "gpu-2: node died")) if candidate.label == self.lose
                           else evaluate_job(self, task, candidate))
            job.done = True
            done.append(job)
        self.held = []
        return done


def test_the_pipeline_hands_candidates_back_in_order_keeps_slots_busy_and_skips_a_build_ahead_of_it(task):
    from agent.config import SelectionConfig
    from agent.loop.lineage import MemoryLineage
    from agent.loop.pipeline import Item, Pipeline
    from agent.proposers.answer import parse_answer
    from agent.protocols import Entry, Proposal

    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "agent"))
    from answers import answer

    sources = [answer(fake="speedup=1.1", variant=1), answer(fake="speedup=1.1", variant=1),
               answer(fake="speedup=1.2", variant=2), answer(fake="speedup=1.3", variant=3)]
    cands = [dataclasses.replace(parse_answer(s, task)[0], label=f"c{i:04d}") for i, s in enumerate(sources, 1)]
    lineage = MemoryLineage(SelectionConfig())
    with OutOfOrder(lose="c0003") as sandbox:
        pipeline = Pipeline(sandbox, task, lineage, gate=lambda phase: None)
        for c in cands:
            pipeline.add(Item(c.label, c, Proposal(c, [], "llm"), 1, "model"))
        out = []
        while len(pipeline):
            item = pipeline.head(0.1)
            if item is not None:
                out.append(item)
                if item.result is not None and not item.duplicate_of:
                    lineage.add(Entry(item.entry_id, item.candidate, item.result, [], "llm", 1), item.identity)
    assert [i.entry_id for i in out] == ["c0001", "c0002", "c0003", "c0004"]
    assert out[1].duplicate_of == "c0001"                    # the same build, still under evaluation ahead of it
    assert sandbox.most == 2                                 # both slots were used, never more
    assert out[0].result.ok and out[3].result.ok
    assert out[2].lost == ["gpu-1: node died", "gpu-2: node died"] and out[2].result is None


# ---- the Ray boundary is typed -----------------------------------------------------------------------------------

BOUNDARY = sorted((ROOT / "sandbox" / "cluster").glob("*.py")) + [ROOT / "agent" / "loop" / "pipeline.py"]
# the keys job outcomes and actor replies were once told apart by
OUTCOME_KEYS = {"result", "invalid", "failure", "lost", "profile", "can_screen"}


def keyed_outcomes(source: str, filename: str = "<source>") -> list[str]:
    """Every ``"key" in x`` test and every ``x["key"]`` / ``x.get("key")`` of an outcome key, as file:line."""
    found = []
    for node in sorted(ast.walk(ast.parse(source, filename=filename)), key=lambda n: getattr(n, "lineno", 0)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and _outcome_key(node.slice):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and _outcome_key(node.args[0])):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def _outcome_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in OUTCOME_KEYS


def test_the_ray_boundary_and_the_pipeline_tell_no_outcome_apart_by_a_key():
    found = [hit for path in BOUNDARY for hit in keyed_outcomes(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, "job outcomes are records (sandbox.jobs): match on their type\n" + "\n".join(found)


def test_the_checker_finds_an_outcome_read_by_its_key():
    source = 'if "invalid" in out:\n    x = out["failure"]\ny = out.get("lost", [])\nz = row["name"]\n'
    assert [hit.split(": ", 1)[1] for hit in keyed_outcomes(source)] == [
        "'invalid' in out", "out['failure']", "out.get('lost', [])"]
