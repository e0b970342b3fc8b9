"""A run killed mid-way (SIGKILL) resumes from its trace and loses nothing that was written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agent
from agent.trace.events import read_events

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


def _optimize_until(url: str, traces: Path, run_id: str, iterations: int, evaluations: int, env: dict):
    """Start `kernelwright optimize` in a subprocess; return once its trace holds ``evaluations`` evaluations."""
    cmd = [sys.executable, "-m", "agent", "optimize", "vector_add", "--model", "scripted", "--base-url", url,
           "--iterations", str(iterations), "--sandbox", "fake", "--no-tune", "--traces", str(traces),
           "--run-id", run_id, "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    assert more.summary["totals"]["iterations"] == 3


@pytest.mark.timeout(240)
def test_ctrl_c_ends_the_run_with_a_summary_and_exit_code_130_and_it_resumes(httpserver, tmp_path, env):
    script, url = _serve(httpserver, [answer(fake=f"speedup={1.1 + v / 10}", variant=v) for v in range(8)], SlowScript)
    traces = tmp_path / "traces"
    proc, _ = _optimize_until(url, traces, "stopped", iterations=5, evaluations=2, env=env)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    events = event_records(traces / "stopped")
    assert events[-1]["kind"] == "end" and events[-1]["summary"]["stop_reason"] == "interrupted"
    assert "stopped: model: interrupted" in out

    run = agent.optimize(resume="stopped", traces=traces)
    assert run.stop_reason == "iterations: 5 reached"
    assert sum(e["kind"] == "proposal" and e["phase"] == "model" for e in event_records(run.path)) == 5
