"""LLMProposer against a real local OpenAI-compatible HTTP server (pytest-httpserver) with scripted answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.config import ModelConfig, Price
from agent.proposers.llm import LLMProposer, ModelEndpointError
from agent.protocols import Entry, ProposalRequest
from sandbox.candidate import load_candidate
from sandbox.result import Result, Status
from sandbox.task import load_task

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import PLAIN  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-llm-0123456789"
GOOD = f"Fixed block size.\n\n```cuda\n{PLAIN}```\n"


@pytest.fixture(scope="module")
def request_():
    task = load_task("vector_add")
    cand = load_candidate(task.baseline_path)
    result = Result(status=Status.compiled, task=task.name, task_fingerprint=task.fingerprint, candidate="c0000",
                    candidate_key=cand.key)
    base = Entry("c0000", cand, result, [], "baseline", 0)
    return ProposalRequest(task, [base], None, base, [], {"gpu": None, "arch": "sm_90"}, 1, {"sandbox": "compile-only"})


def _proposer(httpserver, steps, **cfg):
    script = Script(steps)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    config = ModelConfig(name="scripted", base_url=httpserver.url_for("/v1"), **cfg)
    return LLMProposer(config, KEY, Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)), script


def test_a_good_answer_becomes_a_candidate_with_usage_reasoning_and_the_request_as_configured(httpserver, request_):
    usage = {"prompt_tokens": 1000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 400},
             "completion_tokens_details": {"reasoning_tokens": 150}}
    proposer, script = _proposer(httpserver, [{"content": GOOD, "reasoning": "256 threads is enough", "usage": usage}],
                                 temperature=0.3, max_tokens=999, max_tokens_field="max_completion_tokens",
                                 extra_body={"top_k": 20})
    [p] = proposer.propose(request_)
    assert p.candidate is not None and p.error == "" and p.note == "Fixed block size."
    assert (p.usage.prompt_tokens, p.usage.completion_tokens, p.usage.cached_tokens, p.usage.reasoning_tokens) == (1000, 200, 400, 150)
    assert p.usage.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1e6)
    assert p.exchange["attempts"][0]["reasoning"] == "256 threads is enough"
    body = script.requests[0]
    assert body["max_completion_tokens"] == 999 and "max_tokens" not in body
    assert body["temperature"] == 0.3 and body["top_k"] == 20 and body["model"] == "scripted"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert script.headers[0]["authorization"] == f"Bearer {KEY}"


def test_reasoning_content_field_is_kept_too(httpserver, request_):
    proposer, _ = _proposer(httpserver, [{"content": GOOD, "reasoning_content": "vLLM style"}])
    [p] = proposer.propose(request_)
    assert p.exchange["attempts"][0]["reasoning"] == "vLLM style"


def test_an_answer_without_code_is_sent_back_with_a_precise_message_then_fixed(httpserver, request_):
    proposer, script = _proposer(httpserver, ["I would use float4 loads.", GOOD])
    [p] = proposer.propose(request_)
    assert p.candidate is not None
    follow_up = script.requests[1]["messages"]
    assert [m["role"] for m in follow_up] == ["system", "user", "assistant", "user"]
    assert follow_up[2]["content"] == "I would use float4 loads."
    assert follow_up[3]["content"].startswith("Your answer could not be used: the answer has no ```cuda code block.")
    assert p.exchange["attempts"][0]["error"] and len(p.exchange["attempts"]) == 2
    assert p.usage.requests == 2


def test_a_truncated_answer_is_retried_with_a_larger_token_budget(httpserver, request_):
    cut = GOOD[: len(GOOD) // 2]
    proposer, script = _proposer(httpserver, [{"content": cut, "finish_reason": "length"}, GOOD], max_tokens=1000)
    [p] = proposer.propose(request_)
    assert p.candidate is not None
    assert script.requests[0]["max_tokens"] == 1000 and script.requests[1]["max_tokens"] == 2000
    assert "cut off at the token limit (1000 tokens)" in script.user_messages[1]
    assert p.exchange["attempts"][0]["finish_reason"] == "length"


def test_after_the_semantic_retries_the_failure_is_a_value(httpserver, request_):
    proposer, script = _proposer(httpserver, ["no", "still no", "no again"], semantic_retries=2)
    [p] = proposer.propose(request_)
    assert p.candidate is None and "no ```cuda code block" in p.error
    assert len(script.requests) == 3 and len(p.exchange["attempts"]) == 3


@pytest.mark.parametrize("status", [429, 500])
def test_transport_errors_are_retried_by_the_sdk(httpserver, request_, status):
    proposer, script = _proposer(httpserver, [{"status": status}, {"status": status}, GOOD], max_retries=2)
    [p] = proposer.propose(request_)
    assert p.candidate is not None
    assert len(script.requests) == 3 and p.usage.requests == 1


def test_a_refused_request_ends_with_a_clear_endpoint_error(httpserver, request_):
    proposer, _ = _proposer(httpserver, [{"status": 401}])
    with pytest.raises(ModelEndpointError, match="HTTP 401"):
        proposer.propose(request_)
