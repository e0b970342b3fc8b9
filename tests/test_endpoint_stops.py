"""Every way the model endpoint fails ends the run the same way: a ``stop`` event whose reason is
``model_endpoint`` and whose message names the failure, the failed request's HTTP attempts in the trace, and a
non-zero exit code, also when the failure is the last request in flight and when tuning runs after it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agent
from agent.cli.exits import ExitCode
from agent.cli.optimize import _exit_code
from agent.stops import StopReason
from agent.trace.events import ModelCallEvent, StopEvent, read_events

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

FAILURES = {
    "refused": ({"status": 401, "message": "Incorrect API key provided"}, "answered HTTP 401"),
    "server error": ({"status": 500}, "answered HTTP 500"),
    "html page": ({"raw": "<html><body>502 Bad Gateway</body></html>"}, "not a chat completion"),
    "not json": ({"raw": "{\"choices\": [", "content_type": "application/json"}, "not a chat completion"),
    "slow drip": ({"content": answer(), "drip": 0.5}, "request deadline"),
}


@pytest.fixture
def serve():
    servers = []

    def start(steps):
        server, url = serve_in_background(Script(steps))
        servers.append(server)
        return url

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _run(url, tmp_path, iterations, parallel=1, tune=False):
    cfg = {"model": {"name": "scripted", "max_retries": 0, "timeout_s": 1.5, "semantic_retries": 0},
           "parallel": parallel, "tune": {"max_evaluations": 2}}
    return agent.optimize("vector_add", model="scripted", base_url=url, iterations=iterations, sandbox="fake",
                          tune=tune, sanitize=False, traces=tmp_path / "t", config=cfg)


def _stops(run) -> list[StopEvent]:
    return [e for e in read_events(run.path, strict=True) if isinstance(e, StopEvent)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_each_endpoint_failure_on_the_last_request_is_a_stop_event_and_exit_code_1(serve, tmp_path, failure):
    step, words = FAILURES[failure]
    run = _run(serve([step]), tmp_path, iterations=1)
    [stop] = _stops(run)
    assert stop.reason is StopReason.MODEL_ENDPOINT and words in stop.message, stop.message
    calls = [e for e in read_events(run.path) if isinstance(e, ModelCallEvent)]
    assert calls and words in calls[-1].error and calls[-1].http, calls  # the failed attempt is in the trace
    assert _exit_code(run) == ExitCode.FAILED


@pytest.mark.timeout(60)
def test_a_refusal_while_every_request_is_in_flight_is_not_hidden_by_the_iteration_limit(serve, tmp_path):
    run = _run(serve([answer(fake="speedup=1.2"), {"status": 401}, answer(fake="speedup=1.3", variant=2)]),
               tmp_path, iterations=3, parallel=4)
    [stop] = _stops(run)
    assert stop.reason is StopReason.MODEL_ENDPOINT and "HTTP 401" in stop.message
    assert _exit_code(run) == ExitCode.FAILED


@pytest.mark.timeout(120)
def test_tuning_after_a_failed_model_phase_does_not_hide_the_failure(serve, tmp_path, kw):
    url = serve([{"status": 401}])
    config = tmp_path / "run.toml"
    config.write_text("[tune]\nmax_evaluations = 2\n[model]\nname = \"scripted\"\nmax_retries = 0\n")
    out = kw("optimize", "vector_add", "--base-url", url, "--config", config, "--iterations", "1", "--parallel", "2",
             "--sandbox", "fake", "--no-sanitize", "--traces", tmp_path / "t", "--run-id", "refused")
    assert out.returncode == ExitCode.FAILED, (out.stdout, out.stderr)
    assert "model endpoint" in out.stdout and "answered HTTP 401" in out.stdout
    phases = [(e.phase, e.reason) for e in read_events(tmp_path / "t" / "refused") if isinstance(e, StopEvent)]
    assert phases[0] == ("model", StopReason.MODEL_ENDPOINT) and phases[-1][0] == "tune"  # tuning did run after it


@pytest.mark.timeout(120)
def test_a_batch_whose_run_failed_on_the_endpoint_says_so_and_exits_1(serve, tmp_path, kw):
    url = serve([{"status": 401}])
    out = kw("batch", "vector_add", "--model", "scripted", "--base-url", url, "--iterations", "1", "--sandbox", "fake",
             "--no-tune", "--no-sanitize", "--traces", tmp_path / "t", "--batch-id", "b")
    assert out.returncode == ExitCode.FAILED, (out.stdout, out.stderr)
    assert "failed" in out.stdout and "answered HTTP 401" in out.stdout
