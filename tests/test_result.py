"""The result record is versioned, JSON round-trips, and refuses unknown fields."""

import json

import pytest
from pydantic import ValidationError

from sandbox.judging.result import SCHEMA_VERSION, Check, Interval, Result, Status, Timing


def _result(**kw) -> Result:
    return Result(**{"status": Status.ok, "task": "t", "task_fingerprint": "f", "candidate": "c", "candidate_key": "k", **kw})


def test_json_round_trip_keeps_every_field():
    timing = Timing(sizes={"n": 4}, rounds=10, l2_flush_bytes=1 << 27, rotating_sets=2,
                    impls={"candidate": dict(samples_ms=[1.0] * 10, median_ms=1.0, ci_ms=dict(value=1.0, low=0.9, high=1.1))},
                    speedup={"baseline": Interval(value=1.2, low=1.1, high=1.3)}, faster_than={"baseline": True})
    r = _result(timing=timing, checks=[Check(sizes={"n": 4}, label="check[0]", output="c", distribution="normal", passed=True)])
    again = Result.from_json(r.to_json())
    assert again == r
    data = json.loads(r.to_json())
    assert data["schema_version"] == SCHEMA_VERSION and data["status"] == "ok"
    assert again.speedup().value == 1.2


def test_unknown_fields_and_statuses_are_refused():
    with pytest.raises(ValidationError):
        Result.model_validate({**json.loads(_result().to_json()), "bonus": 1})
    with pytest.raises(ValidationError):
        Result.model_validate({**json.loads(_result().to_json()), "status": "great"})


def test_every_documented_status_exists():
    assert {s.value for s in Status} == {"ok", "compiled", "compile_error", "launch_error", "crashed", "timeout",
                                          "wrong", "rejected", "too_large"}


def test_summary_names_status_error_and_speedup():
    r = _result(status=Status.wrong, error="output 'c' is wrong")
    assert r.summary() == "c: wrong; output 'c' is wrong"


def test_summary_says_which_baseline_could_not_be_timed_and_why():
    timing = Timing(sizes={"n": 4}, rounds=10, l2_flush_bytes=0, rotating_sets=1, primary="eager",
                    impls={"candidate": dict(samples_ms=[1.0] * 10, median_ms=1.0, ci_ms=dict(value=1.0, low=0.9, high=1.1))},
                    speedup={"eager": Interval(value=2.0, low=1.9, high=2.1)}, faster_than={"eager": True},
                    unavailable={"compile": "BackendCompilerFailed: no C compiler"})
    text = _result(timing=timing).summary()
    assert "2.000x vs eager" in text and "compile not timed (BackendCompilerFailed: no C compiler)" in text
