"""A budget too small for the baseline: `optimize` says that nothing was timed and exits 1, never 0 beside "no
candidate beat the baseline"; `show` says the same of the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(180)


def test_a_wall_budget_that_ends_before_the_baseline_ran_exits_1_saying_nothing_was_timed(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "agent", "optimize", "vector_add", "--sandbox", "fake",
                           "--budget-wall-s", "0.001", "--traces", str(tmp_path / "t"), "--run-id", "w"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "best: none: nothing was timed, not even the baseline, before the run stopped" in done.stdout
    assert "no candidate beat" not in done.stdout and "stopped: setup: wall time:" in done.stdout
    shown = subprocess.run([sys.executable, "-m", "agent", "show", "w", "--traces", str(tmp_path / "t")], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "winner: none (nothing was timed, not even the baseline)" in shown.stdout
    assert "no candidate beat" not in shown.stdout
