"""No secret at rest or printed, wherever a user puts one: a distinct canary in each place (the key variable, the
URL's user name and password, credential-like keys of the config's ``extra_body`` at any depth, and
the Python API's ``api_key``) goes through a whole run against a local OpenAI-compatible server that echoes every
header it receives (``Authorization: Bearer`` and ``Basic`` among them) and every request field in its answers and
errors; then ``show``, ``report`` and ``export`` run. No file written and no line printed holds any canary, nor
the Basic credential built from them. (Key-like query values of a URL: tests/test_secrets_at_rest.py; the SDK
appends its path after a base URL's query, so no live run can use one.)"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import ConfigError, build
from agent.redact import Redactor, redact_config, secrets_in

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CANARIES = {"env": "CANARYenvKEY-8c1f27", "user": "canaryuser91", "password": "CANARYpass-4d2e",
            "api_key": "CANARYbodyapikey-19", "upstream_password": "CANARYupstream-5e",
            "nested": "CANARYnested-3f0", "api": "CANARYapi-given-6b2"}
BASIC = base64.b64encode(f"{CANARIES['user']}:{CANARIES['password']}".encode()).decode()


def _leaks(text: str) -> list[str]:
    return [name for name, value in {**CANARIES, "basic": BASIC}.items() if value in text]


def _echo(body, headers):
    """An answer whose note, code comment and reasoning repeat every header and every non-message field sent."""
    fields = {k: v for k, v in body.items() if k != "messages"}
    said = f"headers {json.dumps(headers)} fields {json.dumps(fields)}"
    return {"content": answer(note=f"I received: {said}").replace("// fake:", f"// {said}\n// fake:"),
            "reasoning": said}


def _error(body, headers):
    return {"status": 400, "message": f"bad request: {headers.get('authorization')} {json.dumps(body.get('auth'))}"}


@pytest.mark.timeout(10)
def test_credential_like_config_keys_are_found_and_redacted_at_any_depth():
    extra = {"top_k": 20, "max_tokens": 5, "api_key": "K1-secret", "upstream_password": 1234567,
             "auth": {"token": "T1-secret", "scheme": ["x", "y"]}, "url": "http://u:P1-secret@h/v1"}
    assert sorted(secrets_in(extra)) == sorted(["K1-secret", "1234567", "T1-secret", "x", "y", "u", "P1-secret",
                                                base64.b64encode(b"u:P1-secret").decode()])
    assert redact_config(extra) == {"top_k": 20, "max_tokens": 5, "api_key": "[redacted]",
                                    "upstream_password": "[redacted]",
                                    "auth": {"token": "[redacted]", "scheme": ["[redacted]", "[redacted]"]},
                                    "url": "http://[redacted]@h/v1"}
    assert Redactor().text("Authorization: Basic dXNlcjpwYXNzd29yZA==") == "Authorization: Basic [redacted]"
    with pytest.raises(ConfigError, match="extra_body: its credentials are never recorded"):
        build({"model": {"name": "m", "extra_body": {"api_key": "[redacted]"}}})


@pytest.mark.timeout(300)
def test_canaries_in_every_place_a_user_puts_a_secret_reach_no_file_and_no_screen(kw, tmp_path):
    script = Script([_echo, _error, answer(fake="speedup=1.2", variant=2), _echo])
    server, url = serve_in_background(script)
    with_password = url.replace("http://", f"http://{CANARIES['user']}:{CANARIES['password']}@")
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[model]\nname = "scripted"\nbase_url = "{url}"\napi_key_env = "KW_SECRET_KEY"\nmax_retries = 0\n'
                   f'[model.extra_body]\napi_key = "{CANARIES["api_key"]}"\n'
                   f'upstream_password = "{CANARIES["upstream_password"]}"\n'
                   f'auth = {{ bearer = "{CANARIES["nested"]}" }}\n')
    traces = tmp_path / "t"
    try:
        run = kw("optimize", "vector_add", "--config", cfg, "--iterations", "3", "--sandbox", "fake", "--no-tune",
                 "--traces", traces, "--run-id", "canary", KW_SECRET_KEY=CANARIES["env"])
        api = subprocess.run([sys.executable, "-c", (
            "import sys, kernelwright as kw\n"
            f"s = kw.optimize('vector_add', api_key={CANARIES['api']!r}, "
            f"iterations=1, sandbox='fake', tune=False, traces={str(traces)!r}, run_id='canary-api', "
            f"config={{'model': {{'name': 'scripted', 'base_url': {with_password!r}, 'max_retries': 0}}}})\n"
            "print(s)\n")], capture_output=True, text=True, timeout=200, cwd=ROOT, env=kw.env)
    finally:
        server.shutdown()
    sent = [json.dumps(h) for h in script.headers]
    # the canaries were sent: the key as a Bearer credential, the URL's user and password as a Basic one
    assert any(f"Bearer {CANARIES['env']}" in h for h in sent), (sent, run.stdout, run.stderr)
    assert any(f"Basic {BASIC}" in h for h in sent), (sent, api.stdout, api.stderr)
    assert any(CANARIES["api_key"] in json.dumps(r) for r in script.requests)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    runs = [traces / "canary", traces / "canary-api"]
    assert all((r / "events.jsonl").is_file() for r in runs), api.stdout + api.stderr
    events = (traces / "canary" / "events.jsonl").read_text()
    assert "[redacted]" in events and "I received" in events   # ...echoed, and kept redacted
    shown = [kw(cmd, r.name, "--traces", traces) for r in runs for cmd in ("show", "report")]
    exported = kw("export", "canary", "--traces", traces, "-o", tmp_path / "export")
    screens = [run.stdout, run.stderr, api.stdout, api.stderr, exported.stdout, exported.stderr]
    screens += [o.stdout + o.stderr for o in shown]
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != cfg and "cache" not in p.parts]
    assert {p.name for p in files} >= {"events.jsonl", "summary.json", "run.json", "report.html", "candidate.cu"}
    for i, text in enumerate(screens):
        assert _leaks(text) == [], f"printed ({i}): {_leaks(text)}"
    for path in files:
        assert _leaks(path.read_text(errors="replace")) == [], f"{path}: {_leaks(path.read_text(errors='replace'))}"
    stored = json.loads((traces / "canary" / "run.json").read_text())["config"]["model"]
    assert stored["extra_body"]["api_key"] == "[redacted]" and stored["extra_body"]["auth"]["bearer"] == "[redacted]"


@pytest.mark.timeout(120)
def test_a_batch_keeps_no_extra_body_credential_and_asks_for_the_config_again(kw, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[model]\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\n[model.extra_body]\n'
                   f'api_key = "{CANARIES["api_key"]}"\ntop_k = 20\n[budget]\niterations = 1\n[tune]\nenabled = false\n')
    traces = tmp_path / "t"
    out = kw("batch", "vector_add", "--config", cfg, "--sandbox", "fake", "--traces", traces, "--batch-id", "b1",
             "--quiet")
    assert out.returncode == 1, out.stderr   # nothing answers on port 9
    for path in [p for p in (traces / "b1").rglob("*") if p.is_file()]:
        assert _leaks(path.read_text(errors="replace")) == [], path
    assert _leaks(out.stdout + out.stderr) == []
    stored = json.loads((traces / "b1" / "batch.json").read_text())
    assert stored["base"]["model"]["extra_body"] == {"api_key": "[redacted]", "top_k": 20}
    with pytest.raises(ConfigError, match="extra_body: its credentials are never recorded"):
        build(stored["base"], stored["overrides"], "batch")
