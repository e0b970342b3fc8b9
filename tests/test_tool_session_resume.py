"""A tool-calling session killed at any moment and resumed loses nothing: the run's folder is copied after every
event (what a SIGKILL right after that event leaves), and each copy is resumed against an endpoint that has only the
answers the copy never recorded. Every resumed run ends with the unbroken run's lineage, its model calls and tool
calls (none asked or run twice, none lost) and its totals; the model is sent the conversation it would have been
sent."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import agent
from agent.report import views
from agent.trace.events import ModelCallEvent, ProposalEvent, ToolCallEvent, read_events
from agent.trace.reader import read
from agent.trace.writer import Trace

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(300)

FIXED, WRONG = answer(fake="speedup=1.3", variant=2), answer(fake="wrong", variant=1)


def calls(*pairs):
    return {"content": "", "tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


STEPS = [calls(("read_task", {}), ("read_lineage", {})),
         calls(("compile", {"answer": FIXED}), ("check", {"answer": WRONG})),
         "no code here",                                              # an unusable answer, asked again
         calls(("time", {"answer": FIXED})),
         calls(("submit", {"answer": WRONG})),                        # evaluated in full: wrong
         calls(("check", {"answer": FIXED}), ("submit", {"answer": FIXED}))]   # the next request's session


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-tools-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _calls(run: Path) -> tuple[list, list]:
    events = read_events(run)
    model = [(e.request, e.turn, e.tool_calls and [c["name"] for c in e.tool_calls], e.error) for e in events
             if isinstance(e, ModelCallEvent)]
    tools = [(e.request, e.turn, e.name, e.status, e.arguments) for e in events if isinstance(e, ToolCallEvent)]
    return model, tools


def _lineage(run) -> list[tuple]:
    return [(e.id, e.parent_ids, e.result.status.value, e.candidate.source) for e in run.entries]


def test_a_tool_session_killed_after_any_event_resumes_without_asking_or_running_anything_twice(
        httpserver, tmp_path, monkeypatch):
    script = Script(STEPS)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(
        lambda request: script.werkzeug(request))
    stops = tmp_path / "stops"
    record = Trace.event

    def event_then_copy(trace, event):
        written = record(trace, event)
        shutil.copytree(trace.path, stops / f"{written.seq:03d}", ignore=shutil.ignore_patterns(".lock"))
        return written

    options = dict(model="scripted", base_url=httpserver.url_for("/v1"), iterations=2, sandbox="fake", tune=False,
                   sanitize=False, progress=False, config={"model": {"tools": True, "max_tool_calls": 8}})
    monkeypatch.setattr(Trace, "event", event_then_copy)
    unbroken = agent.optimize("vector_add", traces=tmp_path / "t", **options)
    monkeypatch.setattr(Trace, "event", record)
    sent = [r["messages"] for r in script.requests]
    assert len(sent) == len(STEPS)
    expected_calls = _calls(unbroken.path)
    assert [t[2] for t in expected_calls[1]] == ["read_task", "read_lineage", "compile", "check", "time", "submit",
                                                 "check", "submit"]
    assert [e[3] for e in expected_calls[0]][2].startswith("the answer has no")
    expected = _lineage(unbroken)
    assert [(e[0], e[2]) for e in expected] == [("c0000", "ok"), ("c0001", "wrong"), ("c0002", "ok")]
    totals = unbroken.summary.totals

    mid_session = 0
    for stopped in sorted(stops.iterdir()):
        events = read_events(stopped)
        answered = sum(isinstance(e, ModelCallEvent) for e in events)
        open_session = any(isinstance(e, (ModelCallEvent, ToolCallEvent)) for e in events) and not any(
            isinstance(e, ProposalEvent) and e.request == events[-1].request for e in events
            if getattr(events[-1], "request", None))
        mid_session += open_session
        shown = read(stopped)   # what show and the report read, on a folder a kill left mid-session
        views.summary_view(shown), views.lineage_lines(shown), views.cost(shown)
        script.steps, script.requests = list(STEPS[answered:]), []
        final = agent.optimize(resume=stopped, traces=stops)
        assert final.stop is not None and not final.stop.reason.failed, (stopped.name, final.stop)
        assert _lineage(final) == expected, stopped.name
        assert _calls(final.path) == expected_calls, stopped.name   # each model call and tool call once, in order
        # the model is asked only what it never answered, with the very conversation it would have been sent
        assert [r["messages"] for r in script.requests] == sent[answered:], stopped.name
        got = final.summary.totals
        assert (got.model_requests, got.prompt_tokens, got.completion_tokens, got.iterations) == (
            totals.model_requests, totals.prompt_tokens, totals.completion_tokens, totals.iterations), stopped.name
        assert got.gpu_s == pytest.approx(totals.gpu_s, rel=1e-6, abs=1e-6), stopped.name
    assert mid_session >= 8   # copies taken inside a session, between its model calls and tool calls


def test_the_tools_a_kill_cut_off_mid_answer_run_on_resume_and_the_ones_recorded_do_not(httpserver, tmp_path,
                                                                                         monkeypatch):
    """A kill between two tool calls of one answer: the recorded one is read back, the other one runs."""
    script = Script(STEPS)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(
        lambda request: script.werkzeug(request))
    record = Trace.event
    ran: list[str] = []

    def stop_after_compile(trace, event):
        written = record(trace, event)
        if isinstance(event, ToolCallEvent) and event.name == "compile":
            raise SystemExit("killed")   # the folder stays as a kill right after this event leaves it
        return written

    monkeypatch.setattr(Trace, "event", stop_after_compile)
    with pytest.raises(SystemExit):
        agent.optimize("vector_add", model="scripted", base_url=httpserver.url_for("/v1"), iterations=2,
                       sandbox="fake", tune=False, sanitize=False, progress=False, traces=tmp_path / "t",
                       run_id="cut", config={"model": {"tools": True, "max_tool_calls": 8}})
    monkeypatch.setattr(Trace, "event", record)
    from agent.proposers.tools import ToolBox

    dispatch = ToolBox._dispatch

    def counted(box, name, arguments):
        ran.append(name)
        return dispatch(box, name, arguments)

    monkeypatch.setattr(ToolBox, "_dispatch", counted)
    script.steps, script.requests = list(STEPS[2:]), []
    final = agent.optimize(resume=tmp_path / "t" / "cut", traces=tmp_path / "t")
    assert ran == ["check", "time", "submit", "check", "submit"]    # compile was recorded; the rest ran now
    check = json.loads(next(e for e in read_events(final.path) if isinstance(e, ToolCallEvent)
                            and e.name == "check").result)
    assert check["status"] == "wrong"
    assert [(e.id, e.result.status.value) for e in final.entries] == [("c0000", "ok"), ("c0001", "wrong"),
                                                                       ("c0002", "ok")]
