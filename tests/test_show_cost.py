"""`show` and the report name one baseline time (the one the claim's speedup and saving per call come from) and a
GPU-time breakdown whose parts include screening and add up to the total."""

from __future__ import annotations

import re

import pytest

import agent
from agent.report.views import summary_view
from agent.trace.reader import read

pytestmark = pytest.mark.timeout(300)


def test_the_cost_breakdown_includes_screening_and_the_baseline_time_is_the_claims(tmp_path):
    run = agent.optimize("vector_add", sandbox="fake", traces=tmp_path, run_id="r", sanitize=False,
                         config={"tune": {"max_evaluations": 3}})
    view = summary_view(read(run.path))
    gpu = next(row["value"] for row in view["cost"] if row["label"] == "GPU time")
    total, *parts = [float(x) for x in re.findall(r"\d+\.\d+", gpu)]
    assert "(screen " in gpu and len(parts) == 4, gpu
    assert abs(sum(parts) - total) <= 0.01 * len(parts), gpu
    baseline = next(b for b in view["baselines"] if b["name"] == "baseline")
    saving = next(row["value"] for row in view["cost"] if row["label"] == "saving per call")
    assert baseline["ms"].split()[0] == re.search(r"\(([\d.]+) ms baseline", saving).group(1)
    assert "its time in the winner's A/B timing" in baseline["what"]
