"""Several models in one run: the roles policy (agent.proposers.roles) picks which answers each request, a model
past its own budget hands over to main, and the ledger, the trace and a resumed run account per model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agent
from agent.config import ConfigError, build
from agent.trace.events import ProposalEvent, read_events

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-roles-main-0123456789")
    monkeypatch.setenv("STRONG_KEY", "sk-roles-strong-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _config(httpserver, **strong):
    return {"selection": {"explore": 0.0},
            "model": {"roles": {"repair": "strong", "plateau": "strong", "plateau_after": 1},
                      "others": {"strong": {"name": "big", "base_url": httpserver.url_for("/strong/v1"),
                                            "api_key_env": "STRONG_KEY",
                                            "price": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}, **strong}}}}


def _serve(httpserver, main: list, strong: list) -> tuple[Script, Script]:
    scripts = Script(main), Script(strong)
    for path, script in zip(("/main/v1/chat/completions", "/strong/v1/chat/completions"), scripts):
        httpserver.expect_request(path, method="POST").respond_with_handler(script.werkzeug)
    return scripts


def test_repairs_and_plateaus_go_to_the_strong_model_until_its_budget_then_to_main(httpserver, tmp_path):
    main, strong = _serve(httpserver, [answer(broken=True), answer(fake="speedup=1.3", variant=2),
                                       answer(fake="speedup=1.31", variant=4)],
                          [answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.3", variant=3)])
    run = agent.optimize("vector_add", model="small", base_url=httpserver.url_for("/main/v1"), iterations=5,
                         sandbox="fake", tune=False, sanitize=False, traces=tmp_path / "t", progress=False,
                         config=_config(httpserver, budget_requests=2))
    proposals = [e for e in read_events(run.path) if isinstance(e, ProposalEvent) and e.origin == "llm"]
    assert [(p.answered_by, p.model_rule) for p in proposals] == [
        ("main", "default"), ("strong", "repair"), ("main", "default"), ("strong", "plateau"),
        ("main", "plateau: strong made 2 of its 2 requests")]
    assert [r["model"] for r in strong.requests] == ["big", "big"] and len(main.requests) == 3
    assert strong.headers[0]["authorization"] == "Bearer sk-roles-strong-0123456789"
    assert main.headers[0]["authorization"] == "Bearer sk-roles-main-0123456789"
    models = run.summary.totals.models
    assert models["strong"]["requests"] == 2 and models["main"]["requests"] == 3
    assert models["strong"]["cost_usd"] > 0 and models["main"]["cost_usd"] == 0
    assert sum(m["completion_tokens"] for m in models.values()) == run.summary.totals.completion_tokens
    assert any(n.startswith("models: main 3 request(s)") for n in run.summary.notes)


def test_a_resumed_run_counts_each_model_s_spend_from_the_trace(httpserver, tmp_path):
    _serve(httpserver, [answer(broken=True)], [answer(broken=True, variant=1)])
    first = agent.optimize("vector_add", model="small", base_url=httpserver.url_for("/main/v1"), iterations=2,
                           sandbox="fake", tune=False, sanitize=False, traces=tmp_path / "t", progress=False,
                           config=_config(httpserver, budget_requests=1))
    httpserver.clear()
    main, strong = _serve(httpserver, [answer(fake="speedup=1.3", variant=5)], [])
    resumed = agent.optimize(resume=first.path, iterations=3, progress=False, traces=tmp_path / "t",
                             base_url=httpserver.url_for("/main/v1"), config=_config(httpserver, budget_requests=1))
    proposals = [e for e in read_events(resumed.path) if isinstance(e, ProposalEvent) and e.origin == "llm"]
    assert [(p.answered_by, p.model_rule) for p in proposals] == [
        ("main", "default"), ("strong", "repair"), ("main", "repair: strong made 1 of its 1 requests")]
    assert not strong.requests and resumed.summary.totals.models["strong"]["requests"] == 1


@pytest.mark.parametrize("model, words", [
    ({"name": "a", "roles": {"repair": "nope"}}, "roles.repair: no model named 'nope'"),
    ({"name": "a", "others": {"b": {"name": "b", "budget_usd": 1}}}, "budget_usd of model 'b' needs its price"),
    ({"name": "a", "others": {"b": {"name": "b", "roles": {"repair": "main"}}}}, "cannot name models or roles"),
])
def test_a_role_config_that_cannot_work_is_one_clear_error(model, words):
    with pytest.raises(ConfigError, match=words):
        build({"model": model})
