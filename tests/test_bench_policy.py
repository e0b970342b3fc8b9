"""bench/policy.py replays the recorded landscapes through the run's own selection code, and the default policy is
the one its results file names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import LineageConfig

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(120)


def test_the_policy_bench_prints_every_policy_at_every_n_and_names_a_default():
    out = subprocess.run([sys.executable, "bench/policy.py", "--seeds", "3", "--requests", "6", "12"],
                         capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"^\| (best_explore|islands|archive) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|",
                      out.stdout, re.M)
    assert sorted({(r[0], r[1]) for r in rows}) == sorted((p, n) for p in ("archive", "best_explore", "islands")
                                                          for n in ("6", "12"))
    assert all(0 < float(v) <= 1.0 for r in rows for v in r[2:])
    assert re.search(r"^default: (best_explore|islands|archive) ", out.stdout, re.M)


def test_the_default_lineage_policy_is_the_one_the_bench_results_name():
    text = (ROOT / "bench" / "results" / "policy.md").read_text()
    [named] = re.findall(r"^default: (\w+) \(", text, re.M)
    assert LineageConfig().policy == named
