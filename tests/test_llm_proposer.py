"""LLMProposer against a real local OpenAI-compatible HTTP server with scripted answers, and against one that
misbehaves: every way ends in one ``ModelEndpointError`` or a re-ask, within the request deadline, with each HTTP
attempt recorded and no secret passed on."""

from __future__ import annotations

import json

import sys
import time
from pathlib import Path

import pytest

from agent.proposers import endpoint
from agent.config import ModelConfig, Price
from agent.proposers.llm import LLMProposer, ModelEndpointError
from agent.protocols import Entry, ProposalRequest
from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Result, Status
from sandbox.tasks.task import load_task

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import PLAIN  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

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


# ---- a misbehaving endpoint: every way ends in one clear error or a re-ask, within the deadline ----


@pytest.fixture
def endpoint_with():
    servers = []

    def start(steps, url_auth: str = "", **cfg):
        script = Script(steps)
        server, url = serve_in_background(script)
        servers.append(server)
        if url_auth:
            url = url.replace("http://", f"http://{url_auth}@")
        return LLMProposer(ModelConfig(name="scripted", base_url=url, **cfg), KEY), script

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _fails(proposer, request) -> tuple[ModelEndpointError, float]:
    t0 = time.monotonic()
    with pytest.raises(ModelEndpointError) as info:
        proposer.propose(request)
    return info.value, time.monotonic() - t0


@pytest.mark.parametrize("first_byte_after", [0.5, 30.0], ids=["slow-drip", "silent-after-headers"])
def test_a_request_is_cut_at_its_deadline_however_slowly_the_answer_comes(endpoint_with, request_, first_byte_after):
    proposer, script = endpoint_with([{"content": GOOD, "drip": first_byte_after}, GOOD], timeout_s=2.0, max_retries=2)
    error, seconds = _fails(proposer, request_)
    assert 1.9 < seconds < 15  # cut at 2 s; uncut, the answer would take 30 s or more (a loaded machine adds seconds)
    assert "no complete answer within the request deadline of 2 s" in str(error)
    assert len(script.requests) == 1  # not retried past the deadline
    [attempt] = error.attempts
    assert attempt["http"][0]["status"] == 200 and attempt["error"] == str(error)


@pytest.mark.parametrize("body, content_type, shown", [
    ("<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html", "'<html><body><h1>502 Bad Gateway"),
    ("upstream overloaded", "application/json", "'upstream overloaded'"),
    ('{"error": {"message": "model is loading"}}', "application/json", "model is loading"),
    ('{"choices": [{"index": 0, "message": null}]}', "application/json", "choices"),
    ("", "application/json", "(empty)"),
], ids=["html", "not-json", "error-object", "no-message", "empty"])
def test_a_200_answer_that_is_not_a_chat_completion_is_an_endpoint_error(endpoint_with, request_, body, content_type,
                                                                          shown):
    proposer, _ = endpoint_with([{"raw": body, "content_type": content_type}])
    error, _ = _fails(proposer, request_)
    assert f"answered HTTP 200 with a body that is not a chat completion ({content_type}" in str(error)
    assert shown in str(error) and "\n" not in str(error)


def test_every_http_attempt_is_recorded_including_the_sdk_retries(endpoint_with, request_):
    proposer, script = endpoint_with([{"status": 429}, {"status": 503}, GOOD], max_retries=2)
    [p] = proposer.propose(request_)
    assert p.candidate is not None and len(script.requests) == 3
    [attempt] = p.exchange["attempts"]
    assert [h.get("status") for h in attempt["http"]] == [429, 503, 200]


def test_a_refusal_carries_its_attempts_and_never_the_key_it_echoes(endpoint_with, request_):
    proposer, script = endpoint_with([{"status": 401, "message": f"Incorrect API key provided: {KEY}"}],
                                     url_auth="alice:hunter2-PASS")
    error, _ = _fails(proposer, request_)
    text = str(error)
    assert "answered HTTP 401" in text and "Incorrect API key provided" in text
    assert KEY not in text and "hunter2-PASS" not in text and "[redacted]@127.0.0.1" in text
    assert error.attempts[0]["http"] == [{"status": 401, "seconds": error.attempts[0]["http"][0]["seconds"]}]
    assert script.headers[0]["authorization"].startswith("Basic ")  # the URL's credentials went to the server only


def test_a_response_larger_than_the_byte_cap_is_cut_off(endpoint_with, request_, monkeypatch):
    monkeypatch.setattr(endpoint, "MAX_BODY_BYTES", 64 * 1024)
    proposer, _ = endpoint_with([GOOD + "x" * 200_000])
    error, _ = _fails(proposer, request_)
    assert "the response passed 0.0625 MiB" in str(error)


def test_an_answer_over_the_size_limit_is_re_asked_and_never_kept_whole(endpoint_with, request_):
    huge = GOOD + "// padding\n" * 500_000  # 5.5 MB
    proposer, script = endpoint_with([huge, GOOD])
    [p] = proposer.propose(request_)
    assert p.candidate is not None and len(script.requests) == 2
    first, second = p.exchange["attempts"]
    assert first["error"].startswith("the answer is 5,500,") and "at most 200,000 are accepted" in first["error"]
    assert len(first["response"]) < 2100 and "more characters not kept" in first["response"]
    follow_up = script.requests[1]["messages"]
    assert sum(len(m["content"]) for m in follow_up) < 50_000
    assert "at most one sentence before it" in follow_up[-1]["content"]


def test_a_key_the_endpoint_echoes_reaches_neither_the_candidate_nor_the_next_prompt(endpoint_with, request_):
    def echo(body, headers):
        token = headers["authorization"].removeprefix("Bearer ")
        return {"content": f"Your key is {token}. I would use float4.", "reasoning": f"key={token}"}

    def echo_in_code(body, headers):
        token = headers["authorization"].removeprefix("Bearer ")
        return {"content": GOOD.replace("```cuda\n", f"Key {token}.\n```cuda\n// {token}\n")}

    proposer, script = endpoint_with([echo, echo_in_code])
    [p] = proposer.propose(request_)
    assert p.candidate is not None
    assert KEY not in p.candidate.source and KEY not in p.note and "[redacted]" in p.candidate.source
    assert all(KEY not in m["content"] for m in script.requests[1]["messages"])
    assert KEY not in repr(p.exchange)


def test_a_200_completion_with_no_choices_is_asked_again_like_an_empty_answer(endpoint_with, request_):
    empty = json.dumps({"id": "x", "created": 0, "model": "scripted", "choices": [],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10}})
    proposer, script = endpoint_with([{"raw": empty, "content_type": "application/json"}, GOOD])
    [p] = proposer.propose(request_)
    assert p.candidate is not None and p.error == ""
    assert len(script.requests) == 2
    first, second = p.exchange["attempts"]
    assert first["response"] == "" and first["error"]
    assert second["response"] == GOOD.strip() or second["response"] == GOOD
