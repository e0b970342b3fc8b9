"""Lineage: ranking by measured speedup, parent selection (repair, explore, exploit), duplicate builds."""

from __future__ import annotations

import dataclasses

import pytest

from agent.config import SelectionConfig
from agent.loop.lineage import MemoryLineage
from agent.protocols import Entry, Lineage
from agent.loop.summary import rows
from sandbox import CompileOnlySandbox
from sandbox.candidates.candidate import load_candidate
from sandbox.candidates.plan import identity
from sandbox.judging.result import Interval, Profile, Result, Status, Timing
from sandbox.tasks.task import load_task

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def task():
    return load_task("vector_add")


def _entry(task, eid, status=Status.ok, speed=None, parents=("c0000",), origin="llm", half=0.01):
    timing = None
    if speed is not None:
        timing = Timing(sizes={"n": 1}, rounds=10, l2_flush_bytes=0, rotating_sets=1, impls={},
                        speedup={"baseline": Interval(value=speed, low=speed - half, high=speed + half)})
    result = Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=eid,
                    candidate_key=eid, timing=timing)
    return Entry(eid, load_candidate(task.baseline_path), result, list(parents), origin, 0)


def _lineage(task, *entries, **cfg):
    lineage = MemoryLineage(SelectionConfig(**cfg))
    lineage.add(_entry(task, "c0000", speed=1.0, parents=(), origin="baseline"))
    for e in entries:
        lineage.add(e)
    return lineage


def test_the_best_is_the_fastest_correct_timed_candidate(task):
    lineage = _lineage(task, _entry(task, "c0001", speed=1.3), _entry(task, "c0002", speed=1.6),
                       _entry(task, "c0003", Status.wrong))
    assert isinstance(lineage, Lineage)
    assert lineage.best().id == "c0002"
    assert [e.id for e in lineage.ranked()] == ["c0002", "c0001", "c0000"]


def test_a_tie_goes_to_the_earlier_entry_and_a_measurably_faster_one_takes_the_lead(task):
    # c0003 has the higher median, but its interval overlaps c0001's: one measurement's noise must not pick it
    tied = _lineage(task, _entry(task, "c0001", speed=2.509), _entry(task, "c0002", speed=1.4),
                    _entry(task, "c0003", speed=2.518))
    assert tied.best().id == "c0001" and tied.ranked()[0].id == "c0003"
    assert [r.id for r in rows(tied)] == ["c0001", "c0003", "c0002", "c0000"]  # the table leads with the winner
    ahead = _lineage(task, _entry(task, "c0001", speed=2.509), _entry(task, "c0003", speed=2.6))
    assert ahead.best().id == "c0003"
    # a candidate whose interval reaches the baseline's is no winner: the baseline keeps the lead
    assert _lineage(task, _entry(task, "c0001", speed=1.015, half=0.02)).best().id == "c0000"


def test_a_candidate_would_lead_exactly_when_adding_it_makes_it_the_winner(task):
    # the new-best event and the "profile a new best" policy ask would_lead before the entry is added
    import random

    rng = random.Random(3)
    for _ in range(200):
        lineage = _lineage(task, *(_entry(task, f"c{i:04d}", speed=round(rng.uniform(0.9, 1.3), 3),
                                          half=rng.choice([0.005, 0.02])) for i in range(1, rng.randint(1, 5))))
        new = _entry(task, "c0099", speed=round(rng.uniform(0.9, 1.4), 3), half=rng.choice([0.005, 0.02]))
        leads = lineage.would_lead(new.result)
        lineage.add(new)
        assert leads == (lineage.best() is new)


def test_a_fresh_failure_is_repaired_once_then_the_best_is_picked(task):
    lineage = _lineage(task, _entry(task, "c0001", speed=1.3), _entry(task, "c0002", Status.compile_error), explore=0)
    assert lineage.select(1)[0].id == "c0002"
    assert lineage.select(1)[0].id == "c0001"


def test_a_failing_line_is_abandoned_after_max_repairs(task):
    lineage = _lineage(task, _entry(task, "c0001", speed=1.2), _entry(task, "c0002", Status.wrong),
                       _entry(task, "c0003", Status.compile_error, parents=("c0002",)),
                       _entry(task, "c0004", Status.wrong, parents=("c0003",)), explore=0, max_repairs=2)
    assert lineage.failure_depth(lineage.get("c0004")) == 3
    assert lineage.select(1)[0].id == "c0001"


def test_exploration_picks_a_good_candidate_other_than_the_best(task):
    lineage = _lineage(task, _entry(task, "c0001", speed=1.3), _entry(task, "c0002", speed=1.6), explore=1.0, pool=1)
    assert {lineage.select(1)[0].id for _ in range(5)} == {"c0001"}
    greedy = _lineage(task, _entry(task, "c0001", speed=1.3), _entry(task, "c0002", speed=1.6), explore=0.0)
    assert {greedy.select(1)[0].id for _ in range(5)} == {"c0002"}


