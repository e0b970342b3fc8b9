"""A run folder whose files or numbers no longer match its events is refused by show, export, verify and report
(exit code 2, the file named); a run written before the hashes existed is marked; a best-known record edited
by hand is refused; a lone surrogate in a model's answer is written escaped and read back."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from agent.trace.reader import read

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    traces = tmp_path_factory.mktemp("traces")
    cfg = traces / "small.toml"
    cfg.write_text("[tune]\nmax_evaluations = 2\n")
    assert _cli("optimize", "vector_add", "--sandbox", "fake", "--config", cfg, "--traces", traces, "--run-id", "r1",
                "--quiet").exit_code == 0
    return traces / "r1"


@pytest.fixture
def run(original, tmp_path):
    shutil.copytree(original, tmp_path / "r1")
    return tmp_path / "r1"


def _refused(run: Path, *words):
    for args in (("show", run), ("export", run, "--candidate", "c0000", "-o", run.parent / "k.cu"),
                 ("verify", run), ("report", run, "-o", run.parent / "r.html")):
        result = _cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert all(w in result.output for w in words), (args, result.output)
    assert not (run.parent / "k.cu").exists() and not (run.parent / "r.html").exists()


def test_an_untouched_run_reads_as_checked(run):
    stored = read(run)
    assert stored.unchecked == ""
    assert all(e.source_sha256 for e in stored.events if e.kind == "evaluation")
    assert _cli("show", run).exit_code == 0


def test_an_edited_candidate_file_is_refused_by_name(run):
    source = run / "candidates" / "c0000" / "candidate.cu"
    source.write_text(source.read_text().replace("c[i] = a[i] + b[i]", "c[i] = a[i] - b[i]"))
    _refused(run, "c0000/candidate.cu", "edited since it was evaluated")


def test_a_number_edited_in_events_jsonl_is_refused_with_its_line(run):
    events = run / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if '"kind": "evaluation"' in line)
    lines[n], edits = re.subn(r'"time_gpu_s": [0-9.e-]+', '"time_gpu_s": 0.000123', lines[n], count=1)
    assert edits == 1
    events.write_text("".join(lines))
    _refused(run, f"events.jsonl: line {n + 1}", "chain does not match")


def test_a_line_removed_from_events_jsonl_is_refused(run):
    events = run / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    events.write_text("".join(lines[:3] + lines[4:]))
    assert _cli("show", run).exit_code == 2


def test_an_edited_summary_is_refused_by_name(run):
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["candidates"] += 5
    path.write_text(json.dumps(summary, indent=2))
    _refused(run, "summary.json", "none of the run's end events")


def test_a_run_without_hashes_is_shown_with_a_loud_mark(run):
    events = run / "events.jsonl"
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    for line in lines:
        line.pop("chain")
        line.pop("source_sha256", None)
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    shown = _cli("show", run)
    assert shown.exit_code == 0 and "UNCHECKED" in shown.output and "cannot be detected" in shown.output
    lines[1]["chain"] = "0" * 64  # a chain after lines without one would start a new, unchecked history
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert _cli("show", run).exit_code == 2


def test_an_edited_best_known_record_is_refused_by_name(tmp_path, monkeypatch):
    from agent.claims.best import BestRecord, BestStore, Envelope
    from sandbox.judging.result import Interval
    from sandbox.tasks.task import load_task

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    task = load_task("vector_add")
    store = BestStore()
    envelope = Envelope(gpu="NVIDIA H200")
    record = BestRecord(task=task.name, task_version=1, task_fingerprint=task.fingerprint, envelope=envelope,
                        sizes=dict(task.spec.sizes.benchmark), kernel=task.baseline_path.read_text(), label="c0001",
                        knobs={}, flags=[], median_ms=1.0, speedup=Interval(value=1.2, low=1.1, high=1.3),
                        recorded_at="2026-01-01T00:00:00")
    record.digest = record.content_digest()
    path = store.path(task, envelope, record.sizes)
    path.parent.mkdir(parents=True)
    path.write_text(record.model_dump_json(indent=2))
    good = _cli("best", "vector_add", "--gpu", "NVIDIA H200")
    assert good.exit_code == 0 and "vector_add" in good.output
    path.write_text(path.read_text().replace('"median_ms": 1.0', '"median_ms": 0.5'))
    bad = _cli("best", "vector_add", "--gpu", "NVIDIA H200")
    assert bad.exit_code == 2 and str(path) in bad.output.replace("\n", "") and "edited" in bad.output


@pytest.mark.timeout(180)
def test_a_lone_surrogate_in_an_answer_is_kept_escaped_in_the_trace(kw, tmp_path):
    script = Script([answer(note="half of a pair: \ud83d, alone"), answer(fake="speedup=1.1", variant=1)])
    server, url = serve_in_background(script)
    traces = tmp_path / "t"
    try:
        out = kw("optimize", "vector_add", "--model", "scripted", "--base-url", url, "--iterations", "2",
                 "--sandbox", "fake", "--no-tune", "--traces", traces, "--run-id", "s")
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    raw = (traces / "s" / "events.jsonl").read_bytes()
    assert b"\\ud83d, alone" in raw
    stored = read(traces / "s")
    assert any(e.note == "half of a pair: \ud83d, alone" for e in stored.entries)
    assert kw("show", "s", "--traces", traces).returncode == 0


@pytest.mark.timeout(180)
def test_a_lone_surrogate_in_a_models_code_is_escaped_before_any_cache_key_or_file(kw, tmp_path):
    in_comment = answer(variant=1).replace("// fake:", "// half of a pair \ud83d here\n// fake:")
    in_code = answer(variant=2).replace("__global__", "__global__ /* \udc00 */", 1)
    script = Script([in_comment, in_code] * 2)
    server, url = serve_in_background(script)
    traces = tmp_path / "t"
    try:
        outs = [kw("optimize", "vector_add", "--model", "scripted", "--base-url", url, "--iterations", "2",
                   "--sandbox", sandbox, "--no-tune", "--traces", traces, "--run-id", sandbox)
                for sandbox in ("fake", "compile-only")]
    finally:
        server.shutdown()
    for out in outs:
        assert out.returncode == 0 and "Traceback" not in out.stdout + out.stderr, out.stderr
    for sandbox in ("fake", "compile-only"):
        files = sorted((traces / sandbox / "candidates").glob("*/candidate.cu"))
        written = b"".join(f.read_bytes() for f in files)
        assert b"\\ud83d here" in written and b"/* \\udc00 */" in written
        assert read(traces / sandbox).unchecked == ""


def test_swapped_candidate_files_make_resume_refuse_as_show_does(run):
    first, second = (run / "candidates" / c / "candidate.cu" for c in ("c0000", "c0001"))
    a, b = first.read_bytes(), second.read_bytes()
    assert a != b
    first.write_bytes(b)
    second.write_bytes(a)
    resumed = _cli("optimize", "--resume", run, "--sandbox", "fake", "--quiet")
    assert resumed.exit_code == 2, resumed.output
    assert "c0000/candidate.cu" in resumed.output and "edited since it was evaluated" in resumed.output
    _refused(run, "c0000/candidate.cu", "edited since it was evaluated")


def test_an_event_log_cut_before_its_end_beside_a_kept_summary_is_refused_not_mixed(run):
    events = run / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    end = max(i for i, line in enumerate(lines) if '"kind": "end"' in line)
    events.write_text("".join(lines[:end]))   # whole lines: no torn line to repair
    assert (run / "summary.json").is_file()
    _refused(run, "events.jsonl", "no end event", "cut short")
    resumed = _cli("optimize", "--resume", run, "--sandbox", "fake", "--quiet")
    assert resumed.exit_code == 2 and "cut short" in resumed.output, resumed.output


def test_a_best_known_record_without_its_digest_is_refused(tmp_path, monkeypatch):
    from agent.claims.best import BestRecord, BestStore, Envelope
    from sandbox.judging.result import Interval
    from sandbox.tasks.task import load_task

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    task = load_task("vector_add")
    envelope = Envelope(gpu="NVIDIA H200")
    record = BestRecord(task=task.name, task_version=1, task_fingerprint=task.fingerprint, envelope=envelope,
                        sizes=dict(task.spec.sizes.benchmark), kernel=task.baseline_path.read_text(), label="c0001",
                        knobs={}, flags=[], median_ms=0.01, speedup=Interval(value=99.0, low=98.0, high=99.5),
                        recorded_at="2026-01-01T00:00:00")
    path = BestStore().path(task, envelope, record.sizes)
    path.parent.mkdir(parents=True)
    path.write_text(record.model_dump_json(indent=2))   # digest: null, as if it had been deleted
    bad = _cli("best", "vector_add", "--gpu", "NVIDIA H200")
    assert bad.exit_code == 2 and "has no digest" in bad.output and "99" not in bad.output.replace(str(path), "")
