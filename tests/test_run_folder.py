"""A run folder belongs to one process at a time, run ids are names, and bad files or names leave nothing behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class HeldScript(Script):
    """A model that holds every answer after the first two until ``gate`` opens: the run stays alive, holding its
    folder, for as long as the test needs, however fast or loaded the machine."""

    def __init__(self, steps):
        super().__init__(steps)
        self.gate = threading.Event()

    def reply(self, body, headers):
        with self._lock:
            held = len(self.requests) >= 2
        if held:
            self.gate.wait(timeout=150)
        return super().reply(body, headers)


@pytest.mark.timeout(180)
def test_a_second_process_on_a_live_run_is_told_who_holds_it_and_exits_2(kw, tmp_path):
    script = HeldScript([answer(fake=f"speedup={1.1 + v / 10}", variant=v) for v in range(12)])
    server, url = serve_in_background(script)
    traces = tmp_path / "t"
    cmd = [sys.executable, "-m", "agent", "optimize", "vector_add", "--model", "scripted", "--base-url", url,
           "--iterations", "10", "--sandbox", "fake", "--no-tune", "--traces", str(traces), "--run-id", "busy", "--quiet"]
    first = subprocess.Popen(cmd, cwd=ROOT, env=kw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        events = traces / "busy" / "events.jsonl"
        deadline = time.monotonic() + 90
        while not (events.exists() and '"kind": "evaluation"' in events.read_text()):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        before = events.read_bytes()
        for args in (["optimize", "--resume", "busy"], ["optimize", "vector_add", "--run-id", "busy", "--sandbox", "fake"]):
            out = kw(*args, "--traces", traces)
            assert out.returncode == 2, (out.stdout, out.stderr)
            assert f"in use by process {first.pid} on " in out.stderr and "optimize vector_add" in out.stderr
            assert "Traceback" not in out.stderr
        assert events.read_bytes().startswith(before)
        script.gate.set()
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        again = kw("optimize", "--resume", "busy", "--traces", traces, "--iterations", "3", "--quiet")
        assert again.returncode == 0, again.stderr  # the kernel dropped the killed process's lock
    finally:
        script.gate.set()
        if first.poll() is None:
            first.kill()
        server.shutdown()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["../../escaped", "/tmp/absolute-run", "a/b", "..", ".hidden", "x" * 200, ""])
def test_a_run_id_is_a_name_not_a_path(name):
    from agent.config import ConfigError, run_name

    with pytest.raises(ConfigError, match="is not a usable name"):
        run_name(name)
    assert run_name("20260101-120000-softmax-ab12") == "20260101-120000-softmax-ab12"


@pytest.mark.timeout(60)
def test_a_path_as_run_id_or_batch_id_writes_nothing_anywhere(kw, tmp_path):
    traces = tmp_path / "deep" / "t"
    for args in (["optimize", "vector_add", "--run-id"], ["batch", "vector_add", "--batch-id"]):
        out = kw(*args, "../../escaped", "--sandbox", "fake", "--traces", traces)
        assert out.returncode == 2, (out.stdout, out.stderr)
        assert "is not a usable name" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "deep").exists() and not (tmp_path / "escaped").exists()


@pytest.mark.timeout(60)
def test_a_batch_with_an_unknown_task_leaves_no_folder(kw, tmp_path):
    out = kw("batch", "vector_add", "no_such_task", "--sandbox", "fake", "--traces", tmp_path / "t", "--batch-id", "b")
    assert out.returncode == 2 and "no_such_task" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "t").exists()


@pytest.mark.timeout(60)
def test_files_that_are_not_utf8_are_one_clear_error(kw, tmp_path):
    candidate = tmp_path / "latin1.cu"
    candidate.write_bytes((ROOT / "kernels" / "vector_add" / "baseline.cu").read_bytes() + "// caf\xe9\n".encode("latin-1"))
    config = tmp_path / "latin1.toml"
    config.write_bytes("[budget]\niterations = 2 # caf\xe9\n".encode("latin-1"))
    for args in (["compile", "vector_add", candidate], ["optimize", "vector_add", "--config", config, "--traces", tmp_path / "t"]):
        out = kw(*args)
        assert out.returncode == 2, (out.stdout, out.stderr)
        assert "not UTF-8 text (byte 0xe9 at offset" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "t").exists()


@pytest.mark.timeout(60)
def test_a_candidate_over_the_size_limit_is_refused(kw, tmp_path):
    from sandbox.candidates.candidate import MAX_SOURCE_CHARS

    big = tmp_path / "big.cu"
    big.write_text((ROOT / "kernels" / "vector_add" / "baseline.cu").read_text() + "//" + "x" * MAX_SOURCE_CHARS + "\n")
    out = kw("compile", "vector_add", big)
    assert out.returncode == 2 and f"at most {MAX_SOURCE_CHARS:,} are accepted" in out.stderr