def test_picks_replayed_from_a_trace_leave_the_same_state_as_the_picks_made(task):
    """A resumed run replays its recorded picks (``note_pick``), so it draws the parents an unbroken run draws."""
    grow = [_entry(task, "c0001", speed=1.3), _entry(task, "c0002", Status.wrong), _entry(task, "c0003", speed=1.5),
            _entry(task, "c0004", speed=1.1), _entry(task, "c0005", Status.compile_error), _entry(task, "c0006", speed=1.2)]
    live, resumed = _lineage(task, explore=0.5, pool=3, seed=7), _lineage(task, explore=0.5, pool=3, seed=7)
    picks = []
    for i, e in enumerate(grow):
        for _ in range(1 + i % 2):  # every other step, an answer without a candidate: a pick and nothing added
            picks.append(live.select(1)[0].id)
            resumed.note_pick()
        live.add(e)
        resumed.add(e)
    assert picks.count("c0002") == 1 and picks.count("c0005") == 1  # each failure repaired once
    assert [live.select(1)[0].id for _ in range(12)] == [resumed.select(1)[0].id for _ in range(12)]
    fresh = _lineage(task, *grow, explore=0.5, pool=3, seed=7)  # the same entries, no replayed picks
    assert [fresh.select(1)[0].id for _ in range(12)] != [resumed.select(1)[0].id for _ in range(12)]


def test_without_measurements_the_latest_compiled_candidate_is_refined(task):
    lineage = MemoryLineage(SelectionConfig(explore=0))
    lineage.add(_entry(task, "c0000", Status.compiled, parents=(), origin="baseline"))
    lineage.add(_entry(task, "c0001", Status.compiled))
    assert lineage.best() is None
    assert lineage.select(1)[0].id == "c0001"


def test_duplicates_are_the_same_binary_with_the_same_launch_geometry(task, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))  # one environment compiles everything
    base = load_candidate(task.baseline_path)
    with CompileOnlySandbox() as sb:
        def fp(c):
            return identity(task, c, sb.compile(task, c).compile)

        same = fp(base)
        reworded = base.source.replace("straightforward", "STRAIGHTFORWARD")
        assert reworded != base.source and fp(dataclasses.replace(base, source=reworded)) == same
        other_block = base.with_knobs({"BLOCK": 512})
        assert sb.compile(task, other_block).compile.cubin_sha256 == sb.compile(task, base).compile.cubin_sha256
        assert fp(other_block) != same


class _Profiler:
    """A sandbox that only records which candidates it was asked to profile."""

    def __init__(self):
        self.profiled = []

    def profile(self, task, candidate, result=None, parent_profile=None):
        self.profiled.append(result.candidate)
        result.profile = Profile(status="ok", diagnosis=f"profiled {result.candidate}")
        return result.profile


@pytest.mark.parametrize("origin, speed, profiled", [
    ("llm", 1.96, True),     # within 5% of the best (2.0): a model's candidate is worth profiling
    ("llm", 1.80, False),
    ("tuner", 1.96, False),  # a tuner point is profiled only as a new best
    ("tuner", 2.0, False),
    ("tuner", 2.05, True),
])
def test_promising_policy_profiles_model_candidates_near_the_best_and_tuner_points_that_beat_it(task, origin, speed, profiled):
    from agent.loop.judge import diagnose

    lineage = _lineage(task, _entry(task, "c0001", speed=2.0))
    sb = _Profiler()
    entry = _entry(task, "c0002", speed=speed, parents=("c0001",), origin=origin)
    text = diagnose(sb, task, lineage, entry.candidate, entry.result, ["c0001"], "promising", origin)
    assert (sb.profiled == ["c0002"]) == profiled
    if profiled:
        assert text == "profiled c0002"
    else:
        assert text.startswith("counters: none (not profiled)")
    fresh, never = _entry(task, "c0003", speed=speed, origin=origin), _Profiler()
    text = diagnose(never, task, lineage, fresh.candidate, fresh.result, ["c0001"], "none", origin)
    assert text.startswith("counters: none (not profiled)") and never.profiled == []


@pytest.mark.parametrize("origin, status, speed, prompts, profiled", [
    ("baseline", Status.ok, 1.0, True, True),       # the first parent a model reads
    ("baseline", Status.ok, 1.0, False, False),     # a run without a model: nobody reads it
    ("llm", Status.ok, 2.05, True, True),           # a new best: the next parent
    ("llm", Status.ok, 1.98, True, False),          # near the best but not better: its profile changes no prompt
    ("tuner", Status.ok, 2.5, False, False),        # the search phase after a model: no prompt follows
    ("llm", Status.wrong, None, True, True),        # the model will be asked to repair it: its diagnosis is shown
    ("llm", Status.compile_error, None, True, False),
])
def test_prompt_policy_profiles_only_what_a_later_prompt_shows(task, origin, status, speed, prompts, profiled):
    from agent.loop.judge import diagnose
    from sandbox.judging.result import CompileInfo

    lineage = _lineage(task, _entry(task, "c0001", speed=2.0))
    if origin == "baseline":
        lineage = MemoryLineage(SelectionConfig())
    sb = _Profiler()
    entry = _entry(task, "c0002", status=status, speed=speed, parents=("c0001",), origin=origin)
    entry.result.compile = CompileInfo(ok=True, arch="sm_90", nvrtc_version="13.0", options=[])
    diagnose(sb, task, lineage, entry.candidate, entry.result, ["c0001"], "prompt", origin, prompts=prompts)
    assert (sb.profiled == ["c0002"]) == profiled


def test_a_wrong_candidate_past_its_repairs_is_not_profiled(task):
    from agent.loop.judge import should_profile

    lineage = _lineage(task, _entry(task, "c0001", Status.wrong), _entry(task, "c0002", Status.wrong, parents=("c0001",)),
                       max_repairs=2)
    third = _entry(task, "c0003", Status.wrong, parents=("c0002",))
    assert not should_profile("prompt", lineage, third.result, ["c0002"], "llm", True)
    second = _entry(task, "c0004", Status.wrong, parents=("c0001",))
    assert should_profile("prompt", lineage, second.result, ["c0001"], "llm", True)
