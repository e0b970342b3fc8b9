"""The agent loop end to end on the CPU: a real local OpenAI-compatible server (pytest-httpserver) with
scripted answers, real NVRTC compiles, and the FakeSandbox (simulated runs) or compile-only mode."""

from __future__ import annotations

import json
import sys
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


pytestmark = pytest.mark.timeout(180)

KEY = "sk-e2e-SECRET-5f3a9c2e7b"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def serve(httpserver):
    def start(steps):
        script = Script(steps)
        httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
        return script, httpserver.url_for("/v1")
    return start


def _run(url, tmp_path, iterations, **kw):
    kw.setdefault("sandbox", "fake")
    kw.setdefault("tune", False)
    return agent.optimize("vector_add", model="scripted", base_url=url, iterations=iterations,
                          traces=tmp_path / "traces", **kw)


def _events(run, kind=None):
    events = event_records(run.path)
    return [e for e in events if kind is None or e["kind"] == kind]


def test_a_compile_error_goes_back_to_the_model_and_its_fix_becomes_the_best(serve, tmp_path):
    script, url = serve([answer(broken=True), answer(fake="speedup=1.3")])
    run = _run(url, tmp_path, 2)
    statuses = {e.id: (e.result.status.value, e.parent_ids) for e in run.entries}
    assert statuses == {"c0000": ("ok", []), "c0001": ("compile_error", ["c0000"]), "c0002": ("ok", ["c0001"])}
    assert 'identifier "j" is undefined' in script.user_messages[1]
    assert "does not compile" in script.user_messages[1]
    assert run.best.id == "c0002" and run.best.result.speedup().low > 1.0
    assert run.summary.stop_reason == "iterations: 2 reached" and run.simulated


def test_a_wrong_result_goes_back_with_its_mismatch_and_is_fixed(serve, tmp_path):
    script, url = serve([answer(fake="wrong"), answer(fake="speedup=1.25", variant=1)])
    run = _run(url, tmp_path, 2)
    assert [e.result.status.value for e in run.entries] == ["ok", "wrong", "ok"]
    assert "compiled but failed: wrong" in script.user_messages[1]
    assert "got 0.0, expected 1.0" in script.user_messages[1]
    assert run.best.parent_ids == ["c0001"]


def test_an_answer_without_code_is_answered_with_a_format_error_in_the_same_request(serve, tmp_path):
    script, url = serve(["Use float4.", answer()])
    run = _run(url, tmp_path, 1)
    calls = _events(run, "model_call")
    assert len(calls) == 2 and calls[0]["error"] and calls[1]["messages"][-1]["content"].startswith("Your answer could not be used")
    [proposal] = [p for p in _events(run, "proposal") if p["origin"] == "llm"]
    assert proposal["candidate_id"] == "c0001" and proposal["usage"]["requests"] == 2


def test_a_truncated_answer_is_detected_and_asked_again(serve, tmp_path):
    cut = answer()[:300]
    script, url = serve([{"content": cut, "finish_reason": "length"}, answer()])
    run = _run(url, tmp_path, 1)
    assert _events(run, "model_call")[0]["finish_reason"] == "length"
    assert "cut off at the token limit" in script.user_messages[1]
    assert run.best is not None


def test_an_answer_that_stays_unusable_is_recorded_and_the_run_goes_on(serve, tmp_path):
    script, url = serve(["no", "no", "no", answer()])
    run = _run(url, tmp_path, 2)
    proposals = [p for p in _events(run, "proposal") if p["origin"] == "llm"]
    assert proposals[0]["candidate_id"] is None and "no ```cuda code block" in proposals[0]["error"]
    assert proposals[1]["candidate_id"] == "c0001"


def test_429_and_500_are_retried_by_the_sdk_inside_the_loop(serve, tmp_path):
    script, url = serve([{"status": 429}, {"status": 500}, answer()])
    run = _run(url, tmp_path, 1)
    assert len(script.requests) == 3
    assert run.summary.totals.model_requests == 1 and run.best is not None


def test_the_api_key_is_sent_but_never_written_to_the_trace(serve, tmp_path):
    script, url = serve([answer(note=f"(server echoes the key: {KEY})")])
    run = _run(url, tmp_path, 1)
    assert script.headers[0]["authorization"] == f"Bearer {KEY}"
    files = [p for p in run.path.rglob("*") if p.is_file()]
    assert files and all(KEY not in p.read_text() for p in files)
    assert "[redacted]" in (run.path / "events.jsonl").read_text()


def test_the_trace_holds_config_events_candidates_and_summary(serve, tmp_path):
    script, url = serve([answer(), answer(fake="speedup=1.4", variant=2)])
    run = _run(url, tmp_path, 2)
    info = json.loads((run.path / "run.json").read_text())
    assert info["config"]["model"]["name"] == "scripted" and info["task"]["fingerprint"] == run.summary.task.fingerprint
    assert info["sandbox"]["kind"] == "fake"
    kinds = [e["kind"] for e in _events(run)]
    for kind in ("phase", "request", "model_call", "proposal", "evaluation", "best", "stop", "end"):
        assert kind in kinds
    for e in run.entries:
        folder = run.path / "candidates" / e.id
        assert (folder / "candidate.cu").read_text().startswith("/*@kernelwright")
        assert json.loads((folder / "result.json").read_text())["status"] == e.result.status.value
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["best"]["id"] == "c0002" and summary["totals"]["tokens"] > 0
    assert summary["notes"][0].startswith("SIMULATED")
    assert (run.path / "best.cu").is_file()


