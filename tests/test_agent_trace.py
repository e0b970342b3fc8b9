"""Traces: versioned append-only events, fsynced per line, torn lines repaired on resume, secrets scrubbed;
budgets: every limit ends the run with its reason."""

from __future__ import annotations

import json

import pytest

from agent.config import BudgetConfig
from agent.loop.budget import Budget, Totals
from agent.stops import StopReason
from agent.protocols import Usage
from agent.redact import Redactor
from agent.trace.events import EVENTS_SCHEMA, ModelCallEvent, PhaseEvent, RequestEvent, StopEvent, read_events
from agent.trace.records import ProposerInfo, RunInfo, SandboxInfo, TaskInfo
from agent.trace.writer import Trace

pytestmark = pytest.mark.timeout(30)


def _info(**config) -> RunInfo:
    return RunInfo(run_id="run", created="2026-12-01T00:00:00", config=config, proposer=ProposerInfo(kind="tuner"),
                   task=TaskInfo(name="vector_add", version=1, fingerprint="f00d", folder="kernels/vector_add"),
                   sandbox=SandboxInfo(kind="fake", device={}), environment={}, sessions=[])


def _phase(name: str) -> PhaseEvent:
    return PhaseEvent(name=name, proposer="tuner")


def test_every_event_line_carries_the_schema_and_a_sequence(tmp_path):
    trace = Trace.create(tmp_path / "run", _info())
    trace.event(_phase("search"))
    trace.event(RequestEvent(request="r0000", iteration=1, phase="search", parents=["c0000"]))
    trace.close()
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["schema"] for r in records] == [EVENTS_SCHEMA] * 2
    assert [r["seq"] for r in records] == [0, 1]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["schema"] == "kernelwright-run-1"


def test_a_torn_last_line_is_cut_and_the_sequence_continues(tmp_path):
    trace = Trace.create(tmp_path / "run", _info())
    trace.event(_phase("a"))
    trace.event(_phase("b"))
    trace.close()
    with open(tmp_path / "run" / "events.jsonl", "a") as f:
        f.write('{"schema": "kernelwright-events-1", "seq": 2, "kind": "c", "tor')
    again = Trace.resume(tmp_path / "run")
    again.event(StopEvent(phase="c", reason=StopReason.NOTHING_LEFT, message="nothing left"))
    again.close()
    events = read_events(tmp_path / "run")
    assert [(e.seq, e.kind) for e in events] == [(0, "phase"), (1, "phase"), (2, "stop")]


def test_a_ctrl_c_between_writing_an_event_and_counting_it_gives_no_number_twice(tmp_path, monkeypatch):
    trace = Trace.create(tmp_path / "run", _info())
    trace.event(_phase("a"))

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr("agent.trace.writer.os.fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        trace.event(_phase("b"))
    monkeypatch.undo()
    trace.event(StopEvent(phase="b", reason=StopReason.INTERRUPTED, message="interrupted"))
    trace.close()
    events = read_events(tmp_path / "run", strict=True)
    assert [(e.seq, e.kind) for e in events] == [(0, "phase"), (1, "phase"), (2, "stop")]


def test_a_new_run_never_overwrites_an_existing_one(tmp_path):
    Trace.create(tmp_path / "run", _info()).close()
    with pytest.raises(FileExistsError):
        Trace.create(tmp_path / "run", _info())


def test_secrets_are_scrubbed_from_events_and_files(tmp_path):
    key = "sk-live-SECRET-9876543210"
    trace = Trace.create(tmp_path / "run", _info(note=f"key={key}"), Redactor([key]))
    trace.event(ModelCallEvent(request="r0000", response=f"the key is {key}", messages=[{"role": "user", "content": key}]))
    trace.write_json("summary.json", {"echo": key})
    trace.close()
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert key not in path.read_text(), path.name
    assert "[redacted]" in (tmp_path / "run" / "events.jsonl").read_text()


@pytest.mark.parametrize("config, totals, phase, reason, words", [
    (BudgetConfig(iterations=3), Totals(iterations=2, in_flight=1), "model", StopReason.ITERATIONS, "iterations: 3 reached"),
    (BudgetConfig(iterations=None, tokens=100), Totals(usage=Usage(prompt_tokens=80, completion_tokens=30)), "model",
     StopReason.TOKENS, "tokens"),
    (BudgetConfig(iterations=None, usd=0.5), Totals(usage=Usage(cost_usd=0.51)), "model", StopReason.MONEY, "money"),
    (BudgetConfig(iterations=None, gpu_seconds=10), Totals(gpu_s=10.5), "tune", StopReason.GPU_TIME, "GPU time"),
    (BudgetConfig(iterations=None, wall_seconds=60), Totals(wall_s=61), "search", StopReason.WALL_TIME, "wall time"),
    (BudgetConfig(iterations=None, plateau=4), Totals(since_improvement=4), "model", StopReason.PLATEAU, "plateau"),
])
def test_each_budget_limit_stops_with_its_reason(config, totals, phase, reason, words):
    stop = Budget(config).exhausted(totals, phase)
    assert stop.reason is reason and words in stop.message


def test_the_iteration_limit_does_not_bind_the_tuner():
    assert Budget(BudgetConfig(iterations=1)).exhausted(Totals(iterations=5), "tune") is None
