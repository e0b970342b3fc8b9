"""No secret reaches the screen, the trace, the report or a later prompt, whatever echoes it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.redact import Redactor, redact_url, redact_urls_in

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

KEY = "sk-proj-SECRETKEY-0123456789abcdef"
PASSWORD = "pa55w0rd-SECRET"


@pytest.mark.timeout(10)
def test_the_redactor_knows_keys_url_credentials_and_key_shaped_text(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_tokenvalue_SECRET_1")
    monkeypatch.setenv("KW_KEY", "explicit-var-SECRET")
    r = Redactor.for_run("http://bob:p%40ss-SECRET@[::1]:8000/v1", "KW_KEY", key="given-SECRET")
    text = r.text("given-SECRET explicit-var-SECRET hf_tokenvalue_SECRET_1 p%40ss-SECRET p@ss-SECRET "
                  "sk-ant-abcdefghijklmnopqrstuvwxyz Authorization: Bearer abcdefghijklmnopqrstu vector_add sk-x")
    assert "SECRET" not in text and "abcdefghij" not in text
    assert text.endswith("vector_add sk-x")  # ordinary text is left alone
    assert r.data({"a": ["given-SECRET", 3, None], "given-SECRET": 1.5}) == {"a": ["[redacted]", 3, None], "[redacted]": 1.5}
    assert redact_url("http://bob:pw@[::1]:8000/v1") == "http://[redacted]@[::1]:8000/v1"
    assert redact_url("https://api.example.com/v1") == "https://api.example.com/v1"
    assert redact_urls_in("kernelwright optimize x --base-url https://u:p@h/v1 --model m") == \
        "kernelwright optimize x --base-url https://[redacted]@h/v1 --model m"


def _echo(body, headers):
    return {"content": answer(note=f"The key you sent: {KEY}; the password: {PASSWORD}.").replace(
        "// fake:", f"// {KEY} {PASSWORD}\n// fake:"), "reasoning": f"I saw {KEY}"}


@pytest.mark.timeout(180)
def test_a_key_and_a_url_password_echoed_by_the_endpoint_are_redacted_everywhere(kw, tmp_path):
    script = Script([_echo, answer(fake="speedup=1.2", variant=2),
                     {"status": 401, "message": f"Incorrect API key provided: {KEY} for user bob:{PASSWORD}"}])
    server, url = serve_in_background(script)
    url = url.replace("http://", f"http://bob:{PASSWORD}@")
    traces = tmp_path / "t"
    try:
        out = kw("optimize", "vector_add", "--model", "scripted", "--base-url", url, "--api-key-env", "KW_KEY",
                 "--iterations", "4", "--sandbox", "fake", "--no-tune", "--traces", traces, "--run-id", "leaky", KW_KEY=KEY)
    finally:
        server.shutdown()
    assert out.returncode == 1, (out.stdout, out.stderr)
    screen = out.stdout + out.stderr
    assert "model endpoint: http://[redacted]@127.0.0.1:" in " ".join(screen.split())
    assert "answered HTTP 401" in screen and "Incorrect API key provided: [redacted]" in screen
    report = kw("report", "leaky", "--traces", traces)
    assert report.returncode == 0, report.stderr
    shown = kw("show", "leaky", "--traces", traces)
    files = [p for p in (traces / "leaky").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"events.jsonl", "summary.json", "run.json", "report.html", "candidate.cu"}
    for text in [screen, report.stdout + report.stderr, shown.stdout + shown.stderr] + [p.read_text() for p in files]:
        assert KEY not in text and PASSWORD not in text
    later_prompts = [m["content"] for r in script.requests[1:] for m in r["messages"]]
    assert any("[redacted]" in m for m in later_prompts)  # the echoing answer was the parent of the next request
    assert all(KEY not in m and PASSWORD not in m for m in later_prompts)
