"""Traces: versioned append-only events, fsynced per line, torn lines repaired on resume, secrets scrubbed;
budgets: every limit ends the run with its reason."""

from __future__ import annotations

import json

import pytest

from agent.loop.budget import Budget, Totals
from agent.config import BudgetConfig
from agent.protocols import Usage
from agent.redact import Redactor
from agent.trace.writer import EVENTS_SCHEMA, Trace, read_events

pytestmark = pytest.mark.timeout(30)


def test_every_event_line_carries_the_schema_and_a_sequence(tmp_path):
    trace = Trace.create(tmp_path / "run", {"run_id": "run"})
    trace.event("session")
    trace.event("request", request="r0000")
    trace.close()
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["schema"] for r in records] == [EVENTS_SCHEMA] * 2
    assert [r["seq"] for r in records] == [0, 1]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["schema"] == "kernelwright-run-1"


def test_a_torn_last_line_is_cut_and_the_sequence_continues(tmp_path):
    trace = Trace.create(tmp_path / "run", {"run_id": "run"})
    trace.event("a")
    trace.event("b")
    trace.close()
    with open(tmp_path / "run" / "events.jsonl", "a") as f:
        f.write('{"schema": "kernelwright-events-1", "seq": 2, "kind": "c", "tor')
    again = Trace.resume(tmp_path / "run")
    again.event("c")
    again.close()
    events = read_events(tmp_path / "run")
    assert [(e["seq"], e["kind"]) for e in events] == [(0, "a"), (1, "b"), (2, "c")]


def test_a_new_run_never_overwrites_an_existing_one(tmp_path):
    Trace.create(tmp_path / "run", {"run_id": "run"}).close()
    with pytest.raises(FileExistsError):
        Trace.create(tmp_path / "run", {"run_id": "run"})


def test_secrets_are_scrubbed_from_events_and_files(tmp_path):
    key = "sk-live-SECRET-9876543210"
    trace = Trace.create(tmp_path / "run", {"run_id": "run", "note": f"key={key}"}, Redactor([key]))
    trace.event("model_call", response=f"the key is {key}", messages=[{"role": "user", "content": key}])
    trace.write_json("summary.json", {"echo": key})
    trace.close()
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert key not in path.read_text(), path.name
    assert "[redacted]" in (tmp_path / "run" / "events.jsonl").read_text()


@pytest.mark.parametrize("config, totals, phase, words", [
    (BudgetConfig(iterations=3), Totals(iterations=2, in_flight=1), "model", "iterations: 3 reached"),
    (BudgetConfig(iterations=None, tokens=100), Totals(usage=Usage(prompt_tokens=80, completion_tokens=30)), "model", "tokens"),
    (BudgetConfig(iterations=None, usd=0.5), Totals(usage=Usage(cost_usd=0.51)), "model", "money"),
    (BudgetConfig(iterations=None, gpu_seconds=10), Totals(gpu_s=10.5), "tune", "GPU time"),
    (BudgetConfig(iterations=None, wall_seconds=60), Totals(wall_s=61), "search", "wall time"),
    (BudgetConfig(iterations=None, plateau=4), Totals(since_improvement=4), "model", "plateau"),
])
def test_each_budget_limit_stops_with_its_reason(config, totals, phase, words):
    assert words in Budget(config).exhausted(totals, phase)


def test_the_iteration_limit_does_not_bind_the_tuner():
    assert Budget(BudgetConfig(iterations=1)).exhausted(Totals(iterations=5), "tune") is None
