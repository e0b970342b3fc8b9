"""Paths and disks that cannot take a command's output are one error line and exit code 2, never a traceback,
and nothing half-written is left."""

from __future__ import annotations

import errno
import pathlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "tests" / "fixtures" / "kernelbench" / "1_swish_clamp.py"
pytestmark = pytest.mark.timeout(120)


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _one_error(result, *words):
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], result.output


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    traces = tmp_path_factory.mktemp("traces")
    cfg = traces / "small.toml"
    cfg.write_text("[tune]\nmax_evaluations = 1\n")
    assert _cli("optimize", "vector_add", "--sandbox", "fake", "--config", cfg, "--traces", traces, "--run-id", "r1",
                "--quiet").exit_code == 0
    return traces


def test_import_of_a_file_that_is_not_utf8_is_one_error_line(tmp_path):
    pytest.importorskip("torch")   # without it, import says that first
    bad = tmp_path / "latin.py"
    bad.write_bytes(b"# caf\xe9\nimport torch\n")
    _one_error(_cli("import", bad, "-o", tmp_path / "out"), "latin.py: not UTF-8 text")


def test_import_onto_a_file_is_one_error_line(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    _one_error(_cli("import", PROBLEM, "-o", target), "is a file; give a folder")


def test_export_and_best_onto_a_folder_are_one_error_line(run, tmp_path):
    _one_error(_cli("export", "r1", "--traces", run, "--candidate", "c0000", "-o", tmp_path), "is a folder")
    (tmp_path / "k.py").mkdir()
    _one_error(_cli("export", "r1", "--traces", run, "--candidate", "c0000", "--torch", "-o", tmp_path / "k.py"),
               "is a folder")
    _one_error(_cli("best", "vector_add", "--gpu", "NVIDIA H200", "--out", tmp_path), "--out", "is a folder")


def _full_disk(monkeypatch):
    """Every file write raises ENOSPC once its first bytes are asked for, as on a full disk."""
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    import os
    real_fdopen = os.fdopen

    class FullFile:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            full()

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: FullFile(real_fdopen(fd, *a, **k)))
    monkeypatch.setattr(pathlib.Path, "write_text", full)


