"""heldout_table: the winner re-checked and re-timed at held-out sizes (scripted sandbox results)."""

from __future__ import annotations

import pytest

from agent.claims.heldout import any_flagged, format_heldout, heldout_table
from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Result, Status
from sandbox.tasks.task import describe_sizes, load_task
from tuner_fakes import ScriptedSandbox, failed_result, timed_result

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def task():
    return load_task("softmax")


@pytest.fixture
def baseline(task):
    return load_candidate(task.baseline_path)


@pytest.fixture
def winner(baseline):
    return baseline.with_knobs({"BLOCK": 512}).with_flags(["--ptxas-options=-dlcm=cg"])


def _script(per_size: dict):
    """Answer by the size's position in the held-out list: a function of (task, candidate) -> Result."""
    def answer(task, candidate, sizes):
        index = task.spec.sizes.heldout.index(sizes)
        return per_size[index](task, candidate, sizes)
    return answer


def _faster(low, high, value=None):
    return lambda task, cand, sizes: timed_result(task, cand, 1.0, value or (low + high) / 2, low=low, high=high,
                                                  sizes=sizes, vendor=(0.9, 0.85, 0.95))


def test_every_heldout_size_is_evaluated_and_a_faster_winner_is_not_flagged(task, baseline, winner):
    sb = ScriptedSandbox(_script({0: _faster(1.1, 1.3), 1: _faster(1.05, 1.2), 2: _faster(0.97, 1.04)}))
    rows = heldout_table(sb, task, baseline, winner)
    assert [r.sizes for r in rows] == task.spec.sizes.heldout
    assert [sizes for _, sizes in sb.calls] == task.spec.sizes.heldout
    assert not any_flagged(rows)
    assert rows[0].speedup.low == 1.1 and rows[0].vendor_speedup.value == 0.9
    assert rows[0].winner_ms == 1.0 and rows[0].measured
    assert rows[2].reason == ""                       # an interval straddling 1.0 is not "slower"


def test_a_winner_slower_than_the_baseline_at_some_size_is_flagged(task, baseline, winner):
    sb = ScriptedSandbox(_script({0: _faster(1.1, 1.3), 1: _faster(0.8, 0.95), 2: _faster(1.0, 1.2)}))
    rows = heldout_table(sb, task, baseline, winner)
    assert [r.flagged for r in rows] == [False, True, False]
    assert "slower than the baseline" in rows[1].reason
    text = format_heldout(rows)
    assert f"{describe_sizes(task.spec.sizes.heldout[1])}: 0.875x [0.800, 0.950] vs baseline" in text
    assert "FLAGGED" in text.splitlines()[2] and "FLAGGED" not in text.splitlines()[1]


def test_with_until_the_sizes_after_the_first_row_it_holds_for_are_not_evaluated(task, baseline, winner):
    wrong = lambda t, c, s: failed_result(t, c, Status.wrong, "output 'y' is wrong")  # noqa: E731
    sb = ScriptedSandbox(_script({0: _faster(1.1, 1.3), 1: wrong, 2: _faster(1.1, 1.3)}))
    rows = heldout_table(sb, task, baseline, winner, until=lambda rows: any_flagged(rows))
    assert [r.status for r in rows] == ["ok", "wrong"]
    assert [sizes for _, sizes in sb.calls] == task.spec.sizes.heldout[:2]
    sb = ScriptedSandbox(_script({0: _faster(1.1, 1.3), 1: _faster(1.1, 1.3), 2: _faster(1.1, 1.3)}))
    assert len(heldout_table(sb, task, baseline, winner, until=lambda rows: any_flagged(rows))) == 3


def test_a_winner_that_is_not_ok_at_some_size_is_flagged(task, baseline, winner):
    wrong = lambda t, c, s: failed_result(t, c, Status.wrong, "heldout[2]: output 'y' is wrong")  # noqa: E731
    sb = ScriptedSandbox(_script({0: _faster(1.1, 1.3), 1: _faster(1.1, 1.3), 2: wrong}))
    rows = heldout_table(sb, task, baseline, winner)
    assert rows[2].flagged and rows[2].status == "wrong" and rows[2].speedup is None
    assert "the winner is wrong at this size" in rows[2].reason
    assert "output 'y' is wrong" in format_heldout(rows)


