"""A run sanitizes its winner before declaring it: one with a race or an out-of-bounds access is rejected and
the next best takes its turn. CPU: a local scripted model server, real compiles and the FakeSandbox, whose
sanitizer verdicts are scripted by ``// fake:`` annotations (and marked simulated)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import agent
from agent.claims.sanitize import DISABLED
from agent.trace.events import SanitizeEvent, read_events

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def serve(httpserver):
    def start(steps):
        httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(Script(steps).werkzeug)
        return httpserver.url_for("/v1")
    return start


def _run(url, tmp_path, answers: int, **kw):
    return agent.optimize("vector_add", model="scripted", base_url=url, iterations=answers, sandbox="fake", tune=False,
                          traces=tmp_path / "traces", **kw)


def _sanitize_events(run):
    return [e.model_dump(mode="json") for e in read_events(run.path) if isinstance(e, SanitizeEvent)]


def test_a_racy_winner_is_rejected_and_the_next_best_is_declared(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.6, race", variant=2)])
    run = _run(url, tmp_path, 2)
    section = run.summary.claim.sanitizer
    assert run.best.id == "c0001" and section.winner == "c0001" and section.rejected == ["c0002"]
    assert section.status == "clean"
    assert [e["candidate_id"] for e in _sanitize_events(run)] == ["c0002", "c0001"]
    racy = next(e for e in run.entries if e.id == "c0002")
    assert racy.result.status.value == "rejected"
    assert racy.result.error.startswith("compute-sanitizer: racecheck: 1 error in vector_add4")
    stored = json.loads((run.path / "candidates" / "c0002" / "result.json").read_text())
    assert stored["status"] == "rejected" and stored["sanitize"]["simulated"] is True
    assert run.summary.claim.sanitizer.text == ("sanitizer: c0002 rejected (memcheck: clean; racecheck: 1 error in "
                                            "vector_add4: Error: Race reported between Write access and Read access "
                                            "(simulated by a '// fake: race' annotation) (simulated)); winner c0001: "
                                            "memcheck: clean; racecheck: clean (simulated)")
    assert "2244)" in (run.path / "best.cu").read_text()  # c0001's grid cap
    reread = agent.load_run(run.path)
    assert next(e for e in reread.entries if e.id == "c0002").result.status.value == "rejected"
    assert reread.best.id == "c0001"


def test_a_winner_with_no_verdict_stands_and_the_summary_says_so(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3, sanitizer_fails")])
    run = _run(url, tmp_path, 1)
    assert run.best.id == "c0001" and run.best.result.status.value == "ok"
    assert run.summary.claim.sanitizer.status == "failed"
    assert "memcheck: no verdict (simulated ('// fake: sanitizer_fails'))" in run.summary.claim.sanitizer.text


def test_out_of_bounds_winners_past_the_limit_are_not_called_sanitized(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3, out_of_bounds", variant=1), answer(fake="speedup=1.6, out_of_bounds",
                                                                                variant=2)])
    run = _run(url, tmp_path, 2, config={"sanitize": {"max_candidates": 1}})
    section = run.summary.claim.sanitizer
    assert section.rejected == ["c0002"] and section.winner == "c0001" and section.status == "not sanitized"
    assert section.text.endswith("winner c0001: not sanitized (the limit of 1 sanitized candidates was reached)")
    assert [e["candidate_id"] for e in _sanitize_events(run)] == ["c0002"]


def test_when_every_faster_candidate_has_errors_there_is_no_winner(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3, out_of_bounds")])
    run = _run(url, tmp_path, 1)
    assert run.best is None and run.summary.best is None
    assert run.summary.claim.sanitizer.status == "none left"
    assert "no winner left" in run.summary.claim.sanitizer.text


def test_no_sanitize_is_said_and_nothing_is_sanitized(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3, race")])
    run = _run(url, tmp_path, 1, sanitize=False)
    assert run.best.id == "c0001" and _sanitize_events(run) == []
    assert run.summary.claim.sanitizer.status == "disabled"
    assert run.summary.claim.sanitizer.text == "sanitizer: winner c0001: " + DISABLED


def test_a_resumed_run_keeps_its_verdicts_and_does_not_sanitize_again(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.6, race", variant=2)])
    first = _run(url, tmp_path, 2)
    again = agent.optimize(resume=first.path, model="scripted", base_url=url, traces=tmp_path / "traces")
    assert len(_sanitize_events(again)) == 2
    assert again.best.id == "c0001" and again.summary.claim.sanitizer == first.summary.claim.sanitizer


def test_the_no_sanitize_flag_becomes_the_config_switch():
    from agent.run_options import RunOptions

    assert RunOptions(no_sanitize=True).overrides() == {"sanitize": {"enabled": False}}
    assert RunOptions(no_sanitize=False).overrides() == {}