def test_export_onto_a_full_disk_is_one_error_line_and_leaves_no_file(run, tmp_path, monkeypatch):
    _full_disk(monkeypatch)
    out = tmp_path / "k.py"
    _one_error(_cli("export", "r1", "--traces", run, "--candidate", "c0000", "--torch", "-o", out),
               "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_import_onto_a_full_disk_is_one_error_line_and_leaves_no_folder(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    _full_disk(monkeypatch)
    out = tmp_path / "out"
    _one_error(_cli("import", PROBLEM, "-o", out), "No space left on device")
    assert not out.exists() or list(out.iterdir()) == []


def _bad_plan_task(tmp_path: Path) -> Path:
    import shutil

    folder = tmp_path / "tasks" / "vector_add"
    shutil.copytree(ROOT / "kernels" / "vector_add", folder)
    cu = folder / "baseline.cu"
    cu.write_text(cu.read_text().replace('grid = "ceil_div(n, BLOCK)"', 'grid = "ceil_div(n, NOPE)"'))
    return folder


@pytest.mark.parametrize("command", ["optimize", "batch"])
def test_a_baseline_whose_plan_does_not_fit_leaves_no_run_folder(command, tmp_path):
    traces = tmp_path / "t"
    result = _cli(command, _bad_plan_task(tmp_path), "--sandbox", "fake", "--traces", traces, "--quiet")
    assert result.exit_code == 2, result.output
    assert "baseline.cu: the task's starting kernel does not fit the task" in result.stderr
    assert "unknown names ['NOPE']" in result.stderr
    assert not traces.exists()


@pytest.mark.parametrize("url, words", [
    ("localhost:8000", ["add http://", "http://localhost:8000"]), ("http://[::1", ["cannot be read as a URL"]),
    ("http://h:99999/v1", ["Port out of range"]), ("ftp://h/v1", ["scheme 'ftp'"]), ("http:///v1", ["names no host"]),
    ("http://bob:pw-SECRET@h st/v1", ["space", "[redacted]"])],
    ids=["no scheme", "ipv6", "port", "ftp", "no host", "space"])
@pytest.mark.parametrize("command", ["optimize", "batch"])
def test_a_malformed_endpoint_url_is_one_line_and_exit_2(command, url, words, tmp_path):
    result = _cli(command, "vector_add", "--model", "m", "--base-url", url, "--sandbox", "fake", "--traces",
                  tmp_path / "t", "--quiet")
    _one_error(result, "--base-url", *words)
    assert "SECRET" not in result.output and not (tmp_path / "t").exists()


def test_a_malformed_proxy_variable_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
    result = _cli("optimize", "vector_add", "--model", "m", "--base-url", "http://localhost:9/v1", "--sandbox", "fake",
                  "--traces", tmp_path / "t", "--quiet")
    _one_error(result, "HTTPS_PROXY", "add http://")


class _FullAfter:
    """A trace's events file on a disk that fills up: the ``after``-th write and every later one raise ENOSPC."""

    def __init__(self, f, counter):
        self.f, self.counter = f, counter

    def write(self, data):
        self.counter["writes"] += 1
        if self.counter["writes"] >= self.counter["after"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


def _full_traces(monkeypatch, after: int) -> None:
    from agent.trace import writer

    counter = {"writes": 0, "after": after}
    real = writer.Trace.event

    def event(self, ev):
        if not isinstance(self._file, _FullAfter):
            self._file = _FullAfter(self._file, counter)
        return real(self, ev)

    monkeypatch.setattr(writer.Trace, "event", event)


@pytest.mark.parametrize("after", [2, 6])
def test_a_full_disk_under_traces_is_one_line_keeps_the_run_and_it_resumes(after, tmp_path, monkeypatch):
    traces = tmp_path / "t"
    with monkeypatch.context() as m:
        _full_traces(m, after)
        result = _cli("optimize", "vector_add", "--sandbox", "fake", "--traces", traces, "--run-id", "r", "--quiet")
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert len(error) == 1 and "r/events.jsonl: No space left on device" in error[0] and "--resume" in error[0]
    assert not (traces / "r" / ".lock").exists()
    kept = (traces / "r" / "events.jsonl").read_text()
    assert kept.count("\n") == after - 1 and kept.endswith("\n")
    again = _cli("optimize", "--resume", traces / "r", "--quiet")
    assert again.exit_code == 0, again.output
    assert (traces / "r" / "events.jsonl").read_text().startswith(kept)


def test_a_full_disk_under_a_batch_is_one_line_and_leaves_no_lock(tmp_path, monkeypatch):
    traces = tmp_path / "t"
    with monkeypatch.context() as m:
        _full_traces(m, 4)
        result = _cli("batch", "vector_add", "--sandbox", "fake", "--traces", traces, "--batch-id", "b", "--quiet")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "No space left on device" in result.output
    assert [p for p in traces.rglob(".lock")] == []
    again = _cli("batch", "--resume", "b", "--traces", traces, "--quiet")
    assert again.exit_code == 0, again.output


def test_an_import_name_taken_meanwhile_is_refused_not_overwritten(tmp_path):
    pytest.importorskip("torch")
    from sandbox.pytorch.importer import import_problem
    from sandbox.pytorch.problem import ProblemError

    out = tmp_path / "tasks"

    def other_import_finishes_first(folder):
        (out / "same").mkdir()
        (out / "same" / "theirs").write_text("the other import's task")

    with pytest.raises(ProblemError, match="another import took the name meanwhile"):
        import_problem(PROBLEM, out, name="same", vet=other_import_finishes_first)
    assert [p.name for p in (out / "same").iterdir()] == ["theirs"]
    assert sorted(p.name for p in out.iterdir()) == ["same"]


@pytest.mark.timeout(400)
def test_two_concurrent_imports_of_one_name_do_not_both_succeed(tmp_path):
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "300", "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "agent", "import", str(PROBLEM), "-o", str(tmp_path / "tasks"), "--name", "same"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=380) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = next(err for p, (_, err) in zip(procs, outs) if p.returncode == 2)
    assert "already exists" in loser and "Traceback" not in loser
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["same"]
