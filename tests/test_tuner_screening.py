"""The built-in search screens its configurations and evaluates only finalists in full; it compiles ahead and
not at all where a flag is known to change nothing (real NVRTC compiles, the fake sandbox's simulated runs)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from agent.protocols import Entry, ProposalRequest
from agent.tune.inert import FlagEvidence
from agent.trace.claim import TuningRecord
from agent.tune.proposer import TunerProposer, format_tuning, tune
from agent.tune.points import Space
from agent.tune.search import Search
from sandbox import CompileOnlySandbox, FakeSandbox, load_candidate, load_task
from sandbox.candidates.plan import identity
from sandbox.judging.result import Status

from conftest import private_cache

pytestmark = pytest.mark.timeout(300)


class WrongFirst(FakeSandbox):
    """The fake sandbox, but the first ``n`` full evaluations of tuned configurations are wrong at a check size
    (screening, which runs the benchmark size alone, cannot see it)."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.full = n, []

    def evaluate(self, task, candidate, sizes=None, timing=True):
        result = super().evaluate(task, candidate, sizes, timing)
        if ".tune" in candidate.label:
            self.full.append(candidate.label)
            if len(self.full) <= self.n:
                result.status, result.timing, result.error = Status.wrong, None, "check[1]: output 'y' is wrong"
        return result


class AllSlower(FakeSandbox):
    """Screening finds every configuration 30% slower than the baseline."""

    def screen(self, task, candidates, **kw):
        found = super().screen(task, candidates, **kw)
        for s in found:
            s.relative, s.relative_ci = 1.3, (1.28, 1.32)
        return found


def test_the_search_screens_and_only_its_finalists_are_evaluated_in_full():
    task = load_task("softmax")
    with FakeSandbox() as sb:
        outcome = tune(sb, task, proposer=TunerProposer(max_evaluations=10, seed=0, sandbox=sb))
    s = outcome.summary
    assert s["screened"] >= 10 - 1 and s["evaluations"] == 10
    finalists = outcome.entries[1:]
    assert 1 <= len(finalists) == s["evaluated_in_full"] <= 3
    for e in finalists:
        assert e.origin == "tuner" and "finalist" in e.note and "screened at" in e.note
        assert e.result.ok and len(e.result.checks) > len(task.spec.sizes.check)   # every check size, then timed
    screened = sorted(v for v in (f["screened"] for f in s["finalists"]))
    assert screened == [f["screened"] for f in s["finalists"]]                # best screened first
    assert all(f["screened"] < 1.0 + 0.01 for f in s["finalists"])            # faster than the start
    assert "screened of a budget of 10" in format_tuning([TuningRecord.model_validate(s)]) and "evaluated in full" in format_tuning(
        [TuningRecord.model_validate(s)])


def test_a_finalist_wrong_at_a_check_size_gives_way_to_the_next_best_screened():
    task = load_task("softmax")
    with WrongFirst(2) as sb:
        outcome = tune(sb, task, proposer=TunerProposer(max_evaluations=12, seed=0, sandbox=sb, finalists=2))
    statuses = [f["status"] for f in outcome.summary["finalists"]]
    assert statuses[:2] == ["wrong", "wrong"] and statuses[2:] and set(statuses[2:]) == {"ok"}
    assert len(statuses) <= 4 and outcome.summary["evaluated_in_full"] == len(statuses)
    assert outcome.best.result.ok and outcome.best.candidate.label not in sb.full[:2]


def test_no_configuration_is_evaluated_in_full_when_none_screened_faster_than_the_start():
    task = load_task("softmax")
    with AllSlower() as sb:
        outcome = tune(sb, task, proposer=TunerProposer(max_evaluations=6, seed=0, sandbox=sb))
    assert outcome.entries == [outcome.start] and outcome.best is outcome.start
    assert outcome.summary["evaluated_in_full"] == 0 and outcome.summary["screened"] >= 5
    assert "no screened configuration was faster than the start" in format_tuning([TuningRecord.model_validate(outcome.summary)])


