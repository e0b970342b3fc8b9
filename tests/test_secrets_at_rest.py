"""No credential is kept at rest: a password in an endpoint URL from a config file, or a key in its query string,
is in no file of a batch or its runs, not on the screen, not in a lock file; a resume asks for the URL again."""

from __future__ import annotations

import json
import sys

import pytest

from agent.config import ConfigError, build
from agent.redact import Redactor, redact_url, redact_urls_in, url_credentials
from agent.trace.lock import FolderLock

PASSWORD, QUERY_KEY = "PW-SECRET-0815", "QK-SECRET-4711"
URL = f"http://bob:{PASSWORD}@127.0.0.1:9/v1?api-version=2024&api-key={QUERY_KEY}"


@pytest.mark.timeout(10)
def test_key_like_query_values_and_credentials_leave_every_url():
    assert redact_url(URL) == "http://[redacted]@127.0.0.1:9/v1?api-version=2024&api-key=[redacted]"
    assert redact_url(redact_url(URL)) == redact_url(URL), "redacting twice changes nothing"
    assert redact_url("https://h/v1?sig=abc&token=t0k&x=1#f") == "https://h/v1?sig=[redacted]&token=[redacted]&x=1#f"
    assert redact_url("https://h/v1?x=1") == "https://h/v1?x=1"
    assert redact_urls_in(f"GET {URL} failed") == f"GET {redact_url(URL)} failed"
    assert set(url_credentials(URL)) == {"bob", PASSWORD, QUERY_KEY}
    assert Redactor.for_run(URL).text(f"the server said {QUERY_KEY}") == "the server said [redacted]"
    line = json.dumps({"note": 'see "https://h/v1?token=abc"\nand https://h/?key=k\\'})  # a trace line
    assert json.loads(Redactor().text(line)) == {"note": 'see "https://h/v1?token=[redacted]"\nand https://h/?key=[redacted]\\'}


@pytest.mark.timeout(10)
def test_a_lock_file_names_the_command_without_the_urls_secrets(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["kernelwright", "optimize", "x", "--base-url", URL])
    with FolderLock(tmp_path):
        text = (tmp_path / ".lock").read_text()
    assert PASSWORD not in text and QUERY_KEY not in text and "api-key=[redacted]" in text


@pytest.mark.timeout(120)
def test_a_batch_keeps_no_credential_of_a_config_files_url_and_asks_for_it_on_resume(kw, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[model]\nname = "m"\nbase_url = "{URL}"\n[budget]\niterations = 1\n[tune]\nenabled = false\n')
    traces = tmp_path / "t"
    out = kw("batch", "vector_add", "--config", cfg, "--sandbox", "fake", "--traces", traces, "--batch-id", "b1",
             "--quiet")
    assert out.returncode == 1, out.stderr  # nothing answers on port 9: the model phase fails
    files = [p for p in (traces / "b1").rglob("*") if p.is_file()]
    # the endpoint is checked before a run folder is made, so the batch's own files are what is at rest
    assert {p.name for p in files} >= {"batch.json", "summary.json"}
    for text in [out.stdout, out.stderr] + [p.read_text(errors="replace") for p in files]:
        assert PASSWORD not in text and QUERY_KEY not in text
    stored = json.loads((traces / "b1" / "batch.json").read_text())
    assert stored["base"]["model"]["base_url"] == redact_url(URL)
    with pytest.raises(ConfigError, match="credentials in the endpoint's URL are never recorded"):
        build(stored["base"], stored["overrides"], "batch")  # what a resume starts from, unless the URL is given
    assert build(stored["base"], {"model": {"base_url": URL}}).model.base_url == URL
