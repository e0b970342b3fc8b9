"""A run killed mid-way (SIGKILL) resumes from its trace and loses nothing that was written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import agent
from agent.config import BudgetConfig, SelectionConfig
from agent.loop.budget import Budget, Totals
from agent.loop.lineage import MemoryLineage
from agent.loop.loop import Loop
from agent.loop.resume import restore
from agent.trace.fold import open_requests
from agent.trace.events import (EvaluationEvent, PhaseEvent, ProposalEvent, RequestEvent, ScreenEvent, SkipEvent,
                                read_events)

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402


def event_records(path):
    """The run's events (read through agent.trace.events) as the JSON objects of its events.jsonl."""
    return [e.model_dump(mode="json", by_alias=True) for e in read_events(path)]


ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-resume-SECRET-31415926"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return {**os.environ}


class SlowScript(Script):
    """A model that takes a moment per answer, so a kill lands mid-run."""

    def werkzeug(self, request):
        time.sleep(0.3)
        return super().werkzeug(request)


class GatedScript(Script):
    """A model that holds every answer after the first two until ``gate`` opens: a signal sent before it opens
    lands while the run waits for an answer, however fast or loaded the machine."""

    def __init__(self, steps):
        super().__init__(steps)
        self.gate = threading.Event()

    def werkzeug(self, request):
        with self._lock:
            held = len(self.requests) >= 2
        if held:
            self.gate.wait(timeout=120)
        return super().werkzeug(request)


def _optimize_until(url: str, traces: Path, run_id: str, iterations: int, evaluations: int, env: dict):
    """Start `kernelwright optimize` in a subprocess; return once its trace holds ``evaluations`` evaluations."""
    cmd = [sys.executable, "-m", "agent", "optimize", "vector_add", "--model", "scripted", "--base-url", url,
           "--iterations", str(iterations), "--sandbox", "fake", "--no-tune", "--traces", str(traces),
           "--run-id", run_id, "--quiet"]
    # SIGINT as a terminal's Ctrl-C finds it, even where this test runs in a background job that ignores it (a
    # child would inherit that, and Python would then never raise KeyboardInterrupt)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    events_file = traces / run_id / "events.jsonl"
    deadline = time.monotonic() + 120
    while not (events_file.exists() and events_file.read_text().count('"kind": "evaluation"') >= evaluations):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc, events_file


def _serve(httpserver, steps, cls=Script):
    script = cls(steps)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    return script, httpserver.url_for("/v1")


@pytest.mark.timeout(240)
def test_a_run_killed_with_sigkill_resumes_and_keeps_every_event(httpserver, tmp_path, env):
    # spare answers: one the killed process asked for and never recorded is asked again after the resume
    script, url = _serve(httpserver, [answer(fake=f"speedup={1.1 + v / 10}", variant=v) for v in range(9)], SlowScript)
    traces = tmp_path / "traces"
    proc, events_file = _optimize_until(url, traces, "killed", iterations=6, evaluations=3, env=env)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = events_file.read_bytes()
    assert b'"kind": "end"' not in before

    run = agent.optimize(resume="killed", traces=traces)
    after = events_file.read_bytes()
    kept = before[: before.rfind(b"\n") + 1]
    assert after.startswith(kept)

    events = event_records(run.path)
    assert [e["seq"] for e in events] == list(range(len(events)))
    proposals = [e for e in events if e["kind"] == "proposal" and e["phase"] == "model"]
    assert len(proposals) == 6 and run.stop_reason == "iterations: 6 reached"
    ids = [p["candidate_id"] for p in proposals]
    assert None not in ids and len(set(ids)) == 6
    settled = {e["candidate_id"] for e in events if e["kind"] in ("evaluation", "skip")}
    assert set(ids) <= settled
    assert len(json.loads((run.path / "run.json").read_text())["sessions"]) == 2
    assert run.best.result.speedup().value > 1.5


@pytest.mark.timeout(120)
def test_a_proposal_recorded_before_the_kill_is_evaluated_on_resume_not_asked_again(httpserver, tmp_path, env):
    script, url = _serve(httpserver, [answer(variant=1), answer(fake="speedup=1.4", variant=2)])
    run = agent.optimize("vector_add", model="scripted", base_url=url, iterations=2, sandbox="fake", tune=False,
                         traces=tmp_path / "traces")
    events_file = run.path / "events.jsonl"
    lines = events_file.read_text().splitlines(keepends=True)
    last_proposal = max(i for i, line in enumerate(lines) if '"kind": "proposal"' in line)
    events_file.write_text("".join(lines[: last_proposal + 1]))
    (run.path / "summary.json").unlink()  # a kill there comes before the summary (a kept one reads as a cut log)

    again = agent.optimize(resume=run.path)
    assert len(script.requests) == 2
    assert {e.id for e in again.entries} == {"c0000", "c0001", "c0002"}
    assert again.best.id == "c0002" and again.stop_reason == "iterations: 2 reached"


@pytest.mark.timeout(120)
def test_a_finished_run_continues_when_resumed_with_a_larger_budget(httpserver, tmp_path, env):
    script, url = _serve(httpserver, [answer(variant=v) for v in range(3)])
    run = agent.optimize("vector_add", model="scripted", base_url=url, iterations=1, sandbox="fake", tune=False,
                         traces=tmp_path / "traces")
    more = agent.optimize(resume=run.path, iterations=3)
    assert len(script.requests) == 3 and len(more.entries) == 4
    assert more.summary.totals.iterations == 3


