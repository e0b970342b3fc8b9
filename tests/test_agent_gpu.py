"""The agent loop on a real GPU: a local OpenAI-compatible server answers with scripted kernels that really
speed up softmax (tests/fixtures/agent/softmax: a one-pass, register-cached, warp-shuffle softmax; a
variant with a compile error; its fix). The best must beat the baseline with an interval clearing 1.0, and
pass compute-sanitizer's memcheck and racecheck before it is declared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import agent
from agent.trace.events import read_events

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from scripted_server import Script  # noqa: E402


def event_records(path):
    """The run's events (read through agent.trace.events) as the JSON objects of its events.jsonl."""
    return [e.model_dump(mode="json", by_alias=True) for e in read_events(path)]


ANSWERS = Path(__file__).parent / "fixtures" / "agent" / "softmax"


@pytest.mark.gpu
@pytest.mark.timeout(1200)
def test_scripted_rewrites_make_softmax_faster_and_the_trace_is_complete(httpserver, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    script = Script([p.read_text() for p in sorted(ANSWERS.glob("*.md"))])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize("softmax", model="scripted", base_url=httpserver.url_for("/v1"), iterations=3,
                         sandbox="gpu", tune=False, traces=tmp_path / "traces")
    shown = run.summary.to_json()
    print(json.dumps({k: shown[k] for k in ("best", "baseline", "totals", "stops", "notes", "claim")}, indent=2,
                     default=str))

    statuses = {e.id: e.result.status.value for e in run.entries}
    assert statuses == {"c0000": "ok", "c0001": "ok", "c0002": "compile_error", "c0003": "ok"}
    assert not run.simulated and run.summary.sandbox == "gpu"
    # the rewrites are faster at the benchmark size; the claim's winner must also hold at every held-out size,
    # where these answers were measured slower on the H200 (0.26x-0.44x): then each leader is set aside, named
    leader = max((e for e in run.entries if e.origin == "llm" and e.result.ok),
                 key=lambda e: e.result.speedup("baseline").value)
    speed = leader.result.speedup("baseline")
    assert speed.low > 1.0, speed
    assert leader.result.timing.impls["candidate"].pct_of_roofline > 0
    best = run.best
    flagged = run.summary.claim.set_aside
    if best is None:
        assert leader.id in {f.id for f in flagged}
        assert all("regresses at" in f.note or "REGRESSES at" in f.note for f in flagged), flagged
        assert any(n.startswith("set aside: ") and leader.id in n for n in run.summary.notes)
        assert run.summary.claim.sanitizer is None or run.summary.claim.sanitizer.winner is None
    else:
        assert best.origin == "llm" and best.id not in {f.id for f in flagged}

    baseline = run.baseline
    assert baseline.diagnosis and baseline.diagnosis in script.user_messages[0]

    events = event_records(run.path)
    proposed = {e["candidate_id"] for e in events if e["kind"] == "proposal" and e["candidate_id"]}
    evaluated = {e["candidate_id"] for e in events if e["kind"] == "evaluation"}
    assert proposed == evaluated == set(statuses)
    assert sum(e["kind"] == "model_call" for e in events) == 3 and events[-1]["kind"] == "end"
    totals = run.summary.totals
    assert totals.tokens > 0 and totals.gpu_s > 0
    if best is not None:
        assert run.summary.claim.ledger.saving.speedup == pytest.approx(best.result.speedup("baseline").value)
        assert all(row.status == "ok" for row in run.summary.claim.rows), run.summary.claim.heldout.text
        sanitized = run.summary.claim.sanitizer
        assert sanitized.status == "clean" and sanitized.winner == best.id, sanitized.text
        assert [t.tool for t in best.result.sanitize.tools] == ["memcheck", "racecheck"]
    for entry in run.entries:
        assert (run.path / "candidates" / entry.id / "result.json").is_file()
