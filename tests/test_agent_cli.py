"""`kernelwright optimize` and `kernelwright batch` as a user runs them (subprocesses, real local model server)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402


@pytest.fixture
def tune_small(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text("[tune]\nmax_evaluations = 3\n")
    return path


@pytest.mark.timeout(180)
def test_optimize_against_a_local_server_prints_the_table_and_says_it_is_simulated(kw, httpserver, tmp_path):
    script = Script([answer(broken=True), answer(fake="speedup=1.3")])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    key = "sk-cli-SECRET-27182818"
    out = kw("optimize", "vector_add", "--model", "scripted", "--base-url", httpserver.url_for("/v1"),
             "--api-key-env", "KW_TEST_KEY", "--iterations", "2", "--sandbox", "fake", "--no-tune",
             "--traces", tmp_path / "t", "--run-id", "demo", KW_TEST_KEY=key)
    assert out.returncode == 0, out.stderr
    assert "SIMULATED" in out.stdout and "compile_error" in out.stdout
    assert re.search(r"best: c0002 \(llm\) 1\.\d+x \[1\.\d+, 1\.\d+\]: faster than the baseline", out.stdout)
    assert "GPU-s (simulated)" in out.stdout and "break-even" in out.stdout
    assert script.headers[0]["authorization"] == f"Bearer {key}"
    assert (tmp_path / "t" / "demo" / "summary.json").is_file()
    assert all(key not in p.read_text() for p in (tmp_path / "t" / "demo").rglob("*") if p.is_file())


@pytest.mark.timeout(180)
def test_optimize_without_a_model_says_it_runs_the_built_in_search(kw, tmp_path, tune_small):
    out = kw("optimize", "vector_add", "--sandbox", "fake", "--config", tune_small, "--traces", tmp_path / "t", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["stops"]["search"] and summary["simulated"] is True
    [tuning] = summary["claim"]["tuning"]["searches"]
    assert tuning["strategy"] == "default" and tuning["budget"] == 3 and tuning["evaluations"] == 3
    assert tuning["stop_reason"] == "budget of 3 evaluations used"
    # the search screens; only its finalists are evaluated in full and become candidates
    assert tuning["screened"] == summary["totals"]["screened"] == 3
    assert tuning["evaluated_in_full"] == summary["totals"]["evaluations"] - 1 == summary["candidates"] - 1 <= 3
    from agent.report.html import render_report
    from agent.trace.reader import read

    html = render_report(read(tmp_path / "t" / summary["run_id"]))
    assert "built-in search" in html and "3 screened of a budget of 3" in html
    quiet = kw("optimize", "vector_add", "--sandbox", "fake", "--config", tune_small, "--traces", tmp_path / "t", "--quiet")
    assert "No model configured: running the built-in search" in quiet.stderr
    assert re.search(r"search \(default\) from .*: [\d,]+ configurations \(.*\); 3 screened of a budget of 3, "
                     r"\d evaluated in full", " ".join(quiet.stdout.split()))
    assert re.search(r"totals: 0 iterations, 3 configurations screened, \d evaluations in full, ", " ".join(quiet.stdout.split()))
    assert "or a [model] table in --config FILE" in " ".join(quiet.stderr.split())
    assert "--model NAME" in quiet.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, words", [
    (["vector_add", "--sandbox", "cloud"], "--sandbox: expected one of"),
    (["vector_add", "--resume", "x"], "give a TASK, or --resume RUN"),
    (["no_such_task", "--sandbox", "fake"], "no such task"),
    (["vector_add", "--model", "gpt-x", "--base-url", "https://api.example.com/v1"], "no API key for https://api.example.com/v1"),
    (["vector_add", "--model", "gpt-x", "--budget-usd", "1"], "a money budget needs the price of model 'gpt-x'"),
    (["--resume", "nope"], "nope: no such run"),
])
def test_bad_input_is_one_clear_line_and_exit_code_2(kw, tmp_path, args, words):
    out = kw("optimize", *args, "--traces", tmp_path / "t")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert words in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("events.jsonl"))


@pytest.mark.timeout(60)
def test_an_unknown_key_in_the_config_file_is_named(kw, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\niterations = 3\nmoney = 2\n")
    out = kw("optimize", "vector_add", "--config", bad, "--traces", tmp_path / "t")
    assert out.returncode == 2 and "budget.money: unknown key" in out.stderr


@pytest.mark.timeout(300)
def test_batch_runs_tasks_in_turn_and_resumes_the_unfinished_one(kw, tmp_path, tune_small):
    out = kw("batch", "vector_add", "softmax", "--sandbox", "fake", "--config", tune_small, "--traces", tmp_path / "t",
             "--batch-id", "b1", timeout=280)
    assert out.returncode == 0, out.stderr
    assert "vector_add" in out.stdout and "softmax" in out.stdout and "(sim)" in out.stdout
    rows = json.loads((tmp_path / "t" / "b1" / "summary.json").read_text())["tasks"]
    assert [r["state"] for r in rows] == ["done", "done"]

    events = tmp_path / "t" / "b1" / "softmax" / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    events.write_text("".join(lines[: len(lines) // 2]))
    (events.parent / "summary.json").unlink()  # as a kill leaves it: a kept summary beside a cut log is refused
    untouched = (tmp_path / "t" / "b1" / "vector_add" / "events.jsonl").read_text()
    again = kw("batch", "--resume", "b1", "--traces", tmp_path / "t", timeout=280)
    assert again.returncode == 0, again.stderr
    assert "softmax: resuming" in again.stdout and "vector_add: " not in again.stdout
    assert (tmp_path / "t" / "b1" / "vector_add" / "events.jsonl").read_text() == untouched
    assert events.read_text().splitlines()[-1].find('"kind": "end"') > 0