@pytest.mark.timeout(240)
def test_ctrl_c_ends_the_run_with_a_summary_and_exit_code_130_and_it_resumes(httpserver, tmp_path, env):
    script, url = _serve(httpserver, [answer(fake=f"speedup={1.1 + v / 10}", variant=v) for v in range(8)], GatedScript)
    traces = tmp_path / "traces"
    try:
        proc, _ = _optimize_until(url, traces, "stopped", iterations=5, evaluations=2, env=env)
        proc.send_signal(signal.SIGINT)  # the third answer is held until now: the run cannot have ended
    finally:
        script.gate.set()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    events = event_records(traces / "stopped")
    assert events[-1]["kind"] == "end" and events[-1]["summary"]["stop_reason"] == "interrupted"
    assert "stopped: model: interrupted" in out

    run = agent.optimize(resume="stopped", traces=traces)
    assert run.stop_reason == "iterations: 5 reached"
    assert sum(e["kind"] == "proposal" and e["phase"] == "model" for e in event_records(run.path)) == 5


# ---- the requests a kill cut off, from the events alone --------------------------------------------------------


class CountedPicks(MemoryLineage):
    """A lineage that lists the picks a restore replays (by the request they were made for)."""

    def __init__(self):
        super().__init__()
        self.replayed: list[int] = []

    def note_pick(self) -> None:
        self.replayed.append(len(self.replayed))
        super().note_pick()


def _phase(name):
    return PhaseEvent(name=name, proposer="replay")


def _request(rid, phase="model", parents=("c0000",)):
    return RequestEvent(request=rid, iteration=int(rid[1:]) + 1, phase=phase, parents=list(parents))


def _proposal(rid, cid, of=None, phase="model"):
    return ProposalEvent(request=rid, iteration=int(rid[1:]) + 1, phase=phase, candidate_id=cid, parents=["c0000"],
                         origin="replay", answer_proposals=of)


def _restored(events):
    lineage = CountedPicks()
    loop = Loop(None, None, lineage, None, Budget(BudgetConfig()), Totals(), SelectionConfig())
    restore(loop, events)
    return loop, lineage


def test_a_request_cut_off_again_after_its_resume_is_asked_again_with_its_id_and_parents_and_picked_once():
    events = [_phase("model"), _request("r0000"), _proposal("r0000", None, of=1), _request("r0001", parents=["c0007"]),
              _phase("model"), _request("r0001", parents=["c0007"]), _phase("model")]
    loop, lineage = _restored(events)
    assert [(r.request, r.iteration, r.parents) for r in loop.cut_off] == [("r0001", 2, ["c0007"])]
    assert len(lineage.replayed) == 2 and loop.next_request == 2


def test_a_request_an_earlier_resume_asked_again_under_a_new_id_is_superseded_and_its_pick_not_replayed():
    events = [_phase("model"), _request("r0000"), _proposal("r0000", None), _request("r0001"),
              _phase("model"), _request("r0002"), _proposal("r0002", None)]
    assert open_requests(events) == ([], {"r0001"})
    loop, lineage = _restored(events)
    assert loop.cut_off == [] and len(lineage.replayed) == 2 and loop.next_request == 3


def test_a_request_whose_answer_was_recorded_in_part_is_asked_again():
    asked = [_phase("tune"), _request("r0004", phase="tune")]
    part = [_proposal("r0004", "c0006", of=3, phase="tune"), _proposal("r0004", "c0007", of=3, phase="tune")]
    assert [r.request for r in open_requests(asked + part)[0]] == ["r0004"]
    rest = [_phase("tune"), _request("r0004", phase="tune"), _proposal("r0004", "c0008", of=1, phase="tune")]
    assert open_requests(asked + part + rest)[0] == []
    older = [_proposal("r0004", "c0006", phase="tune")]  # a trace that did not count an answer's proposals
    assert open_requests(asked + older)[0] == []


def test_a_screening_answers_the_search_request_it_came_from():
    events = [_phase("tune"), _request("r0003", phase="tune"),
              ScreenEvent(phase="tune", parents=["c0000"], gpu_s=0.1, configurations=[])]
    assert open_requests(events) == ([], set())
    assert [r.request for r in open_requests(events + [_request("r0004", phase="tune")])[0]] == ["r0004"]


def test_one_fold_of_the_events_gives_the_stored_runs_entries_and_the_proposals_left_pending(env, tmp_path):
    from agent.trace.fold import fold

    run = agent.optimize("vector_add", sandbox="fake", config={"tune": {"max_evaluations": 3}},
                         traces=tmp_path / "t", run_id="r")
    events = read_events(run.path)
    state = fold(events)
    assert [e.id for e in state.entries] == [e.id for e in agent.load_run(run.path).entries] and not state.pending
    last = max(i for i, e in enumerate(events) if isinstance(e, ProposalEvent) and e.candidate is not None)
    cut = events[:last + 1]
    pending = fold(cut).pending
    settled = {e.candidate_id for e in cut
               if isinstance(e, EvaluationEvent) or (isinstance(e, SkipEvent) and e.reason == "duplicate")}
    assert [p.entry_id for p in pending] == [e.candidate_id for e in cut if isinstance(e, ProposalEvent)
                                             and e.candidate is not None and e.candidate_id not in settled]
    pending, recorded = pending[-1], events[last]
    assert (pending.entry_id, pending.phase, pending.iteration) == (recorded.candidate_id, recorded.phase,
                                                                    recorded.iteration)
    assert pending.proposal.candidate.key == recorded.candidate.candidate().key
    assert pending.proposal.parent_ids == recorded.parents and pending.proposal.origin == recorded.origin
