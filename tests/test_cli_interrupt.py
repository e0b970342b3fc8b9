"""Ctrl-C as a user presses it: at any moment `optimize` exits 130 with one line saying what to do next (the
command that resumes the run once its folder exists, or that nothing was written), its summary never claims a
winner's saving beside "no candidate beat the baseline", and a second Ctrl-C while it winds down exits 130 too,
not by the signal."""

from __future__ import annotations

import os
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
pytestmark = pytest.mark.timeout(240)


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200", PYTHONPATH=str(ROOT))
    return env


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    # SIGINT as Ctrl-C finds it, even where this test runs in a background job that ignores it (inherited)
    return subprocess.Popen([sys.executable, "-m", "agent", *args], cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _held_run(tmp_path: Path, interrupts: int):
    """An optimize run whose first model request is held until it was interrupted ``interrupts`` times."""
    asked, release = threading.Event(), threading.Event()

    def held(body, headers):
        asked.set()
        release.wait(60)
        return answer()

    server, url = serve_in_background(Script([held, answer()]))
    try:
        proc = _start(["optimize", "vector_add", "--model", "scripted", "--base-url", url, "--iterations", "2",
                       "--sandbox", "fake", "--no-tune", "--traces", str(tmp_path / "t"), "--run-id", "r1"], tmp_path)
        deadline = time.monotonic() + 120
        while not asked.is_set():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            asked.wait(0.1)
        for _ in range(interrupts):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
        out, err = proc.communicate(timeout=90)
    finally:
        release.set()
        server.shutdown()
    return proc.returncode, out, err


def test_ctrl_c_during_a_run_exits_130_names_the_resume_command_and_claims_no_saving(tmp_path):
    code, out, err = _held_run(tmp_path, 1)
    assert code == 130, (out, err)
    assert f"`kernelwright optimize --resume r1 --traces {tmp_path / 't'}` continues run r1" in err
    assert "best: none: no candidate was timed against the baseline" in out
    assert "saving per call: unknown (no timed winner)" in out
    assert "break-even" not in out and "winner," not in out
    assert "Traceback" not in err


def test_a_second_ctrl_c_while_the_run_winds_down_exits_130(tmp_path):
    code, out, err = _held_run(tmp_path, 2)
    assert code == 130, (code, out, err)
    assert "Traceback" not in err


@pytest.mark.parametrize("delay", [0.6, 1.2, 2.0])
def test_ctrl_c_at_any_moment_of_the_start_exits_130_with_one_line(delay, tmp_path):
    proc = _start(["optimize", "vector_add", "--sandbox", "fake", "--run-id", "early", "--traces", str(tmp_path / "t"),
                   "--quiet"], tmp_path)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    if proc.returncode == 0:
        pytest.skip(f"the run ended within {delay} s, before the interrupt")
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    said = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert len(said) == 1, err
    if (tmp_path / "t" / "early" / "run.json").is_file():
        assert "kernelwright optimize --resume early" in said[0]
    else:
        assert "nothing" in said[0] or said[0] == "interrupted"
