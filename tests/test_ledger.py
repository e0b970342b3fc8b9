"""The cost ledger: stage sums, break-even arithmetic (hand-computed), and resuming from a trace."""

from __future__ import annotations

import json
import math

import pytest

from agent.claims.ledger import Ledger
from agent.protocols import Usage
from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Cost, Status
from sandbox.tasks.task import load_task
from tuner_fakes import failed_result, timed_result

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def task():
    return load_task("softmax")


@pytest.fixture
def cand(task):
    return load_candidate(task.baseline_path)


def _with_cost(result, **cost):
    return result.model_copy(update={"cost": Cost(**cost)})


def test_stage_seconds_are_summed_per_stage(task, cand):
    ledger = Ledger()
    ledger.add_result(_with_cost(timed_result(task, cand, 1.0, 1.0), compile_s=0.5, check_gpu_s=1.25, time_gpu_s=2.0))
    ledger.add_result(_with_cost(failed_result(task, cand, Status.wrong), compile_s=0.25, check_gpu_s=0.75))
    ledger.add_compile(_with_cost(failed_result(task, cand, Status.compile_error), compile_s=0.125))
    ledger.add_result(_with_cost(timed_result(task, cand, 1.0, 1.0), profile_gpu_s=3.0))
    assert (ledger.compile_s, ledger.check_gpu_s, ledger.time_gpu_s, ledger.profile_gpu_s) == (0.875, 2.0, 2.0, 3.0)
    assert ledger.gpu_s == 7.0
    assert (ledger.evaluations, ledger.compiles) == (3, 1)
    assert ledger.statuses == {"ok": 2, "wrong": 1}


def test_break_even_is_tuning_cost_over_saving_per_call(task, cand):
    ledger = Ledger(check_gpu_s=30.0, time_gpu_s=60.0)
    # baseline 2.0 ms, winner 1.6 ms: 0.4 ms = 4e-4 s saved per call; 90 GPU-s / 4e-4 s = 225,000 calls
    saving = ledger.record_winner(timed_result(task, cand, 1.6, 2.0, low=1.2, high=1.3))
    assert saving.per_call_s == pytest.approx(4e-4)
    assert ledger.break_even_calls() == pytest.approx(225_000)
    # conservative: speedup low end 1.2 -> winner would take 2.0/1.2 ms, saving 2.0 * (1 - 1/1.2) ms = 1/3 ms
    assert ledger.break_even_calls(conservative=True) == pytest.approx(90 / (2.0 / 6 / 1e3))
    assert ledger.break_even_calls(cost_s=10.0, saving_s=0.5) == 20.0


def test_wall_time_basis_uses_the_frozen_wall_clock(task, cand):
    ledger = Ledger(wall_before_s=100.0)
    ledger.record_winner(timed_result(task, cand, 1.0, 2.0))
    ledger.stop()
    wall = ledger.wall_s
    assert wall >= 100.0 and ledger.wall_s == wall
    assert ledger.break_even_calls("wall") == pytest.approx(wall / 1e-3)


def test_no_winner_means_no_break_even_and_no_saving_means_never(task, cand):
    ledger = Ledger(time_gpu_s=5.0)
    assert ledger.break_even_calls() is None
    ledger.record_winner(failed_result(task, cand, Status.wrong))
    assert ledger.saving is None and ledger.break_even_calls() is None
    ledger.record_winner(timed_result(task, cand, 2.5, 2.0, low=0.7, high=0.9))
    assert ledger.saving.per_call_s < 0
    assert ledger.break_even_calls() == math.inf
    ledger.record_winner(timed_result(task, cand, 2.0, 2.0, low=0.98, high=1.02))
    assert ledger.break_even_calls() == math.inf
    assert ledger.break_even_calls(conservative=True) == math.inf


def test_usage_adds_tokens_and_money():
    ledger = Ledger()
    ledger.add_usage(Usage(prompt_tokens=100, completion_tokens=20, cost_usd=0.25, requests=1))
    ledger.add_usage(Usage(prompt_tokens=50, completion_tokens=5, cost_usd=0.5, requests=1))
    assert (ledger.usage.prompt_tokens, ledger.usage.completion_tokens, ledger.usage.requests) == (150, 25, 2)
    assert ledger.usage.cost_usd == 0.75
    assert "2 requests, 150 prompt + 25 completion tokens, $0.7500" in ledger.summary()


def test_to_dict_is_json_and_from_dict_resumes_with_the_wall_time(task, cand):
    ledger = Ledger(compile_s=1.5, check_gpu_s=2.0, time_gpu_s=4.0, evaluations=3, statuses={"ok": 3},
                    usage=Usage(prompt_tokens=7, requests=1))
    ledger.record_winner(timed_result(task, cand, 1.0, 1.5, low=1.4, high=1.6))
    ledger.stop()
    data = json.loads(json.dumps(ledger.to_dict()))
    assert data["gpu_s"] == 6.0 and data["saving"]["per_call_s"] == pytest.approx(5e-4)
    assert data["break_even_calls"]["gpu"] == pytest.approx(12_000)
    again = Ledger.from_dict(data)
    assert (again.compile_s, again.gpu_s, again.evaluations, again.statuses) == (1.5, 6.0, 3, {"ok": 3})
    assert again.usage.prompt_tokens == 7
    assert again.break_even_calls() == pytest.approx(ledger.break_even_calls())
    assert again.wall_s >= data["wall_s"]


def test_infinite_break_even_serializes_as_a_string(task, cand):
    ledger = Ledger(time_gpu_s=1.0)
    ledger.record_winner(timed_result(task, cand, 3.0, 2.0, low=0.6, high=0.7))
    data = json.loads(json.dumps(ledger.to_dict(), allow_nan=False))
    assert data["break_even_calls"]["gpu"] == "inf"


def test_summary_names_the_saving_and_the_break_even(task, cand):
    ledger = Ledger(time_gpu_s=90.0)
    assert "unknown (no timed winner)" in ledger.summary()
    ledger.record_winner(timed_result(task, cand, 1.6, 2.0, low=1.2, high=1.3))
    text = ledger.summary()
    assert "400.00 us" in text and "rows=32768,cols=8192" in text
    assert "225,000 calls to repay the GPU time" in text


def test_unknown_cost_basis_is_refused():
    with pytest.raises(ValueError, match="unknown cost basis 'tokens'"):
        Ledger().break_even_calls("tokens")
