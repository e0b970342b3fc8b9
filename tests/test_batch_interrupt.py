"""Ctrl-C during a batch exits with code 130, keeps what ran, and `batch --resume` finishes the rest."""

from __future__ import annotations

import json
import os
import shutil
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


def _second_task(tmp_path: Path) -> Path:
    folder = tmp_path / "vector_add_two"
    shutil.copytree(ROOT / "kernels" / "vector_add", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('name = "vector_add"', 'name = "vector_add_two"'))
    return folder


@pytest.mark.timeout(240)
def test_ctrl_c_in_a_batch_exits_130_and_the_batch_resumes(tmp_path):
    asked, release = threading.Event(), threading.Event()

    def held(body, headers):  # the first model request waits until the batch was interrupted
        asked.set()
        release.wait(60)
        return answer()

    script = Script([held] + [answer(fake=f"speedup={1.1 + v / 10}", variant=v) for v in range(1, 6)])
    server, url = serve_in_background(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    traces = tmp_path / "t"
    common = ["--model", "scripted", "--base-url", url, "--iterations", "1", "--sandbox", "fake", "--no-tune",
              "--traces", str(traces), "--quiet"]
    cmd = [sys.executable, "-m", "agent", "batch", "vector_add", str(_second_task(tmp_path)), "--batch-id", "b1",
           *common]
    try:
        # SIGINT as Ctrl-C finds it, even where this test runs in a background job that ignores it (inherited)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not asked.is_set():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            asked.wait(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        release.set()
        assert proc.returncode == 130, (out, err)
        assert "batch --resume b1" in err
        results = json.loads((traces / "b1" / "batch.json").read_text())["results"]
        assert results["vector_add"]["state"] == "stopped" and "vector_add_two" not in results
        again = subprocess.run([sys.executable, "-m", "agent", "batch", "--resume", "b1", *common], cwd=ROOT,
                               env=env, capture_output=True, text=True, timeout=120)
    finally:
        release.set()
        server.shutdown()
    assert again.returncode == 0, (again.stdout, again.stderr)
    rows = json.loads((traces / "b1" / "summary.json").read_text())["tasks"]
    assert [(r["task"].split("/")[-1], r["state"]) for r in rows] == [("vector_add", "done"), ("vector_add_two", "done")]