def test_a_duplicate_build_is_skipped_before_it_costs_gpu_time(serve, tmp_path):
    script, url = serve([answer(), answer(note="Same thing again.")])
    run = _run(url, tmp_path, 2)
    [skip] = _events(run, "skip")
    assert skip["reason"] == "duplicate" and skip["duplicate_of"] == "c0001"
    assert len(run.entries) == 2 and run.summary.duplicates_skipped == 1


def test_compile_only_mode_compiles_for_real_and_times_nothing(serve, tmp_path):
    script, url = serve([answer(broken=True), answer()])
    run = _run(url, tmp_path, 2, sandbox="compile-only")
    assert [e.result.status.value for e in run.entries] == ["compiled", "compile_error", "compiled"]
    assert all(e.result.timing is None for e in run.entries)
    assert run.best is None and not run.simulated
    assert any(n.startswith("compile-only") for n in run.summary.notes)
    assert "compile-only run" in script.user_messages[0]


def test_several_requests_are_in_flight_while_candidates_are_evaluated_one_at_a_time(serve, tmp_path):
    script, url = serve([answer(variant=v) for v in range(4)])
    run = _run(url, tmp_path, 4, config={"parallel": 2})
    kinds = [e["kind"] for e in _events(run)]
    first_proposal = kinds.index("proposal", kinds.index("phase"))
    assert kinds[:first_proposal].count("request") == 2
    assert len(script.requests) == 4 and len(run.entries) == 5


def test_token_and_money_budgets_end_the_run_with_a_summary(serve, tmp_path):
    script, url = serve([answer(variant=v) for v in range(5)])
    price = {"scripted": {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}
    run = _run(url, tmp_path, 5, config={"budget": {"usd": 2.0}, "prices": price})
    assert run.stop_reason.startswith("money") and len(script.requests) < 5
    assert run.summary.totals.usd >= 2.0 and (run.path / "summary.json").is_file()


def test_a_replay_reproduces_the_run_without_a_model(serve, tmp_path):
    script, url = serve([answer(broken=True), "no code here", "still none", "none", answer(variant=3)])
    first = _run(url, tmp_path, 3)
    again = agent.optimize("vector_add", replay=first.path, sandbox="fake", tune=False, traces=tmp_path / "traces",
                           config={"budget": {"iterations": 10}})
    assert [e.result.status.value for e in again.entries] == [e.result.status.value for e in first.entries]
    assert [e.result.candidate_key for e in again.entries] == [e.result.candidate_key for e in first.entries]
    assert again.stop_reason == "the proposer has nothing more to propose"
    assert again.summary.totals.tokens == 0


def test_after_a_model_run_the_tuner_sweeps_the_winners_knobs(serve, tmp_path):
    script, url = serve([answer()])
    run = _run(url, tmp_path, 1, tune=True, config={"tune": {"max_evaluations": 3}})
    phases = [e["name"] for e in _events(run, "phase")]
    assert phases == ["model", "tune"]
    tuned = [e for e in run.entries if e.origin == "tuner"]
    assert tuned and all(e.parent_ids == ["c0001"] for e in tuned)
    assert "tune" in run.summary.stops


def test_without_a_model_the_built_in_search_runs(tmp_path):
    run = agent.optimize("vector_add", sandbox="fake", traces=tmp_path / "traces",
                         config={"tune": {"max_evaluations": 4}})
    assert [e["name"] for e in _events(run, "phase")] == ["search"]
    assert {e.origin for e in run.entries} <= {"baseline", "tuner"} and run.entries[0].origin == "baseline"
    assert run.summary.claim.ledger.evaluations == len(run.entries)
    # the search's configurations are screened; the entries after the baseline are its finalists
    assert run.summary.totals.screened == len([c for e in _events(run, "screen") for c in e["configurations"]]) >= 3
    assert run.summary.claim.searches[0].evaluated_in_full == len(run.entries) - 1


def test_a_toml_run_config_sets_the_endpoint_and_request_fields(serve, tmp_path):
    script, url = serve([answer()])
    config = tmp_path / "run.toml"
    config.write_text(f'sandbox = "fake"\n\n[model]\nname = "scripted"\nbase_url = "{url}"\nmax_tokens = 4096\n'
                      'max_tokens_field = "max_completion_tokens"\nextra_body = { top_k = 20 }\n\n'
                      '[budget]\niterations = 1\n\n[tune]\nenabled = false\n')
    run = agent.optimize("vector_add", config=config, traces=tmp_path / "traces")
    body = script.requests[0]
    assert body["max_completion_tokens"] == 4096 and body["top_k"] == 20 and "max_tokens" not in body
    assert run.best is not None and json.loads((run.path / "run.json").read_text())["config"]["model"]["base_url"] == url


def test_openai_base_url_is_used_when_no_base_url_is_given(serve, tmp_path, monkeypatch):
    script, url = serve([answer()])
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    run = agent.optimize("vector_add", model="scripted", iterations=1, sandbox="fake", tune=False,
                         traces=tmp_path / "traces")
    assert len(script.requests) == 1 and run.best is not None


def test_progress_reports_iteration_best_interval_tokens_and_gpu_seconds(serve, tmp_path):
    script, url = serve([answer(fake="speedup=1.3")])
    seen = []
    _run(url, tmp_path, 1, on_progress=lambda kind, snap: seen.append((kind, snap)))
    kinds = [k for k, _ in seen]
    assert kinds.index("request") < kinds.index("proposal") < len(kinds) - 1 - kinds[::-1].index("evaluation")
    last = [snap for kind, snap in seen if kind == "evaluation"][-1]
    assert last["best_id"] == "c0001" and last["best_speedup"]["low"] > 1.0 and last["simulated"]
    assert last["iterations"] == 1 and last["tokens"] > 0 and last["gpu_s"] > 0 and last["phase"] == "model"