def test_a_sandbox_that_cannot_screen_gets_every_configuration_for_a_full_evaluation():
    task = load_task("vector_add")
    with CompileOnlySandbox() as sb:
        tuner = TunerProposer(max_evaluations=3, sandbox=sb)
        start = Entry("e0", load_candidate(task.baseline_path), sb.compile(task, load_candidate(task.baseline_path)),
                      [], "baseline", 0)
        proposals = tuner.propose(ProposalRequest(task, [start], None, start, [], sb.device, 1))
    assert proposals and all(p.stage == "evaluate" for p in proposals)


def test_flags_seen_to_change_nothing_are_not_compiled_and_the_prediction_holds():
    task = load_task("vector_add")
    base = dataclasses.replace(load_candidate(task.baseline_path), label="baseline")
    with CompileOnlySandbox() as sb:
        tuner = TunerProposer(strategy="exhaustive", sandbox=sb, screen=True)
        start = Entry("e0", base, sb.compile(task, base), [], "baseline", 0)
        request = ProposalRequest(task, [start], None, start, [], sb.device, 1)
        while proposals := tuner.propose(request):
            for p in proposals:
                tuner.observe_screened(p, _screened(1.0))
        [source] = tuner._sources.values()
        summary = source.summary("exhaustive")
        space = source.tspace.space
        assert summary["screened"] + summary["duplicates"] + summary["failed_before_running"] == space.size - 1
        compiled = sum(summary["compile_statuses"].values())
        assert summary["not_compiled"] > space.size / 2 and compiled < space.size / 3
        # every configuration answered without a compile really compiles to its twin's code
        predicted = [p for p in space.points() if source.flags.canonical(p) != p][:12]
        for p in predicted:
            mine = sb.compile(task, source.tspace.candidate_at(p))
            twin = sb.compile(task, source.tspace.candidate_at(source.flags.canonical(p)))
            assert identity(task, source.tspace.candidate_at(p), mine.compile) == \
                identity(task, source.tspace.candidate_at(p), twin.compile)


def _screened(relative: float):
    from sandbox.host.screener import Screened

    return Screened("ok", ms=relative, baseline_ms=1.0, relative=relative, relative_ci=(relative, relative), rounds=6)


def test_flag_evidence_is_kept_per_knob_values():
    ev = FlagEvidence(knobs=1)
    ev.learn((0, 2, 1), 1, same_code=True)      # flag choice 2 of dimension 1 changed nothing at knob value 0
    ev.learn((0, 0, 1), 2, same_code=False)     # flag choice 1 of dimension 2 changed the code there
    assert ev.canonical((0, 2, 1)) == (0, 0, 1)
    assert ev.canonical((1, 2, 1)) == (1, 2, 1)  # other knob values: nothing known
    assert ev.unknown((0, 2, 1)) == [] and ev.unknown((0, 1, 1)) == [1] and ev.unknown((1, 2, 0)) == [1]


def test_a_non_adaptive_strategy_hands_out_many_points_at_once_and_says_which_come_next():
    space = Space(("a", "b"), ((0, 1, 2), (0, 1, 2, 3)))
    search = Search(space, "exhaustive", budget=6, start=(0, 0))
    handed = search.ask() + search.ask() + search.ask()
    assert handed == [(0, 0), (0, 1), (0, 2)]
    assert search.upcoming(4) == [(0, 3), (1, 0), (1, 1), (1, 2)]
    assert search.ask() + search.ask() + search.ask() == [(0, 3), (1, 0), (1, 1)]
    assert search.ask() == []                      # six handed out, none valued: the budget is spoken for
    search.tell((0, 1), 1.0)
    assert search.ask() == []                      # one measured, five awaiting values: still six
    search.tell((0, 0), 1.0, evaluated=False)      # a duplicate costs nothing: room for one more
    assert search.ask() == [(1, 2)]
    adaptive = Search(space, "default", budget=6, start=(1, 1))
    assert adaptive.ask() == [(1, 1)] and adaptive.ask() == [] and adaptive.upcoming(8) == []
    adaptive.tell((1, 1), 1.0)
    assert set(adaptive.upcoming(8)) == {(0, 1), (2, 1), (1, 0), (1, 2), (1, 3)}


