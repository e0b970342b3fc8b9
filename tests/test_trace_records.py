"""Trace records as typed models: both event schemas load, version-1 stops and summaries are upgraded to
values and one interval shape, and a record that does not fit its model is one clear error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.stops import StopReason
from agent.trace.events import EVENTS_SCHEMA, EndEvent, EvaluationEvent, StopEvent, TraceError, read_events
from agent.trace.reader import read
from agent.trace.records import SUMMARY_SCHEMA, Summary

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import run_dir, simulated_run  # noqa: E402,F401  (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_every_stored_version_1_trace_reads_with_its_stops_as_values(run_dir):
    events = read_events(run_dir, strict=True)
    assert {e.schema_ for e in events} == {"kernelwright-events-1"}
    stops = [e for e in events if isinstance(e, StopEvent)]
    assert stops and all(isinstance(e.reason, StopReason) and e.message for e in stops)
    raw = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    fingerprints = [r["fingerprint"] for r in raw if r["kind"] == "evaluation"]
    assert [e.identity for e in events if isinstance(e, EvaluationEvent)] == fingerprints and any(fingerprints)
    [end] = [e for e in events if isinstance(e, EndEvent)]
    assert end.summary.schema_ == SUMMARY_SCHEMA and end.summary.last_stop.message == end.summary.stop_reason


def test_a_version_1_summary_gets_one_interval_shape(simulated_run):
    raw = json.loads((simulated_run / "summary.json").read_text())
    assert raw["schema"] == "kernelwright-summary-1" and isinstance(raw["best"]["ci_ms"], list)
    summary = read(simulated_run).summary
    best = summary.best
    assert (best.ci_ms.low, best.ci_ms.high) == tuple(raw["best"]["ci_ms"]) and best.ci_ms.value == best.median_ms
    assert best.speedup.model_dump() == {k: raw["best"]["speedup"][k] for k in ("value", "low", "high")}
    assert best.faster is raw["best"]["speedup"]["faster"]
    assert summary.stops["model"].reason is StopReason.ITERATIONS
    assert summary.stops["tune"].reason is StopReason.NOTHING_LEFT
    upgraded = summary.to_json()
    intervals = [upgraded["best"][k] for k in ("ci_ms", "speedup", "vendor_speedup") if upgraded["best"][k]]
    intervals += [row[k] for row in upgraded["claim"]["heldout"]["rows"] for k in ("speedup", "vendor_speedup") if row[k]]
    assert intervals and all(set(i) == {"value", "low", "high"} for i in intervals)
    assert Summary.model_validate(upgraded) == summary


def test_an_older_summarys_flat_claim_keys_are_read_into_its_claim(simulated_run):
    raw = json.loads((simulated_run / "summary.json").read_text())
    claim = read(simulated_run).summary.claim
    assert [r.model_dump(mode="json")["sizes"] for r in claim.rows] == [r["sizes"] for r in raw["heldout"]]
    assert claim.heldout.text == raw["heldout_text"] and claim.set_aside == []
    assert claim.ledger.text == raw["ledger_text"] and claim.ledger.evaluations == raw["ledger"]["evaluations"]
    assert claim.ledger.break_even_calls.gpu == raw["ledger"]["break_even_calls"]["gpu"]
    assert claim.sanitizer is None and claim.tuning is None
    flagged = {"id": "c0002", "note": "REGRESSES at 1 of 1 held-out sizes: wrong at n=3", "rows": raw["heldout"][:1]}
    tuning = {"strategy": "random", "space_points": 8, "dimensions": {"BLOCK": 8}, "screened": 4, "retired": 1,
              "finalists": [{"config": "BLOCK=64", "entry": "c0003", "status": "evaluated", "screened": 0.8}]}
    v2 = Summary.model_validate({**raw, "schema": "kernelwright-summary-2", "heldout_flagged": [flagged],
                                 "tuning": [tuning], "tuning_text": "search (random)",
                                 "sanitize": {"status": "disabled", "winner": "c0001", "rejected": [], "checked": [],
                                              "text": "sanitizer: off"}, "sanitize_text": "sanitizer: off"})
    assert v2.schema_ == SUMMARY_SCHEMA and [f.id for f in v2.claim.set_aside] == ["c0002"]
    assert v2.claim.searches[0].finalists[0].entry == "c0003" and v2.claim.tuning.text == "search (random)"
    assert v2.claim.sanitizer.status == "disabled"
    assert Summary.model_validate(v2.to_json()) == v2


def test_an_event_with_a_field_its_model_does_not_know_is_one_error_naming_the_line(simulated_run):
    path = simulated_run / "events.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[2])
    lines[2] = json.dumps({**record, "surprise": 1}) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(TraceError, match=r"line 3: a \w+ event that does not fit .*surprise"):
        read(simulated_run)


def test_a_version_1_stop_sentence_this_kernelwright_never_wrote_is_refused(simulated_run):
    path = simulated_run / "events.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if '"kind": "stop"' in line)
    lines[i] = json.dumps({**json.loads(lines[i]), "reason": "the moon was full"}) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(TraceError, match="unknown stop reason 'the moon was full'"):
        read_events(simulated_run)


def test_new_events_carry_the_current_schema(tmp_path):
    from agent.trace.records import ProposerInfo, RunInfo, SandboxInfo, TaskInfo
    from agent.trace.writer import Trace

    info = RunInfo(run_id="r", created="2026-12-01T00:00:00", config={}, proposer=ProposerInfo(kind="tuner"),
                   task=TaskInfo(name="t", version=1, fingerprint="f", folder="kernels/t"),
                   sandbox=SandboxInfo(kind="fake", device={}), environment={}, sessions=[])
    trace = Trace.create(tmp_path / "r", info)
    trace.event(StopEvent(phase="search", reason=StopReason.PLATEAU, message="plateau: 4 timed candidates"))
    trace.close()
    line = json.loads((tmp_path / "r" / "events.jsonl").read_text())
    assert line["schema"] == EVENTS_SCHEMA and line["reason"] == "plateau" and line["message"].startswith("plateau")
    [stop] = read_events(tmp_path / "r", strict=True)
    assert stop.reason is StopReason.PLATEAU
