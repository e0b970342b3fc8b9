"""A run folder that a kill, a disk or a hand damaged: ``--resume`` repairs only a last line torn by a kill, and
refuses everything else (a damaged middle line, a missing or foreign run.json or events.jsonl) with one error line
naming the file (and the line) and exit code 2, changing nothing; ``--replay`` of a folder that is not a run is
the same error, before any run folder is made."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

import agent
from agent.cli.app import app
from agent.trace.events import read_events


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A small finished run of the built-in search on the fake sandbox."""
    traces = tmp_path_factory.mktemp("traces")
    run = agent.optimize("vector_add", sandbox="fake", sanitize=False, traces=traces, run_id="done",
                         config={"tune": {"max_evaluations": 3}})
    return run.path


@pytest.fixture
def copy(finished, tmp_path):
    shutil.copytree(finished, tmp_path / "t" / "run")
    return tmp_path / "t" / "run"


def _kw(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _resume(run):
    return _kw("optimize", "--resume", run, "--quiet")


def _files(run) -> dict:
    """Every file of the run but its lock (which names the last process that held it)."""
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}


def _one_error(output: str, *words: str) -> None:
    assert "Traceback" not in output and all(w in output for w in words), output


@pytest.mark.timeout(60)
def test_a_damaged_middle_line_is_refused_with_its_number_and_nothing_is_cut(copy):
    events = copy / "events.jsonl"
    lines = events.read_bytes().split(b"\n")
    lines[4] = lines[4][: len(lines[4]) // 2] + b"#garbage"
    events.write_bytes(b"\n".join(lines))
    before = events.read_bytes()
    code, out = _resume(copy)
    assert code == 2
    _one_error(out, "events.jsonl: line 5: not JSON", "damaged line")
    assert events.read_bytes() == before
    code, out = _kw("show", copy)
    assert code == 2 and "line 5" in out


@pytest.mark.timeout(60)
def test_a_last_line_torn_by_a_kill_is_cut_and_the_run_resumes(copy):
    events = copy / "events.jsonl"
    whole = events.read_bytes()
    kept = whole[: whole.rstrip(b"\n").rfind(b"\n") + 1]  # every line but the last (the end event)
    events.write_bytes(kept + whole[len(kept): len(kept) + 40])
    (copy / "summary.json").unlink()  # the end event is written before the summary: a kill there leaves none
    code, out = _resume(copy)
    assert code == 0, out
    assert events.read_bytes().startswith(kept)
    assert len(read_events(copy, strict=True)) >= kept.count(b"\n") + 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage, words", [
    (lambda run: (run / "run.json").write_text("{not json"), ["run.json", "not JSON"]),
    (lambda run: (run / "run.json").write_text(json.dumps({k: v for k, v in json.loads((run / "run.json").read_text())
                                                          .items() if k != "task"})), ["run.json", "task"]),
    (lambda run: (run / "run.json").write_bytes(b"\xff\xfe{}"), ["run.json", "not JSON"]),
    (lambda run: (run / "events.jsonl").unlink(), ["no events.jsonl"]),
    (lambda run: (run / "events.jsonl").write_text('{"schema": "someone-else-1", "seq": 0, "kind": "x"}\n'),
     ["events.jsonl: line 1", "someone-else-1"]),
    (lambda run: (run / "run.json").write_text(json.dumps({**json.loads((run / "run.json").read_text()),
                                                           "task": {"name": "gone", "version": 1, "fingerprint": "x",
                                                                    "folder": str(run / "nowhere")}})),
     ["the run's task cannot be loaded"]),
], ids=["run.json not json", "run.json without task", "run.json not utf8", "no events", "foreign events", "task gone"])
def test_a_missing_or_foreign_run_file_is_one_error_and_exit_2(copy, damage, words):
    damage(copy)
    before = _files(copy)
    code, out = _resume(copy)
    assert code == 2, out
    _one_error(out, *words)
    assert _files(copy) == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [lambda d: None, lambda d: (d / "events.jsonl").write_text("not a trace\n")],
                         ids=["empty folder", "not a trace"])
def test_replay_of_a_folder_that_is_not_a_run_is_one_error_and_makes_nothing(tmp_path, make):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    make(folder)
    code, out = _kw("optimize", "vector_add", "--replay", folder, "--sandbox", "fake", "--traces", tmp_path / "t",
                    "--run-id", "r", "--quiet")
    assert code == 2, out
    _one_error(out, str(folder))
    assert not (tmp_path / "t" / "r").exists()
