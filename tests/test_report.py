"""`kernelwright report` and `kernelwright show` on stored runs (no GPU), and their answers to bad RUN arguments."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import run_dir, simulated_run  # noqa: E402,F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent


def kw(*args, timeout=120):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def cli(*args):
    """The command in this process, through the app ``python -m agent`` runs: for the many error answers, where
    starting a process per answer would cost a second each."""
    from typer.testing import CliRunner

    from agent.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"}, catch_exceptions=False)


def _events(run: Path) -> list[str]:
    return (run / "events.jsonl").read_text().splitlines(keepends=True)


@pytest.mark.timeout(120)
def test_report_is_one_self_contained_file_with_plots_lineage_and_every_candidate(run_dir):
    from agent.report.html import write_report
    from agent.trace.reader import read

    stored = read(run_dir)
    html = write_report(stored).read_text()
    assert (run_dir / "report.html").is_file()
    assert html.count("<svg") >= 2 and 'id="plot-evaluations"' in html and 'id="plot-gpu_s"' in html
    for entry in stored.entries:
        assert f'id="{entry.id}"' in html
    assert "Validity envelope" in html and "Held-out sizes" in html and "break-even" in html
    assert "the task&#39;s starting kernel (baseline.cu)" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "the report must load nothing from outside"
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert "Content-Security-Policy" in html and '"Segoe UI"' in html, "CSS must not be HTML-escaped"


@pytest.mark.timeout(120)
def test_report_names_the_winner_its_interval_and_the_costs_of_the_simulated_run(simulated_run):
    from agent.report.html import render_report
    from agent.trace.reader import read

    stored = read(simulated_run)
    html = render_report(stored)
    best = stored.best
    s = best.result.speedup("baseline")
    assert f"Winner <a href=\"#{best.id}\">{best.id}</a>" in html
    assert f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" in html
    assert "SIMULATED RUN" in html
    tokens = json.loads((simulated_run / "summary.json").read_text())["totals"]["tokens"]
    assert f"{tokens:,} (prompt" in html
    # three progress curves and the roofline; this model run screened nothing, so the space figure says so
    assert 'id="plot-tokens"' in html and html.count("<svg") == 4
    assert 'id="plot-roofline"><svg' in html.replace("\n", "") and "screened nothing" in html
    assert "duplicate of c0003" in html and "unusable answer" in html


@pytest.mark.timeout(120)
def test_text_from_the_model_is_escaped_in_the_report(simulated_run):
    from agent.report.html import render_report
    from agent.trace.reader import read

    html = render_report(read(simulated_run))
    assert "&lt;script&gt;alert(&#39;not escaped&#39;)&lt;/script&gt;" in html
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    assert "a &lt; b &amp;&amp; b &gt; a" in html


@pytest.mark.timeout(120)
def test_each_candidate_shows_its_diff_against_its_parent(simulated_run):
    from agent.report.views import candidate_view
    from agent.trace.reader import read

    stored = read(simulated_run)
    fixed = candidate_view(stored, stored.by_id["c0003"])
    assert fixed["parents"] == ["c0002"]
    changed = [d["text"] for d in fixed["diff"] if d["kind"] in ("add", "del")]
    assert any("make_float5" in t for t in changed if t.startswith("-"))
    assert any("make_float4" in t for t in changed if t.startswith("+"))
    tuned = candidate_view(stored, stored.by_id[stored.best.id])
    assert any(d["kind"] == "add" and "BLOCK = [512" in d["text"] for d in tuned["diff"])
    base = candidate_view(stored, stored.baseline)
    assert {d["kind"] for d in base["diff"]} == {"src"}


@pytest.mark.timeout(120)
def test_a_profiled_candidate_shows_its_diagnosis(simulated_run):
    from agent.report.html import render_report
    from agent.trace.reader import read

    text = "memory-bound: DRAM at 81% of peak; top stall long_scoreboard <b>(41%)</b>"
    lines = []
    for line in _events(simulated_run):
        ev = json.loads(line)
        if ev["kind"] == "evaluation" and ev["candidate_id"] == "c0003":
            ev["diagnosis"] = text
            ev["result"]["profile"] = {"status": "ok", "diagnosis": text, "diagnosis_data": {"bound": "memory"}}
        lines.append(json.dumps(ev) + "\n")
    (simulated_run / "events.jsonl").write_text("".join(lines))
    html = render_report(read(simulated_run))
    section = html[html.index('id="c0003"'):html.index('id="c0004"')]
    assert "<summary>diagnosis</summary>" in section
    assert "long_scoreboard &lt;b&gt;(41%)&lt;/b&gt;" in section and section.count("DRAM at 81%") == 1


@pytest.mark.timeout(120)
def test_an_unfinished_run_still_renders_and_says_it_did_not_finish(simulated_run):
    from agent.report.html import render_report
    from agent.trace.reader import read

    lines = _events(simulated_run)
    cut = next(i for i, line in enumerate(lines) if '"kind": "stop"' in line)
    (simulated_run / "events.jsonl").write_text("".join(lines[:cut]))
    (simulated_run / "summary.json").unlink()
    stored = read(simulated_run)
    html = render_report(stored)
    assert "did not finish" in html and stored.best is not None
    assert f'id="{stored.best.id}"' in html


@pytest.mark.timeout(120)
def test_report_command_writes_the_file_given_with_o(run_dir, tmp_path):
    out = kw("report", run_dir.name, "--traces", run_dir.parent, "-o", tmp_path / "r.html")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert str(tmp_path / "r.html") in out.stdout


@pytest.mark.timeout(120)
def test_show_prints_the_claim_and_the_lineage_tree(simulated_run):
    from agent.trace.reader import read

    stored = read(simulated_run)
    out = kw("show", simulated_run)
    assert out.returncode == 0, out.stderr
    assert "SIMULATED" in out.stdout and "lineage:" in out.stdout
    assert re.search(rf"winner {stored.best.id} \(tuner\): \d\.\d{{3}}x \[", out.stdout)
    assert "└─ c0002 llm compile_error" in out.stdout
    assert re.search(rf"[├└]─ {stored.best.id} tuner ok .* <- winner", out.stdout)
    for entry in stored.entries:
        assert entry.id in out.stdout


def _cut_last_line(run: Path) -> None:
    raw = (run / "events.jsonl").read_bytes()
    (run / "events.jsonl").write_bytes(raw[:-40])


def _garbage_line(run: Path) -> None:
    lines = _events(run)
    lines[3] = "{not json\n"
    (run / "events.jsonl").write_text("".join(lines))


def _other_schema(run: Path) -> None:
    lines = _events(run)
    lines[0] = lines[0].replace("kernelwright-events-1", "kernelwright-events-9")
    (run / "events.jsonl").write_text("".join(lines))


def _lost_proposal(run: Path) -> None:
    lines = _events(run)
    first = next(i for i, line in enumerate(lines) if '"kind": "proposal"' in line and '"c0001"' in line)
    kept = lines[:first] + lines[first + 1:]
    (run / "events.jsonl").write_text("".join(json.dumps({**json.loads(line), "seq": i}) + "\n" for i, line in enumerate(kept)))


def _no_events(run: Path) -> None:
    (run / "events.jsonl").unlink()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["report", "show", "verify"])
@pytest.mark.parametrize("damage, message", [
    (_cut_last_line, "is cut off"),
    (_garbage_line, "line 4: not JSON"),
    (_other_schema, "line 1: schema 'kernelwright-events-9'"),
    (_lost_proposal, "which no earlier proposal made"),
    (_no_events, "not a run folder (no events.jsonl)"),
], ids=["truncated", "garbage", "schema", "orphan-evaluation", "no-events"])
def test_a_damaged_trace_is_one_clear_error_and_exit_2(simulated_run, command, damage, message):
    damage(simulated_run)
    out = cli(command, simulated_run)
    assert out.exit_code == 2, (out.stdout, out.stderr)
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 3
    assert not (simulated_run / "report.html").exists()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["report", "show", "verify"])
def test_no_such_run_and_a_folder_that_is_not_a_run_exit_2(command, tmp_path):
    missing = kw(command, "no-such-run", "--traces", tmp_path)
    assert missing.returncode == 2 and "no-such-run: no such run" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = cli(command, tmp_path / "empty")
    assert empty.exit_code == 2 and "not a run folder" in empty.stderr