def test_a_distinct_start_is_timed_too_and_a_winner_below_it_is_flagged(task, baseline, winner):
    start = baseline.with_knobs({"BLOCK": 1024})

    def answer(t, cand, sizes):
        if cand.key == start.key:
            return timed_result(t, cand, 1.0, 1.5, low=1.4, high=1.6, sizes=sizes)
        return timed_result(t, cand, 1.0, 1.2, low=1.15, high=1.25, sizes=sizes)

    sb = ScriptedSandbox(answer)
    rows = heldout_table(sb, task, start, winner)
    assert len(sb.calls) == 2 * len(task.spec.sizes.heldout)
    assert all(r.flagged and "start configuration" in r.reason for r in rows)
    assert rows[0].start_speedup.value == 1.5


def test_a_compile_only_sandbox_reports_not_run_without_flagging(task, baseline, winner):
    def compiled(t, cand, sizes) -> Result:
        return Result(status=Status.compiled, task=t.name, task_fingerprint=t.fingerprint, candidate=cand.label,
                      candidate_key=cand.key)

    rows = heldout_table(ScriptedSandbox(compiled), task, baseline, winner)
    assert not any_flagged(rows)
    assert all(not r.measured and "only compiles" in r.reason for r in rows)
    assert rows[0].to_dict()["measured"] is False


def test_sizes_named_first_are_evaluated_first_and_the_rows_keep_the_tasks_order(task, baseline, winner):
    held = task.spec.sizes.heldout
    sb = ScriptedSandbox(_script({0: _faster(1.1, 1.3), 1: _faster(1.1, 1.3), 2: _faster(1.1, 1.3)}))
    rows = heldout_table(sb, task, baseline, winner, first=[held[2], {"n": 7}])   # {"n": 7}, not a held-out size:
    assert [sizes for _, sizes in sb.calls] == [held[2], held[0], held[1]]      # ignored
    assert [r.sizes for r in rows] == held


def test_the_size_that_set_a_leader_aside_is_evaluated_first_for_the_next(task, baseline):
    from types import SimpleNamespace

    from agent.claims.heldout import heldout_winner

    held = task.spec.sizes.heldout
    leaders = [baseline.with_knobs({"BLOCK": b}) for b in (512, 256, 128)]
    passes = leaders[2].key                                   # the first two fail at the second held-out size

    def answer(t, cand, sizes):
        if sizes == held[1] and cand.key != passes:
            return failed_result(t, cand, Status.wrong, "output 'y' is wrong")
        return timed_result(t, cand, 1.0, 1.2, low=1.1, high=1.3, sizes=sizes)

    entries = [SimpleNamespace(id=f"c{i}", candidate=c, result=timed_result(task, c, 1.0, 1.5 - i / 10))
               for i, c in enumerate(leaders)]
    aside: list[str] = []
    lineage = SimpleNamespace(baseline=lambda: None, set_aside=aside.append,
                              best=lambda: next(e for e in entries if e.id not in aside),
                              ranked=lambda: [e for e in entries if e.id not in aside])
    sb = ScriptedSandbox(answer)
    claim = heldout_winner(sb, task, lineage)
    assert aside == ["c0", "c1"] and [f.id for f in claim.flagged] == ["c0", "c1"]
    assert [sizes for _, sizes in sb.calls] == [held[0], held[1],            # c0: the task's order, aside at held[1]
                                                held[1],                     # c1: held[1] first, set aside at once
                                                held[1], held[0], held[2]]   # c2: held[1] first, then the rest
    assert [r.sizes for r in claim.rows] == held and not any(r.flagged for r in claim.rows)
    assert "(2 not checked: it was set aside before them)" in claim.flagged[1].note