def test_an_optimize_run_without_a_model_records_its_screening_and_only_finalists_as_candidates(tmp_path, monkeypatch, compiled_kernels):
    import agent
    from agent.trace.events import ScreenEvent, read_events

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    run = agent.optimize("softmax", sandbox="fake", traces=tmp_path / "t", config={"tune": {"max_evaluations": 8}})
    events = read_events(run.path)
    screens = [e for e in events if isinstance(e, ScreenEvent)]
    configs = [c for e in screens for c in e.configurations]
    assert len(configs) == run.summary.totals.screened == run.summary.claim.searches[0].screened
    assert all(c.status == "ok" and c.relative > 0 and (6 <= c.rounds <= 15 or c.stopped == "slower" and c.rounds >= 3)
               for c in configs)
    assert sum(e.gpu_s for e in screens) == pytest.approx(run.summary.totals.screen_gpu_s, abs=1e-3)
    ids = [e.id for e in run.entries]
    assert sorted(p.name for p in (run.path / "candidates").iterdir()) == ids   # screened ones are no candidates
    assert all("finalist" in e.note for e in run.entries[1:])
    assert run.summary.claim.ledger.screened == len(configs) and "configurations screened" in run.summary.claim.ledger.text
    # a resumed run counts what was screened before
    again = agent.optimize(resume=run.path, sandbox="fake")
    assert again.summary.totals.screened >= len(configs)


def test_a_knobs_only_search_covers_the_space_the_kernel_declares(tmp_path, monkeypatch, compiled_kernels):
    import agent

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    knobs = load_candidate(load_task("softmax").baseline_path).knobs
    run = agent.optimize("softmax", sandbox="fake", traces=tmp_path / "t",
                         config={"tune": {"flags": False, "strategy": "exhaustive"}})
    [tuning] = run.summary.claim.searches
    assert tuning.dimensions == {k: len(v) for k, v in knobs.items()}
    assert tuning.space_points == math.prod(len(v) for v in knobs.values())
    assert tuning.screened + tuning.duplicates + tuning.failed_before_running == tuning.space_points - 1


def test_a_gpu_time_budget_stops_the_screening(tmp_path, monkeypatch, compiled_kernels):
    import agent

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    run = agent.optimize("softmax", sandbox="fake", traces=tmp_path / "t",
                         config={"tune": {"max_evaluations": 40}, "budget": {"gpu_seconds": 0.1}})
    assert run.summary.stops["search"].reason == "gpu_time"
    assert run.summary.totals.screened < 40


def test_a_resumed_search_takes_back_what_it_screened_and_measures_none_of_it_again(tmp_path, monkeypatch, compiled_kernels):
    import agent
    from agent.trace.events import ScreenEvent, read_events

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    first = agent.optimize("softmax", sandbox="fake", traces=tmp_path / "t",
                           config={"tune": {"max_evaluations": 12}, "budget": {"gpu_seconds": 0.12}})
    assert first.summary.stops["search"].reason == "gpu_time"
    before = [c for e in read_events(first.path) if isinstance(e, ScreenEvent) for c in e.configurations]
    again = agent.optimize(resume=first.path, sandbox="fake", config={"budget": {"gpu_seconds": 100}})
    events = read_events(first.path)
    screens = [i for i, e in enumerate(events) if isinstance(e, ScreenEvent)]
    after = [c for e in events[screens[0]:] if isinstance(e, ScreenEvent) for c in e.configurations][len(before):]
    seen = {(tuple(sorted(c.knobs.items())), tuple(c.flags)) for c in before}
    assert before and after and not any((tuple(sorted(c.knobs.items())), tuple(c.flags)) in seen for c in after)
    [tuning] = again.summary.claim.searches
    assert tuning.screened == len(before) + len(after) == again.summary.totals.screened
