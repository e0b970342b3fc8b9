"""Tool-calling sessions on the CPU: a scripted endpoint that answers with ``tool_calls`` drives a whole session
on the FakeSandbox (read, compile, check, time, profile, submit, then a repair after a wrong submission); the trace
and the totals account for every call; an endpoint that refuses tools gets one line and plain requests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import agent
from agent.config import ConfigError, build
from agent.trace.events import ModelCallEvent, ProposalEvent, ToolCallEvent, read_events

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-tools-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def calls(*pairs):
    return {"content": "", "tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


WRONG = answer(fake="wrong", variant=1)
FIXED = answer(fake="speedup=1.3", variant=2)


def _run(httpserver, tmp_path, steps, iterations):
    script = Script(steps)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize("vector_add", model="scripted", base_url=httpserver.url_for("/v1"), iterations=iterations,
                         sandbox="fake", tune=False, sanitize=False, traces=tmp_path / "t", progress=False,
                         config={"model": {"tools": True, "max_tool_calls": 8}})
    return run, script


def test_a_session_reads_compiles_checks_times_profiles_submits_and_a_wrong_submission_is_repaired(
        httpserver, tmp_path):
    steps = [calls(("read_task", {}), ("read_lineage", {})),
             calls(("compile", {"answer": answer(broken=True)})),
             calls(("check", {"answer": WRONG})),
             calls(("time", {"answer": FIXED}), ("profile", {"answer": FIXED})),
             calls(("submit", {"answer": WRONG})),
             calls(("check", {"answer": FIXED})),
             calls(("submit", {"answer": FIXED}))]
    run, script = _run(httpserver, tmp_path, steps, 2)
    assert [t["function"]["name"] for t in script.requests[0]["tools"]] == [
        "read_task", "read_lineage", "read_candidate", "compile", "check", "time", "profile", "submit"]
    events = read_events(run.path)
    tools = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(t.request, t.turn, t.name, t.status) for t in tools] == [
        ("r0000", 0, "read_task", "ok"), ("r0000", 0, "read_lineage", "ok"), ("r0000", 1, "compile", "ok"),
        ("r0000", 2, "check", "ok"), ("r0000", 3, "time", "ok"), ("r0000", 3, "profile", "ok"),
        ("r0000", 4, "submit", "ok"), ("r0001", 0, "check", "ok"), ("r0001", 1, "submit", "ok")]
    results = {(t.request, t.name): json.loads(t.result) for t in tools}
    assert results["r0000", "read_task"]["task"]["name"] == "vector_add"
    assert results["r0000", "compile"]["status"] == "compile_error"
    assert 'identifier "j" is undefined' in results["r0000", "compile"]["detail"]
    assert results["r0000", "check"]["status"] == "wrong"
    assert "got 0.0, expected 1.0" in json.dumps(results["r0000", "check"]["checks"])
    assert results["r0000", "time"]["speedup_text"].startswith("1.3")
    # the tool results went back to the model in the same conversation
    last = script.requests[4]["messages"]
    assert last[-1]["role"] == last[-2]["role"] == "tool" and last[-3]["tool_calls"][1]["function"]["name"] == "profile"
    # what was submitted was evaluated in full: the wrong one is repaired by the next session
    assert [(e.id, e.result.status.value, e.parent_ids) for e in run.entries] == [
        ("c0000", "ok", []), ("c0001", "wrong", ["c0000"]), ("c0002", "ok", ["c0001"])]
    assert "compiled but failed: wrong" in script.requests[5]["messages"][1]["content"]
    model_calls = [e for e in events if isinstance(e, ModelCallEvent)]
    assert len(model_calls) == 7 and model_calls[0].tool_calls[0]["name"] == "read_task"
    proposals = [e for e in events if isinstance(e, ProposalEvent) and e.origin == "llm"]
    assert sum(p.usage.requests for p in proposals) == 7
    tool_gpu = sum(t.gpu_s for t in tools)
    assert tool_gpu > 0
    from agent.report import views
    from agent.trace.reader import read

    shown = {n["id"]: n["picked"] for n in views.lineage_lines(read(run.path))}
    assert "7 tool calls (read_task ok, read_lineage ok, compile ok, check ok, time ok, profile ok, submit ok" \
        in shown["c0001"]
    evaluated = sum(e.result.cost.gpu_s for e in run.entries)
    assert run.summary.totals.gpu_s == pytest.approx(evaluated + tool_gpu, rel=1e-3, abs=1e-4)


def test_a_session_that_never_submits_ends_at_its_tool_call_limit(httpserver, tmp_path):
    steps = [calls(("read_lineage", {}))] * 8 + [calls(("read_task", {})), calls(("submit", {"answer": FIXED}))]
    run, _ = _run(httpserver, tmp_path, steps, 1)
    tools = [e for e in read_events(run.path) if isinstance(e, ToolCallEvent)]
    assert [t.status for t in tools][-2:] == ["limit", "ok"] and len(run.entries) == 2


def test_an_endpoint_without_tools_gets_one_line_and_plain_requests(httpserver, tmp_path, capfd):
    steps = [{"status": 400, "message": "tools are not supported by this model"}, answer(), answer(variant=3)]
    run, script = _run(httpserver, tmp_path, steps, 2)
    err = capfd.readouterr().err
    assert err.count("does not take tools") == 1
    assert "tools" in script.requests[0] and "tools" not in script.requests[1] and "tools" not in script.requests[2]
    assert [e.result.status.value for e in run.entries] == ["ok", "ok", "ok"]


def test_a_session_cut_off_by_its_endpoint_leaves_its_tool_calls_in_the_trace_and_the_totals(httpserver, tmp_path):
    steps = [calls(("compile", {"answer": FIXED})), calls(("time", {"answer": FIXED})),
             {"status": 401, "message": "the key was revoked"}]
    run, _ = _run(httpserver, tmp_path, steps, 2)
    events = read_events(run.path)
    tools = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(t.request, t.turn, t.name, t.status) for t in tools] == [("r0000", 0, "compile", "ok"),
                                                                      ("r0000", 1, "time", "ok")]
    assert json.loads(tools[1].result)["speedup_text"].startswith("1.3") and tools[1].gpu_s > 0
    assert [e.request for e in events if isinstance(e, ModelCallEvent)] == ["r0000"] * 3
    assert run.summary.stops["model"].reason.value == "model_endpoint"
    assert [e.id for e in run.entries] == ["c0000"]
    assert run.summary.totals.gpu_s == pytest.approx(run.entries[0].result.cost.gpu_s + tools[1].gpu_s, rel=1e-3,
                                                     abs=1e-4)


def test_an_endpoint_that_refuses_tools_midway_keeps_the_calls_made_so_far(httpserver, tmp_path, capfd):
    steps = [calls(("check", {"answer": FIXED})), {"status": 400, "message": "tools are not supported here"},
             FIXED]
    run, _ = _run(httpserver, tmp_path, steps, 1)
    assert capfd.readouterr().err.count("does not take tools") == 1
    tools = [e for e in read_events(run.path) if isinstance(e, ToolCallEvent)]
    assert [(t.request, t.name, t.status) for t in tools] == [("r0000", "check", "ok")]
    assert [(e.id, e.result.status.value) for e in run.entries] == [("c0000", "ok"), ("c0001", "ok")]


def test_a_baseline_the_sandbox_cannot_check_stops_the_setup_before_any_session_and_says_why(
        httpserver, tmp_path, monkeypatch):
    # what the GPU sandbox raises where the reference worker runs out of device memory on the baseline's checks
    from sandbox.host.fake import FakeSandbox
    from sandbox.tasks.task import TaskError

    def out_of_memory(self, task, candidate, sizes=None, timing=True):
        raise TaskError(f"{task.folder}/reference.py: reference() raised OutOfMemoryError: Out of memory")

    monkeypatch.setattr(FakeSandbox, "evaluate", out_of_memory)
    run, script = _run(httpserver, tmp_path, [calls(("read_task", {}))], 2)
    events = read_events(run.path)
    assert not script.requests and not [e for e in events if isinstance(e, (ToolCallEvent, ModelCallEvent))]
    assert list(run.summary.stops) == ["setup"] and "OutOfMemoryError" in run.summary.stops["setup"].message
    assert run.entries == []


def test_tools_with_parallel_requests_is_one_clear_error():
    with pytest.raises(ConfigError, match="parallel = 1"):
        build({"model": {"name": "m", "tools": True}, "parallel": 2})


SOFTMAX = Path(__file__).parent / "fixtures" / "agent" / "softmax"


@pytest.mark.gpu
@pytest.mark.timeout(1200)
def test_a_scripted_tool_session_drives_the_real_sandbox(httpserver, tmp_path):
    online, broken = (SOFTMAX / "01_online.md").read_text(), (SOFTMAX / "02_broken.md").read_text()
    wrong = online.replace('grid = "rows"', 'grid = "ceil_div(rows, 2)"')   # half the rows: a wrong result
    steps = [calls(("read_task", {}), ("read_lineage", {})),
             calls(("compile", {"answer": broken})),
             calls(("check", {"answer": online})),
             calls(("time", {"answer": online})),
             calls(("profile", {"answer": online})),
             calls(("submit", {"answer": wrong})),
             calls(("submit", {"answer": online}))]
    script = Script(steps)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize("softmax", model="scripted", base_url=httpserver.url_for("/v1"), iterations=2,
                         sandbox="gpu", tune=False, sanitize=False, traces=tmp_path / "t", progress=False,
                         config={"model": {"tools": True}})
    events = read_events(run.path)
    tools = [e for e in events if isinstance(e, ToolCallEvent)]
    stops = {phase: f"{stop.reason.value}: {stop.message}" for phase, stop in run.summary.stops.items()}
    print("stops:", stops)
    print("entries:", [e.result.summary() for e in run.entries])
    for m in events:
        if isinstance(m, ModelCallEvent) and m.error:
            print("model call", m.request, m.error)
    for t in tools:
        print(t.request, t.name, t.status, f"{t.gpu_s:.3f} GPU-s", t.result[:160])
    # a setup that stopped (the baseline not ok, the sandbox failing) never reaches the model phase: say so first
    assert run.entries and run.entries[0].result.status.value == "ok", stops
    assert stops.get("model", "").startswith("iterations"), stops
    results = {t.name: json.loads(t.result) for t in tools if t.name != "submit"}
    assert results["compile"]["status"] == "compile_error"
    assert results["check"]["status"] in ("ok", "compiled") and results["check"]["checks"]["passed"] > 0
    assert results["time"]["status"] == "ok" and "interval" in results["time"]["speedup_text"]
    assert results["profile"]["status"] in ("ok", "unavailable", "failed")
    assert [(e.result.status.value, e.parent_ids) for e in run.entries[1:]] == [("wrong", ["c0000"]),
                                                                                ("ok", ["c0001"])]
    assert not run.simulated and sum(t.gpu_s for t in tools) > 0
    assert run.summary.totals.gpu_s >= sum(e.result.cost.gpu_s for e in run.entries) + sum(t.gpu_s for t in tools) - 1e-6
