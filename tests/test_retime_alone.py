"""The headline re-timed alone (``agent.claims.retime``): a run that kept other work in flight beside its
evaluations re-times its winner with nothing else in flight before the claim is printed, keeps both intervals, names
a difference where they do not overlap, and states the re-time as its headline; a run whose evaluations ran alone
says so and does not re-time; a resumed run reads its re-time back. On the device: tests/test_retime_alone_gpu.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

import agent
from agent.claims.retime import concurrent, why_retimed
from agent.cli.app import app, console
from agent.cli.optimize import print_summary
from agent.report.html import render_report
from agent.trace.reader import read
from agent.protocols import Proposal
from agent.trace.events import RetimeEvent, read_events
from agent.trace.records import SessionInfo
from sandbox.candidates.candidate import load_candidate
from sandbox.host.fake import FakeSandbox
from sandbox.tasks.task import load_task

pytestmark = pytest.mark.timeout(300)


class Scripted:
    """One candidate per request, from a list, each the task's baseline with an annotation and a block size of its own
    (a build of its own: the same machine code twice is a duplicate)."""

    name = "scripted"

    def __init__(self, notes: list[str]):
        base = load_candidate(load_task("vector_add").baseline_path)
        self.left = [dataclasses.replace(base, source=base.source + f"\n// fake: {n}\n")
                     .with_knobs({"BLOCK": (128, 512, 1024)[i]}) for i, n in reversed(list(enumerate(notes)))]

    def propose(self, request):
        return [Proposal(self.left.pop(), [request.baseline.id], "model")] if self.left else []

    def observe(self, entry):
        pass


@pytest.fixture
def calls(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    seen = []
    real = FakeSandbox.evaluate_alone

    def evaluate_alone(sb, task, candidate):
        seen.append(candidate.label)
        return real(sb, task, candidate)

    monkeypatch.setattr(FakeSandbox, "evaluate_alone", evaluate_alone)
    return seen


def _run(tmp_path, notes, parallel, **kw):
    return agent.optimize("vector_add", proposer=Scripted(notes), sandbox="fake", traces=tmp_path / "traces",
                          progress=False, config={"budget": {"iterations": len(notes)}, "tune": {"enabled": False},
                                                  "parallel": parallel, "profile": "none"}, **kw)


def test_a_run_with_parallel_requests_re_times_its_winner_alone_and_names_intervals_that_do_not_overlap(calls,
                                                                                                          tmp_path):
    run = _run(tmp_path, ["speedup=1.1", "speedup=1.5 alone=1.2"], parallel=2)
    retime = run.summary.claim.retime
    assert calls == ["c0002"] and retime.candidate == "c0002" and retime.status == "retimed"
    first, alone = retime.original["baseline"], retime.isolated["baseline"]
    assert first.low > 1.4 and 1.1 < alone.value < 1.3 and retime.headline == alone
    assert retime.differs == ["baseline"] and "do not overlap" in retime.text
    assert "--parallel above 1" in retime.reason and retime.gpu_s > 0
    events = [e for e in read_events(run.path) if isinstance(e, RetimeEvent)]
    assert [e.candidate_id for e in events] == ["c0002"] and events[0].result.status.value == "ok"
    ledger = run.summary.claim.ledger
    assert ledger.evaluations == len(run.entries) + 1   # the re-time is an evaluation in full, and paid for
    assert ledger.saving.speedup == pytest.approx(alone.value)   # the saving per call is the headline's

    shown = CliRunner().invoke(app, ["show", str(run.path), "--json"])
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.output)
    assert view["retime"]["status"] == "retimed" and view["best"]["speedup"].startswith(f"{alone.value:.3f}x")
    assert view["best"]["first_measured"].startswith(f"{first.value:.3f}x")
    text = CliRunner().invoke(app, ["show", str(run.path)])
    assert "re-timed alone on the GPU: c0002" in text.output and "do not overlap" in text.output
    assert "re-timed alone on the GPU: c0002" in render_report(read(run.path))
    with console.capture() as final:
        print_summary(run)
    lines = " ".join(final.get().split())
    assert f"best: c0002 (model) {alone.value:.3f}x" in lines and "re-timed alone on the GPU: c0002" in lines


def test_a_re_time_within_the_first_interval_is_recorded_without_a_difference(calls, tmp_path):
    run = _run(tmp_path, ["speedup=1.3"], parallel=2)
    retime = run.summary.claim.retime
    assert retime.status == "retimed" and retime.differs == [] and "the intervals overlap" in retime.text
    first, alone = retime.original["baseline"], retime.isolated["baseline"]
    assert first != alone and first.low <= alone.high and alone.low <= first.high   # a second measurement, not a copy


def test_a_run_whose_evaluations_ran_alone_is_not_re_timed_and_says_why(calls, tmp_path):
    run = _run(tmp_path, ["speedup=1.5 alone=1.2"], parallel=1)
    retime = run.summary.claim.retime
    assert calls == [] and retime.status == "ran alone" and retime.isolated == {}
    assert "ran alone" in retime.reason and "--parallel 1" in retime.reason
    assert retime.headline == retime.original["baseline"]
    assert not [e for e in read_events(run.path) if isinstance(e, RetimeEvent)]


def test_a_resumed_run_reads_its_re_time_back_instead_of_re_timing(calls, tmp_path):
    run = _run(tmp_path, ["speedup=1.5 alone=1.2"], parallel=2)
    again = agent.optimize(resume=run.path, progress=False)
    assert calls == ["c0001"]
    assert again.summary.claim.retime == run.summary.claim.retime
    assert len([e for e in read_events(run.path) if isinstance(e, RetimeEvent)]) == 1


def test_any_session_with_other_work_in_flight_or_none_recorded_makes_the_winner_re_timed():
    alone, busy, unknown = (SessionInfo(started=0, resumed=False, concurrent=c) for c in (False, True, None))
    assert why_retimed([alone, alone]) is None
    assert "--parallel above 1" in why_retimed([alone, busy])
    assert "do not record" in why_retimed([alone, unknown]) and why_retimed([]) is not None
    assert concurrent(2, False) and concurrent(1, True) and not concurrent(1, False)


def test_a_cluster_re_times_once_every_call_under_way_has_finished_and_hands_out_the_held_jobs_after():
    from collections import deque
    from types import SimpleNamespace

    from sandbox.cluster.pool import RaySandbox

    log = []
    sb = RaySandbox.__new__(RaySandbox)
    sb.pool = SimpleNamespace(queue=deque(["waiting"]), running={"ref": "under way"},
                              dispatch=lambda: log.append(("dispatch", list(sb.pool.queue))))
    sb._poll = lambda timeout: (log.append(("poll", dict(sb.pool.running))), sb.pool.running.clear())
    sb.evaluate = lambda task, cand: log.append(("evaluate", list(sb.pool.queue), dict(sb.pool.running))) or "result"
    assert sb.evaluate_alone("task", "cand") == "result"
    assert log == [("poll", {"ref": "under way"}), ("evaluate", [], {}), ("dispatch", ["waiting"])]


def test_the_gpu_sandbox_waits_for_every_compile_started_ahead_before_it_re_times():
    import threading
    import time
    from concurrent.futures import Future

    from sandbox.host.builder import Builder
    from sandbox.host.config import SandboxConfig

    builder = Builder(SandboxConfig(), "sm_90")
    try:
        running, done = Future(), Future()
        done.set_result("compiled")
        builder._done.update({"running": running, "done": done})
        threading.Timer(0.3, lambda: running.set_result("compiled")).start()
        t0 = time.monotonic()
        builder.wait_idle()
        assert running.done() and time.monotonic() - t0 >= 0.25
    finally:
        builder.close()
